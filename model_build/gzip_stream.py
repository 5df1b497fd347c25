"""A gzip stream that stores what deflate cannot shrink: weights packed at disk speed, the rest compressed.

Float weights shrink by about 7 % under deflate, at about 30 MB/s of one core (BERT-base's 438 MB took 13.6 s at
level 6, 11.6 s at level 1, measured 2026-11-29); stored, they cost a copy, and a cold endpoint inflates them at memory
speed. Deflate (RFC 1951 §3.2.3) is a sequence of blocks, each compressed or stored, so one gzip member (RFC 1952) can
hold both: each run is written by a compressor of its own, ended on a byte boundary by a sync flush, and the next
run starts a fresh compressor, so no back-reference crosses the seam. Any gzip reader reads the result (GNU tar,
Python's tarfile, the Python backend unpacking an environment). The same bytes in give the same bytes out.
"""
from __future__ import annotations

import io
import struct
import zlib
from typing import Any, BinaryIO

COMPRESSED, STORED = 6, 0  # level 9 costs ~3x the time of 6 on float weights for ~1 % smaller files
# What gzip.GzipFile writes at level 6 with no file name and mtime 0: magic, deflate, no flags, MTIME 0, XFL 0, OS
# unknown. A tarball with nothing stored is byte for byte the one gzip.GzipFile wrote before this module.
HEADER = b"\x1f\x8b\x08\x00" + b"\x00\x00\x00\x00" + b"\x00\xff"
# A file is stored when deflate keeps more than this share of samples from its start, middle and end; smaller
# files are always compressed (the samples would be most of them).
STORE_ABOVE = 0.9
SAMPLE_BYTES, SMALLEST_STORED = 256 * 1024, 4 * 1024 * 1024


def worth_compressing(path_size: int, fh: BinaryIO) -> bool:
    """Whether deflate shrinks the file below ``STORE_ABOVE`` of its size, judged on three samples (fast level).

    Reads from ``fh`` and leaves it at its start."""
    if path_size < SMALLEST_STORED:
        return True
    kept = total = 0
    for offset in (0, path_size // 2, path_size - SAMPLE_BYTES):
        fh.seek(offset)
        sample = fh.read(SAMPLE_BYTES)
        kept += len(zlib.compress(sample, 1))
        total += len(sample)
    fh.seek(0)
    return kept <= STORE_ABOVE * total


class GzipStream(io.RawIOBase):
    """One gzip member written to ``raw``; ``use(level)`` switches between compressing and storing at a seam."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw, self._crc, self._size, self._level = raw, 0, 0, COMPRESSED
        self._deflate = self._compressor(COMPRESSED)
        raw.write(HEADER)

    @staticmethod
    def _compressor(level: int) -> Any:  # zlib's Compress type is not public
        # The arguments gzip.GzipFile uses: raw deflate, 32 KiB window, default memory level, default strategy.
        return zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS, zlib.DEF_MEM_LEVEL, 0)

    def use(self, level: int) -> None:
        if level != self._level:
            self._raw.write(self._deflate.flush(zlib.Z_SYNC_FLUSH))
            self._deflate, self._level = self._compressor(level), level

    def writable(self) -> bool:
        return True

    def tell(self) -> int:  # tarfile asks where the stream is; this is the uncompressed offset, as GzipFile says
        return self._size

    def write(self, data: Any) -> int:  # bytes, bytearray or memoryview, as tarfile and io send them
        view = memoryview(data).cast("B")
        self._crc = zlib.crc32(view, self._crc)
        self._size += len(view)
        self._raw.write(self._deflate.compress(view))
        return len(view)

    def close(self) -> None:
        if not self.closed:
            self._raw.write(self._deflate.flush(zlib.Z_FINISH))
            self._raw.write(struct.pack("<II", self._crc, self._size & 0xFFFFFFFF))
        super().close()

"""Deterministic, atomic tarballs (same inputs, same bytes: the sha256 is the CDK asset hash and object name)."""
from __future__ import annotations

import gzip
import hashlib
import os
import subprocess
import tarfile
import time

import pytest

from model_build import archive


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "src" / "m"
    (root / "1").mkdir(parents=True)
    (root / "config.pbtxt").write_text('name: "m"\n')
    (root / "1" / "model.onnx").write_bytes(os.urandom(1000))
    (root / "2").mkdir()  # an empty version directory (ensembles have one) must survive packing
    return {"m": root}


def test_same_inputs_same_bytes_even_seconds_apart(tmp_path, tree):
    # Timestamps, owners and file modes do not leak into the archive.
    first = archive.write_tarball(tmp_path / "a.tar.gz", tree)
    time.sleep(1.1)
    for path in tree["m"].rglob("*"):
        os.utime(path, (1, 1))
    os.chmod(tree["m"] / "config.pbtxt", 0o600)
    second = archive.write_tarball(tmp_path / "b.tar.gz", tree)
    assert first == second == hashlib.sha256((tmp_path / "a.tar.gz").read_bytes()).hexdigest()


def test_entries_are_sorted_and_normalised(tmp_path, tree):
    archive.write_tarball(tmp_path / "a.tar.gz", tree)
    with tarfile.open(tmp_path / "a.tar.gz") as tar:
        infos = tar.getmembers()
    assert [i.name for i in infos] == ["m", "m/1", "m/1/model.onnx", "m/2", "m/config.pbtxt"]
    assert {(i.mtime, i.uid, i.gid, i.uname, i.gname) for i in infos} == {(0, 0, 0, "", "")}
    assert {i.name: oct(i.mode) for i in infos if i.isfile()} == {"m/1/model.onnx": "0o644", "m/config.pbtxt": "0o644"}


def test_gzip_header_has_no_timestamp_or_name(tmp_path, tree):
    archive.write_tarball(tmp_path / "a.tar.gz", tree)
    header = (tmp_path / "a.tar.gz").read_bytes()[:10]
    assert header[4:8] == b"\0\0\0\0"  # MTIME
    assert header[3] & 0x08 == 0        # FNAME flag unset
    assert gzip.decompress((tmp_path / "a.tar.gz").read_bytes())


def test_replaced_member_is_written_instead_of_the_file(tmp_path, tree):
    archive.write_tarball(tmp_path / "a.tar.gz", {"m-1": tree["m"]}, {"m-1/config.pbtxt": b'name: "m-1"\n'})
    with tarfile.open(tmp_path / "a.tar.gz") as tar:
        assert tar.extractfile("m-1/config.pbtxt").read() == b'name: "m-1"\n'


def test_failed_write_leaves_no_file(tmp_path, tree):
    # A crash mid-write must not leave a partial tarball that a deploy could pick up.
    with pytest.raises(ValueError):
        archive.write_tarball(tmp_path / "a.tar.gz", tree, {"m/missing.txt": b"x"})
    assert list(tmp_path.glob("*.tar.gz")) == [] and list(tmp_path.glob(".*")) == []


def test_atomic_text_write_keeps_old_content_on_failure(tmp_path):
    target = tmp_path / "manifest.json"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with archive.atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("boom")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]


def test_weights_are_stored_and_the_rest_compressed_in_one_stream_every_reader_reads(tmp_path):
    # Random bytes stand in for float weights (deflate keeps ~93 % of those); the text around them compresses.
    from model_build import gzip_stream

    root = tmp_path / "src" / "m"
    (root / "1").mkdir(parents=True)
    weights = os.urandom(gzip_stream.SMALLEST_STORED + 12345)
    (root / "1" / "model.onnx").write_bytes(weights)
    (root / "config.pbtxt").write_text('name: "m"\n' * 50_000)  # 500 kB of text
    (root / "z.txt").write_text("after the weights, compressed again\n" * 20_000)
    target = tmp_path / "a.tar.gz"
    archive.write_tarball(target, {"m": root})
    size = target.stat().st_size
    assert len(weights) < size < len(weights) + 64 * 1024  # stored: the weights plus compressed text and headers
    with tarfile.open(target) as tar:
        assert tar.extractfile("m/1/model.onnx").read() == weights
        assert tar.extractfile("m/z.txt").read() == (root / "z.txt").read_bytes()
    unpacked = tmp_path / "gnu"
    unpacked.mkdir()
    subprocess.run(["tar", "-xzf", str(target), "-C", str(unpacked)], check=True)  # GNU tar, as SageMaker's hosts
    assert (unpacked / "m" / "1" / "model.onnx").read_bytes() == weights
    subprocess.run(["gzip", "-t", str(target)], check=True)  # CRC and length agree


def test_with_nothing_to_store_the_bytes_are_those_gzip_module_writes(tmp_path):
    # The tarballs built before weights were stored keep their bytes (their sha256 names S3 objects and CDK assets).
    import io

    src = tmp_path / "m"
    src.mkdir()
    (src / "a.txt").write_text("compressible\n" * 10_000)
    (src / "b.bin").write_bytes(os.urandom(100_000))  # below the size that is ever stored
    ours = archive.write_tarball(tmp_path / "a.tar.gz", {"m": src})
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=6) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, path in archive.members({"m": src}):
            info = tarfile.TarInfo(name)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if path.is_dir():
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size, info.mode = path.stat().st_size, 0o644
                with open(path, "rb") as fh:
                    tar.addfile(info, fh)
    assert ours == hashlib.sha256(buffer.getvalue()).hexdigest()


@pytest.mark.parametrize("content, compress", [
    (lambda n: os.urandom(n), False),
    (lambda n: b"\0" * n, True),
    (lambda n: os.urandom(n // 2) + b"\0" * (n - n // 2), True),  # half compresses: worth it
])
def test_a_large_file_is_stored_only_when_deflate_would_keep_most_of_it(tmp_path, content, compress):
    from model_build import gzip_stream

    path = tmp_path / "f"
    path.write_bytes(content(gzip_stream.SMALLEST_STORED * 2))
    with open(path, "rb") as fh:
        assert gzip_stream.worth_compressing(path.stat().st_size, fh) is compress
        assert fh.tell() == 0


def test_a_small_file_is_always_compressed(tmp_path):
    from model_build import gzip_stream

    path = tmp_path / "f"
    path.write_bytes(os.urandom(gzip_stream.SMALLEST_STORED - 1))
    with open(path, "rb") as fh:
        assert gzip_stream.worth_compressing(path.stat().st_size, fh) is True

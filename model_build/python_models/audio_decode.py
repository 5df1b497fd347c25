"""A request's audio -> the mono float32 waveform a speech model's feature extractor takes, in numpy and the
standard library only (it runs inside a Triton Python-backend model).

Two inputs, each checked the same way: ``decode`` takes the bytes of an encoded file (a BYTES tensor ``AUDIO``),
``waveform`` takes samples already decoded (an FP32 tensor ``AUDIO``). What this model cannot take is refused
with ``AudioRejected``, whose message is one sentence for the client: the tensor, what was found, what is
allowed, the fix.

Followed: transformers 5.23.0, ``transformers/pipelines/automatic_speech_recognition.py``. Given bytes,
``AutomaticSpeechRecognitionPipeline.preprocess`` decodes them with ``ffmpeg_read``
(``transformers/pipelines/audio_utils.py``: ``ffmpeg -ac 1 -ar <sampling_rate> -f f32le``), which downmixes and
resamples anything ffmpeg reads. Given an array, ``preprocess`` calls ``_to_mono``: a 1-D array is taken as it
is, a 2-D one is read as ``(channels, samples)`` and averaged over the channels (``inputs.mean(axis=0)``) when it
has 1 or 2 of them, and refused when it has more ("downmix it to mono yourself so the weighting is yours to
choose"). ``AudioClassificationPipeline.preprocess`` (``audio_classification.py``) refuses every 2-D array ("We
expect a single channel audio input").

Where this differs from the pipeline, and why:

* Formats: WAV (RIFF/WAVE: integer PCM of 8, 16, 24, 32 bits, IEEE float of 32 or 64 bits, plain or
  WAVE_FORMAT_EXTENSIBLE) is parsed here, chunk by chunk (the standard library's ``wave`` refuses float
  samples). FLAC is decoded with ``soundfile`` when the serving environment has it. Everything else ffmpeg would
  read (MP3, Ogg, MP4...) is refused: there is no ffmpeg in a Python-backend model.
* Scaling: integer samples are divided by 2**(bits-1), 8-bit ones (unsigned) become (x-128)/128, as
  libsndfile (``soundfile``) and ``librosa`` give them; float samples are taken as they are (cast to float32).
* Channels: ``_to_mono``'s rule, not ffmpeg's. Two channels are averaged with the same numpy call on the same
  (channels, samples) float32 layout; ffmpeg's ``-ac 1`` mixes stereo as (L+R)/2 too (its normalised
  stereo-to-mono matrix). More than two are refused:
  ffmpeg would weight them by their channel layout (centre, surrounds, LFE dropped), which a plain average does
  not reproduce, and ``_to_mono`` refuses them for that reason.
* Sampling rate: a rate other than the feature extractor's is refused, never resampled. ffmpeg resamples bytes
  with its own filter; given an array, the pipeline resamples with ``torchaudio.functional.resample`` and,
  without torchaudio, raises ImportError. Neither is available here, and another resampler would give other
  samples.
* A WAV whose 'data' chunk declares more bytes than follow is refused as cut short (libsndfile and ffmpeg read
  what is there): a cut upload would otherwise be answered as if it were the whole recording. A size of
  0xFFFFFFFF, which writers to a pipe leave in place, means "up to the end of the file".
* Length: more than ``max_seconds`` of audio is refused; the pipeline has no limit.
"""
from __future__ import annotations

import importlib
import io
import struct
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float32]

_PCM, _FLOAT, _EXTENSIBLE = 0x0001, 0x0003, 0xFFFE
_ENCODINGS = {(_PCM, 8), (_PCM, 16), (_PCM, 24), (_PCM, 32), (_FLOAT, 32), (_FLOAT, 64)}
# A WAVE_FORMAT_EXTENSIBLE subformat GUID is the format tag (4 bytes, little-endian) and then these 12 bytes
# (KSDATAFORMAT_SUBTYPE_PCM / _IEEE_FLOAT: xxxxxxxx-0000-0010-8000-00aa00389b71).
_GUID_TAIL = bytes.fromhex("0000 1000 8000 00aa00389b71")
_TAG_NAMES = {0x0002: "Microsoft ADPCM", 0x0006: "A-law", 0x0007: "mu-law", 0x0011: "IMA ADPCM",
              0x0050: "MPEG", 0x0055: "MPEG Layer 3"}
_UNSET_SIZE = 0xFFFFFFFF  # what a writer to a pipe leaves in the 'data' size: it cannot seek back to fill it in
_FIX_FORMAT = "convert it to WAV (16-bit PCM or 32-bit float) before sending"


class AudioRejected(ValueError):
    """Audio this model does not take; the message is one sentence for the client."""


class _Format(NamedTuple):
    tag: int  # _PCM or _FLOAT (an EXTENSIBLE header is resolved to its subformat)
    channels: int
    rate: int
    bits: int
    block_align: int  # bytes per frame, all channels


# --- the two entry points ---------------------------------------------------------------------------------

def decode(data: bytes, *, sampling_rate: int, max_seconds: float) -> Floats:
    """The bytes of one WAV (or, with soundfile, FLAC) file -> mono float32 samples at ``sampling_rate``.

    Raises AudioRejected for anything else: no bytes, another format, a broken or cut-short file, an encoding
    that is not taken, more than two channels, another sampling rate, more than ``max_seconds``, no samples,
    NaN or infinite samples.
    """
    data = bytes(data)
    if not data:
        raise AudioRejected(f"AUDIO: no bytes; this model takes one {_accepted()} file per request; "
                            "send the file's bytes")
    if data[:4] == b"RIFF":
        return _wav(data, sampling_rate, max_seconds)
    if data[:4] == b"fLaC":
        return _flac(data, sampling_rate, max_seconds)
    raise AudioRejected(f"AUDIO: {_found(data)}; this model takes {_accepted()} audio; {_FIX_FORMAT}")


def waveform(array: npt.ArrayLike, *, max_seconds: float, sampling_rate: int) -> Floats:
    """Samples sent as they are (an FP32 tensor) -> float32 1-D, after the checks ``decode`` makes."""
    values = np.asarray(array)
    if values.dtype.kind != "f":
        raise AudioRejected(f"AUDIO: a waveform of dtype {values.dtype}; this model takes floating-point samples "
                            "(FP32, in [-1, 1]); convert the samples to float32 before sending")
    if values.ndim != 1:
        raise AudioRejected(f"AUDIO: a waveform of shape {tuple(values.shape)}; this model takes a 1-D waveform "
                            f"(one mono channel of samples at {sampling_rate} Hz); "
                            "send one channel as a flat array")
    _check_length("a waveform", values.shape[0], sampling_rate, max_seconds)
    samples = values.astype(np.float32, copy=False)
    _check_finite("a waveform", samples)
    return samples


# --- what the bytes are -------------------------------------------------------------------------------------

def _soundfile() -> Any:
    """The soundfile module, or None where the serving environment lacks it."""
    try:
        return importlib.import_module("soundfile")
    except (ImportError, OSError):  # soundfile raises OSError when its libsndfile cannot be loaded
        return None


def _accepted() -> str:
    return "WAV (RIFF/WAVE) or FLAC" if _soundfile() is not None else "WAV (RIFF/WAVE)"


def _found(data: bytes) -> str:
    """What the bytes look like, by their magic numbers, so that the client learns what it sent."""
    if data[:4] == b"OggS":
        return "Ogg audio (Vorbis or Opus)"
    if data[:3] == b"ID3" or (len(data) > 1 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0):
        return "MPEG audio (MP3 or AAC)"
    if data[4:8] == b"ftyp":
        return "an MP4/M4A file"
    if data[:4] == b"\x1a\x45\xdf\xa3":
        return "a WebM/Matroska file"
    if data[:4] == b"FORM":
        return "an AIFF file"
    return f"{len(data)} bytes that are neither WAV nor FLAC (they begin 0x{data[:8].hex()})"


# --- WAV ----------------------------------------------------------------------------------------------------

def _wav(data: bytes, sampling_rate: int, max_seconds: float) -> Floats:
    if len(data) < 12:
        raise _broken_wav(f"header is cut short ({len(data)} bytes)")
    if data[8:12] != b"WAVE":
        raise AudioRejected(f"AUDIO: a RIFF file of form {_ascii(data[8:12])}, not WAVE; "
                            f"this model takes {_accepted()} audio; {_FIX_FORMAT}")
    fmt_body, payload = _chunks(data)
    fmt = _format(fmt_body)
    if len(payload) % fmt.block_align:
        raise _broken_wav(f"'data' chunk holds {len(payload)} bytes, not a whole number of "
                          f"{fmt.block_align}-byte frames")
    frames = len(payload) // fmt.block_align
    _check_layout("a WAV", fmt.channels, fmt.rate, sampling_rate)
    _check_length("a WAV", frames, sampling_rate, max_seconds)
    samples = _samples(payload, fmt).reshape(frames, fmt.channels)
    return _mono("a WAV", samples)


def _chunks(data: bytes) -> tuple[bytes, memoryview]:
    """The bodies of the 'fmt ' and 'data' chunks, in whichever order they come; other chunks are skipped."""
    view = memoryview(data)
    fmt: bytes | None = None
    payload: memoryview | None = None
    pos = 12
    while pos + 8 <= len(data) and (fmt is None or payload is None):
        chunk_id = data[pos:pos + 4]
        (size,) = struct.unpack_from("<I", data, pos + 4)
        body = pos + 8
        present = len(data) - body
        if chunk_id == b"data":
            if size == _UNSET_SIZE:
                size = present
            elif size > present:
                raise _broken_wav(f"'data' chunk is cut short (it declares {size} bytes, {present} follow)")
            payload = view[body:body + size]
        elif chunk_id == b"fmt ":
            if size > present:
                raise _broken_wav(f"'fmt ' chunk is cut short (it declares {size} bytes, {present} follow)")
            fmt = data[body:body + size]
        pos = body + size + (size & 1)  # chunks are padded to an even length
    if fmt is None:
        raise _broken_wav("'fmt ' chunk is missing")
    if payload is None:
        raise _broken_wav("'data' chunk is missing")
    return fmt, payload


def _format(body: bytes) -> _Format:
    if len(body) < 16:
        raise _broken_wav(f"'fmt ' chunk is cut short ({len(body)} bytes, 16 needed)")
    tag, channels, rate, _byte_rate, block_align, bits = struct.unpack_from("<HHIIHH", body)
    if tag == _EXTENSIBLE:
        if len(body) < 40:
            raise _broken_wav(f"WAVE_FORMAT_EXTENSIBLE 'fmt ' chunk is cut short ({len(body)} bytes, 40 needed)")
        guid = body[24:40]
        if guid[4:] != _GUID_TAIL:
            raise _unsupported(f"WAVE_FORMAT_EXTENSIBLE subformat {guid.hex()}")
        # The container size (bits) decides the scaling, as in libsndfile; "valid bits" (body[18:20]) only say
        # how many of them carry signal.
        (tag,) = struct.unpack_from("<I", guid)
    if (tag, bits) not in _ENCODINGS:
        raise _unsupported(_encoding_name(tag, bits))
    if channels == 0:
        raise _broken_wav("header declares 0 channels")
    if block_align != channels * bits // 8:
        raise _broken_wav(f"header declares {block_align}-byte frames where {channels} channel(s) of {bits} bits "
                          f"take {channels * bits // 8} bytes")
    return _Format(tag, channels, rate, bits, block_align)


def _encoding_name(tag: int, bits: int) -> str:
    if tag == _PCM:
        return f"{bits}-bit integer PCM"
    if tag == _FLOAT:
        return f"{bits}-bit IEEE float"
    name = _TAG_NAMES.get(tag)
    return f"format tag 0x{tag:04X}" + (f" ({name})" if name else "")


def _samples(payload: memoryview, fmt: _Format) -> Floats:
    """Interleaved samples as float32; integers scaled to [-1, 1) as soundfile and librosa scale them."""
    if fmt.tag == _FLOAT:
        with np.errstate(over="ignore"):  # float64 beyond float32's range becomes inf, refused by _check_finite
            return np.frombuffer(payload, dtype="<f4" if fmt.bits == 32 else "<f8").astype(np.float32)
    if fmt.bits == 8:  # 8-bit WAV is unsigned, centred on 128
        return ((np.frombuffer(payload, dtype=np.uint8).astype(np.float64) - 128.0) / 128.0).astype(np.float32)
    if fmt.bits == 24:
        ints = _int24_shifted(payload)  # the value times 256: scale by 2**31 instead of 2**23
        scale = 2.0 ** 31
    else:
        ints = np.frombuffer(payload, dtype=f"<i{fmt.bits // 8}")
        scale = 2.0 ** (fmt.bits - 1)
    # Exact in float64 (at most 32 significant bits), then one rounding to float32, as libsndfile's
    # (float) x * (1.0 / 0x80000000) also rounds once.
    return (ints.astype(np.float64) / scale).astype(np.float32)


def _int24_shifted(payload: memoryview) -> npt.NDArray[np.int32]:
    # numpy has no 3-byte integer: put each sample's bytes in the top three of an int32 (sign included).
    triples = np.frombuffer(payload, dtype=np.uint8).reshape(-1, 3)
    wide = np.zeros((triples.shape[0], 4), dtype=np.uint8)
    wide[:, 1:] = triples
    return wide.view("<i4").reshape(-1)


def _broken_wav(problem: str) -> AudioRejected:
    return AudioRejected(f"AUDIO: a WAV whose {problem}; this model takes a complete, well-formed WAV file; "
                         "send the whole file as it was written")


def _unsupported(encoding: str) -> AudioRejected:
    return AudioRejected(f"AUDIO: a WAV of {encoding}; this model takes WAV samples as 8/16/24/32-bit integer PCM "
                         "or 32/64-bit IEEE float; convert it to 16-bit PCM or 32-bit float before sending")


def _ascii(raw: bytes) -> str:
    return repr(raw.decode("latin-1"))


# --- FLAC ---------------------------------------------------------------------------------------------------

def _flac(data: bytes, sampling_rate: int, max_seconds: float) -> Floats:
    soundfile = _soundfile()
    if soundfile is None:
        raise AudioRejected("AUDIO: FLAC audio, which this server cannot decode (it has no soundfile package); "
                            f"this model takes WAV (RIFF/WAVE) audio here; {_FIX_FORMAT}")
    try:
        with soundfile.SoundFile(io.BytesIO(data)) as stream:
            # The header's figures are checked before decoding, so that an over-long file costs no decoding.
            # A stream that does not declare its length reads as 0 frames (or libsndfile's "unknown"): the
            # read below is bounded instead, and what it gives is checked.
            declared = int(stream.frames)
            _check_layout("a FLAC", int(stream.channels), int(stream.samplerate), sampling_rate)
            if declared > int(max_seconds * sampling_rate):
                _check_length("a FLAC", declared, sampling_rate, max_seconds)
            bounded = int(max_seconds * sampling_rate) + 1
            samples = np.asarray(stream.read(frames=bounded, dtype="float32", always_2d=True), dtype=np.float32)
    except AudioRejected:
        raise
    except Exception as error:  # libsndfile's failures come as several types across soundfile versions
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise AudioRejected(f"AUDIO: a FLAC that soundfile cannot read ({reason}); this model takes a complete, "
                            "well-formed FLAC or WAV file; send the whole file as it was written") from error
    _check_length("a FLAC", samples.shape[0], sampling_rate, max_seconds)
    return _mono("a FLAC", samples)


# --- checks shared by every input ---------------------------------------------------------------------------

def _check_layout(what: str, channels: int, rate: int, sampling_rate: int) -> None:
    if channels > 2:
        raise AudioRejected(f"AUDIO: {what} with {channels} channels; this model takes mono or stereo audio "
                            "(stereo is averaged to mono, as transformers' speech-recognition pipeline does); "
                            "downmix it to mono before sending")
    if rate != sampling_rate:
        raise AudioRejected(f"AUDIO: {what} at {rate} Hz; this model takes {sampling_rate} Hz audio (its feature "
                            f"extractor's sampling_rate); resample it to {sampling_rate} Hz before sending")


def _check_length(what: str, frames: int, sampling_rate: int, max_seconds: float) -> None:
    limit = int(max_seconds * sampling_rate)
    if frames > limit:
        raise AudioRejected(f"AUDIO: {what} of {frames / sampling_rate:.2f} s ({frames} samples at {sampling_rate} "
                            f"Hz); this model takes at most {max_seconds:g} s ({limit} samples); "
                            f"cut it into pieces of at most {max_seconds:g} s before sending")
    if frames == 0:
        raise AudioRejected(f"AUDIO: {what} with no samples; this model takes at least one sample; "
                            "send audio that is not empty")


def _check_finite(what: str, samples: Floats) -> None:
    bad = int(np.count_nonzero(~np.isfinite(samples)))
    if bad:
        # float64 samples beyond float32's range count here too: they became infinite in the cast.
        raise AudioRejected(f"AUDIO: {what} with {bad} NaN or infinite samples; this model takes finite sample "
                            "values; replace them (e.g. with 0) before sending")


def _mono(what: str, frames: Floats) -> Floats:
    """[frames, channels] -> [frames], as transformers' ``_to_mono`` does it (1 or 2 channels, checked before)."""
    _check_finite(what, frames)
    if frames.shape[1] == 1:
        return np.ascontiguousarray(frames[:, 0])
    # _to_mono averages a (channels, samples) array with mean(axis=0); the same call on the same float32
    # values gives the same roundings.
    return np.asarray(frames.T.mean(axis=0), dtype=np.float32)

"""model_build/python_models/audio_decode.py: request audio -> mono float32 samples, or one refusal sentence.

WAVs come from the standard library's ``wave`` (integer PCM) or are built here byte by byte (IEEE float,
WAVE_FORMAT_EXTENSIBLE, broken headers); the decoded samples must equal the numbers written, scaled as
soundfile/librosa scale them. Stereo is averaged as transformers' ``_to_mono`` averages it (checked against that
function). Every refusal is checked with its exact text. A seeded fuzz loop over truncated, mutated and random
bytes shows that nothing but AudioRejected ever escapes ``decode``.

The refusals that name the accepted formats depend on whether soundfile can be imported; an autouse fixture
pins "no soundfile" so that the texts do not depend on this machine, and the FLAC tests put in a stand-in.
"""
from __future__ import annotations

import io
import struct
import wave

import numpy as np
import pytest

from model_build.python_models import audio_decode
from model_build.python_models.audio_decode import AudioRejected, decode, waveform

RATE = 16000
FIX = "convert it to WAV (16-bit PCM or 32-bit float) before sending"
BROKEN = "; this model takes a complete, well-formed WAV file; send the whole file as it was written"
# KSDATAFORMAT_SUBTYPE_PCM / _IEEE_FLOAT without their first 4 bytes (the format tag)
GUID_TAIL = bytes.fromhex("000010008000" "00aa00389b71")


@pytest.fixture(autouse=True)
def no_soundfile(monkeypatch):
    monkeypatch.setattr(audio_decode, "_soundfile", lambda: None)


# --- building WAVs --------------------------------------------------------------------------------------------

def _stdlib_wav(ints: np.ndarray, bits: int, channels: int = 1, rate: int = RATE) -> bytes:
    """A PCM WAV written by the standard library; ``ints`` interleaved, as they go in the file."""
    if bits == 8:
        raw = ints.astype(np.uint8).tobytes()
    elif bits == 24:
        raw = b"".join(int(v).to_bytes(3, "little", signed=True) for v in ints)
    else:
        raw = ints.astype(f"<i{bits // 8}").tobytes()
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(bits // 8)
        w.setframerate(rate)
        w.writeframes(raw)
    return out.getvalue()


def _fmt(tag: int, channels: int, rate: int, bits: int, extensible_tag: int | None = None) -> bytes:
    align = channels * bits // 8
    body = struct.pack("<HHIIHH", tag, channels, rate, rate * align, align, bits)
    if extensible_tag is not None:  # cbSize 22, valid bits, channel mask, subformat GUID
        body += struct.pack("<HHI", 22, bits, 0x3 if channels == 2 else 0x4) + struct.pack("<I", extensible_tag)
        body += GUID_TAIL
    return body


def _riff(*chunks: tuple[bytes, bytes]) -> bytes:
    body = b"".join(cid + struct.pack("<I", len(data)) + data + b"\0" * (len(data) & 1) for cid, data in chunks)
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WAVE" + body


def _float_wav(values: np.ndarray, bits: int, channels: int = 1, rate: int = RATE, extensible: bool = False) -> bytes:
    dtype = "<f4" if bits == 32 else "<f8"
    fmt = _fmt(0xFFFE, channels, rate, bits, 3) if extensible else _fmt(3, channels, rate, bits)
    return _riff((b"fmt ", fmt), (b"data", np.asarray(values, dtype=dtype).tobytes()))


def _decode(data: bytes, max_seconds: float = 10.0) -> np.ndarray:
    return decode(data, sampling_rate=RATE, max_seconds=max_seconds)


def _rejected(data: bytes, max_seconds: float = 10.0) -> str:
    with pytest.raises(AudioRejected) as caught:
        _decode(data, max_seconds)
    return str(caught.value)


# --- samples as written ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("bits", [8, 16, 24, 32])
def test_integer_pcm_is_scaled_as_soundfile_scales_it(bits):
    rng = np.random.default_rng(bits)
    if bits == 8:
        ints = np.concatenate([[0, 1, 127, 128, 129, 255], rng.integers(0, 256, 200)])
        expected = (ints.astype(np.float64) - 128) / 128
    else:
        low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        ints = np.concatenate([[low, low + 1, -1, 0, 1, high], rng.integers(low, high + 1, 200)])
        expected = ints.astype(np.float64) / 2 ** (bits - 1)
    got = _decode(_stdlib_wav(ints, bits))
    assert got.dtype == np.float32 and got.ndim == 1
    np.testing.assert_array_equal(got, expected.astype(np.float32))
    assert got.min() == -1.0 and got.max() == (1.0 if bits == 32 else 1 - 2.0 ** (1 - bits))
    # 32-bit: (2**31 - 1) / 2**31 has no float32 of its own and rounds to 1.0, in soundfile as here.


@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize("extensible", [False, True])
def test_ieee_float_is_taken_as_written(bits, extensible):
    values = np.random.default_rng(bits).normal(0, 0.5, 300)
    values[:3] = [1.5, -2.0, 0.0]  # float WAVs may exceed [-1, 1]; soundfile leaves them so
    got = _decode(_float_wav(values, bits, extensible=extensible))
    np.testing.assert_array_equal(got, values.astype("<f4" if bits == 32 else "<f8").astype(np.float32))


@pytest.mark.parametrize("bits", [16, 24, 32])
def test_extensible_pcm_equals_plain_pcm(bits):
    ints = np.random.default_rng(7).integers(-(2 ** (bits - 1)), 2 ** (bits - 1), 100)
    plain = _stdlib_wav(ints, bits)
    payload = plain[44:]  # the standard library's header is 44 bytes
    extensible = _riff((b"fmt ", _fmt(0xFFFE, 1, RATE, bits, 1)), (b"data", payload))
    np.testing.assert_array_equal(_decode(extensible), _decode(plain))


def test_stereo_is_averaged_as_transformers_to_mono_does():
    from transformers.pipelines.automatic_speech_recognition import _to_mono

    rng = np.random.default_rng(3)
    left, right = rng.integers(-32768, 32768, 500), rng.integers(-32768, 32768, 500)
    interleaved = np.stack([left, right], axis=1).reshape(-1)
    got = _decode(_stdlib_wav(interleaved, 16, channels=2))
    channels_first = (np.stack([left, right]) / 32768).astype(np.float32)
    np.testing.assert_array_equal(got, _to_mono(channels_first))
    np.testing.assert_array_equal(got, ((left + right) / 65536).astype(np.float32))

    # Float samples whose sum rounds in float32: the same numpy call gives the same roundings.
    pair = rng.normal(0, 0.3, (2, 400)).astype(np.float32)
    got = _decode(_float_wav(pair.T.reshape(-1), 32, channels=2))
    np.testing.assert_array_equal(got, _to_mono(pair))


def test_more_than_two_channels_refused_as_to_mono_refuses_them():
    from transformers.pipelines.automatic_speech_recognition import _to_mono

    with pytest.raises(ValueError, match="downmix it to mono yourself"):
        _to_mono(np.zeros((3, 10), dtype=np.float32))
    assert _rejected(_stdlib_wav(np.zeros(60, dtype=np.int64), 16, channels=6)) == (
        "AUDIO: a WAV with 6 channels; this model takes mono or stereo audio (stereo is averaged to mono, as "
        "transformers' speech-recognition pipeline does); downmix it to mono before sending")


def test_a_sine_keeps_its_pitch_and_amplitude():
    t = np.arange(RATE // 2) / RATE
    sine = 0.5 * np.sin(2 * np.pi * 440 * t)
    ints = np.round(sine * 32767).astype(np.int64)
    got = _decode(_stdlib_wav(ints, 16))
    np.testing.assert_array_equal(got, (ints / 32768).astype(np.float32))
    assert abs(float(np.abs(got).max()) - 0.5) < 1e-3
    peak = np.argmax(np.abs(np.fft.rfft(got))) * RATE / len(got)
    assert peak == 440


def test_chunks_in_any_order_odd_padding_and_streaming_size():
    values = np.linspace(-1, 1, 7, dtype=np.float32)
    fmt = _fmt(3, 1, RATE, 32)
    # A LIST chunk of odd length (padded), 'data' before 'fmt '.
    reordered = _riff((b"LIST", b"INFOabc"), (b"data", values.tobytes()), (b"fmt ", fmt))
    np.testing.assert_array_equal(_decode(reordered), values)
    # A writer to a pipe leaves 0xFFFFFFFF as the 'data' size: the samples run to the end of the file.
    streamed = _riff((b"fmt ", fmt)) + b"data" + struct.pack("<I", 0xFFFFFFFF) + values.tobytes()
    np.testing.assert_array_equal(_decode(streamed), values)


def test_length_limit_is_inclusive():
    assert len(_decode(_stdlib_wav(np.zeros(RATE), 16), max_seconds=1.0)) == RATE


# --- refusals, each with its text --------------------------------------------------------------------------------

def test_sampling_rate_refused():
    assert _rejected(_stdlib_wav(np.zeros(10), 16, rate=44100)) == (
        "AUDIO: a WAV at 44100 Hz; this model takes 16000 Hz audio (its feature extractor's sampling_rate); "
        "resample it to 16000 Hz before sending")


def test_too_long_refused():
    assert _rejected(_stdlib_wav(np.zeros(RATE + 1), 16), max_seconds=1.0) == (
        "AUDIO: a WAV of 1.00 s (16001 samples at 16000 Hz); this model takes at most 1 s (16000 samples); "
        "cut it into pieces of at most 1 s before sending")
    assert _rejected(_stdlib_wav(np.zeros(48000), 16), max_seconds=2.5) == (
        "AUDIO: a WAV of 3.00 s (48000 samples at 16000 Hz); this model takes at most 2.5 s (40000 samples); "
        "cut it into pieces of at most 2.5 s before sending")


def test_empty_request_and_empty_recording_refused():
    assert _rejected(b"") == "AUDIO: no bytes; this model takes one WAV (RIFF/WAVE) file per request; " \
                             "send the file's bytes"
    assert _rejected(_stdlib_wav(np.zeros(0), 16)) == (
        "AUDIO: a WAV with no samples; this model takes at least one sample; send audio that is not empty")


@pytest.mark.parametrize("data, found", [
    (b"ID3\x04\x00\x00\x00\x00\x00\x00" + bytes(100), "MPEG audio (MP3 or AAC)"),
    (b"\xff\xfb\x90\x64" + bytes(100), "MPEG audio (MP3 or AAC)"),
    (b"OggS\x00\x02" + bytes(100), "Ogg audio (Vorbis or Opus)"),
    (b"\x00\x00\x00\x20ftypM4A " + bytes(100), "an MP4/M4A file"),
    (b"\x1a\x45\xdf\xa3" + bytes(100), "a WebM/Matroska file"),
    (b"FORM\x00\x00\x00\x10AIFF" + bytes(100), "an AIFF file"),
    (b"hello world", "11 bytes that are neither WAV nor FLAC (they begin 0x68656c6c6f20776f)"),
])
def test_unknown_formats_refused(data, found):
    assert _rejected(data) == f"AUDIO: {found}; this model takes WAV (RIFF/WAVE) audio; {FIX}"


def test_riff_of_another_form_refused():
    assert _rejected(b"RIFF\x10\x00\x00\x00AVI LIST" + bytes(20)) == (
        f"AUDIO: a RIFF file of form 'AVI ', not WAVE; this model takes WAV (RIFF/WAVE) audio; {FIX}")


def test_flac_without_soundfile_refused():
    assert _rejected(b"fLaC\x00\x00\x00\x22" + bytes(60)) == (
        "AUDIO: FLAC audio, which this server cannot decode (it has no soundfile package); "
        f"this model takes WAV (RIFF/WAVE) audio here; {FIX}")


def test_broken_wavs_refused():
    good = _stdlib_wav(np.arange(100), 16)
    fmt = _fmt(1, 1, RATE, 16)
    cases = {
        good[:10]: "header is cut short (10 bytes)",
        good[:30]: "'fmt ' chunk is cut short (it declares 16 bytes, 10 follow)",
        good[:36]: "'data' chunk is missing",
        good[:-3]: "'data' chunk is cut short (it declares 200 bytes, 197 follow)",
        _riff((b"data", bytes(4))): "'fmt ' chunk is missing",
        _riff((b"fmt ", fmt[:14]), (b"data", bytes(4))): "'fmt ' chunk is cut short (14 bytes, 16 needed)",
        _riff((b"fmt ", fmt), (b"data", bytes(5))): "'data' chunk holds 5 bytes, not a whole number of 2-byte frames",
        _riff((b"fmt ", _fmt(1, 0, RATE, 16)), (b"data", bytes(4))): "header declares 0 channels",
        _riff((b"fmt ", fmt[:12] + struct.pack("<HH", 4, 16)), (b"data", bytes(4))):
            "header declares 4-byte frames where 1 channel(s) of 16 bits take 2 bytes",
        _riff((b"fmt ", _fmt(0xFFFE, 1, RATE, 16)), (b"data", bytes(4))):
            "WAVE_FORMAT_EXTENSIBLE 'fmt ' chunk is cut short (16 bytes, 40 needed)",
    }
    for data, problem in cases.items():
        assert _rejected(data) == f"AUDIO: a WAV whose {problem}{BROKEN}", problem


@pytest.mark.parametrize("fmt, encoding", [
    (_fmt(1, 1, RATE, 12), "12-bit integer PCM"),
    (_fmt(3, 1, RATE, 16), "16-bit IEEE float"),
    (_fmt(2, 1, RATE, 4), "format tag 0x0002 (Microsoft ADPCM)"),
    (_fmt(0x55, 1, RATE, 0), "format tag 0x0055 (MPEG Layer 3)"),
    (_fmt(0x1234, 1, RATE, 16), "format tag 0x1234"),
    (_fmt(0xFFFE, 1, RATE, 16, 3), "16-bit IEEE float"),
    (_fmt(0xFFFE, 1, RATE, 16, 1)[:-1] + b"\x00",
     "WAVE_FORMAT_EXTENSIBLE subformat 0100000000001000800000aa00389b00"),
])
def test_unsupported_encodings_refused(fmt, encoding):
    assert _rejected(_riff((b"fmt ", fmt), (b"data", bytes(8)))) == (
        f"AUDIO: a WAV of {encoding}; this model takes WAV samples as 8/16/24/32-bit integer PCM or 32/64-bit "
        "IEEE float; convert it to 16-bit PCM or 32-bit float before sending")


def test_non_finite_float_samples_refused():
    values = np.array([0.0, np.nan, np.inf, 1e300, 0.5])  # 1e300 does not fit float32: infinite after the cast
    assert _rejected(_float_wav(values, 64)) == (
        "AUDIO: a WAV with 3 NaN or infinite samples; this model takes finite sample values; "
        "replace them (e.g. with 0) before sending")


# --- FLAC through soundfile (a stand-in here; the real one where it is installed) -------------------------------

class _FakeSoundFile:
    """What audio_decode uses of soundfile.SoundFile, over arrays registered by their FLAC bytes."""

    files: dict[bytes, tuple[np.ndarray, int, int]] = {}

    def __init__(self, file):
        data = file.read()
        if data not in self.files:
            raise RuntimeError("Error opening <_io.BytesIO object>: Format not recognised.")
        self.samples, self.samplerate, self.frames = self.files[data]
        self.channels = self.samples.shape[1]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def read(self, frames, dtype, always_2d):
        assert dtype == "float32" and always_2d
        return self.samples[:frames]


@pytest.fixture
def fake_soundfile(monkeypatch):
    module = type("soundfile", (), {"SoundFile": _FakeSoundFile})
    monkeypatch.setattr(audio_decode, "_soundfile", lambda: module)
    _FakeSoundFile.files = {}
    return _FakeSoundFile.files


def test_flac_with_soundfile(fake_soundfile):
    stereo = np.random.default_rng(5).normal(0, 0.3, (300, 2)).astype(np.float32)
    fake_soundfile[b"fLaC1"] = (stereo, RATE, 300)
    np.testing.assert_array_equal(_decode(b"fLaC1"), stereo.T.mean(axis=0))
    fake_soundfile[b"fLaC2"] = (stereo, 22050, 300)
    assert _rejected(b"fLaC2").startswith("AUDIO: a FLAC at 22050 Hz; this model takes 16000 Hz audio")
    fake_soundfile[b"fLaC3"] = (np.zeros((RATE + 1, 1), np.float32), RATE, RATE + 1)
    assert _rejected(b"fLaC3", max_seconds=1.0) == (
        "AUDIO: a FLAC of 1.00 s (16001 samples at 16000 Hz); this model takes at most 1 s (16000 samples); "
        "cut it into pieces of at most 1 s before sending")
    # A stream that does not declare its length (0 frames) is read up to one sample past the limit.
    fake_soundfile[b"fLaC4"] = (np.zeros((RATE + 5, 1), np.float32), RATE, 0)
    assert "(16001 samples at 16000 Hz)" in _rejected(b"fLaC4", max_seconds=1.0)
    assert _rejected(b"fLaCbroken") == (
        "AUDIO: a FLAC that soundfile cannot read (Error opening <_io.BytesIO object>: Format not recognised.); "
        "this model takes a complete, well-formed FLAC or WAV file; send the whole file as it was written")
    assert _rejected(b"Ogg") == f"AUDIO: 3 bytes that are neither WAV nor FLAC (they begin 0x4f6767); " \
                                f"this model takes WAV (RIFF/WAVE) or FLAC audio; {FIX}"


def test_flac_with_the_real_soundfile(monkeypatch):
    soundfile = pytest.importorskip("soundfile")
    monkeypatch.setattr(audio_decode, "_soundfile", lambda: soundfile)
    ints = np.random.default_rng(9).integers(-32768, 32768, (400, 2)).astype(np.int16)
    out = io.BytesIO()
    soundfile.write(out, ints, RATE, format="FLAC", subtype="PCM_16")
    flac = out.getvalue()
    np.testing.assert_array_equal(_decode(flac), (ints.T / 32768).astype(np.float32).mean(axis=0))
    assert _rejected(flac[:60]).startswith("AUDIO: a FLAC")


def test_wav_equals_soundfile_where_installed():
    soundfile = pytest.importorskip("soundfile")
    for data in _seeds():
        expected, rate = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=True)
        assert rate == RATE
        np.testing.assert_array_equal(_decode(data), expected.T.mean(axis=0))


# --- FP32 waveform input ---------------------------------------------------------------------------------------

def _waveform(array, max_seconds=1.0):
    return waveform(array, max_seconds=max_seconds, sampling_rate=RATE)


def _waveform_rejected(array, max_seconds=1.0) -> str:
    with pytest.raises(AudioRejected) as caught:
        _waveform(array, max_seconds)
    return str(caught.value)


def test_waveform_taken_as_float32():
    values = np.random.default_rng(1).normal(0, 0.2, 100)
    got = _waveform(values)
    assert got.dtype == np.float32 and got.shape == (100,)
    np.testing.assert_array_equal(got, values.astype(np.float32))
    same = values.astype(np.float32)
    assert _waveform(same) is same  # no copy for what already is float32


def test_waveform_refusals():
    assert _waveform_rejected(np.zeros(10, dtype=np.int16)) == (
        "AUDIO: a waveform of dtype int16; this model takes floating-point samples (FP32, in [-1, 1]); "
        "convert the samples to float32 before sending")
    assert _waveform_rejected(np.zeros((2, 10), dtype=np.float32)) == (
        "AUDIO: a waveform of shape (2, 10); this model takes a 1-D waveform (one mono channel of samples at "
        "16000 Hz); send one channel as a flat array")
    assert _waveform_rejected(np.zeros(0, dtype=np.float32)) == (
        "AUDIO: a waveform with no samples; this model takes at least one sample; send audio that is not empty")
    assert _waveform_rejected(np.zeros(24000, dtype=np.float32)) == (
        "AUDIO: a waveform of 1.50 s (24000 samples at 16000 Hz); this model takes at most 1 s (16000 samples); "
        "cut it into pieces of at most 1 s before sending")
    assert _waveform_rejected(np.array([0.0, np.nan, -np.inf], dtype=np.float32)) == (
        "AUDIO: a waveform with 2 NaN or infinite samples; this model takes finite sample values; "
        "replace them (e.g. with 0) before sending")


# --- nothing but AudioRejected escapes --------------------------------------------------------------------------

def _seeds() -> list[bytes]:
    rng = np.random.default_rng(11)
    stereo_float = rng.normal(0, 0.3, 64)
    return [
        _stdlib_wav(rng.integers(0, 256, 50), 8),
        _stdlib_wav(rng.integers(-32768, 32768, 60), 16, channels=2),
        _stdlib_wav(rng.integers(-2 ** 23, 2 ** 23, 30), 24),
        _stdlib_wav(rng.integers(-2 ** 31, 2 ** 31, 30), 32),
        _float_wav(stereo_float, 32, channels=2),
        _float_wav(stereo_float, 64, extensible=True),
        _riff((b"LIST", b"INFOabc"), (b"fmt ", _fmt(0xFFFE, 2, RATE, 24, 1)), (b"data", bytes(60))),
    ]


def test_decode_raises_nothing_but_audio_rejected():
    rng = np.random.default_rng(2024)
    seeds = _seeds()
    inputs = []
    for seed in seeds:
        inputs += [seed[:n] for n in rng.integers(0, len(seed), 30)]  # truncations
        for _ in range(40):  # a few bytes overwritten, mostly in the headers
            data = bytearray(seed)
            for _ in range(int(rng.integers(1, 4))):
                at = int(rng.integers(0, min(len(data), 80) if rng.random() < 0.8 else len(data)))
                data[at] = int(rng.integers(0, 256))
            inputs.append(bytes(data))
    inputs += [rng.bytes(int(rng.integers(0, 200))) for _ in range(60)]
    inputs += [b"RIFF" + rng.bytes(4) + b"WAVE" + rng.bytes(int(rng.integers(0, 100))) for _ in range(60)]
    inputs += [b"fLaC" + rng.bytes(20), b"RIFF", b"\xff"]
    outcomes = {"decoded": 0, "rejected": 0}
    for data in inputs:
        try:
            got = decode(data, sampling_rate=RATE, max_seconds=1.0)
        except AudioRejected as error:
            message = str(error)
            assert message.startswith("AUDIO: ") and message.count("; ") >= 2 and "\n" not in message, message
            outcomes["rejected"] += 1
        else:
            assert got.dtype == np.float32 and got.ndim == 1 and 0 < len(got) <= RATE
            assert np.isfinite(got).all()
            outcomes["decoded"] += 1
    assert len(inputs) > 500
    assert outcomes["decoded"] > 50 and outcomes["rejected"] > 300, outcomes

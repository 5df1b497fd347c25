"""model_build/python_models/audio_decode.py: request audio -> mono float32 samples at the model's rate, or one
refusal sentence.

One decoder, libsndfile's (soundfile): WAVs from the standard library's ``wave`` (integer PCM) or built here byte by
byte (IEEE float, WAVE_FORMAT_EXTENSIBLE), and FLAC, Ogg Vorbis and Opus, MP3, AIFF, AU and CAF written by
soundfile; the decoded samples must equal the numbers written (lossless formats), scaled as soundfile/librosa scale
them, or carry the written tone (lossy ones). Stereo is mixed as ffmpeg mixes it for the pipeline. Other
sampling rates are resampled (Hann-windowed sinc, torchaudio's default filter), checked against the ideal tone and
scipy's polyphase resampler. Every refusal is checked with its exact text. A seeded fuzz loop over truncated,
mutated and random bytes shows that nothing but AudioRejected ever escapes ``decode``.
"""
from __future__ import annotations

import io
import struct
import wave

import numpy as np
import pytest
import soundfile

from model_build.python_models import audio_decode
from model_build.python_models.audio_decode import AudioRejected, decode, waveform

RATE = 16000
FIX = "convert it to WAV, FLAC, Ogg or MP3 before sending"
ACCEPTED = "WAV, FLAC, Ogg (Vorbis or Opus), MP3, AIFF or another format libsndfile reads"
# KSDATAFORMAT_SUBTYPE_PCM / _IEEE_FLOAT without their first 4 bytes (the format tag)
GUID_TAIL = bytes.fromhex("000010008000" "00aa00389b71")


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


def test_stereo_is_mixed_as_ffmpeg_mixes_it_for_the_pipeline():
    # (L+R)/sqrt(2), ffmpeg's -ac 1 (which the pipeline runs on a file's bytes), not the mean transformers' _to_mono
    # takes of an array: tests/model_build/test_audio_vs_pipeline.py checks it against ffmpeg itself.
    from transformers.pipelines.automatic_speech_recognition import _to_mono

    rng = np.random.default_rng(3)
    left, right = rng.integers(-32768, 32768, 500), rng.integers(-32768, 32768, 500)
    interleaved = np.stack([left, right], axis=1).reshape(-1)
    got = _decode(_stdlib_wav(interleaved, 16, channels=2))
    np.testing.assert_allclose(got, (left + right) / 32768 / np.sqrt(2), rtol=1e-6, atol=1e-7)
    channels_first = (np.stack([left, right]) / 32768).astype(np.float32)
    np.testing.assert_allclose(got, np.sqrt(2) * _to_mono(channels_first), rtol=1e-6, atol=1e-7)


def test_more_than_two_channels_refused_as_to_mono_refuses_them():
    from transformers.pipelines.automatic_speech_recognition import _to_mono

    with pytest.raises(ValueError, match="downmix it to mono yourself"):
        _to_mono(np.zeros((3, 10), dtype=np.float32))
    assert _rejected(_stdlib_wav(np.zeros(60, dtype=np.int64), 16, channels=6)) == (
        "AUDIO: the WAV file with 6 channels; this model takes mono or stereo audio (stereo is mixed to mono as "
        "transformers' pipeline has ffmpeg mix it); downmix it to mono before sending")


def _tone(rate: int, seconds: float = 0.5, frequency: float = 440.0) -> np.ndarray:
    return 0.5 * np.sin(2 * np.pi * frequency * np.arange(int(rate * seconds)) / rate)


def _peak_hz(samples: np.ndarray, rate: int) -> float:
    return float(np.argmax(np.abs(np.fft.rfft(samples))) * rate / len(samples))


def test_a_sine_keeps_its_pitch_and_amplitude():
    ints = np.round(_tone(RATE) * 32767).astype(np.int64)
    got = _decode(_stdlib_wav(ints, 16))
    np.testing.assert_array_equal(got, (ints / 32768).astype(np.float32))
    assert abs(float(np.abs(got).max()) - 0.5) < 1e-3
    assert _peak_hz(got, RATE) == 440


def test_a_streamed_wav_size_runs_to_the_end_of_the_file():
    # A writer to a pipe leaves 0xFFFFFFFF as the 'data' size: the samples run to the end of the file.
    values = np.linspace(-1, 1, 7, dtype=np.float32)
    streamed = _riff((b"fmt ", _fmt(3, 1, RATE, 32))) + b"data" + struct.pack("<I", 0xFFFFFFFF) + values.tobytes()
    np.testing.assert_array_equal(_decode(streamed), values)


def test_length_limit_is_inclusive():
    assert len(_decode(_stdlib_wav(np.zeros(RATE), 16), max_seconds=1.0)) == RATE


# --- every format libsndfile reads, and other sampling rates ----------------------------------------------------

def _written(samples: np.ndarray, rate: int, fmt: str, subtype: str) -> bytes:
    out = io.BytesIO()
    soundfile.write(out, samples.astype(np.float32), rate, format=fmt, subtype=subtype)
    return out.getvalue()


@pytest.mark.parametrize("fmt, subtype", [("FLAC", "PCM_16"), ("AIFF", "PCM_16"), ("AU", "PCM_16"),
                                          ("CAF", "PCM_16"), ("WAV", "ULAW"), ("WAV", "IMA_ADPCM")])
def test_other_containers_and_encodings_decode_as_soundfile_reads_them(fmt, subtype):
    data = _written(_tone(RATE), RATE, fmt, subtype)
    expected, _ = soundfile.read(io.BytesIO(data), dtype="float32")
    np.testing.assert_array_equal(_decode(data), expected)
    assert abs(_peak_hz(expected, RATE) - 440) < 2   # a block codec (IMA ADPCM) pads the last block


@pytest.mark.parametrize("fmt, subtype, rate", [("OGG", "VORBIS", 44100), ("OGG", "OPUS", 48000),
                                                ("MP3", "MPEG_LAYER_III", 44100), ("FLAC", "PCM_24", 22050)])
def test_what_phones_and_browsers_record_decodes_and_is_resampled(fmt, subtype, rate):
    got = _decode(_written(_tone(rate, 1.0), rate, fmt, subtype))
    assert got.dtype == np.float32 and abs(len(got) - RATE) <= RATE // 50   # lossy codecs pad a few frames
    assert abs(_peak_hz(got, RATE) - 440) <= 2 and abs(float(np.abs(got[2000:-2000]).max()) - 0.5) < 0.05


@pytest.mark.parametrize("rate", [8000, 22050, 32000, 44100, 48000])
def test_another_rate_is_resampled_to_the_models(rate):
    got = _decode(_written(_tone(rate), rate, "WAV", "FLOAT"))
    assert len(got) == int(np.ceil(len(_tone(rate)) * RATE / rate))
    ideal = _tone(RATE)[:len(got)]
    # Away from the edges (where the filter sees the file's silent padding) the tone is the tone at 16 kHz.
    assert np.abs(got[100:-100] - ideal[100:-100]).max() < 5e-4
    np.testing.assert_array_equal(got, audio_decode.resample(_tone(rate).astype(np.float32), rate, RATE))


def test_the_resampler_agrees_with_scipys_polyphase_filter():
    """An independent reference: scipy.signal.resample_poly (a Kaiser-windowed filter, not the Hann sinc), on a
    two-tone signal well inside both passbands."""
    signal = pytest.importorskip("scipy.signal")
    t = np.arange(int(44100 * 1.3)) / 44100
    x = (0.5 * np.sin(2 * np.pi * 440 * t) + 0.2 * np.sin(2 * np.pi * 3000 * t)).astype(np.float32)
    ours = audio_decode.resample(x, 44100, RATE)
    theirs = signal.resample_poly(x.astype(np.float64), 160, 441)
    assert len(ours) == len(theirs) == 20800
    assert np.abs(ours[200:-200] - theirs[200:-200]).max() < 1e-3
    np.testing.assert_array_equal(audio_decode.resample(x, RATE, RATE), x)  # the same rate: the same samples


# --- refusals, each with its text --------------------------------------------------------------------------------

def test_too_long_refused_before_decoding():
    assert _rejected(_stdlib_wav(np.zeros(RATE + 1), 16), max_seconds=1.0) == (
        "AUDIO: the WAV file of 1.00 s (16001 samples at 16000 Hz); this model takes at most 1 s; cut it into "
        "pieces of at most 1 s before sending")
    assert _rejected(_written(np.zeros(3 * 44100), 44100, "FLAC", "PCM_16"), max_seconds=2.5) == (
        "AUDIO: the FLAC file of 3.00 s (132300 samples at 44100 Hz); this model takes at most 2.5 s; cut it into "
        "pieces of at most 2.5 s before sending")


def test_empty_request_and_empty_recording_refused():
    assert _rejected(b"") == f"AUDIO: no bytes; this model takes one audio file per request ({ACCEPTED}); " \
                             "send the file's bytes"
    assert _rejected(_stdlib_wav(np.zeros(0), 16)) == (
        "AUDIO: the WAV file with no samples; this model takes at least one sample; send audio that is not empty")


@pytest.mark.parametrize("data, found", [
    (b"\x00\x00\x00\x20ftypM4A " + bytes(100), "an MP4/M4A file (AAC)"),
    (b"\x1a\x45\xdf\xa3" + bytes(100), "a WebM/Matroska file"),
])
def test_containers_libsndfile_does_not_read_are_named(data, found):
    assert _rejected(data) == f"AUDIO: {found}, which libsndfile does not read; this model takes {ACCEPTED}; {FIX}"


def test_bytes_that_are_no_audio_are_refused_with_libsndfiles_reason():
    assert _rejected(b"hello world") == (
        "AUDIO: 11 bytes that libsndfile cannot read as audio (Format not recognised; they begin 0x68656c6c6f20776f); "
        f"this model takes one complete file ({ACCEPTED}); send the whole file as it was written, or {FIX}")
    assert _rejected(_stdlib_wav(np.arange(100), 16)[:30]).startswith(
        "AUDIO: 30 bytes that libsndfile cannot read as audio (Error in WAV file. No 'data' chunk marker; ")


def test_rates_out_of_range_or_without_a_common_factor_are_refused_before_reading():
    fix = "record or convert it at a common rate (8000, 16000, 22050, 44100 or 48000 Hz)"
    assert _rejected(_stdlib_wav(np.zeros(10), 16, rate=500)) == (
        "AUDIO: the WAV file at 500 Hz; this model takes audio sampled at 1,000 to 384,000 Hz (and resamples it to "
        f"its own 16000 Hz); {fix}")
    assert _rejected(_stdlib_wav(np.zeros(10), 16, rate=16001)) == (
        "AUDIO: the WAV file at 16001 Hz; this model resamples to its 16000 Hz from a rate that shares a large common "
        f"factor with it (this one would take a filter of 256,240,000 taps); {fix}")
    for rate in (8000, 11025, 12000, 22050, 24000, 32000, 37800, 44100, 47250, 48000, 88200, 96000, 176400, 192000):
        assert audio_decode._taps(rate, RATE) <= audio_decode.MAX_TAPS, rate


def test_non_finite_float_samples_refused():
    values = np.array([0.0, np.nan, np.inf, 1e300, 0.5])  # 1e300 does not fit float32: infinite after the cast
    assert _rejected(_float_wav(values, 64)) == (
        "AUDIO: the WAV file with 3 NaN or infinite samples; this model takes finite sample values; "
        "replace them (e.g. with 0) before sending")


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
        "AUDIO: a waveform of 1.50 s (24000 samples at 16000 Hz); this model takes at most 1 s; cut it into pieces "
        "of at most 1 s before sending")
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
        _written(_tone(RATE, 0.05), RATE, "FLAC", "PCM_16"),
        _written(_tone(44100, 0.1), 44100, "OGG", "VORBIS"),
        _written(_tone(44100, 0.1), 44100, "MP3", "MPEG_LAYER_III"),
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

"""Raw audio an audio task's ensemble is verified on: WAV and FLAC files as applications send them, made here.

Clips of several lengths (half a second to two), sample encodings (8, 16 and 24-bit PCM, 32-bit float, 16-bit
FLAC written by libsndfile through soundfile), mono and stereo (mixed to mono as ffmpeg mixes it), and signals that
differ in what a model hears: a tone, a chirp, noise, a voice-like
harmonic stack with a syllable rhythm. All at the feature extractor's sampling rate: another rate is refused by
the preprocessing step, a bad request rather than a raw input.
"""
from __future__ import annotations

import dataclasses
import io
import struct
import wave

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]


@dataclasses.dataclass(frozen=True)
class RawAudio:
    what: str
    data: bytes


def _signal(kind: str, seconds: float, rate: int, seed: int) -> Floats:
    t = np.arange(int(seconds * rate)) / rate
    rng = np.random.default_rng(seed)
    if kind == "tone":
        return 0.5 * np.sin(2 * np.pi * 440 * t)
    if kind == "chirp":
        return 0.4 * np.sin(2 * np.pi * (200 + 1500 * t / seconds) * t)
    if kind == "noise":
        return 0.3 * rng.standard_normal(t.size)
    # voice-like: harmonics of a gliding pitch, opened and closed four times a second
    pitch = 120 + 30 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(pitch) / rate
    voice = sum(np.sin(k * phase) / k for k in range(1, 8))
    return 0.25 * voice * (0.5 + 0.5 * np.sin(2 * np.pi * 4 * t)) + 0.01 * rng.standard_normal(t.size)


def pcm_wav(samples: npt.ArrayLike, rate: int, bits: int = 16) -> bytes:
    """Integer PCM WAV (stdlib ``wave``): samples in [-1, 1], [frames] or [frames, channels]."""
    data = np.asarray(samples, dtype=np.float64)
    frames = data if data.ndim == 2 else data[:, None]
    scale = 2 ** (bits - 1)
    ints = np.clip(np.round(frames * scale), -scale, scale - 1).astype(np.int64)
    if bits == 8:
        raw = (ints + 128).astype(np.uint8).tobytes()
    elif bits == 24:
        raw = b"".join(int(v).to_bytes(3, "little", signed=True) for v in ints.reshape(-1))
    else:
        raw = ints.astype({16: "<i2", 32: "<i4"}[bits]).tobytes()
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(frames.shape[1])
        writer.setsampwidth(bits // 8)
        writer.setframerate(rate)
        writer.writeframes(raw)
    return out.getvalue()


def float_wav(samples: npt.ArrayLike, rate: int) -> bytes:
    """32-bit IEEE float WAV (format tag 3), mono, written by hand (``wave`` writes integer PCM only)."""
    data = np.asarray(samples, dtype="<f4").tobytes()
    fmt = struct.pack("<HHIIHH", 3, 1, rate, rate * 4, 4, 32)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def flac(samples: npt.ArrayLike, rate: int) -> bytes:
    """16-bit FLAC, [frames] or [frames, channels], written by libsndfile (soundfile), as audio tools write it."""
    import soundfile

    out = io.BytesIO()
    soundfile.write(out, np.asarray(samples, dtype=np.float64), rate, format="FLAC", subtype="PCM_16")
    return out.getvalue()


def clips(rate: int, max_seconds: float | None = None) -> list[RawAudio]:
    """The raw clips at ``rate``, those no longer than ``max_seconds`` (what the step refuses is not an answer)."""
    left = _signal("tone", 0.8, rate, 1)
    stereo = np.stack([left, _signal("noise", 0.8, rate, 2)], axis=1)
    made = [
        (0.6, RawAudio("tone 440 Hz, 0.6 s, 16-bit PCM", pcm_wav(_signal("tone", 0.6, rate, 0), rate))),
        (1.3, RawAudio("chirp, 1.3 s, 16-bit PCM", pcm_wav(_signal("chirp", 1.3, rate, 3), rate))),
        (2.0, RawAudio("noise, 2 s, 32-bit float", float_wav(_signal("noise", 2.0, rate, 4), rate))),
        (0.8, RawAudio("stereo, 0.8 s, 16-bit PCM (mixed to mono)", pcm_wav(stereo, rate))),
        (0.5, RawAudio("voice-like, 0.5 s, 8-bit PCM", pcm_wav(_signal("voice", 0.5, rate, 5), rate, bits=8))),
        (1.7, RawAudio("voice-like, 1.7 s, 24-bit PCM", pcm_wav(_signal("voice", 1.7, rate, 6), rate, bits=24))),
        (1.1, RawAudio("stereo voice-like, 1.1 s, 16-bit FLAC (mixed to mono)",
                       flac(np.stack([_signal("voice", 1.1, rate, 7), _signal("chirp", 1.1, rate, 8)], axis=1), rate))),
    ]
    return [clip for seconds, clip in made if max_seconds is None or seconds <= max_seconds]


def reference_waveform(data: bytes) -> tuple[npt.NDArray[np.float32], int]:
    """The clip decoded by scipy (WAV: not the step's decoder) or soundfile (FLAC: what the step decodes it with,
    as nothing else here reads FLAC; the pipeline's own ffmpeg_read needs an ffmpeg binary), scaled as libsndfile
    scales samples and mixed to mono as ffmpeg_read mixes a file's channels (``STEREO_GAIN``; checked against
    ffmpeg itself by tests/model_build/test_audio_vs_pipeline.py): what the pipeline makes of the file."""
    from scipy.io import wavfile

    if data[:4] == b"fLaC":
        import soundfile

        samples, rate = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=True)
        return _mono(samples.T), int(rate)
    rate, samples = wavfile.read(io.BytesIO(data))
    if samples.dtype == np.uint8:
        floats = (samples.astype(np.float32) - 128) / 128
    elif samples.dtype.kind == "i":  # scipy left-justifies 24-bit samples in int32
        floats = samples.astype(np.float32) / (2 ** (8 * samples.dtype.itemsize - 1))
    else:
        floats = samples.astype(np.float32)
    return _mono(floats.T) if floats.ndim == 2 else np.ascontiguousarray(floats, dtype=np.float32), int(rate)


def _mono(channels: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """[channels, samples] -> [samples]: one channel as it is, two as ffmpeg's -ac 1 mixes them."""
    from model_build.python_models.audio_decode import STEREO_GAIN

    mixed = channels[0] if channels.shape[0] == 1 else (channels[0] + channels[1]) * STEREO_GAIN
    return np.ascontiguousarray(mixed, dtype=np.float32)

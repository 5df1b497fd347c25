"""Audio files as applications record them, decoded by the step's decoder and by transformers' pipeline on the same
bytes (issue #60): the pipeline reads bytes with the ``ffmpeg`` on PATH (``transformers.pipelines.audio_utils.
ffmpeg_read``: decoded, downmixed and resampled by ffmpeg's swresample), here imageio-ffmpeg's binary; the step with
libsndfile and torchaudio's default windowed-sinc filter (model_build/python_models/audio_decode.py). Both then run
the same checkpoint's feature extractor and model.

The stated tolerances: the two waveforms agree within ``WAVE_RMS`` (root mean square of the difference, on a signal
of RMS ~0.25: two resampling filters differ near the Nyquist frequency, two MP3 and Vorbis decoders in their last
bits) and the classifier's scores within ``SCORE_ATOL``. At the model's own rate and in a lossless format the
waveforms are equal to 1e-6 (no resampling: only the decoders' float conversion).
"""
from __future__ import annotations

import io
import os
import pathlib

import numpy as np
import pytest

from benchmarks.tooling import audio_checkpoints
from model_build.python_models import audio_decode

RATE = audio_checkpoints.RATE
WAVE_RMS = 2e-3
SCORE_ATOL = 1e-3
LENGTH_SECONDS = 0.03
# (what an application sends, the rate it was recorded at, soundfile's format and subtype, channels)
RECORDINGS = [
    ("16 kHz WAV, the model's rate", 16000, "WAV", "PCM_16", 1),
    ("48 kHz FLAC, 24-bit (a browser's lossless capture)", 48000, "FLAC", "PCM_24", 1),
    ("44.1 kHz stereo WAV (a desktop recorder)", 44100, "WAV", "PCM_16", 2),
    ("8 kHz WAV (telephony, upsampled)", 8000, "WAV", "PCM_16", 1),
    ("44.1 kHz MP3", 44100, "MP3", "MPEG_LAYER_III", 1),
    ("48 kHz Ogg Vorbis (a phone's voice note)", 48000, "OGG", "VORBIS", 1),
    ("48 kHz Ogg Opus", 48000, "OGG", "OPUS", 1),
]


def _recording(rate: int, channels: int, seconds: float = 1.5) -> np.ndarray:
    """A voice-like signal (harmonics of a gliding pitch, with noise) at ``rate``, band-limited below 3.5 kHz so an
    8 kHz file holds it."""
    t = np.arange(int(seconds * rate)) / rate
    pitch = 140 + 60 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(pitch) / rate
    voice = sum(np.sin(k * phase) / k for k in range(1, 20) if k * 200 < 3500)
    noise = np.random.default_rng(3).normal(0, 0.02, t.size)
    mono = (0.25 * voice / np.abs(voice).max() + noise).astype(np.float32)
    return mono if channels == 1 else np.stack([mono, 0.8 * mono[::-1]], axis=1)


def _file(rate: int, fmt: str, subtype: str, channels: int) -> bytes:
    import soundfile

    out = io.BytesIO()
    soundfile.write(out, _recording(rate, channels), rate, format=fmt, subtype=subtype)
    return out.getvalue()


@pytest.fixture(scope="module")
def ffmpeg_on_path(tmp_path_factory) -> None:
    import imageio_ffmpeg

    folder = tmp_path_factory.mktemp("bin")
    (folder / "ffmpeg").symlink_to(imageio_ffmpeg.get_ffmpeg_exe())
    before = os.environ["PATH"]
    os.environ["PATH"] = f"{folder}{os.pathsep}{before}"
    yield
    os.environ["PATH"] = before


@pytest.fixture(scope="module", params=["wav2vec2", "ast"])
def classifier(request, tmp_path_factory, ffmpeg_on_path):
    """A classifier whose extractor normalises the waveform (wav2vec2) and one whose log-mel features keep its level
    (AST), so a wrong gain shows."""
    import transformers

    folder = audio_checkpoints.save(tmp_path_factory.mktemp("ckpt") / request.param, "audio-classification",
                                    request.param)
    return transformers.pipeline("audio-classification", model=str(folder), device="cpu")


def _ours(pipe, data: bytes) -> tuple[np.ndarray, dict[str, float]]:
    """The step's decoding, then the checkpoint's feature extractor and model: its scores by label."""
    wave = audio_decode.decode(data, sampling_rate=RATE, max_seconds=10)
    return wave, _scores(pipe, wave)


def _scores(pipe, wave: np.ndarray) -> dict[str, float]:
    import torch

    features = pipe.feature_extractor(wave, sampling_rate=RATE, return_tensors="pt")
    with torch.no_grad():
        probabilities = pipe.model(**features).logits.softmax(-1)[0].numpy()
    return {pipe.model.config.id2label[i]: float(p) for i, p in enumerate(probabilities)}


@pytest.mark.parametrize("what, rate, fmt, subtype, channels", RECORDINGS, ids=[r[0] for r in RECORDINGS])
def test_the_step_decodes_and_answers_as_the_pipeline_on_the_same_file(classifier, what, rate, fmt, subtype,
                                                                         channels):
    from transformers.pipelines.audio_utils import ffmpeg_read

    data = _file(rate, fmt, subtype, channels)
    wave, ours = _ours(classifier, data)
    theirs_wave = ffmpeg_read(data, RATE)  # what the pipeline hands its feature extractor
    # ffmpeg and libsndfile agree on the length up to a lossy codec's padding (ffmpeg keeps an MP3's last frame's).
    n = min(wave.size, theirs_wave.size)
    assert abs(wave.size - theirs_wave.size) <= LENGTH_SECONDS * RATE, (wave.size, theirs_wave.size)
    rms = float(np.sqrt(np.mean((wave[:n] - theirs_wave[:n]) ** 2)))
    assert rms <= (1e-6 if rate == RATE and fmt == "WAV" else WAVE_RMS), (what, rms)
    theirs = {row["label"]: row["score"] for row in classifier(data, top_k=None)}
    assert theirs.keys() == ours.keys()
    worst = max(abs(theirs[label] - ours[label]) for label in theirs)
    assert worst <= SCORE_ATOL, (what, worst, ours, theirs)


def test_a_planted_mean_of_the_channels_is_seen_on_the_log_mel_classifier(classifier):
    # The twin for the channel mix: averaging a stereo file (transformers' _to_mono rule for arrays, this step's
    # rule before it followed ffmpeg) scores outside the tolerance where the features keep the level.
    import soundfile

    data = _file(44100, "WAV", "PCM_16", 2)
    frames, rate = soundfile.read(io.BytesIO(data), dtype="float32")
    averaged = audio_decode.resample(frames.mean(axis=1).astype(np.float32), rate, RATE)
    theirs = {row["label"]: row["score"] for row in classifier(data, top_k=None)}
    worst = max(abs(theirs[label] - score) for label, score in _scores(classifier, averaged).items())
    if classifier.model.config.model_type == "ast":
        assert worst > 10 * SCORE_ATOL, worst
    else:  # wav2vec2 normalises the waveform: the level does not change its answer
        assert worst <= SCORE_ATOL, worst


def test_a_planted_wrong_rate_is_seen_by_the_comparison(classifier):
    # The twin: the same 48 kHz file decoded as if it were at the model's rate (no resampling) is three times too
    # long and its waveform is nowhere near ffmpeg's, so the length and RMS checks above would fail on it.
    import soundfile
    from transformers.pipelines.audio_utils import ffmpeg_read

    data = _file(48000, "FLAC", "PCM_24", 1)
    unresampled, _ = soundfile.read(io.BytesIO(data), dtype="float32")
    theirs = ffmpeg_read(data, RATE)
    assert unresampled.size - theirs.size > LENGTH_SECONDS * RATE
    n = theirs.size
    assert float(np.sqrt(np.mean((unresampled[:n] - theirs) ** 2))) > 50 * WAVE_RMS


def test_the_stated_tolerances_are_the_ones_the_module_checks():
    # The page (docs/image-audio-tasks.md) states what this module measures against.
    page = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "image-audio-tasks.md").read_text()
    assert f"{WAVE_RMS:g}" in page and f"{SCORE_ATOL:g}" in page

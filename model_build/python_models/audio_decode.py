"""A request's audio -> the mono float32 waveform a speech model's feature extractor takes, decoded by libsndfile
(``soundfile``) and resampled here (it runs inside a Triton Python-backend model: numpy and soundfile only).

Two inputs, each checked the same way: ``decode`` takes the bytes of an encoded file (a BYTES tensor ``AUDIO``),
``waveform`` takes samples already decoded (an FP32 tensor ``AUDIO``, at the feature extractor's rate). What this
model cannot take is refused with ``AudioRejected``, whose message is one sentence for the client: the tensor, what
was found, what is allowed, the fix.

Followed: transformers 5.23.0, ``transformers/pipelines/automatic_speech_recognition.py``. Given bytes,
``AutomaticSpeechRecognitionPipeline.preprocess`` decodes them with ``ffmpeg_read``
(``transformers/pipelines/audio_utils.py``: ``ffmpeg -ac 1 -ar <sampling_rate> -f f32le``), which downmixes and
resamples anything ffmpeg reads. Given an array, ``preprocess`` calls ``_to_mono``: a 1-D array is taken as it
is, a 2-D one is read as ``(channels, samples)`` and averaged over the channels when it has 1 or 2 of them, and
refused when it has more. ``AudioClassificationPipeline.preprocess`` (``audio_classification.py``) does the same
with bytes.

Where this differs from the pipeline, and why:

* Formats: what libsndfile reads (soundfile 0.14.0 bundles libsndfile 1.2.2: WAV in every encoding it knows, RF64,
  W64, FLAC, Ogg Vorbis and Opus, MP3, AIFF, CAF, AU...); ffmpeg also reads MP4/M4A (AAC) and WebM, which are refused
  here with what they are: there is no ffmpeg in a Python-backend model.
* Sampling rate: another rate than the feature extractor's is resampled with a windowed-sinc filter (``resample``:
  the Hann-windowed sinc interpolation of ``torchaudio.functional.resample``'s default, 6 zero crossings, rolloff
  0.99, computed with numpy); ffmpeg resamples with its own filter (libswresample), so the samples differ a little,
  within the tolerances tests/model_build/test_audio_vs_pipeline.py states and checks against the pipeline.
* Channels: ffmpeg's ``-ac 1`` mix, which the pipeline runs on a file's bytes: left and right each at 1/sqrt(2)
  (``STEREO_GAIN``), not averaged as ``_to_mono`` averages an array; more than two are refused, as ``_to_mono``
  refuses them.
* Length: more than ``max_seconds`` of audio is refused (from the file's header, before decoding); the pipeline
  has no limit.
* A file cut short (its header declares more than follows) is read as far as it goes, as libsndfile and ffmpeg
  read it.
"""
from __future__ import annotations

import io
import math
from typing import Optional

import numpy as np
import numpy.typing as npt
import soundfile

Floats = npt.NDArray[np.float32]

ACCEPTED = "WAV, FLAC, Ogg (Vorbis or Opus), MP3, AIFF or another format libsndfile reads"
_FIX_FORMAT = "convert it to WAV, FLAC, Ogg or MP3 before sending"
# The sampling rates taken: what recorders write (8 kHz telephony to 384 kHz studio). A header's rate is bounded
# before anything is read, as the decoded length is bounded by max_seconds at that rate: a forged rate of 2**31 Hz
# would otherwise have the read allocate gigabytes.
RATES = (1000, 384000)
# The resampling filter has one row of taps per output phase: target/gcd rows of about rate/gcd taps. Common rates
# share a large factor with the models' (44100 -> 16000: 160 x 455); two nearly coprime ones (16001 -> 16000) would
# take 16000 x 16015, 2 GB: refused above this many taps.
MAX_TAPS = 2_000_000
# How ffmpeg's -ac 1 mixes two channels into one: FFmpeg's libswresample/rematrix.c (swr_build_matrix2) adds front
# left and right into the centre at M_SQRT1_2 each, and a float output is not renormalised. Measured through the
# pipeline's own ffmpeg_read (FFmpeg 9.0.2): (L+R)/sqrt(2) for WAV, FLAC, MP3, Ogg and AIFF alike, 1.414 x the mean.
STEREO_GAIN = math.sqrt(0.5)
ZERO_CROSSINGS = 6   # torchaudio.functional.resample's lowpass_filter_width default
ROLLOFF = 0.99       # its rolloff default: the cutoff, as a share of the lower Nyquist frequency


class AudioRejected(ValueError):
    """Audio this model does not take; the message is one sentence for the client."""


def decode(data: bytes, *, sampling_rate: int, max_seconds: float) -> Floats:
    """The bytes of one audio file -> mono float32 samples at ``sampling_rate`` (resampled where the file's rate
    differs). Raises AudioRejected for no bytes, a format libsndfile does not read, a broken file, more than two
    channels, more than ``max_seconds``, no samples, NaN or infinite samples."""
    data = bytes(data)
    if not data:
        raise AudioRejected(f"AUDIO: no bytes; this model takes one audio file per request ({ACCEPTED}); "
                            "send the file's bytes")
    try:
        with soundfile.SoundFile(io.BytesIO(data)) as stream:
            name, channels, rate = f"the {stream.format} file", int(stream.channels), int(stream.samplerate)
            _check_channels(name, channels)
            _check_rate(name, rate, sampling_rate)
            # The header's length is checked before decoding, so that an over-long file costs no decoding; a stream
            # that does not declare its length reads bounded, and what it gives is checked.
            bound = int(max_seconds * rate)
            if int(stream.frames) > bound:
                _check_length(name, int(stream.frames), rate, max_seconds)
            frames = np.asarray(stream.read(frames=bound + 1, dtype="float32", always_2d=True), dtype=np.float32)
    except AudioRejected:
        raise
    except Exception as error:  # libsndfile's failures come as several types across soundfile versions
        raise _unreadable(data, error) from None
    _check_length(name, frames.shape[0], rate, max_seconds)
    samples = _mono(name, frames)
    return samples if rate == sampling_rate else resample(samples, rate, sampling_rate)


def waveform(array: npt.ArrayLike, *, max_seconds: float, sampling_rate: int) -> Floats:
    """Samples sent as they are (an FP32 tensor, at ``sampling_rate``) -> float32 1-D, after ``decode``'s checks."""
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


def resample(samples: Floats, rate: int, target: int) -> Floats:
    """``samples`` at ``rate`` Hz -> at ``target`` Hz, ceil(len * target / rate) of them, by Hann-windowed sinc
    interpolation (the filter ``torchaudio.functional.resample`` uses by default, applied as a strided
    polyphase product)."""
    if rate == target:  # as torchaudio: no filtering at all
        return samples.astype(np.float32, copy=False)
    common = math.gcd(rate, target)
    up, down = target // common, rate // common          # every `down` input samples give `up` outputs
    cutoff = min(up, down) * ROLLOFF
    width = math.ceil(ZERO_CROSSINGS * down / cutoff)    # input samples on each side of an output
    taps = np.arange(-width, width + down, dtype=np.float64) / down
    phases = -np.arange(up, dtype=np.float64)[:, None] / up
    t = np.clip((phases + taps[None, :]) * cutoff, -ZERO_CROSSINGS, ZERO_CROSSINGS)
    window = np.cos(t * math.pi / ZERO_CROSSINGS / 2) ** 2
    t = t * math.pi
    kernels = np.where(t == 0, 1.0, np.sin(t) / np.where(t == 0, 1.0, t)) * window * (cutoff / down)
    padded = np.pad(samples.astype(np.float64), (width, width + down))
    count = (padded.shape[0] - kernels.shape[1]) // down + 1
    frames = np.lib.stride_tricks.sliding_window_view(padded, kernels.shape[1])[::down][:count]
    out = (frames @ kernels.T).reshape(-1)[:math.ceil(up * samples.shape[0] / down)]
    return out.astype(np.float32)


def _unreadable(data: bytes, error: Exception) -> AudioRejected:
    # libsndfile's message after soundfile's "Error opening <object>: " (e.g. "Format not recognised.")
    reason = (str(error).strip().splitlines() or [type(error).__name__])[0].split(">: ", 1)[-1].rstrip(".")
    found = _found(data)
    if found is not None:
        return AudioRejected(f"AUDIO: {found}, which libsndfile does not read; this model takes {ACCEPTED}; "
                             f"{_FIX_FORMAT}")
    return AudioRejected(f"AUDIO: {len(data)} bytes that libsndfile cannot read as audio ({reason}; they begin "
                         f"0x{data[:8].hex()}); this model takes one complete file ({ACCEPTED}); send the whole "
                         "file as it was written, or " + _FIX_FORMAT)


def _found(data: bytes) -> Optional[str]:
    """What the bytes are, by their magic numbers, where it is a container libsndfile does not read."""
    if data[4:8] == b"ftyp":
        return "an MP4/M4A file (AAC)"
    if data[:4] == b"\x1a\x45\xdf\xa3":
        return "a WebM/Matroska file"
    return None


def _check_channels(what: str, channels: int) -> None:
    if channels > 2:
        raise AudioRejected(f"AUDIO: {what} with {channels} channels; this model takes mono or stereo audio "
                            "(stereo is mixed to mono as transformers' pipeline has ffmpeg mix it); "
                            "downmix it to mono before sending")


def _check_rate(what: str, rate: int, target: int) -> None:
    fix = "record or convert it at a common rate (8000, 16000, 22050, 44100 or 48000 Hz)"
    if not RATES[0] <= rate <= RATES[1]:
        raise AudioRejected(f"AUDIO: {what} at {rate} Hz; this model takes audio sampled at {RATES[0]:,} to "
                            f"{RATES[1]:,} Hz (and resamples it to its own {target} Hz); {fix}")
    taps = _taps(rate, target) if rate != target else 0
    if taps > MAX_TAPS:
        raise AudioRejected(f"AUDIO: {what} at {rate} Hz; this model resamples to its {target} Hz from a rate that "
                            f"shares a large common factor with it (this one would take a filter of {taps:,} taps); "
                            f"{fix}")


def _taps(rate: int, target: int) -> int:
    common = math.gcd(rate, target)
    up, down = target // common, rate // common
    return up * (2 * math.ceil(ZERO_CROSSINGS * down / (min(up, down) * ROLLOFF)) + down)


def _check_length(what: str, frames: int, rate: int, max_seconds: float) -> None:
    limit = int(max_seconds * rate)
    if frames > limit:
        raise AudioRejected(f"AUDIO: {what} of {frames / rate:.2f} s ({frames} samples at {rate} Hz); this model "
                            f"takes at most {max_seconds:g} s; cut it into pieces of at most {max_seconds:g} s "
                            "before sending")
    if frames == 0:
        raise AudioRejected(f"AUDIO: {what} with no samples; this model takes at least one sample; "
                            "send audio that is not empty")


def _check_finite(what: str, samples: Floats) -> None:
    bad = int(np.count_nonzero(~np.isfinite(samples)))
    if bad:
        raise AudioRejected(f"AUDIO: {what} with {bad} NaN or infinite samples; this model takes finite sample "
                            "values; replace them (e.g. with 0) before sending")


def _mono(what: str, frames: Floats) -> Floats:
    """[frames, channels] -> [frames], as ffmpeg_read mixes a file's channels (1 or 2, checked before)."""
    _check_finite(what, frames)
    if frames.shape[1] == 1:
        return np.ascontiguousarray(frames[:, 0])
    return np.asarray((frames[:, 0] + frames[:, 1]) * STEREO_GAIN, dtype=np.float32)

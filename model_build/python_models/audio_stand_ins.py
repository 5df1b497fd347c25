"""numpy stand-ins for the audio feature extractors transformers 5.23.0 marks as needing torch
(``@requires(backends=("torch",))``): ASTFeatureExtractor, ParakeetFeatureExtractor, LasrFeatureExtractor.

The preprocessing step's execution environment has no torch, so those classes cannot even be imported there.
Each class here computes the same tensor on numpy for the case the step uses: a list of mono clips of ONE length
(the step refuses requests mixing lengths), so nothing is padded. Each is built from the dict of
``preprocessor_config.json`` with its class's own defaults, called on a list of 1-D float32 arrays, and returns
{output name: float32 [clips, ...]}. ``feature_atol`` is the largest difference from the class it stands in for
that the build accepts (model_build/backends/ensemble/audio_check.py compares the two on every test clip);
each says where its difference comes from.

Sources ported (transformers 5.23.0): models/audio_spectrogram_transformer/
feature_extraction_audio_spectrogram_transformer.py, models/parakeet/feature_extraction_parakeet.py,
models/lasr/feature_extraction_lasr.py.
"""
import numpy as np


class ASTFeatures:
    """transformers 5.23.0 ``ASTFeatureExtractor`` (models/audio_spectrogram_transformer/
    feature_extraction_audio_spectrogram_transformer.py) without torchaudio, where it computes a Kaldi-style
    log-mel filter bank with ``audio_utils.spectrogram``: the same call, then zero rows appended or rows cut to
    ``max_length`` frames (it does this with ``torch.nn.ZeroPad2d``, hence its torch requirement), then
    ``(x - mean) / (2 * std)`` when ``do_normalize``. Defaults are that class's."""

    replaces = "ASTFeatureExtractor"
    model_input_names = ["input_values", "attention_mask"]
    feature_atol = 1e-6  # the same numpy calls in the same order: measured 0 on clips of 400 to 200000 samples

    def __init__(self, settings):
        from transformers.audio_utils import mel_filter_bank, window_function

        self.sampling_rate = int(settings.get("sampling_rate", 16000))
        self.num_mel_bins = int(settings.get("num_mel_bins", 128))
        self.max_length = int(settings.get("max_length", 1024))
        self.do_normalize = bool(settings.get("do_normalize", True))
        self.mean = float(settings.get("mean", -4.2677393))
        self.std = float(settings.get("std", 4.5689974))
        self.mel_filters = mel_filter_bank(num_frequency_bins=257, num_mel_filters=self.num_mel_bins,
                                           min_frequency=20, max_frequency=self.sampling_rate // 2,
                                           sampling_rate=self.sampling_rate, norm=None, mel_scale="kaldi",
                                           triangularize_in_mel_space=True)
        self.window = window_function(400, "hann", periodic=False)

    def fbank(self, wave):
        from transformers.audio_utils import spectrogram

        frames = spectrogram(np.squeeze(np.asarray(wave, dtype=np.float32)), self.window, frame_length=400,
                             hop_length=160, fft_length=512, power=2.0, center=False, preemphasis=0.97,
                             mel_filters=self.mel_filters, log_mel="log", mel_floor=1.192092955078125e-07,
                             remove_dc_offset=True).T
        if len(frames) < self.max_length:
            frames = np.pad(frames, ((0, self.max_length - len(frames)), (0, 0)))
        return frames[:self.max_length]

    def __call__(self, waves, sampling_rate=None, return_tensors="np"):
        _check_call(sampling_rate, self.sampling_rate, return_tensors)
        features = [self.fbank(wave) for wave in waves]
        if self.do_normalize:
            features = [(f - self.mean) / (self.std * 2) for f in features]
        return {"input_values": np.stack(features).astype(np.float32)}


# feature_extraction_parakeet.py, module constants
PARAKEET_EPSILON = 1e-5
PARAKEET_LOG_ZERO_GUARD_VALUE = 2**-24


def _check_call(sampling_rate, expected, return_tensors):
    """What a stand-in takes of the extractor's call: the clips' rate (as the class checks it) and numpy arrays."""
    if sampling_rate is not None and int(sampling_rate) != expected:
        raise ValueError(f"the clips are at {sampling_rate} Hz; this feature extractor takes {expected} Hz")
    if return_tensors not in (None, "np"):
        raise ValueError(f"return_tensors={return_tensors!r}: a numpy stand-in returns numpy arrays only ('np')")


def _same_length_batch(waves):
    """The clips as one float32 [batch, samples] array. The source converts each clip with
    ``.to(torch.float32)`` before padding; the step only sends clips of one length, so nothing is padded."""
    waves = [np.asarray(wave, dtype=np.float32).reshape(-1) for wave in waves]
    if len({len(wave) for wave in waves}) != 1:
        raise ValueError("this stand-in takes clips of one length only (padding would be needed otherwise)")
    return np.stack(waves)


def _read_frame_settings(extractor, settings, feature_size):
    """The framing settings Parakeet's and LASR's extractors share, with the defaults of both classes' __init__
    (they differ in feature_size only)."""
    extractor.feature_size = int(settings.get("feature_size", feature_size))
    extractor.sampling_rate = int(settings.get("sampling_rate", 16000))
    extractor.hop_length = int(settings.get("hop_length", 160))
    extractor.n_fft = int(settings.get("n_fft", 512))
    extractor.win_length = int(settings.get("win_length", 400))


def _torch_hann_window_float32(length):
    """``torch.hann_window(length, periodic=False)`` in float32. torch computes it as
    ``arange(N).mul_(2*pi/(N-1)).cos_().mul_(-0.5).add_(0.5)`` in the window's dtype (ATen hamming_window);
    doing the same in float32 here matches it to within 1 ulp, where the float64 ``np.hanning`` rounded to float32
    (``audio_utils.window_function``) differs by up to ~2e-7."""
    if length == 1:
        return np.ones(1, dtype=np.float32)
    n = np.arange(length, dtype=np.float32)
    return np.cos(n * np.float32(2.0 * np.pi / (length - 1))) * np.float32(-0.5) + np.float32(0.5)


class ParakeetFeatures:
    """transformers 5.23.0 ``ParakeetFeatureExtractor.__call__`` (models/parakeet/feature_extraction_parakeet.py)
    on numpy, all in float32 as torch computes it there:

    1. preemphasis over the whole clip: ``y[0] = x[0]; y[t] = x[t] - preemphasis * x[t-1]`` (the source's time
       mask then zeroes padded samples; there are none here);
    2. ``torch.stft(n_fft, hop_length, win_length, hann_window(win_length, periodic=False), center=True,
       pad_mode="constant")``: the clip zero-padded by n_fft//2 on both sides, frames of n_fft samples every
       hop_length, the window zero-padded to n_fft centred (offset (n_fft - win_length)//2, as torch does),
       one-sided FFT;
    3. power ``sqrt(re**2 + im**2) ** 2``, slaney-normalised slaney-scale mel filters (``audio_utils.
       mel_filter_bank(..., dtype=np.float32)``), ``log(mel + 2**-24)``;
    4. per mel bin, mean and unbiased std over the first ``(len + n_fft//2*2 - n_fft) // hop_length`` frames
       (the "valid" frames: one fewer than the STFT yields for an even n_fft), ``(x - mean) / (std + 1e-5)``,
       and the frames past those set to 0.

    Output: ``input_features`` float32 [clips, 1 + len // hop_length, feature_size] (for an even n_fft)."""

    replaces = "ParakeetFeatureExtractor"
    model_input_names = ["input_features", "attention_mask"]
    # torch's float32 FFT (MKL) is not reproducible bit for bit on numpy (1.26 computes in float64): measured up to
    # 8e-5 (in features of unit variance) on noise of 0.1 to 3 s, and 3.7e-4 on the build's synthetic chirp, whose
    # nearly empty mel bins have a small std to divide by; torch's own float32 and float64 STFTs differ as much
    feature_atol = 5e-4

    def __init__(self, settings):
        from transformers.audio_utils import mel_filter_bank

        _read_frame_settings(self, settings, feature_size=80)
        # None in the config means no preemphasis step at all (the source tests `is not None`)
        preemphasis = settings.get("preemphasis", 0.97)
        self.preemphasis = None if preemphasis is None else float(preemphasis)
        # the same call as the source's __init__; kept as [n_fft//2+1, feature_size] for `power @ filters`
        self.mel_filters = mel_filter_bank(num_frequency_bins=self.n_fft // 2 + 1,
                                           num_mel_filters=self.feature_size, min_frequency=0.0,
                                           max_frequency=self.sampling_rate / 2, sampling_rate=self.sampling_rate,
                                           norm="slaney", mel_scale="slaney", dtype=np.float32)
        # torch.stft pads a shorter window with zeros to n_fft, centred
        window = np.zeros(self.n_fft, dtype=np.float32)
        left = (self.n_fft - self.win_length) // 2
        window[left:left + self.win_length] = _torch_hann_window_float32(self.win_length)
        self.window = window

    def power_spectrum(self, batch):
        """|STFT|**2 as torch.stft computes it for the source: [clips, frames, n_fft//2+1] float32.
        Not ``audio_utils.spectrogram``: that one applies preemphasis per frame (the source applies it to the
        whole clip first) and clamps the mel spectrum at a floor (the source adds a guard)."""
        half = self.n_fft // 2
        padded = np.pad(batch, ((0, 0), (half, half)))  # center=True, pad_mode="constant"
        frames = np.lib.stride_tricks.sliding_window_view(padded, self.n_fft, axis=1)[:, ::self.hop_length]
        # np.fft works in float64; torch's float32 FFT (MKL on CPU) is not reproducible bit for bit. Its own
        # rounding, measured against torch.stft in float64, is up to ~1e-4 in the log of the lowest mel bins
        # (near DC, where preemphasis leaves little power); the differences to the source come from there
        spectrum = np.fft.rfft(frames * self.window, axis=-1).astype(np.complex64)
        # the source's "sqrt(re**2 + im**2) then **2", in float32
        magnitude = np.sqrt(spectrum.real ** 2 + spectrum.imag ** 2)
        return magnitude ** 2

    def __call__(self, waves, sampling_rate=None, return_tensors="np"):
        _check_call(sampling_rate, self.sampling_rate, return_tensors)
        batch = _same_length_batch(waves)
        length = batch.shape[1]

        if self.preemphasis is not None:
            # torch multiplies a float32 tensor by the python float in float32; numpy does the same here
            batch = np.concatenate([batch[:, :1], batch[:, 1:] - np.float32(self.preemphasis) * batch[:, :-1]],
                                   axis=1)

        power = self.power_spectrum(batch)
        # source: mel_filters [F, bins] @ magnitudes [clips, bins, frames], then permuted to [clips, frames, F]
        mel = np.log(power @ self.mel_filters + np.float32(PARAKEET_LOG_ZERO_GUARD_VALUE))

        # the source's features_lengths (floor division, as torch.floor_divide) and the mask derived from it
        valid = (length + self.n_fft // 2 * 2 - self.n_fft) // self.hop_length
        mask = (np.arange(mel.shape[1]) < valid)[None, :, None]
        with np.errstate(divide="ignore", invalid="ignore"):  # valid <= 1 gives nan/inf there as in torch
            masked = mel * mask
            mean = masked.sum(axis=1, keepdims=True) / np.float32(valid)
            variance = (((masked - mean) ** 2) * mask).sum(axis=1, keepdims=True) / np.float32(valid - 1)
            std = np.sqrt(variance)
            features = (mel - mean) / (std + np.float32(PARAKEET_EPSILON))
        features = features * mask
        return {"input_features": features.astype(np.float32)}


def lasr_mel_weight_matrix(num_mel_bins, num_spectrogram_bins, sample_rate, lower_edge_hertz, upper_edge_hertz):
    """``linear_to_mel_weight_matrix`` of models/lasr/feature_extraction_lasr.py (a numpy port of JAX's): HTK-style
    triangles on the kaldi mel scale, DC bin excluded, float64 throughout (the source asks for float64).
    Copied rather than imported, since its module belongs to a class marked as needing torch."""
    from transformers.audio_utils import hertz_to_mel

    linear_frequencies = np.linspace(0.0, sample_rate / 2.0, num_spectrogram_bins, dtype=np.float64)[1:]
    spectrogram_bins_mel = hertz_to_mel(linear_frequencies, mel_scale="kaldi")[:, np.newaxis]
    edges = np.linspace(hertz_to_mel(lower_edge_hertz, mel_scale="kaldi"),
                        hertz_to_mel(upper_edge_hertz, mel_scale="kaldi"), num_mel_bins + 2, dtype=np.float64)
    lower_edge_mel, center_mel, upper_edge_mel = edges[:-2][None, :], edges[1:-1][None, :], edges[2:][None, :]
    lower_slopes = (spectrogram_bins_mel - lower_edge_mel) / (center_mel - lower_edge_mel)
    upper_slopes = (upper_edge_mel - spectrogram_bins_mel) / (upper_edge_mel - center_mel)
    weights = np.maximum(0.0, np.minimum(lower_slopes, upper_slopes))
    return np.pad(weights, [[1, 0], [0, 0]]).astype(np.float64)


class LasrFeatures:
    """transformers 5.23.0 ``LasrFeatureExtractor.__call__`` (models/lasr/feature_extraction_lasr.py) on numpy.
    It differs from Parakeet's: no preemphasis, no centring (``waveform.unfold(win_length, hop_length)``: frames of
    win_length samples, not n_fft), the hann window (periodic=False) is not padded to n_fft but each windowed frame
    is zero-padded at its END by ``rfft(n=n_fft)``, everything in float64, mel filters from
    ``linear_to_mel_weight_matrix`` (kaldi mel scale, 125-7500 Hz), ``log(clamp(mel, min=1e-5))``, no
    normalisation, cast to float32 at the end. That is exactly ``audio_utils.spectrogram`` with center=False,
    frame_length=win_length, fft_length=n_fft, power=2, mel_floor=1e-5 (a clamp there too), log_mel="log".

    Output: ``input_features`` float32 [clips, 1 + (len - win_length) // hop_length, feature_size]."""

    replaces = "LasrFeatureExtractor"
    model_input_names = ["input_features", "attention_mask"]
    feature_atol = 1e-5  # float64 throughout as the source: measured up to 9.5e-7

    def __init__(self, settings):
        from transformers.audio_utils import window_function

        _read_frame_settings(self, settings, feature_size=128)
        # lower/upper edges are fixed at 125 and 7500 Hz in the source's __init__, not settings
        self.mel_filters = lasr_mel_weight_matrix(self.feature_size, self.n_fft // 2 + 1, self.sampling_rate,
                                                  125.0, 7500.0)
        # torch.hann_window(win_length, periodic=False, dtype=float64) == np.hanning(win_length) to ~1e-16
        self.window = window_function(self.win_length, "hann", periodic=False)

    def log_mel(self, wave):
        from transformers.audio_utils import spectrogram

        return spectrogram(wave.astype(np.float64), self.window, frame_length=self.win_length,
                           hop_length=self.hop_length, fft_length=self.n_fft, power=2.0, center=False,
                           mel_filters=self.mel_filters, mel_floor=1e-5, log_mel="log", dtype=np.float64).T

    def __call__(self, waves, sampling_rate=None, return_tensors="np"):
        _check_call(sampling_rate, self.sampling_rate, return_tensors)
        batch = _same_length_batch(waves)  # the source's .to(torch.float32) first, then float64
        if batch.shape[1] < self.win_length:
            # unfold yields no frame for a clip shorter than one window (spectrogram() would fail)
            return {"input_features": np.zeros((len(batch), 0, self.feature_size), dtype=np.float32)}
        features = np.stack([self.log_mel(wave) for wave in batch])
        return {"input_features": features.astype(np.float32)}


STAND_INS = {stand_in.replaces: stand_in for stand_in in (ASTFeatures, ParakeetFeatures, LasrFeatures)}

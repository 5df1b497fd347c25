"""Triton Python-backend model: encoded audio bytes -> the checkpoint's own feature extractor's tensors.

The first step of an audio ``task:`` ensemble (deployment_spec/sections/tasks.py). Each row of ``AUDIO`` (BYTES: one audio
file libsndfile reads) is decoded to a mono float32 waveform by ``audio_decode.py`` beside this file (its rules:
resampled to the feature extractor's sampling rate, stereo is averaged, a clip longer than ``max_audio_seconds`` is
refused), then the feature extractor of ``preprocessor_config.json`` beside this file (``audio_features.py``:
transformers' own where it runs on numpy, a numpy stand-in where transformers marks it as needing torch; there
is no torch in the execution environment) runs as ``pipeline("audio-classification")`` /
``pipeline("automatic-speech-recognition")`` run it on one waveform.

The model step takes no attention mask, so the rows of one request must have one length: a request whose
clips differ in length is refused (send one clip per request, or clips of one length); Triton's dynamic
batcher joins only requests of one shape. Padding would change the answers of models without a mask
(wav2vec2-base's group-normalised feature encoder) and is not done.

config.pbtxt parameters: ``sampling_rate``, ``max_audio_seconds``, ``feature_class`` (the class the build
verified with; the step refuses to start on another) and ``output`` (the tensor the feature extractor makes:
``input_values`` or ``input_features``). Output: that tensor, FP32, [rows, ...].
"""
import importlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # its helpers ship beside this file
import audio_features  # noqa: E402
from step_requests import RequestError, answer_requests  # noqa: E402

import numpy as np

try:  # absent when the build imports this file to verify the ensemble (model_build/backends/ensemble)
    import triton_python_backend_utils as pb_utils
except ImportError:
    pb_utils = None

INPUT = "AUDIO"


class Preprocess:
    """Decoding and the checkpoint's feature extractor with the parameters of config.pbtxt; no Triton types."""

    def __init__(self, folder, params):
        if folder not in sys.path:  # audio_decode.py ships beside this file
            sys.path.insert(0, folder)
        self.decoder = importlib.import_module("audio_decode")
        self.extractor = audio_features.load(folder, params["feature_class"])
        found = audio_features.class_name(self.extractor)
        if found != params["feature_class"]:
            raise RuntimeError(f"the feature extractor loaded as {found}, the build verified "
                               f"{params['feature_class']}: rebuild the model with the same transformers")
        self.sampling_rate = int(params["sampling_rate"])
        self.max_seconds = float(params["max_audio_seconds"])
        self.output = params["output"]

    def waveforms(self, rows):
        """BYTES rows -> mono float32 waveforms; RequestError naming the first bad row."""
        out = []
        for row, value in enumerate(rows):
            data = value if isinstance(value, bytes) else str(value).encode()
            try:
                out.append(self.decoder.decode(data, sampling_rate=self.sampling_rate, max_seconds=self.max_seconds))
            except self.decoder.AudioRejected as exc:
                raise RequestError(f"{exc} (row {row})") from None
        lengths = sorted({len(w) for w in out})
        if len(lengths) > 1:
            raise RequestError(f"{INPUT}: the clips of one request have {len(lengths)} lengths ({lengths[0]} to "
                               f"{lengths[-1]} samples); this model takes clips of one length per request (it has "
                               "no attention mask, padding would change its answers); send one clip per request")
        return out

    def features(self, rows):
        """BYTES rows -> the feature extractor's tensor [rows, ...] float32."""
        waves = self.waveforms(rows)
        made = self.extractor(waves, sampling_rate=self.sampling_rate, return_tensors="np")
        return np.asarray(made[self.output], dtype=np.float32)


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        here = os.path.join(args["model_repository"], args["model_version"])
        self.step = Preprocess(here, params)

    def execute(self, requests):
        def compute(request):
            clips = pb_utils.get_input_tensor_by_name(request, INPUT).as_numpy().reshape(-1)
            return [pb_utils.Tensor(self.step.output, self.step.features(clips))]

        return answer_requests(pb_utils, requests, compute)

"""The feature extractor of an audio task's preprocessing step, in an execution environment without torch.

The checkpoint's own, loaded by transformers' ``AutoFeatureExtractor`` from ``preprocessor_config.json``, where
transformers runs it on numpy (Wav2Vec2FeatureExtractor, WhisperFeatureExtractor, SeamlessM4TFeatureExtractor...).
Where transformers marks it as needing torch, its numpy stand-in from ``audio_stand_ins.py`` beside this file,
which the build compares with the class itself on every test clip (model_build/backends/ensemble/audio_check.py).
Shipped beside the step's model.py; the build imports it from model_build/python_models.
"""
import json
import os
import sys

try:  # the build imports this file as model_build.python_models.audio_features
    from .audio_stand_ins import STAND_INS
except ImportError:  # the step imports it as a module of its own folder, audio_stand_ins.py beside it
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from audio_stand_ins import STAND_INS

CONFIG = "preprocessor_config.json"
EXACT = 0.0  # transformers' own class: the step runs the very code the build ran


def settings(folder):
    with open(os.path.join(folder, CONFIG), encoding="utf-8") as handle:
        return json.load(handle)


def load(folder, verified):
    """The extractor of the checkpoint in ``folder``: the numpy stand-in of ``verified`` (the class the build
    found, config.pbtxt's ``feature_class``; preprocessor_config.json may leave it to config.json's model type)
    where there is one, else transformers' own."""
    stand_in = STAND_INS.get(verified)
    if stand_in is not None:
        return stand_in(settings(folder))
    from transformers import AutoFeatureExtractor

    return AutoFeatureExtractor.from_pretrained(folder, local_files_only=True)


def class_name(extractor):
    """The transformers class ``extractor`` is or stands in for."""
    return getattr(extractor, "replaces", type(extractor).__name__)


def tolerance(extractor):
    """The largest difference from transformers' class the build accepts for ``extractor``'s features."""
    return float(getattr(extractor, "feature_atol", EXACT))

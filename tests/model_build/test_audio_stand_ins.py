"""The numpy stand-ins of the feature extractors transformers 5.23.0 marks as needing torch
(model_build/python_models/audio_stand_ins.py) compute what the classes themselves compute, within the
tolerance each states, for the defaults and a non-default setting, clips of several lengths, one and three at a
time; the step loads the stand-in by the class name the build verified."""
from __future__ import annotations

import json

import numpy as np
import pytest
import transformers

from model_build.python_models import audio_features, audio_stand_ins

SETTINGS = {"ASTFeatureExtractor": {"max_length": 100, "num_mel_bins": 64, "do_normalize": False},
            "ParakeetFeatureExtractor": {"feature_size": 64, "preemphasis": 0.9},
            "LasrFeatureExtractor": {"feature_size": 64, "hop_length": 200}}
# From 0.1 s at 16 kHz. Parakeet normalises each mel bin over the clip's frames: a 25 ms clip has two, whose
# unbiased std turns the FFT's float32 rounding into differences of 5e-4 (measured); no application sends those.
LENGTHS = (1600, 16000, 24000, 48000)


def test_every_stand_in_is_for_a_class_transformers_marks_as_needing_torch():
    for name in audio_stand_ins.STAND_INS:
        assert "torch" in vars(getattr(transformers, name)).get("__backends", ()), name
    assert sorted(audio_stand_ins.STAND_INS) == sorted(SETTINGS)


@pytest.mark.parametrize("name", sorted(SETTINGS))
@pytest.mark.parametrize("non_default", [False, True], ids=["defaults", "non-default"])
def test_the_stand_in_computes_the_classs_features_within_its_stated_tolerance(name, non_default, tmp_path):
    real = getattr(transformers, name)(**(SETTINGS[name] if non_default else {}))
    real.save_pretrained(tmp_path)
    ours = audio_features.load(str(tmp_path), name)
    # the step imports it as a module of its own folder: the same class by name
    assert type(ours).__name__ == audio_stand_ins.STAND_INS[name].__name__ and audio_features.class_name(ours) == name
    output = real.model_input_names[0]
    rng = np.random.default_rng(3)
    worst = 0.0
    for length in LENGTHS:
        for rows in (1, 3):
            clips = [(0.1 * rng.standard_normal(length)).astype(np.float32) for _ in range(rows)]
            want = np.asarray(real(clips, sampling_rate=real.sampling_rate, return_tensors="np")[output])
            got = ours(clips, sampling_rate=real.sampling_rate)[output]
            assert got.shape == want.shape and got.dtype == np.float32, (length, rows)
            worst = max(worst, float(np.abs(got - want).max()))
    assert worst <= audio_features.tolerance(ours), worst


def test_a_stand_in_refuses_another_sampling_rate(tmp_path):
    transformers.ASTFeatureExtractor().save_pretrained(tmp_path)
    with pytest.raises(ValueError) as caught:
        audio_features.load(str(tmp_path), "ASTFeatureExtractor")([np.zeros(800, np.float32)], sampling_rate=8000)
    assert str(caught.value) == "the clips are at 8000 Hz; this feature extractor takes 16000 Hz"


def test_a_class_without_a_stand_in_is_transformers_own(tmp_path):
    transformers.Wav2Vec2FeatureExtractor().save_pretrained(tmp_path)
    loaded = audio_features.load(str(tmp_path), "Wav2Vec2FeatureExtractor")
    assert type(loaded) is transformers.Wav2Vec2FeatureExtractor
    assert audio_features.tolerance(loaded) == 0.0
    assert json.loads((tmp_path / "preprocessor_config.json").read_text())["feature_extractor_type"] == \
        audio_features.class_name(loaded)

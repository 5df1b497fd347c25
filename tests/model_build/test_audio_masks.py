"""The attention_mask the audio pipelines hand the model for one unpadded clip, made by the model step from the
features' length (model_build/recipes/audio_steps.py ``masked_end_frames``): Parakeet's extractor masks its last
STFT frame, the others mask nothing or a count that changes with the clip (left to the build's check)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers

from deployment_spec.sections.model import Backend, ModelSpec
from deployment_spec.sections.tasks import Task, TaskKind
from model_build.recipes import audio_steps


def _model(kind: TaskKind, folder) -> ModelSpec:
    return ModelSpec(backend=Backend.ONNXRUNTIME, weights=str(folder), task=Task(kind), name="words-model",
                     task_entry="words")


def _saved(extractor, tmp_path):
    audio_steps.feature_extractor.cache_clear()
    extractor.save_pretrained(tmp_path)
    return tmp_path


@pytest.mark.parametrize("extractor, kind, masked", [
    (transformers.ParakeetFeatureExtractor(), TaskKind.SPEECH_RECOGNITION, 1),
    (transformers.Wav2Vec2FeatureExtractor(return_attention_mask=True), TaskKind.SPEECH_RECOGNITION, 0),
    (transformers.Wav2Vec2FeatureExtractor(return_attention_mask=False), TaskKind.AUDIO_CLASSIFICATION, 0),
    (transformers.ASTFeatureExtractor(), TaskKind.AUDIO_CLASSIFICATION, 0),
], ids=["parakeet-ctc", "wav2vec2-ctc", "wav2vec2-classification", "ast-classification"])
def test_the_frames_the_pipelines_mask_at_the_end_of_a_clip(extractor, kind, masked, tmp_path):
    folder = _saved(extractor, tmp_path)
    assert audio_steps.masked_end_frames(_model(kind, folder), folder) == masked


def test_the_model_step_passes_the_mask_it_makes_as_the_pipeline_passes_it():
    # A stand-in model that answers with the mask it was given: ones, then the masked frames, for every row.
    class Echo(torch.nn.Module):
        def forward(self, input_features, attention_mask=None):
            return type("Out", (), {"logits": attention_mask})()

    step = audio_steps.SpectrogramModel(Echo(), masked_end_frames=1)
    made = step(input_features=torch.zeros(2, 5, 80))
    assert made.tolist() == [[1, 1, 1, 1, 0], [1, 1, 1, 1, 0]]
    assert audio_steps.SpectrogramModel(Echo())(input_features=torch.zeros(1, 3, 80)) is None


def test_a_mask_that_changes_with_the_clip_is_not_made(tmp_path):
    # SeamlessM4T's extractor pads to an even frame count and masks that pad: 0 or 1 frames by the clip's length.
    # The graph cannot know the clip's length, so the features go alone (as the build verified wav2vec2-bert).
    folder = _saved(transformers.SeamlessM4TFeatureExtractor(), tmp_path)
    counts = set()
    for seconds in (0.25, 0.5, 1.0, 1.5):
        made = audio_steps.feature_extractor(folder)([np.zeros(int(16000 * seconds), np.float32)], sampling_rate=16000,
                                                     return_tensors="np", return_attention_mask=True)
        counts.add(made["input_features"].shape[1] - int(made["attention_mask"].sum()))
    assert counts == {0, 1}
    assert audio_steps.masked_end_frames(_model(TaskKind.SPEECH_RECOGNITION, folder), folder) == 0

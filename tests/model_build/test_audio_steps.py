"""The audio model step's example and serving-case lengths follow what the feature extractor makes of one second
of audio (model_build/recipes/audio_steps.py): raw samples for wav2vec2's, spectrogram frames for
SeamlessM4TFeatureExtractor's (wav2vec2-bert), not a frame per sample, whose frames x frames relative position
tensors took 23 GB in the ONNX export and got the build killed."""
from __future__ import annotations

import pathlib

from deployment_spec.sections.model import Backend, ModelSpec
from deployment_spec.sections.tasks import Task, TaskKind
from model_build.recipes import audio_steps
from benchmarks.tooling import audio_checkpoints


def _model_step(folder: pathlib.Path) -> ModelSpec:
    return ModelSpec(backend=Backend.ONNXRUNTIME, weights=str(folder), task=Task(TaskKind.AUDIO_CLASSIFICATION),
                     name="scenes-model", task_entry="scenes")


def test_a_spectrogram_example_is_one_second_of_frames(tmp_path):
    folder = tmp_path / "w2v-bert"
    audio_checkpoints.save_mapped("wav2vec2-bert", "Wav2Vec2BertForSequenceClassification", folder)
    assert audio_steps.feature_shape(folder) == (-1, 160)
    # SeamlessM4TFeatureExtractor: 10 ms frames of 80 mel bins, stacked in pairs (stride 2): 49 rows of 160.
    assert audio_steps.example_shape(folder) == (49, 160)
    made = audio_steps.exportable(_model_step(folder), tmp_path)
    assert tuple(made.example_inputs["input_features"].shape) == (2, 49, 160)
    assert tuple(made.sample_inputs(3, 1)["input_features"].shape) == (3, 49, 160)
    assert made.short_length == 12  # a quarter of a second's frames


def test_raw_samples_stay_one_second_of_samples(tmp_path):
    folder = audio_checkpoints.save(tmp_path / "w2v", "audio-classification")
    assert audio_steps.feature_shape(folder) == (-1,)
    made = audio_steps.exportable(_model_step(folder), tmp_path)
    assert tuple(made.example_inputs["input_values"].shape) == (2, audio_checkpoints.RATE)
    assert made.short_length == audio_checkpoints.RATE // 4


def test_a_fixed_length_spectrogram_has_no_short_length(tmp_path):
    folder = tmp_path / "whisper"
    audio_checkpoints.save_mapped("whisper", "WhisperForAudioClassification", folder)
    assert audio_steps.feature_shape(folder) == audio_steps.example_shape(folder) == (80, 3000)
    assert audio_steps.exportable(_model_step(folder), tmp_path).short_length is None

"""The audio coverage benchmark's parts that decide an outcome, on fixed inputs: how a served answer is judged
against the pipeline's (labels and scores: coverage_runs.label_answer, shared with the image benchmark; a
transcript: benchmarks/hf_audio_coverage.py), and the tiny checkpoints it builds from transformers' mappings
(benchmarks/tooling/audio_checkpoints.py ``save_mapped``)."""
from __future__ import annotations

import importlib.util
import json
import pathlib
import sys

import pytest

from benchmarks.tooling import audio_checkpoints, coverage_runs

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _benchmark():
    """benchmarks/hf_audio_coverage.py as a module (benchmarks/ is scripts, not a package)."""
    if "hf_audio_coverage" not in sys.modules:
        spec = importlib.util.spec_from_file_location("hf_audio_coverage", ROOT / "benchmarks" / "hf_audio_coverage.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up there
        spec.loader.exec_module(module)
    return sys.modules["hf_audio_coverage"]


def _answer(**outputs):
    return {"outputs": [{"name": name, "data": data} for name, data in outputs.items()]}


PIPELINE = {"speech": 0.5, "music": 0.3, "noise": 0.2}
KNOWN = set(PIPELINE)


def test_labels_and_scores_as_the_pipeline_are_served():
    ok, what = coverage_runs.label_answer(_answer(labels=["speech", "music"], scores=[0.5004, 0.3]), KNOWN, 2,
                                          lambda: PIPELINE)
    assert (ok, what) == (True, "speech 0.5004, music 0.3000 (as the pipeline, score difference 0.0004)")


def test_nearly_tied_labels_may_come_in_either_order():
    tied = {"speech": 0.4, "music": 0.39995, "noise": 0.20005}
    ok, _ = coverage_runs.label_answer(_answer(labels=["music", "speech"], scores=[0.39995, 0.4]), KNOWN, 2,
                                       lambda: tied)
    assert ok


def test_a_score_off_by_more_than_the_tolerance_or_a_better_label_left_out_fails():
    off = coverage_runs.label_answer(_answer(labels=["speech", "music"], scores=[0.502, 0.3]), KNOWN, 2,
                                     lambda: PIPELINE)
    assert off == (False, "served speech 0.5020, music 0.3000; the pipeline answers speech 0.5000, music 0.3000")
    left_out = coverage_runs.label_answer(_answer(labels=["speech", "noise"], scores=[0.5, 0.2]), KNOWN, 2,
                                          lambda: PIPELINE)
    assert left_out[0] is False


def test_an_answer_of_the_wrong_shape_fails_without_running_the_pipeline():
    def never() -> dict[str, float]:
        raise AssertionError("the pipeline ran")

    assert coverage_runs.label_answer(_answer(text=["hi"]), KNOWN, 2, never) == (
        False, "the answer has outputs text, not labels and scores")
    assert coverage_runs.label_answer(_answer(labels=["speech", "LABEL_9"], scores=[0.5, 0.1]), KNOWN, 2, never) == (
        False, "the answer is not 2 labels of the checkpoint with finite scores: ['speech', 'LABEL_9'] [0.5, 0.1]")


def test_labels_that_all_score_alike_are_a_weak_check():
    flat = {"speech": 1 / 3, "music": 1 / 3, "noise": 1 / 3}
    ok, what = coverage_runs.label_answer(_answer(labels=["speech", "music"], scores=[1 / 3, 1 / 3]), KNOWN, 2,
                                          lambda: flat)
    assert ok and what.endswith(f"; {coverage_runs.FLAT_NOTE})")


def test_a_transcript_must_be_the_pipelines_character_for_character():
    bench = _benchmark()
    assert bench.same_transcript(_answer(text=["AB C"]), lambda: "AB C") == (True, '"AB C" (as the pipeline)')
    assert bench.same_transcript(_answer(text=["AB  C"]), lambda: "AB C") == (
        False, 'served "AB  C"; the pipeline answers "AB C"')
    assert bench.same_transcript(_answer(text=[""]), lambda: "") == (
        True, f'"" (as the pipeline; {bench.EMPTY_NOTE})')
    assert bench.same_transcript(_answer(labels=["x"]), lambda: "") == (
        False, "the answer has outputs labels, not one text: None")


def test_every_mapped_model_type_has_a_row_and_an_entry_name():
    bench = _benchmark()
    for task in bench.TASKS.values():
        rows = bench.architectures(task)
        assert rows and all(bench.entry_name(task, r).replace("_", "").isalnum() for r in rows)
    ctc = {r["model_type"]: r["class"] for r in bench.architectures(bench.TASKS["automatic-speech-recognition"])}
    assert ctc["wav2vec2"] == "Wav2Vec2ForCTC"


def test_a_ctc_checkpoint_spells_even_where_its_hidden_states_are_small(tmp_path):
    # SEW's encoder output is far below unit size: a head spread for unit-size states answered blanks only.
    import transformers

    made = audio_checkpoints.save_mapped("sew", "SEWForCTC", tmp_path)
    assert made["feature_extractor"] == "Wav2Vec2FeatureExtractor"
    assert made["tokenizer"] == "Wav2Vec2CTCTokenizer (32 tokens)"  # what Wav2Vec2Processor pairs it with
    assert json.loads((tmp_path / "tokenizer_config.json").read_text())["tokenizer_class"] == "Wav2Vec2CTCTokenizer"
    pipe = transformers.pipeline("automatic-speech-recognition", model=str(tmp_path), device="cpu")
    import numpy as np

    wave = 0.3 * np.sin(2 * np.pi * 300 * np.arange(16000) / 16000).astype(np.float32)
    text = pipe({"raw": wave, "sampling_rate": 16000})["text"]
    assert len(text.replace(" ", "")) >= 5, text


def test_wav2vec2_bert_gets_the_feature_extractor_its_config_documents(tmp_path):
    made = audio_checkpoints.save_mapped("wav2vec2-bert", "Wav2Vec2BertForSequenceClassification", tmp_path)
    assert made["feature_extractor"] == "SeamlessM4TFeatureExtractor"
    config = json.loads((tmp_path / "config.json").read_text())
    assert list(config["id2label"].values()) == audio_checkpoints.LABELS


def test_a_feature_extractor_that_cannot_be_made_here_is_said_so(tmp_path):
    try:
        import torchaudio  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("torchaudio is here: GraniteSpeech5FeatureExtractor can be made")
    with pytest.raises(audio_checkpoints.NoFeatureExtractor) as caught:
        audio_checkpoints.save_mapped("granite_speech5_ctc", "GraniteSpeech5ForCTC", tmp_path)
    assert str(caught.value).startswith(
        "no feature extractor: GraniteSpeech5FeatureExtractor() fails: ImportError: GraniteSpeech5FeatureExtractor "
        "requires the torchaudio library but it was not found in your environment. Please install it and restart "
        "your runtime."), str(caught.value)

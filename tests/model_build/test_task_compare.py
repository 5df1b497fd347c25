"""task_reference.compare, the verdict of every task's build-time check: a NaN or infinite answer is a
difference (NaN compares false with every tolerance, so it would pass unnoticed), and a finite one within the
tolerance is not."""
from __future__ import annotations

import math

import numpy as np
import pytest

from deployment_spec.sections.tasks import Task, TaskKind
from model_build.backends.ensemble import task_reference

LABELS = [{"label": "positive", "score": 0.7}, {"label": "negative", "score": 0.3}]
BOX = {"xmin": 1, "ymin": 2, "xmax": 30, "ymax": 40}


@pytest.mark.parametrize("kind, good, bad", [
    (TaskKind.SENTENCE_EMBEDDING, np.array([0.6, 0.8], np.float32), np.array([math.nan, 0.8], np.float32)),
    (TaskKind.IMAGE_EMBEDDING, np.array([0.6, 0.8], np.float32), np.array([math.inf, 0.8], np.float32)),
    (TaskKind.TEXT_CLASSIFICATION, LABELS, [{"label": "positive", "score": math.nan}, LABELS[1]]),
    (TaskKind.AUDIO_CLASSIFICATION, LABELS, [LABELS[0], {"label": "negative", "score": math.nan}]),
    (TaskKind.OBJECT_DETECTION, [{"score": 0.9, "label": "cat", "box": BOX}],
     [{"score": math.nan, "label": "cat", "box": BOX}]),
])
def test_a_non_finite_answer_is_a_difference(kind, good, bad):
    # a classification task shows as many labels as its answers hold (compare reads top_k)
    task = Task(kind, top_k=len(LABELS)) if isinstance(good, list) and "box" not in good[0] else Task(kind)
    # The twin: the reference's own answer passes.
    worst, problems = task_reference.compare(task, [good], [good], 1e-3)
    assert problems == [] and worst < 1e-12
    worst, problems = task_reference.compare(task, [bad], [good], 1e-3)
    assert problems == ["row 0: it holds NaN or infinite values"] and worst == 1.0


def test_answers_within_the_tolerance_pass_and_beyond_it_fail():
    task = Task(TaskKind.TEXT_CLASSIFICATION, top_k=len(LABELS))
    near = [{"label": "positive", "score": 0.7005}, {"label": "negative", "score": 0.2995}]
    far = [{"label": "positive", "score": 0.71}, {"label": "negative", "score": 0.29}]
    assert task_reference.compare(task, [near], [LABELS], 1e-3)[1] == []
    assert task_reference.compare(task, [far], [LABELS], 1e-3)[1] == ["row 0: score off by 0.01 (atol 0.001)"]


@pytest.mark.parametrize("config, want", [
    ({"id2label": {"0": "cat", "1": "dog", "2": "bird"}}, {0: "cat", 1: "dog", 2: "bird"}),
    # transformers 5 saves num_labels without id2label when the labels are its defaults (PvtConfig did): not 2
    ({"num_labels": 3}, {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}),
    ({}, {0: "LABEL_0", 1: "LABEL_1"}),
])
def test_the_labels_of_a_checkpoint_are_transformers_own(tmp_path, config, want):
    import json

    from model_build.recipes import checkpoint_text

    (tmp_path / "config.json").write_text(json.dumps(config))
    assert checkpoint_text.labels(tmp_path) == want


@pytest.mark.parametrize("kind", [TaskKind.IMAGE_EMBEDDING, TaskKind.SENTENCE_EMBEDDING])
def test_two_zero_embeddings_agree_and_one_alone_is_named(kind):
    # A (tiny, random) MobileViT embeds every image as zeros, as its eager model does: the same answer, which the
    # cosine (0 / 0) used to refuse as "cosine 0.000000 < 0.9999".
    task, zero, some = Task(kind), np.zeros(4, np.float32), np.array([0.6, 0.8, 0.0, 0.0], np.float32)
    assert task_reference.compare(task, [zero], [zero], 1e-3) == (0.0, [])
    assert task_reference.compare(task, [zero], [some], 1e-3) == (
        1.0, ["row 0: the embedding is all zeros, the reference's is not"])
    assert task_reference.compare(task, [some], [zero], 1e-3) == (
        1.0, ["row 0: the reference's embedding is all zeros, this one is not"])

"""Classification answers compared with the pipeline's (model_build/backends/ensemble/task_reference.py): two equal
scores at the last place shown may come in either order; another label there, or a score off, is a difference."""
from deployment_spec.sections.tasks import Task, TaskKind
from model_build.backends.ensemble import task_reference

TASK = Task(TaskKind.AUDIO_CLASSIFICATION, top_k=3)
# What the pipeline answers with reference_top_k (every label): a saturated softmax ties the last three.
THEIRS = [{"label": "glass", "score": 1.0}, {"label": "dog", "score": 1e-36}, {"label": "siren", "score": 0.0},
          {"label": "silence", "score": 0.0}]


def test_the_reference_asks_for_every_label():
    assert task_reference.reference_top_k(TASK) == task_reference.EVERY_LABEL


def test_labels_tied_past_the_one_after_the_last_shown_are_no_difference():
    # A tiny random LeViT gave four labels 0.25 each: the pipeline listed cat, dog, fox, owl; ours cat, owl.
    task = Task(TaskKind.IMAGE_CLASSIFICATION, top_k=2)
    theirs = [{"label": name, "score": 0.25} for name in ("cat", "dog", "fox", "owl")]
    ours = [{"label": "cat", "score": 0.25}, {"label": "owl", "score": 0.25}]
    assert task_reference.compare(task, [ours], [theirs], 1e-5) == (0.0, [])
    # twin: the reference cut at one label past top_k (the rule before) does not know owl's score
    assert task_reference.compare(task, [ours], [theirs[:3]], 1e-5)[1] == ["row 0: label 2 is 'owl', the pipeline's 'dog'"]


def test_a_tie_at_the_last_place_shown_is_no_difference():
    ours = [{"label": "glass", "score": 1.0}, {"label": "dog", "score": 1e-36}, {"label": "silence", "score": 0.0}]
    assert task_reference.compare(TASK, [ours], [THEIRS], 1e-5) == (0.0, [])


def test_another_label_at_the_last_place_is_a_difference():
    # planted: a label whose pipeline score is not within atol of the one shown there
    ours = [{"label": "glass", "score": 1.0}, {"label": "dog", "score": 1e-36}, {"label": "speech", "score": 0.0}]
    assert task_reference.compare(TASK, [ours], [THEIRS], 1e-5)[1] == [
        "row 0: label 3 is 'speech', the pipeline's 'siren'"]
    shifted = [{"label": "glass", "score": 1.0}, {"label": "silence", "score": 0.0}, {"label": "dog", "score": 0.0}]
    assert task_reference.compare(TASK, [shifted], [THEIRS], 0.5)[1] == []  # within a loose atol, a swap is allowed
    assert task_reference.compare(TASK, [shifted], [THEIRS], 1e-40)[1] == [
        "row 0: label 2 is 'silence', the pipeline's 'dog'"]


def test_a_missing_label_is_a_difference():
    assert task_reference.compare(TASK, [THEIRS[:2]], [THEIRS], 1e-5)[1] == ["row 0: 2 labels, the pipeline 3"]

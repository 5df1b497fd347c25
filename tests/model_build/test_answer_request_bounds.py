"""The spec's bounds of a request's options (``task.requests``, deployment_spec/sections/request_options.py) as the
answer step applies them (model_build/python_models/hf_answer.py), and what the response says it applied. Served
through the real Triton: tests/local_endpoint/test_raw_text_tasks.py."""
import pytest

from deployment_spec.sections.request_options import OPTIONS, RequestOptions
from model_build.python_models import hf_answer

CLASSIFIER = {"id2label": {0: "neg", 1: "pos", 2: "neutral"}, "top_k": 1, "function": "softmax"}
ANSWERS = {"id2label": {}, "top_k": 1, "max_answer_len": 15, "handle_impossible_answer": False, "sequence_length": 64}
DETECTOR = {"threshold": 0.5, "rule": "softmax"}


def bounded(params, task, **requests):
    return {**params, "requests": RequestOptions(**requests).answer_bounds(task)}


def refusal(task, params, sent):
    with pytest.raises(hf_answer.RequestError) as caught:
        hf_answer.with_request_parameters(task, params, sent)
    return str(caught.value)


def test_the_spec_and_the_answer_step_name_the_same_options_per_task():
    # Two tables, one contract: the spec validates requests.options against OPTIONS, the step reads REQUEST_OPTIONS.
    assert {task: tuple(options) for task, options in hf_answer.REQUEST_OPTIONS.items()} == OPTIONS


def test_within_the_spec_s_bounds_a_request_changes_what_it_sends():
    params = bounded(CLASSIFIER, "text-classification", max_top_k=2, function_to_apply=("softmax", "sigmoid"))
    got = hf_answer.with_request_parameters("text-classification", params, {"top_k": 2, "function_to_apply": "sigmoid"})
    assert (got["top_k"], got["function"]) == (2, "sigmoid")


@pytest.mark.parametrize("task, params, sent, message", [
    ("text-classification", bounded(CLASSIFIER, "text-classification", max_top_k=2), {"top_k": 3},
     "request parameter 'top_k' is 3; allowed: an integer from 1 to 2 (this endpoint's task.requests bound), the "
     "labels answered per row, best first (this model's default: 1); send e.g. \"parameters\": {\"top_k\": 1} beside "
     "\"inputs\""),
    ("text-classification", bounded(CLASSIFIER, "text-classification", function_to_apply=("softmax",)),
     {"function_to_apply": "sigmoid"},
     "request parameter 'function_to_apply' is 'sigmoid'; allowed: one of softmax (this endpoint's task.requests "
     "bound), the function applied to the logits (this model's default: softmax); send e.g. \"parameters\": "
     "{\"function_to_apply\": \"softmax\"} beside \"inputs\""),
    ("question-answering", bounded(ANSWERS, "question-answering", max_answer_len=30), {"max_answer_len": 31},
     "request parameter 'max_answer_len' is 31; allowed: an integer from 1 to 30 (this endpoint's task.requests "
     "bound), the longest answer in tokens (this model's default: 15); send e.g. \"parameters\": {\"max_answer_len\": "
     "1} beside \"inputs\""),
    ("object-detection", bounded(DETECTOR, "object-detection", min_threshold=0.4), {"threshold": 0.2},
     "request parameter 'threshold' is 0.2; allowed: a number from 0.4 to 1 (this endpoint's task.requests bound), "
     "the lowest score a detection is answered with (this model's default: 0.5); send e.g. \"parameters\": "
     "{\"threshold\": 0.4} beside \"inputs\""),
    ("question-answering", bounded(ANSWERS, "question-answering", options=("top_k",)),
     {"handle_impossible_answer": True},
     "request parameter 'handle_impossible_answer' is not allowed on this endpoint (its spec's task.requests.options: "
     "top_k); remove 'handle_impossible_answer'"),
    ("text-classification", bounded(CLASSIFIER, "text-classification", options=()), {"top_k": 1},
     "request parameter 'top_k' is not allowed on this endpoint (its spec's task.requests.options: none); remove "
     "'top_k'"),
])
def test_beyond_the_spec_s_bounds_a_request_is_refused_naming_the_bound(task, params, sent, message):
    assert refusal(task, params, sent) == message


def test_a_model_bound_tighter_than_the_spec_s_is_the_one_told():
    # 3 labels: a spec bound of 5 changes nothing, and the message does not blame the spec.
    params = bounded(CLASSIFIER, "text-classification", max_top_k=5)
    assert "an integer from 1 to 3, the labels" in refusal("text-classification", params, {"top_k": 4})


@pytest.mark.parametrize("task, params, sent, applied", [
    ("text-classification", CLASSIFIER, {}, {"top_k": 1, "function_to_apply": "softmax"}),
    ("text-classification", CLASSIFIER, {"top_k": 3, "function_to_apply": "none"},
     {"top_k": 3, "function_to_apply": "none"}),
    ("question-answering", ANSWERS, {"max_answer_len": 20},
     {"top_k": 1, "max_answer_len": 20, "handle_impossible_answer": False}),
    ("object-detection", DETECTOR, {"threshold": "0.25"}, {"threshold": 0.25}),
    ("sentence-embedding", {}, {}, {}),
])
def test_the_response_says_which_options_it_applied(task, params, sent, applied):
    used = hf_answer.with_request_parameters(task, params, sent)
    assert hf_answer.applied_options(task, used) == applied


@pytest.mark.parametrize("kind, requests, problems", [
    ("text-classification", RequestOptions(max_top_k=1, options=("top_k", "threshold")), [
        "models.m.task.requests.options: got 'threshold'; allowed: one of top_k, function_to_apply; fix: remove "
        "'threshold'",
        "models.m.task.requests.max_top_k: got 1; allowed: at least the task's own 2 (a request that sends nothing "
        "gets it); fix: set max_top_k to 2 or raise it"]),
    ("text-classification", RequestOptions(function_to_apply=("softmax", "relu")), [
        "models.m.task.requests.function_to_apply: got 'relu'; allowed: one of softmax, sigmoid, none; fix: remove "
        "'relu'"]),
    ("question-answering", RequestOptions(options=("top_k",), max_answer_len=20), [
        "models.m.task.requests.max_answer_len: got 20; allowed: a bound of an option a request may send "
        "(requests.options leaves max_answer_len out); fix: remove max_answer_len"]),
    ("token-classification", RequestOptions(aggregation_strategy=("first",), max_top_k=3), [
        "models.m.task.requests.max_top_k: got 3; allowed: a bound of an option a request may send "
        "(token-classification takes no top_k); fix: remove max_top_k",
        "models.m.task.requests.aggregation_strategy: got [first]; allowed: a list holding the task's own 'simple'; "
        "fix: add 'simple'"]),
    ("object-detection", RequestOptions(min_threshold=0.6), [
        "models.m.task.requests.min_threshold: got 0.6; allowed: at most the task's own 0.5 (a request that sends "
        "nothing gets it); fix: set min_threshold to 0.5 or lower it"]),
    ("sentence-embedding", RequestOptions(options=()), [
        "models.m.task.requests: got {options: []}; allowed: only with text-classification, image-classification, "
        "audio-classification, token-classification, question-answering, object-detection (sentence-embedding takes "
        "none); fix: remove requests"]),
])
def test_a_bound_the_spec_cannot_keep_is_refused_at_load(kind, requests, problems):
    from deployment_spec.sections.tasks import Task, TaskKind
    top_k = 2 if kind == "text-classification" else 1
    task = Task(TaskKind(kind), top_k=top_k, requests=requests)
    assert [str(p) for p in task.entry_problems("models.m.task")] == problems


def test_an_entry_without_requests_builds_the_answer_params_it_built_before():
    assert RequestOptions() == RequestOptions(options=None)
    assert RequestOptions(options=()).answer_bounds("text-classification") == {"options": [], "bounds": {}}

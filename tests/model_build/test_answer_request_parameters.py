"""What one request's KServe v2 ``parameters`` change in the answer step (model_build/python_models/hf_answer.py):
the options pipeline() takes per call (object-detection's threshold; classification's top_k and function_to_apply;
token-classification's aggregation_strategy; question-answering's top_k, max_answer_len, handle_impossible_answer,
doc_stride),
each refused with a message naming it, the value and the bound when outside; an option of another task is refused.
That the answers then equal pipeline() called with the same options: tests/local_endpoint/test_raw_text_tasks.py."""
import pytest

from model_build.python_models import hf_answer

PARAMS = {"threshold": 0.5, "rule": "softmax"}


@pytest.mark.parametrize("sent, used", [(0.3, 0.3), (0, 0.0), (1, 1.0), ("0.25", 0.25)])
def test_a_detector_takes_the_threshold_a_request_sends(sent, used):
    assert hf_answer.with_request_parameters("object-detection", PARAMS, {"threshold": sent}) == \
        {"threshold": used, "rule": "softmax"}


def test_without_the_parameter_the_spec_threshold_stays_and_other_parameters_are_not_the_steps():
    assert hf_answer.with_request_parameters("object-detection", PARAMS, {}) is PARAMS
    assert hf_answer.with_request_parameters("object-detection", PARAMS, {"binary_data_output": True}) is PARAMS


def test_an_option_of_another_task_is_refused_naming_the_models_own():
    # Silently answering with the spec's settings would look like the option worked.
    with pytest.raises(hf_answer.RequestError) as caught:
        hf_answer.with_request_parameters("image-classification", CLASSIFIER, {"threshold": 0.5})
    assert str(caught.value) == ("request parameter 'threshold' does not apply to this model (image-classification); "
                                 "its options: top_k, function_to_apply; remove 'threshold'")


CLASSIFIER = {"id2label": {0: "neg", 1: "pos", 2: "neutral"}, "top_k": 2, "function": "softmax"}
ENTITIES = {"id2label": {0: "O", 1: "B-PER"}, "aggregation_strategy": "simple"}
ANSWERS = {"id2label": {}, "top_k": 1, "max_answer_len": 15, "handle_impossible_answer": False, "sequence_length": 64,
           "doc_stride": 32, "max_doc_stride": 59}


@pytest.mark.parametrize("task, params, sent, changed", [
    ("text-classification", CLASSIFIER, {"top_k": 3}, {"top_k": 3}),
    ("text-classification", CLASSIFIER, {"top_k": "1", "function_to_apply": "SIGMOID"}, {"top_k": 1,
                                                                                         "function": "sigmoid"}),
    ("audio-classification", CLASSIFIER, {"function_to_apply": "none"}, {"function": "none"}),
    ("token-classification", ENTITIES, {"aggregation_strategy": "first"}, {"aggregation_strategy": "first"}),
    ("question-answering", ANSWERS, {"top_k": 3, "max_answer_len": 30, "handle_impossible_answer": "true"},
     {"top_k": 3, "max_answer_len": 30, "handle_impossible_answer": True}),
    ("question-answering", ANSWERS, {"doc_stride": "0"}, {"doc_stride": 0}),   # applied by the tokenizer step
    ("question-answering", ANSWERS, {"doc_stride": 59}, {"doc_stride": 59}),
])
def test_a_request_option_sets_what_pipeline_calls_it(task, params, sent, changed):
    got = hf_answer.with_request_parameters(task, params, sent)
    assert got == {**params, **changed} and got is not params
    assert params == {**params}   # the spec's stay for the next request


@pytest.mark.parametrize("task, params, sent, message", [
    ("text-classification", CLASSIFIER, {"top_k": 4},
     "request parameter 'top_k' is 4; allowed: an integer from 1 to 3, the labels answered per row, best first (this "
     "model's default: 2); send e.g. \"parameters\": {\"top_k\": 1} beside \"inputs\""),
    ("text-classification", CLASSIFIER, {"top_k": 1.5},
     "request parameter 'top_k' is 1.5; allowed: an integer from 1 to 3, the labels answered per row, best first "
     "(this model's default: 2); send e.g. \"parameters\": {\"top_k\": 1} beside \"inputs\""),
    ("text-classification", CLASSIFIER, {"function_to_apply": "relu"},
     "request parameter 'function_to_apply' is 'relu'; allowed: one of softmax, sigmoid, none, the function applied "
     "to the logits (this model's default: softmax); send e.g. \"parameters\": {\"function_to_apply\": \"softmax\"} "
     "beside \"inputs\""),
    ("token-classification", ENTITIES, {"aggregation_strategy": "mean"},
     "request parameter 'aggregation_strategy' is 'mean'; allowed: one of none, simple, first, average, max, how "
     "tokens are grouped into entities (this model's default: simple); send e.g. \"parameters\": "
     "{\"aggregation_strategy\": \"none\"} beside \"inputs\""),
    ("question-answering", ANSWERS, {"max_answer_len": 65},
     "request parameter 'max_answer_len' is 65; allowed: an integer from 1 to 64, the longest answer in tokens (this "
     "model's default: 15); send e.g. \"parameters\": {\"max_answer_len\": 1} beside \"inputs\""),
    ("question-answering", ANSWERS, {"doc_stride": 60},
     "request parameter 'doc_stride' is 60; allowed: an integer from 0 to 59, the context tokens each window repeats "
     "from the one before (this model's default: 32); send e.g. \"parameters\": {\"doc_stride\": 0} beside \"inputs\""),
    ("question-answering", ANSWERS, {"handle_impossible_answer": 1},
     "request parameter 'handle_impossible_answer' is 1; allowed: true or false, whether an empty answer may win "
     "(this model's default: False); send e.g. \"parameters\": {\"handle_impossible_answer\": true} beside "
     "\"inputs\""),
])
def test_an_option_outside_its_bound_is_a_client_error_naming_it(task, params, sent, message):
    with pytest.raises(hf_answer.RequestError) as caught:
        hf_answer.with_request_parameters(task, params, sent)
    assert str(caught.value) == message


@pytest.mark.parametrize("sent", [1.5, -0.1, "high", True, None, [0.3]])
def test_a_threshold_outside_0_to_1_is_a_client_error_naming_it(sent):
    # hf_answer.RequestError: the class the shipped step raises (step_requests.py imported from beside it).
    with pytest.raises(hf_answer.RequestError) as caught:
        hf_answer.with_request_parameters("object-detection", PARAMS, {"threshold": sent})
    assert str(caught.value) == (
        f"request parameter 'threshold' is {sent!r}; allowed: a number from 0 to 1, the lowest score a detection "
        "is answered with (this model's default: 0.5); send e.g. \"parameters\": {\"threshold\": 0.3} beside "
        "\"inputs\"")

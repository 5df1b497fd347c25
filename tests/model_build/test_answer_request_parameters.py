"""What one request's KServe v2 ``parameters`` change in the answer step (model_build/python_models/hf_answer.py):
object-detection's threshold, refused with a message naming the parameter when it is not a number from 0 to 1."""
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
    # A classifier has no threshold: the parameter is not its to read (nor to refuse).
    assert hf_answer.with_request_parameters("image-classification", {"top_k": 2}, {"threshold": 9}) == {"top_k": 2}


@pytest.mark.parametrize("sent", [1.5, -0.1, "high", True, None, [0.3]])
def test_a_threshold_outside_0_to_1_is_a_client_error_naming_it(sent):
    # hf_answer.RequestError: the class the shipped step raises (step_requests.py imported from beside it).
    with pytest.raises(hf_answer.RequestError) as caught:
        hf_answer.with_request_parameters("object-detection", PARAMS, {"threshold": sent})
    assert str(caught.value) == (
        f"request parameter 'threshold' is {sent!r}; allowed: a number from 0 to 1, the lowest score a detection "
        "is answered with (this model's default: 0.5); send e.g. \"parameters\": {\"threshold\": 0.3} beside "
        "\"inputs\"")

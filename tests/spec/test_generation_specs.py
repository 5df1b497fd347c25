"""Generating ``task:`` entries (text-generation, text2text-generation): one Python-backend model under the entry's
name, the request bounds as its parameters, streaming where the container can (deployment_spec/rules/streaming.py);
every misuse refused with its exact message."""
import copy
import pathlib

import pytest
import yaml

from deployment_spec import SpecError
from deployment_spec.rules.container_env import container_environment
from deployment_spec.sections.model import Backend
from deployment_spec.spec import parse_spec

ROOT = pathlib.Path(__file__).resolve().parents[2]
BASE = yaml.safe_load((ROOT / "triton.yaml").read_text())
WRITER = {"backend": "python", "weights": "ckpt", "max_batch_size": 8, "task": {"kind": "text-generation"}}


def _spec(writer: dict, endpoint: dict | None = None, version: str = "25.09", served: tuple[str, ...] = ("writer",)):
    raw = copy.deepcopy(BASE)
    raw["triton_version"] = version
    raw["models"]["writer"] = writer
    raw["endpoints"]["classifier"].update({"models": list(served), **(endpoint or {})})
    return parse_spec(raw, pathlib.Path("/tmp/gen-spec/triton.yaml"))


def test_a_generating_entry_is_one_python_model_that_streams():
    spec = _spec(WRITER)
    writer = spec.models["writer"]
    assert (writer.backend, writer.source.recipe, writer.task_entry) == (Backend.PYTHON, "hf-generate", "writer")
    assert not [name for name in spec.models if name.startswith("writer-")]  # no steps, no ensemble
    endpoint = spec.environments["dev"].endpoints["classifier"]
    assert endpoint.container.inference_type == "generate_stream"
    env = container_environment(endpoint.container, multi_model=False)
    assert env["SAGEMAKER_TRITON_INFERENCE_TYPE"] == "generate_stream"
    # The bounds are the served model's parameters, with the sequences decoded together and the kind.
    params = writer.task.generation.model_parameters(writer.task.kind.value, writer.max_batch_size)
    assert params == {"max_new_tokens": "512", "default_max_new_tokens": "64", "max_prompt_tokens": "2048",
                      "max_temperature": "2.0", "max_top_k": "1000", "max_repetition_penalty": "2.0",
                      "max_stop_strings": "8", "max_concurrent": "8", "kind": "text-generation"}


def test_whole_answers_leave_the_container_in_infer_mode_and_may_serve_from_a_multi_model_endpoint():
    whole = {**WRITER, "task": {"kind": "text2text-generation", "stream": False}}
    spec = _spec(whole, {"kind": "multi-model"})
    endpoint = spec.environments["dev"].endpoints["classifier"]
    assert endpoint.container.inference_type is None
    assert "SAGEMAKER_TRITON_INFERENCE_TYPE" not in container_environment(endpoint.container, multi_model=True)


OFF = "or set models.writer.task.stream: false (the whole text in one answer)"
REFUSED = {
    "a multi-model endpoint": (
        dict(endpoint={"kind": "multi-model"}),
        "endpoints.classifier.kind: got multi-model, serving the streaming model writer (models.writer.task.stream); "
        "allowed: single-model or inference-components: the multi-model route (/models/<m>/invoke) refuses decoupled "
        f"models; fix: serve writer from a single-model endpoint of its own, {OFF}"),
    "a release without generate_stream": (
        dict(version="24.09"),
        "triton_version: got '24.09'; allowed: 25.03 or later with the streaming model writer "
        "(SAGEMAKER_TRITON_INFERENCE_TYPE=generate_stream came with Triton 25.03); fix: set triton_version: \"25.04\" "
        f"or later, {OFF}"),
    "a model that answers in one piece beside it": (
        dict(endpoint={"default_model": "writer"}, served=("writer", "text-classifier")),
        "endpoints.classifier.models: got writer, text-classifier; allowed: only streaming models beside writer: the "
        "container's mode (generate_stream) is the endpoint's, and a model that answers in one piece is not reached "
        f"through it; fix: serve text-classifier from another endpoint, {OFF}"),
    "another container mode": (
        dict(endpoint={"container": {"inference_type": "infer"}}),
        "endpoints.classifier.container.inference_type: got 'infer'; allowed: generate_stream (or unset) with the "
        f"streaming model writer; fix: remove container.inference_type, {OFF}"),
    "an unknown container mode": (
        dict(endpoint={"container": {"inference_type": "stream"}}),
        "endpoints.classifier.container.inference_type: got 'stream'; allowed: infer, generate, generate_stream; "
        "fix: use one of them, or remove inference_type (infer)"),
    "another backend": (
        dict(writer={**WRITER, "backend": "onnxruntime"}),
        "models.writer.backend: got 'onnxruntime'; allowed: python with a generating task (the model decodes with "
        "transformers in Triton's Python backend); fix: set backend: python"),
    "dynamic batching": (
        dict(writer={**WRITER, "dynamic_batching": {"max_queue_delay_us": 100}}),
        "models.writer.dynamic_batching: got dynamic batching with a generating task; allowed: nothing: a new request "
        "joins the running batch between decoding steps, up to max_batch_size sequences; fix: remove dynamic_batching"),
    "a default above the bound": (
        dict(writer={**WRITER, "task": {"kind": "text-generation",
                                        "generation": {"max_new_tokens": 32, "default_max_new_tokens": 64}}}),
        "models.writer.task.generation.default_max_new_tokens: got 64; allowed: at most max_new_tokens (32); fix: "
        "lower default_max_new_tokens or raise max_new_tokens"),
    "generation bounds on a classifier": (
        dict(writer={"backend": "onnxruntime", "weights": "ckpt", "max_batch_size": 8,
                     "task": {"kind": "text-classification", "generation": {"max_new_tokens": 600}}}),
        "models.writer.task.generation: got generation settings; allowed: only with text-generation, "
        "text2text-generation, or automatic-speech-recognition with backend python; fix: remove generation"),
    "stream on a classifier": (
        dict(writer={"backend": "onnxruntime", "weights": "ckpt", "max_batch_size": 8,
                     "task": {"kind": "text-classification", "stream": False}}),
        "models.writer.task.stream: got false; allowed: only with text-generation, text2text-generation, or "
        "automatic-speech-recognition with backend python (a "
        "text-classification answers in one piece); fix: remove stream"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_generation_misuse_is_refused_with_its_message(case):
    arguments, message = REFUSED[case]
    with pytest.raises(SpecError) as caught:
        _spec(**{"writer": WRITER, **arguments})
    assert f"  - {message}" in str(caught.value).splitlines()

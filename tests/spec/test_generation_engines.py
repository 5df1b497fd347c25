"""``task.engine``: vllm and tensorrt-llm (deployment_spec/sections/generation.py,
deployment_spec/rules/generation_engines.py): accepted with a GPU type and the mirrored image, every misuse refused
with its exact message."""
import copy
import pathlib

import pytest
import yaml

from deployment_spec import SpecError
from deployment_spec.sections.generation import Engine, engine_image_tag
from deployment_spec.spec import parse_spec

ROOT = pathlib.Path(__file__).resolve().parents[2]
BASE = yaml.safe_load((ROOT / "triton.yaml").read_text())
WRITER = {"backend": "python", "weights": "ckpt", "max_batch_size": 8,
          "task": {"kind": "text-generation", "engine": "vllm"}}
MIRROR = {"image_repository": "ml/tritonserver"}


def _spec(writer: dict, endpoint: dict | None = None, served: tuple[str, ...] = ("writer",)):
    raw = copy.deepcopy(BASE)
    raw["triton_version"] = "25.09"
    raw["models"]["writer"] = writer
    raw["endpoints"]["classifier"].update({"models": list(served), **MIRROR, **(endpoint or {})})
    return parse_spec(raw, pathlib.Path("/tmp/gen-spec/triton.yaml"))


@pytest.mark.parametrize("engine", ["vllm", "tensorrt-llm"])
def test_an_engine_on_a_gpu_type_with_the_mirrored_image_is_accepted(engine):
    spec = _spec({**WRITER, "task": {"kind": "text-generation", "engine": engine}})
    assert spec.models["writer"].task.engine is Engine(engine)
    assert spec.environments["dev"].endpoints["classifier"].container.inference_type == "generate_stream"


def test_the_default_engine_is_transformers_and_the_tags_are_nvidias():
    spec = _spec({**WRITER, "task": {"kind": "text2text-generation"}})
    assert spec.models["writer"].task.engine is Engine.TRANSFORMERS
    assert engine_image_tag("25.09", Engine.VLLM) == "25.09-vllm-python-py3"
    assert engine_image_tag("25.09", Engine.TENSORRT_LLM) == "25.09-trtllm-python-py3"


def test_tensorrt_llm_may_answer_in_one_piece():
    spec = _spec({**WRITER, "task": {"kind": "text-generation", "engine": "tensorrt-llm", "stream": False}})
    assert spec.environments["dev"].endpoints["classifier"].container.inference_type is None


FIX_IMAGE = ("docker pull nvcr.io/nvidia/tritonserver:25.09-vllm-python-py3, push it to a repository of yours as "
             ":25.09-vllm-python-py3, and set image_repository to its name")
ENGINE_BOUND = ("takes the request's sampling parameters as they come and holds none to a bound; only max_new_tokens "
                "and max_prompt_tokens become its limits (the longest sequence)")
REFUSED = {
    "vllm with seq2seq": (
        dict(writer={**WRITER, "task": {"kind": "text2text-generation", "engine": "vllm"}}),
        "models.writer.task.engine: got 'vllm' with text2text-generation (vLLM's V1 engine, the one vllm_backend "
        "drives from the 25.x images, runs decoder-only text models); allowed: transformers with "
        "text2text-generation; vllm or tensorrt-llm with text-generation; fix: remove engine (transformers)"),
    "tensorrt-llm with seq2seq": (
        dict(writer={**WRITER, "task": {"kind": "text2text-generation", "engine": "tensorrt-llm"}}),
        "models.writer.task.engine: got 'tensorrt-llm' with text2text-generation (the LLM-API's PyTorch flow runs "
        "decoder-only models (encoder-decoders only through a TensorRT engine build, which this product does not "
        "make)); allowed: transformers with text2text-generation; vllm or tensorrt-llm with text-generation; fix: "
        "remove engine (transformers)"),
    "vllm answering in one piece": (
        dict(writer={**WRITER, "task": {"kind": "text-generation", "engine": "vllm", "stream": False}}),
        "models.writer.task.stream: got false with engine 'vllm'; allowed: true: vllm_backend is decoupled only (its "
        "model.py asserts it) and SageMaker's infer route refuses decoupled models; fix: remove stream (true), or "
        "set engine: tensorrt-llm or transformers"),
    "a bound the engine cannot hold": (
        dict(writer={**WRITER, "task": {"kind": "text-generation", "engine": "vllm",
                                        "generation": {"max_temperature": 1.0}}}),
        f"models.writer.task.generation.max_temperature: got 1.0 with engine 'vllm'; allowed: the default (2.0): "
        f"vllm {ENGINE_BOUND}; fix: remove generation.max_temperature, or set engine: transformers"),
    "a default length the engine cannot hold": (
        dict(writer={**WRITER, "task": {"kind": "text-generation", "engine": "tensorrt-llm",
                                        "generation": {"default_max_new_tokens": 32}}}),
        f"models.writer.task.generation.default_max_new_tokens: got 32 with engine 'tensorrt-llm'; allowed: the "
        f"default (64): tensorrt-llm {ENGINE_BOUND}; fix: remove generation.default_max_new_tokens, or set engine: "
        "transformers"),
    "an engine on a classifier": (
        dict(writer={"backend": "onnxruntime", "weights": "ckpt", "max_batch_size": 8,
                     "task": {"kind": "text-classification", "engine": "vllm"}}),
        "models.writer.task.engine: got 'vllm'; allowed: only with text-generation, text2text-generation, or automatic-speech-recognition with backend python; fix: "
        "remove engine"),
    "a CPU instance type": (
        dict(endpoint={"instance_type": "ml.c5.xlarge"}),
        "endpoints.classifier.instance_type: got ml.c5.xlarge (no GPU) serving writer (models.writer.task.engine: "
        "vllm); allowed: a GPU instance type: vllm runs on NVIDIA GPUs only; fix: set instance_type to a GPU type "
        "such as ml.g5.xlarge, or remove task.engine (transformers)"),
    "no mirrored image": (
        dict(endpoint={"image_repository": None}),
        "endpoints.classifier.image_repository: got nothing, serving writer (models.writer.task.engine: vllm); "
        "allowed: the ECR repository of the stage's account holding NVIDIA's tritonserver:25.09-vllm-python-py3 "
        "under that tag (AWS publishes no SageMaker Triton image with this engine); fix: " + FIX_IMAGE),
    "a model the image cannot load beside it": (
        dict(writer={**WRITER, "task": {"kind": "text-generation", "engine": "tensorrt-llm", "stream": False}},
             endpoint={"default_model": "writer"}, served=("writer", "text-classifier")),
        "endpoints.classifier.models: got writer, text-classifier; allowed: only models decoded by tensorrt-llm "
        "beside writer: the endpoint runs NVIDIA's 25.09-trtllm-python-py3 image, which carries the python and "
        "tensorrt-llm backends only; fix: serve text-classifier from another endpoint"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_engine_misuse_is_refused_with_its_message(case):
    arguments, message = REFUSED[case]
    with pytest.raises(SpecError) as caught:
        _spec(**{"writer": WRITER, **arguments})
    assert f"  - {message}" in str(caught.value).splitlines(), str(caught.value)

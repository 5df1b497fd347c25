"""``task.generation``: the bounds of what a request of a generating task may ask (text-generation,
text2text-generation), and when such a model streams.

A request sends its own generation parameters (``parameters`` of Triton's generate JSON: max_new_tokens, temperature,
top_p, top_k, repetition_penalty, stop, seed, do_sample); the served model refuses, as a 400 naming the parameter, the
value and the bound, any that exceeds what is set here. Greedy decoding is the default. The served model reads these
bounds from its config.pbtxt parameters (same names), so the spec is the one place they are set.

Streaming: the model is decoupled (one response per generated piece of text) and the container runs Triton's SageMaker
front end in ``generate_stream`` mode (``SAGEMAKER_TRITON_INFERENCE_TYPE``, from Triton 25.03: server PR #8047,
``docker/sagemaker/serve``), where ``/invocations`` is the generate-stream route. Only a single-model endpoint or an
inference component has it: the multi-model route (``/models/<m>/invoke``) refuses decoupled models.
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Any, Optional, Protocol

from deployment_spec.parsing.errors import Problem
from deployment_spec.parsing.parse import meta

# SAGEMAKER_TRITON_INFERENCE_TYPE exists from this release on (Triton server 2.56.0).
STREAM_RELEASE = "25.03"
INFERENCE_TYPE_VARIABLE = "SAGEMAKER_TRITON_INFERENCE_TYPE"
GENERATE_STREAM = "generate_stream"


@dataclasses.dataclass(frozen=True)
class Generation:
    """Bounds of the per-request generation parameters; every field is also a config.pbtxt parameter of the model."""

    max_new_tokens: int = dataclasses.field(default=512, metadata=meta(
        minimum=1, maximum=32768, help="the most new tokens a request may ask for (parameters.max_new_tokens)"))
    default_max_new_tokens: int = dataclasses.field(default=64, metadata=meta(
        minimum=1, maximum=32768, help="new tokens of a request that does not say (at most max_new_tokens)"))
    max_prompt_tokens: int = dataclasses.field(default=2048, metadata=meta(
        minimum=1, maximum=1_000_000, help="the longest prompt, in the checkpoint's tokens (after its chat "
        "template; a Whisper's parameters.prompt with its <|startofprev|>)"))
    max_temperature: float = dataclasses.field(default=2.0, metadata=meta(
        minimum=0, maximum=100, help="the highest parameters.temperature a request may send"))
    max_top_k: int = dataclasses.field(default=1000, metadata=meta(
        minimum=1, maximum=1_000_000, help="the highest parameters.top_k a request may send"))
    max_repetition_penalty: float = dataclasses.field(default=2.0, metadata=meta(
        minimum=1, maximum=100, help="the highest parameters.repetition_penalty a request may send"))
    max_stop_strings: int = dataclasses.field(default=8, metadata=meta(
        minimum=0, maximum=64, help="how many stop strings (parameters.stop) a request may send"))
    languages: Optional[tuple[str, ...]] = dataclasses.field(default=None, metadata=meta(
        help="automatic-speech-recognition with a multilingual Whisper: the languages a request may ask for "
             "(parameters.language), as codes of its generation_config.json lang_to_id (fr for <|fr|>); default: "
             "every one; [] for none"))

    def problems(self, path: str) -> list[Problem]:
        if self.default_max_new_tokens > self.max_new_tokens:
            return [Problem(f"{path}.default_max_new_tokens", str(self.default_max_new_tokens),
                            f"at most max_new_tokens ({self.max_new_tokens})",
                            "lower default_max_new_tokens or raise max_new_tokens")]
        return []

    def model_parameters(self, kind: str, max_concurrent: int) -> dict[str, str]:
        """What the served model reads from its config.pbtxt (model_build/python_models/generation_engine.py)."""
        bounds = {f.name: _parameter(getattr(self, f.name)) for f in dataclasses.fields(self)
                  if getattr(self, f.name) is not None}
        return {**bounds, "max_concurrent": str(max_concurrent), "kind": kind}


def _parameter(value: Any) -> str:
    """A bound as config.pbtxt's string parameter (generation_engine.Limits.from_parameters reads it back)."""
    return ",".join(value) if isinstance(value, tuple) else str(value)


class Engine(str, enum.Enum):
    """What decodes a generating task's model (``task.engine``)."""

    TRANSFORMERS = "transformers"  # our Python-backend engine (hf_generate.py), any host, any Triton image
    VLLM = "vllm"                  # Triton's vLLM backend (triton-inference-server/vllm_backend), GPU only
    TENSORRT_LLM = "tensorrt-llm"  # TensorRT-LLM's LLM-API Python model (PyTorch flow, no engine build), GPU only


# AWS publishes sagemaker-tritonserver:<ver>-py3 only; the engines run in NVIDIA's own images, which teams mirror
# into their account's ECR (they carry /usr/bin/serve and SageMaker's labels): the tag per engine, as NGC names it.
ENGINE_TAG_SUFFIX = {Engine.VLLM: "-vllm-python-py3", Engine.TENSORRT_LLM: "-trtllm-python-py3"}
# The config.pbtxt ``backend`` per engine: vllm_backend is a backend of its own (backends/vllm/model.py in its
# image); the LLM-API model is a Python-backend model.py of NVIDIA's (triton_backend/all_models/llmapi).
ENGINE_BACKEND = {Engine.TRANSFORMERS: "python", Engine.VLLM: "vllm", Engine.TENSORRT_LLM: "python"}
# Bounds an engine cannot hold a request to (neither engine's request path checks them against a limit); the spec
# refuses them set away from their defaults rather than promise what the served model would not do.
UNBOUNDED_BY_ENGINES = ("default_max_new_tokens", "max_temperature", "max_top_k", "max_repetition_penalty",
                        "max_stop_strings")


def engine_image_tag(triton_version: str, engine: Engine) -> str:
    """The mirrored NVIDIA image's tag, e.g. ``25.09-vllm-python-py3``."""
    return triton_version + ENGINE_TAG_SUFFIX[engine]


def engine_problems(engine: Engine, kind: str, stream: bool, bounds: Generation, path: str) -> list[Problem]:
    """What a generating task with ``engine`` other than transformers may not ask (the task's own fields)."""
    if engine is Engine.TRANSFORMERS:
        return []
    out = []
    if kind == "automatic-speech-recognition":
        out.append(Problem(f"{path}.engine", f"{engine.value!r} with automatic-speech-recognition",
                           "transformers (our engine builds Whisper's decoder prompt from its clip's features; the "
                           "GPU engines take text prompts)", "remove engine (transformers)"))
    if kind == "text2text-generation":
        why = ("vLLM's V1 engine, the one vllm_backend drives from the 25.x images, runs decoder-only text models"
               if engine is Engine.VLLM else "the LLM-API's PyTorch flow runs decoder-only models (encoder-decoders "
               "only through a TensorRT engine build, which this product does not make)")
        out.append(Problem(f"{path}.engine", f"{engine.value!r} with text2text-generation ({why})",
                           "transformers with text2text-generation; vllm or tensorrt-llm with text-generation",
                           "remove engine (transformers)"))
    if engine is Engine.VLLM and not stream:
        out.append(Problem(f"{path}.stream", "false with engine 'vllm'", "true: vllm_backend is decoupled only "
                           "(its model.py asserts it) and SageMaker's infer route refuses decoupled models",
                           "remove stream (true), or set engine: tensorrt-llm or transformers"))
    defaults = Generation()
    for key in UNBOUNDED_BY_ENGINES:
        if getattr(bounds, key) != getattr(defaults, key):
            out.append(Problem(f"{path}.generation.{key}", f"{getattr(bounds, key)} with engine {engine.value!r}",
                               f"the default ({getattr(defaults, key)}): {engine.value} takes the request's "
                               "sampling parameters as they come and holds none to a bound; only max_new_tokens "
                               "and max_prompt_tokens become its limits (the longest sequence)",
                               f"remove generation.{key}, or set engine: transformers"))
    return out


class _Entry(Protocol):
    """What the entry rule reads of a ModelSpec (model.py imports this module, not the other way)."""

    @property
    def backend(self) -> Any: ...

    @property
    def dynamic_batching(self) -> Any: ...


def entry_problems(entry: _Entry, path: str) -> list[Problem]:
    """A generating ``task:`` entry is one Python-backend model that batches on its own, step by step."""
    out = []
    if entry.backend.value != "python":
        out.append(Problem(f"{path}.backend", repr(entry.backend.value), "python with a generating task (the "
                           "model decodes with transformers in Triton's Python backend)", "set backend: python"))
    if entry.dynamic_batching is not None:
        out.append(Problem(f"{path}.dynamic_batching", "dynamic batching with a generating task",
                           "nothing: a new request joins the running batch between decoding steps, up to "
                           "max_batch_size sequences", "remove dynamic_batching"))
    return out


def release_streams(triton_version: str) -> bool:
    """Whether the image's SageMaker front end has ``generate_stream`` (YY.MM releases compare as numbers)."""
    return _release(triton_version) >= _release(STREAM_RELEASE)


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())

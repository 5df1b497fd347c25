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
from typing import Any, Protocol

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
        minimum=1, maximum=1_000_000, help="the longest prompt, in the checkpoint's tokens (after its chat template)"))
    max_temperature: float = dataclasses.field(default=2.0, metadata=meta(
        minimum=0, maximum=100, help="the highest parameters.temperature a request may send"))
    max_top_k: int = dataclasses.field(default=1000, metadata=meta(
        minimum=1, maximum=1_000_000, help="the highest parameters.top_k a request may send"))
    max_repetition_penalty: float = dataclasses.field(default=2.0, metadata=meta(
        minimum=1, maximum=100, help="the highest parameters.repetition_penalty a request may send"))
    max_stop_strings: int = dataclasses.field(default=8, metadata=meta(
        minimum=0, maximum=64, help="how many stop strings (parameters.stop) a request may send"))

    def problems(self, path: str) -> list[Problem]:
        if self.default_max_new_tokens > self.max_new_tokens:
            return [Problem(f"{path}.default_max_new_tokens", str(self.default_max_new_tokens),
                            f"at most max_new_tokens ({self.max_new_tokens})",
                            "lower default_max_new_tokens or raise max_new_tokens")]
        return []

    def model_parameters(self, kind: str, max_concurrent: int) -> dict[str, str]:
        """What the served model reads from its config.pbtxt (model_build/python_models/generation_engine.py)."""
        bounds = {f.name: str(getattr(self, f.name)) for f in dataclasses.fields(self)}
        return {**bounds, "max_concurrent": str(max_concurrent), "kind": kind}


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

"""Where a streaming model may serve, and the container mode it needs (deployment_spec/sections/generation.py).

A model whose task streams is decoupled; SageMaker answers InvokeEndpointWithResponseStream from the container's
``/invocations`` only when Triton's SageMaker front end runs in ``generate_stream`` mode (Triton 25.03 or later), and
only on the single-model route: the multi-model route (``/models/<m>/invoke``) refuses decoupled models (server
``src/sagemaker_server.cc``). The mode is the container's, so every model its ``/invocations`` reaches must stream.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping, Optional

from deployment_spec.parsing.errors import Problem
from deployment_spec.sections.endpoint import EndpointKind, EndpointSpec
from deployment_spec.sections.generation import GENERATE_STREAM, STREAM_RELEASE, release_streams
from deployment_spec.sections.model import ModelSpec


def streams(model: Optional[ModelSpec]) -> bool:
    return model is not None and model.task is not None and model.task.streams()


def derived(ep: EndpointSpec, models: Mapping[str, ModelSpec]) -> EndpointSpec:
    """The endpoint with ``container.inference_type: generate_stream`` when a model it serves streams and the spec
    left the mode unset (the problems below refuse the combinations where that cannot work)."""
    if ep.container.inference_type is not None or not any(streams(models.get(m)) for m in ep.models):
        return ep
    return dataclasses.replace(ep, container=dataclasses.replace(ep.container, inference_type=GENERATE_STREAM))


def endpoint_problems(path: str, ep: EndpointSpec, models: Mapping[str, ModelSpec],
                      triton_version: str) -> list[Problem]:
    streaming = [m for m in ep.models if streams(models.get(m))]
    if not streaming:
        return []
    first, where = streaming[0], f"models.{streaming[0]}.task.stream"
    off = f"or set {where}: false (the whole text in one answer)"
    if ep.kind is EndpointKind.MULTI_MODEL:
        return [Problem(f"{path}.kind", f"multi-model, serving the streaming model {first} ({where})",
                        "single-model or inference-components: the multi-model route (/models/<m>/invoke) refuses "
                        "decoupled models", f"serve {first} from a single-model endpoint of its own, {off}")]
    out = []
    if triton_version and not release_streams(triton_version):
        out.append(Problem("triton_version", repr(triton_version), f"{STREAM_RELEASE} or later with the streaming "
                           f"model {first} (SAGEMAKER_TRITON_INFERENCE_TYPE=generate_stream came with Triton "
                           f"{STREAM_RELEASE})", f"set triton_version: \"25.04\" or later, {off}"))
    others = [m for m in ep.models if m not in streaming]
    if others:
        out.append(Problem(f"{path}.models", ", ".join(ep.models), f"only streaming models beside {first}: the "
                           "container's mode (generate_stream) is the endpoint's, and a model that answers in one piece "
                           "is not reached through it", f"serve {', '.join(others)} from another endpoint, {off}"))
    if ep.asynchronous is not None:
        out.append(Problem(f"{path}.asynchronous", "asynchronous settings beside the streaming model " + first,
                           "no asynchronous: an asynchronous invocation has no stream to answer",
                           f"remove asynchronous, {off}"))
    if ep.container.inference_type not in (None, GENERATE_STREAM):
        out.append(Problem(f"{path}.container.inference_type", repr(ep.container.inference_type),
                           f"{GENERATE_STREAM} (or unset) with the streaming model {first}",
                           f"remove container.inference_type, {off}"))
    return out


def container_problems(inference_type: Optional[str], *, multi_model: bool, triton_version: str,
                       path: str = "container.inference_type") -> list[Problem]:
    """The construct library's rule for a ``Container(inference_type=...)`` given by hand (the spec's own rule above
    names the streaming model instead)."""
    if inference_type in (None, "infer"):
        return []
    out = []
    if multi_model:
        out.append(Problem(path, repr(inference_type), "infer on a multi-model endpoint (its route, /models/<m>/invoke, "
                           "takes infer requests only)", "serve the generating model from a single-model endpoint"))
    if triton_version and not release_streams(triton_version):
        out.append(Problem(path, f"{inference_type!r} with Triton {triton_version}",
                           f"Triton {STREAM_RELEASE} or later (SAGEMAKER_TRITON_INFERENCE_TYPE came with it)",
                           "raise triton_version to 25.04 or later, or remove inference_type"))
    return out

"""Where a generating model decoded by vLLM or TensorRT-LLM (``task.engine``, deployment_spec/sections/generation.py)
may serve: a GPU instance type, NVIDIA's image of that engine mirrored into the team's own ECR repository, and no
model beside it that the image cannot load.

AWS publishes no ``sagemaker-tritonserver`` tag with these engines, so ``endpoints.<e>.image_repository`` (which
today holds a copy of AWS's image under AWS's tag) holds NVIDIA's ``tritonserver:<ver>-vllm-python-py3`` or
``-trtllm-python-py3`` under NVIDIA's tag: the same field, the engine choosing the tag
(generation.engine_image_tag), so nothing new to learn and nothing to keep in step.
"""
from __future__ import annotations

from typing import Mapping, Optional

from deployment_spec.parsing.errors import Problem
from deployment_spec.sections.endpoint import EndpointSpec
from deployment_spec.sections.generation import Engine, engine_image_tag
from deployment_spec.sections.model import ModelSpec


def engine_of(model: Optional[ModelSpec]) -> Engine:
    if model is None or model.task is None or not model.task.generates():
        return Engine.TRANSFORMERS
    return model.task.engine


def endpoint_problems(path: str, ep: EndpointSpec, models: Mapping[str, ModelSpec],
                      triton_version: str) -> list[Problem]:
    chosen = [(m, engine_of(models.get(m))) for m in ep.models if engine_of(models.get(m)) is not Engine.TRANSFORMERS]
    if not chosen:
        return []
    first, engine = chosen[0]
    where = f"models.{first}.task.engine"
    tag = engine_image_tag(triton_version, engine)
    out = []
    instance = ep.instance
    if instance is not None and not instance.is_gpu:
        out.append(Problem(f"{path}.instance_type", f"{ep.instance_type} (no GPU) serving {first} ({where}: "
                           f"{engine.value})", f"a GPU instance type: {engine.value} runs on NVIDIA GPUs only",
                           "set instance_type to a GPU type such as ml.g5.xlarge, or remove task.engine "
                           "(transformers)"))
    if ep.image_repository is None:
        out.append(Problem(f"{path}.image_repository", f"nothing, serving {first} ({where}: {engine.value})",
                           f"the ECR repository of the stage's account holding NVIDIA's tritonserver:{tag} under "
                           "that tag (AWS publishes no SageMaker Triton image with this engine)",
                           f"docker pull nvcr.io/nvidia/tritonserver:{tag}, push it to a repository of yours "
                           "as :" + tag + ", and set image_repository to its name"))
    others = [m for m in ep.models if engine_of(models.get(m)) is not engine]
    if others:
        out.append(Problem(f"{path}.models", ", ".join(ep.models), f"only models decoded by {engine.value} beside "
                           f"{first}: the endpoint runs NVIDIA's {tag} image, which carries the python and "
                           f"{engine.value} backends only", f"serve {', '.join(others)} from another endpoint"))
    return out

"""The spec's ``image_repository`` as the constructs' ``ecr.IRepository``, and the tag to pull from it: one recipe for
every endpoint stack."""
from __future__ import annotations

from typing import Mapping, Optional

from aws_cdk import aws_ecr as ecr
from constructs import Construct

from deployment_spec.rules.generation_engines import engine_of
from deployment_spec.sections.endpoint import EndpointSpec
from deployment_spec.sections.generation import Engine, engine_image_tag
from deployment_spec.sections.model import ModelSpec


def image_repository(scope: Construct, endpoint: EndpointSpec) -> Optional[ecr.IRepository]:
    """The team's repository holding the Triton image (in the stage's account and region), or None: AWS's."""
    if endpoint.image_repository is None:
        return None
    return ecr.Repository.from_repository_name(scope, "ImageRepository", endpoint.image_repository)


def image_tag(endpoint: EndpointSpec, models: Mapping[str, ModelSpec], triton_version: str) -> Optional[str]:
    """NVIDIA's engine image tag where the endpoint's models are decoded by vLLM or TensorRT-LLM (the spec's rules
    keep such an endpoint to one engine and require image_repository), else None: AWS's tag."""
    engines = {engine_of(models.get(m)) for m in endpoint.models} - {Engine.TRANSFORMERS}
    return engine_image_tag(triton_version, engines.pop()) if engines else None

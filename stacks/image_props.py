"""The spec's ``image_repository`` as the constructs' ``ecr.IRepository``: one recipe for every endpoint stack."""
from __future__ import annotations

from typing import Optional

from aws_cdk import aws_ecr as ecr
from constructs import Construct

from deployment_spec.sections.endpoint import EndpointSpec


def image_repository(scope: Construct, endpoint: EndpointSpec) -> Optional[ecr.IRepository]:
    """The team's repository holding the Triton image (in the stage's account and region), or None: AWS's."""
    if endpoint.image_repository is None:
        return None
    return ecr.Repository.from_repository_name(scope, "ImageRepository", endpoint.image_repository)

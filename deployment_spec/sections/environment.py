"""The ``environments:`` section: one CDK stage each."""
from __future__ import annotations

import dataclasses
import enum
from typing import Mapping, Optional

from deployment_spec.sections.endpoint import EndpointSpec
from deployment_spec.parsing.parse import Validated, meta


class RemovalPolicy(str, enum.Enum):
    DESTROY = "destroy"
    RETAIN = "retain"


@dataclasses.dataclass(frozen=True)
class Budget(Validated):
    """What the environment may cost per month: the spec is refused when its ceiling (every endpoint at its
    maximum instances, on-demand, 730 h; deployment_spec.cost.figures) exceeds ``monthly_usd``."""

    monthly_usd: float = dataclasses.field(metadata=meta(
        help="the most the environment's endpoints may cost per month, in USD", minimum=1))


@dataclasses.dataclass(frozen=True)
class EnvironmentSpec:
    account: Optional[str] = dataclasses.field(default=None, metadata=meta(
        pattern=r"[0-9]{12}", pattern_help="a 12-digit AWS account ID in quotes"))
    region: Optional[str] = dataclasses.field(default=None, metadata=meta(
        pattern=r"[a-z]{2}(-[a-z]+)+-[0-9]", pattern_help="an AWS region such as us-east-1"))
    removal_policy: RemovalPolicy = RemovalPolicy.RETAIN
    guardrails: bool = False
    termination_protection: bool = False
    # Serves production traffic: every endpoint keeps 2+ instances, so SageMaker can spread them over
    # Availability Zones (AWS Config rule SAGEMAKER_ENDPOINT_CONFIG_PROD_INSTANCE_COUNT), unless the
    # endpoint gives single_instance_reason.
    production: bool = False
    # S3 Object Lock on the model and access-log buckets (AWS Control Tower's CT.S3.PR.9), without a default
    # retention. Off by default: SageMaker does not need it, and once on it can never be turned off.
    object_lock: bool = False
    # The monthly ceiling the endpoints must stay within (deployment_spec.cost.figures.budget_problems).
    budget: Optional[Budget] = None
    name: str = dataclasses.field(default="", metadata=meta(yaml=False))
    # The endpoints as deployed here: the spec's endpoints with this environment's overrides applied.
    endpoints: Mapping[str, EndpointSpec] = dataclasses.field(default_factory=dict, metadata=meta(yaml=False))

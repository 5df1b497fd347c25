"""An endpoint's ``variants:`` (weighted production variants, an A/B test) and ``shadow:`` (a shadow variant).

Facts, from botocore's SageMaker service model (``CreateEndpointConfig``): ``ProductionVariants`` holds 1-10
variants; ``InitialVariantWeight`` (>= 0, default 1.0) splits the traffic by each weight's share of their sum;
``VariantName`` matches ``[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}``; with ``ShadowProductionVariants`` "you can only
specify one variant for ProductionVariants and one variant for ShadowProductionVariants". SageMaker Runtime's
``InvokeEndpoint``: a caller pins a variant with ``TargetVariant`` (header ``X-Amzn-SageMaker-Target-Variant``),
the answer names the one that served it (``x-Amzn-Invoked-Production-Variant``). The developer guide, "Shadow
tests": at most one shadow variant per endpoint and then at most one production variant; only the production
variant's answers reach the caller. "Deployment guardrails, Exclusions": a blue/green or rolling update needs the
same variant names in the old and the new configuration, and a rolling update refuses multi-variant endpoints.

How a shadow's ``InitialVariantWeight`` maps to the share of requests copied to it is not stated by the API
reference or the developer guide (its API example sets both weights to 1). This product reads it as the ratio of
the shadow's weight to the production variant's (``shadow_weight``), as third-party write-ups describe it: that
reading is unverified on a real endpoint, so ``sampling_percent: 100`` (equal weights) is the default, the one
setting both readings agree on.

No aws_cdk here: the spec, the constructs, the build and the local endpoint share it.
"""
from __future__ import annotations

import dataclasses
from typing import ClassVar, Optional


from deployment_spec.parsing.parse import Validated, meta

from deployment_spec.sections.scaling import Scaling


MAX_PRODUCTION_VARIANTS = 10  # CreateEndpointConfig ProductionVariants: 1-10
VARIANT_NAME = r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"
VARIANT_NAME_HELP = "1-63 letters, digits or '-', starting and ending with a letter or digit"
# The build of a variant whose model is not the endpoint's: its own entry in the build manifest.
BUILD_SEPARATOR = "."
# Where `tritonsm serve` writes the local variants' data-capture records and `tritonsm compare` reads them.
LOCAL_CAPTURE_DIR = "build/capture"


@dataclasses.dataclass(frozen=True)
class Variant(Validated):
    """One weighted production variant.

    ``model``: a model of the spec's ``models:`` section; left out, the endpoint's model. ``weight``: its share of
    the traffic is weight / the sum of the weights. ``instance_type``, ``initial_instances``, ``scaling``: left
    out, the endpoint's.
    """

    name: str = dataclasses.field(metadata=meta(help="the variant's name", pattern=VARIANT_NAME,
                                                pattern_help=VARIANT_NAME_HELP))
    model: Optional[str] = None
    weight: float = dataclasses.field(default=1.0, metadata=meta(minimum=0))
    instance_type: Optional[str] = None
    initial_instances: Optional[int] = dataclasses.field(default=None, metadata=meta(minimum=1, maximum=100))
    scaling: Optional[Scaling] = None


@dataclasses.dataclass(frozen=True)
class Shadow(Validated):
    """The shadow variant: a copy of ``sampling_percent`` % of the production variant's requests, answers never
    returned. ``model``: a model of the spec's ``models:`` section. ``instance_type``, ``initial_instances``,
    ``scaling``: left out, the endpoint's.
    """

    # What the parser answers to a shadow written as a list (parse.parse_dataclass): SageMaker takes one.
    NOT_A_MAPPING: ClassVar[tuple[str, str]] = (
        "one shadow per endpoint, as a mapping of its settings (CreateEndpointConfig: with a shadow, one variant in "
        "ShadowProductionVariants)", "write shadow: {model: NAME} without the list; to compare several "
        "candidates, list them under variants: instead")

    model: str = dataclasses.field(metadata=meta(help="the model the shadow serves (a model of models:)"))
    name: str = dataclasses.field(default="Shadow", metadata=meta(pattern=VARIANT_NAME, pattern_help=VARIANT_NAME_HELP))
    sampling_percent: int = dataclasses.field(default=100, metadata=meta(minimum=1, maximum=100))
    instance_type: Optional[str] = None
    initial_instances: Optional[int] = dataclasses.field(default=None, metadata=meta(minimum=1, maximum=100))
    scaling: Optional[Scaling] = None


@dataclasses.dataclass(frozen=True)
class Comparison(Validated):
    """When the candidate (every variant after the first, or the shadow) alarms against the incumbent.

    ``error_rate_margin_percent``: the candidate's share of failed invocations (4XX + 5XX + model errors) exceeds
    the incumbent's by this many percentage points. ``latency_margin_percent``: the candidate's p99
    ``ModelLatency`` exceeds the incumbent's by this share. ``periods``: consecutive one-minute periods.
    """

    error_rate_margin_percent: float = dataclasses.field(default=1.0, metadata=meta(minimum=0, maximum=100))
    latency_margin_percent: float = dataclasses.field(default=20.0, metadata=meta(minimum=0, maximum=1000))
    periods: int = dataclasses.field(default=5, metadata=meta(minimum=1, maximum=60))


def shadow_weight(production_weight: float, sampling_percent: int) -> float:
    """The shadow's ``InitialVariantWeight`` for a sampled share (see the module's note: the ratio reading)."""
    return round(production_weight * sampling_percent / 100, 6)


def build_name(endpoint: str, variant: str) -> str:
    """The build manifest's name for a variant serving a model other than the endpoint's: ``<endpoint>.<variant>``."""
    return f"{endpoint}{BUILD_SEPARATOR}{variant}"

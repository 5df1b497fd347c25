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
from typing import TYPE_CHECKING, Optional

from deployment_spec.errors import Problem, describe
from deployment_spec.parse import Validated, join, meta

from deployment_spec.scaling import Scaling

if TYPE_CHECKING:
    from deployment_spec.endpoint import EndpointSpec

MAX_PRODUCTION_VARIANTS = 10  # CreateEndpointConfig ProductionVariants: 1-10
VARIANT_NAME = r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"
VARIANT_NAME_HELP = "1-63 letters, digits or '-', starting and ending with a letter or digit"
# The build of a variant whose model is not the endpoint's: its own entry in the build manifest.
BUILD_SEPARATOR = "."


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


def own_builds(endpoint: "EndpointSpec") -> dict[str, "EndpointSpec"]:
    """The builds the endpoint's variants and shadow need beyond the endpoint's own, by build name: a variant whose
    model is not the endpoint's first model is built as a single-model endpoint of its own, on its instance type."""
    out: dict[str, EndpointSpec] = {}
    for name, model, instance_type in served_by_variants(endpoint):
        if model == endpoint.models[0] and instance_type == endpoint.instance_type:
            continue
        out[build_name(endpoint.name, name)] = dataclasses.replace(
            endpoint, name=build_name(endpoint.name, name), models=(model,), default_model=None,
            instance_type=instance_type, variants=(), shadow=None, fallback_instance_types=())
    return out


def served_by_variants(endpoint: "EndpointSpec") -> list[tuple[str, str, str]]:
    """(variant name, model, instance type) of every variant and the shadow, in the spec's order."""
    out = [(v.name, v.model or endpoint.models[0], v.instance_type or endpoint.instance_type)
           for v in endpoint.variants]
    if endpoint.shadow is not None:
        out.append((endpoint.shadow.name, endpoint.shadow.model,
                    endpoint.shadow.instance_type or endpoint.instance_type))
    return out


def build_for(endpoint: "EndpointSpec", variant: str) -> str:
    """The build manifest's entry that serves ``variant``: its own build, or the endpoint's."""
    for name, model, instance_type in served_by_variants(endpoint):
        if name == variant and (model != endpoint.models[0] or instance_type != endpoint.instance_type):
            return build_name(endpoint.name, name)
    return endpoint.name


def combination_problems(endpoint: "EndpointSpec", models: set[str], path: str) -> list[Problem]:
    """What SageMaker refuses about the endpoint's variants and shadow, each with its fix."""
    out: list[Problem] = []
    if not endpoint.variants and endpoint.shadow is None:
        return out
    field = "shadow" if endpoint.shadow is not None else "variants"
    kind = endpoint.kind.value
    if kind != "single-model":
        out.append(Problem(join(path, field), f"{field} on a {kind} endpoint", "variants and a shadow on "
                           "single-model endpoints only (SageMaker's shadow tests and weighted variants serve one "
                           "model per variant)", f"remove {field}, or make the endpoint kind: single-model"))
    if endpoint.asynchronous is not None:
        out.append(Problem(join(path, field), f"{field} beside asynchronous", "real-time endpoints only (an "
                           "asynchronous endpoint has one variant: developer guide, 'Asynchronous inference')",
                           f"remove {field} or the asynchronous block"))
    if endpoint.variants and endpoint.shadow is not None:
        out.append(Problem(join(path, "shadow"), f"a shadow beside {len(endpoint.variants)} production variants",
                           "a shadow with exactly one production variant (CreateEndpointConfig, "
                           "ShadowProductionVariants)", "remove variants (the endpoint's own model is the "
                           "production variant) or remove the shadow"))
    if endpoint.variants:
        out += _variants_problems(endpoint, models, join(path, "variants"))
    if endpoint.shadow is not None:
        out += _model_problem(endpoint.shadow.model, models, join(path, "shadow.model"))
        if endpoint.shadow.name == endpoint.variant_name:
            out.append(Problem(join(path, "shadow.name"), repr(endpoint.shadow.name),
                               f"a name other than the production variant's ({endpoint.variant_name!r})",
                               "rename the shadow"))
    return out


def _variants_problems(endpoint: "EndpointSpec", models: set[str], path: str) -> list[Problem]:
    variants = endpoint.variants
    out: list[Problem] = []
    if len(variants) < 2 or len(variants) > MAX_PRODUCTION_VARIANTS:
        out.append(Problem(path, f"{len(variants)} variant{'s' if len(variants) != 1 else ''}",
                           f"2 to {MAX_PRODUCTION_VARIANTS} production variants (CreateEndpointConfig, "
                           "ProductionVariants)", "list at least two variants (one endpoint model needs no "
                           "variants:)" if len(variants) < 2 else "remove variants"))
    seen: set[str] = set()
    for i, variant in enumerate(variants):
        if variant.name.lower() in seen:
            out.append(Problem(f"{path}[{i}].name", repr(variant.name), "a name no other variant has "
                               "(names compare case-insensitively here)", "rename the variant"))
        seen.add(variant.name.lower())
        if variant.model is not None:
            out += _model_problem(variant.model, models, f"{path}[{i}].model")
    if variants and all(v.weight == 0 for v in variants):
        out.append(Problem(f"{path}[0].weight", "every weight 0", "at least one weight above 0 (each "
                           "variant's share is its weight / the sum of the weights)",
                           "give the incumbent a weight, e.g. 90, and the candidate 10"))
    if endpoint.variant_name != "AllTraffic" and endpoint.variant_name not in {v.name for v in variants}:
        out.append(Problem(join(path.rsplit(".", 1)[0], "variant_name"), repr(endpoint.variant_name),
                           "with variants: the default AllTraffic, or one of the variants' names",
                           "remove variant_name; each variant names itself"))
    return out


def _model_problem(model: str, models: set[str], path: str) -> list[Problem]:
    if model in models:
        return []
    return [Problem(path, repr(model), f"a model of the spec's models: section ({', '.join(sorted(models))})",
                    "add the model under models:, or fix the name")]


def weights_share(endpoint: "EndpointSpec") -> dict[str, float]:
    """Each production variant's share of the traffic, 0-1 (one variant: the endpoint's, all of it)."""
    if not endpoint.variants:
        return {endpoint.variant_name: 1.0}
    total = sum(v.weight for v in endpoint.variants)
    return {v.name: (v.weight / total if total else 0.0) for v in endpoint.variants}


def describe_weights(endpoint: "EndpointSpec") -> str:
    """``A 90 %, B 10 %``: the split a review sees."""
    return ", ".join(f"{name} {describe(round(share * 100, 1))} %" for name, share in weights_share(endpoint).items())

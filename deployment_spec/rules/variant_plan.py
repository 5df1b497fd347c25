"""The endpoint's variants and shadow as they are built, served and checked: which builds they need, which build serves
each variant, what SageMaker refuses about them (the settings themselves: ``deployment_spec.sections.variants``).

Kept apart from the settings so that ``deployment_spec.sections.endpoint`` can hold them without importing this module's
users of ``EndpointSpec``.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Protocol

from deployment_spec.sections.endpoint import EndpointSpec
from deployment_spec.parsing.errors import Problem, describe
from deployment_spec.parsing.parse import join, suggest
from deployment_spec.sections.variants import BUILD_SEPARATOR, MAX_PRODUCTION_VARIANTS, build_name


class _Spec(Protocol):
    """What these functions read of a ``deployment_spec.Spec`` (named structurally: ``Spec`` imports this module)."""

    @property
    def endpoints(self) -> Mapping[str, EndpointSpec]: ...

    @property
    def environments(self) -> Mapping[str, Any]: ...


def own_builds(endpoint: EndpointSpec) -> dict[str, EndpointSpec]:
    """The builds the endpoint's variants and shadow need beyond the endpoint's own, by build name: a variant whose
    model is not the one the endpoint serves, or whose instance type is not the endpoint's, is built as a single-model
    endpoint of its own, on its instance type (the synth-time checks of a build then judge it on that type)."""
    out: dict[str, EndpointSpec] = {}
    if endpoint.kind.value != "single-model" or not endpoint.models:
        return out  # refused by combination_problems and rules.endpoint_rules
    for name, model, instance_type in served_by_variants(endpoint):
        if not _needs_own_build(endpoint, model, instance_type):
            continue
        out[build_name(endpoint.name, name)] = dataclasses.replace(
            endpoint, name=build_name(endpoint.name, name), models=(model,), default_model=None,
            instance_type=instance_type, variants=(), shadow=None, fallback_instance_types=())
    return out


def endpoints_to_build(spec: _Spec) -> dict[str, EndpointSpec]:
    """Every entry ``tritonsm build`` writes to the manifest, by name: the spec's endpoints, then the own builds of
    the variants and shadows of the spec's endpoints and of each environment's (an override may add a shadow in one
    environment only). Where several environments derive one build name, the first one's is built
    (``build_conflicts`` refuses a spec where they would serve different models)."""
    out: dict[str, EndpointSpec] = dict(spec.endpoints)
    for endpoint in _every_endpoint(spec):
        for name, build in own_builds(endpoint).items():
            out.setdefault(name, build)
    return out


def serving_endpoints(spec: _Spec) -> list[EndpointSpec]:
    """Every endpoint as some environment serves it, each followed by the own builds of its variants: where a model
    runs (on which devices) is decided over all of them. Repeats are harmless: callers collect facts."""
    out: list[EndpointSpec] = []
    for endpoint in _every_endpoint(spec):
        out += [endpoint, *own_builds(endpoint).values()]
    return out


def _every_endpoint(spec: _Spec) -> list[EndpointSpec]:
    return list(spec.endpoints.values()) + [ep for env in spec.environments.values() for ep in env.endpoints.values()]


def build_conflicts(endpoints: Mapping[str, EndpointSpec],
                    environments: Mapping[str, Mapping[str, EndpointSpec]]) -> list[Problem]:
    """One manifest entry per build name: where two environments give a variant of one name different models, one
    build cannot serve both."""
    first: dict[str, tuple[str, tuple[str, ...]]] = {}
    out: list[Problem] = []
    for env_name, eps in [("", endpoints), *environments.items()]:
        where = f"environment {env_name}" if env_name else "endpoints:"
        for endpoint in eps.values():
            for build, derived in own_builds(endpoint).items():
                seen_where, seen_models = first.setdefault(build, (where, derived.models))
                if seen_models != derived.models:
                    variant = build.split(BUILD_SEPARATOR, 1)[1]
                    out.append(Problem(
                        (f"environments.{env_name}.overrides." if env_name else "") + f"endpoints.{endpoint.name}",
                        f"the variant {variant!r} serving {derived.models[0]!r} in "
                        f"{where} but {seen_models[0]!r} in {seen_where}", "one model per variant name in every "
                        f"environment (each variant with a model of its own is built once, as {build!r})",
                        "give the variants that serve different models different names"))
    return out


def _needs_own_build(endpoint: EndpointSpec, model: str, instance_type: str) -> bool:
    return model != served_model(endpoint) or instance_type != endpoint.instance_type


def served_model(endpoint: EndpointSpec) -> str:
    """The model the endpoint's own build answers with: its default model, else its first (only) one."""
    return endpoint.default_model or endpoint.models[0]


def served_by_variants(endpoint: EndpointSpec) -> list[tuple[str, str, str]]:
    """(variant name, model, instance type) of every variant and the shadow, in the spec's order; a variant that
    names no model serves the endpoint's (``served_model``)."""
    out = [(v.name, v.model or served_model(endpoint), v.instance_type or endpoint.instance_type)
           for v in endpoint.variants]
    if endpoint.shadow is not None:
        out.append((endpoint.shadow.name, endpoint.shadow.model,
                    endpoint.shadow.instance_type or endpoint.instance_type))
    return out


def roles(endpoint: EndpointSpec) -> tuple[str, tuple[str, ...]]:
    """(the incumbent, the candidates) by variant name: the first of ``variants:``, or without them the endpoint's own
    production variant (``variant_name``); every other variant and the shadow are candidates. The constructs alarm
    candidates against the same incumbent (triton_constructs.endpoint_variants.plans: the incumbent first), and
    ``tritonsm compare`` takes its default roles from here."""
    if endpoint.variants:
        incumbent, others = endpoint.variants[0].name, [v.name for v in endpoint.variants[1:]]
    else:
        incumbent, others = endpoint.variant_name, []
    if endpoint.shadow is not None:
        others.append(endpoint.shadow.name)
    return incumbent, tuple(others)


def build_for(endpoint: EndpointSpec, variant: str) -> str:
    """The build manifest's entry that serves ``variant``: its own build, or the endpoint's."""
    for name, model, instance_type in served_by_variants(endpoint):
        if name == variant and _needs_own_build(endpoint, model, instance_type):
            return build_name(endpoint.name, name)
    return endpoint.name


def combination_problems(endpoint: EndpointSpec, models: set[str], path: str) -> list[Problem]:
    """What SageMaker (or this product) refuses about the endpoint's variants and shadow, each with its fix.

    The variants' and the shadow's own instance types, counts and scaling pass the endpoint's rules in
    ``deployment_spec.rules.cross_section.variant_rules``. Nothing here about ``deployment:``: SageMaker's blue/green update needs
    the same variant names in the old and the new configuration and its rolling update refuses multi-variant
    endpoints (developer guide, "Deployment guardrails", "Exclusions"). The spec knows only the new configuration, so
    the first holds for every update that keeps the variants; and this spec's only rolling policy
    (``rolling_update``) is for inference-components endpoints, which take no variants (refused below).
    """
    out: list[Problem] = []
    if not endpoint.variants and endpoint.shadow is None:
        return out
    field = "shadow" if endpoint.shadow is not None else "variants"
    kind = endpoint.kind.value
    if kind != "single-model":
        out.append(Problem(join(path, field), f"{field} on kind: {kind}", "variants and a shadow on "
                           "kind: single-model endpoints only (each variant serves one model repository, built for "
                           "it as a single-model endpoint)", f"remove {field}, or serve the models it compares "
                           "from a kind: single-model endpoint"))
        return out  # the rest assumes a single-model endpoint
    if endpoint.asynchronous is not None:
        out.append(Problem(join(path, field), f"{field} beside asynchronous", "variants and a shadow on real-time "
                           "endpoints only (an asynchronous endpoint here has one variant: its queue, backlog "
                           "scaling and answers belong to the endpoint)",
                           f"remove {field}, or the asynchronous block"))
    if endpoint.variants and endpoint.shadow is not None:
        out.append(Problem(join(path, "shadow"), f"a shadow beside {len(endpoint.variants)} variants",
                           "a shadow with exactly one production variant, the endpoint's own model "
                           "(CreateEndpointConfig: with ShadowProductionVariants, one variant in ProductionVariants)",
                           "remove variants: (the endpoint's model is the production variant), or remove the shadow"))
    if endpoint.variants:
        out += _variants_problems(endpoint, models, join(path, "variants"))
    if endpoint.shadow is not None:
        out += _model_problem(endpoint.shadow.model, models, join(path, "shadow.model"))
        if endpoint.shadow.name.lower() == endpoint.variant_name.lower():
            out.append(Problem(join(path, "shadow.name"), repr(endpoint.shadow.name),
                               f"a name other than the production variant's ({endpoint.variant_name!r}, the "
                               "endpoint's variant_name; names compare case-insensitively here)",
                               "rename the shadow, e.g. name: Candidate"))
    return out


def _variants_problems(endpoint: EndpointSpec, models: set[str], path: str) -> list[Problem]:
    variants = endpoint.variants
    out: list[Problem] = []
    if len(variants) < 2:
        out.append(Problem(path, f"{len(variants)} variant{'s' if len(variants) != 1 else ''}",
                           f"2 to {MAX_PRODUCTION_VARIANTS} variants (CreateEndpointConfig: ProductionVariants holds "
                           f"1-{MAX_PRODUCTION_VARIANTS}; one is the endpoint itself)",
                           "remove variants: and serve the one model from the endpoint, or add the variant to "
                           "compare it with"))
    if len(variants) > MAX_PRODUCTION_VARIANTS:
        out.append(Problem(path, f"{len(variants)} variants", f"2 to {MAX_PRODUCTION_VARIANTS} variants "
                           f"(CreateEndpointConfig: ProductionVariants holds 1-{MAX_PRODUCTION_VARIANTS})",
                           f"keep at most {MAX_PRODUCTION_VARIANTS}, or split them over two endpoints"))
    seen: dict[str, str] = {}
    for i, variant in enumerate(variants):
        key = variant.name.lower()
        if key in seen:
            out.append(Problem(f"{path}[{i}].name", repr(variant.name), "a name no other variant of the endpoint "
                               f"has (also {seen[key]!r}; names compare case-insensitively here)",
                               "rename the variant"))
        seen.setdefault(key, variant.name)
        if variant.model is not None:
            out += _model_problem(variant.model, models, f"{path}[{i}].model")
    if variants and all(v.weight == 0 for v in variants):
        out.append(Problem(f"{path}[0].weight", "every weight 0", "at least one weight above 0 (each "
                           "variant's share of the traffic is its weight / the sum of the weights)",
                           "give the incumbent a weight, e.g. 90, and the candidate 10"))
    if endpoint.variant_name != "AllTraffic" and endpoint.variant_name not in {v.name for v in variants}:
        names = ", ".join(v.name for v in variants)
        out.append(Problem(join(path.rsplit(".", 1)[0], "variant_name"), repr(endpoint.variant_name),
                           f"with variants: the default AllTraffic, or one of the variants' names ({names})",
                           "remove variant_name: each variant names itself"))
    return out


def _model_problem(model: str, models: set[str], path: str) -> list[Problem]:
    if model in models:
        return []
    near = suggest(model, sorted(models))
    return [Problem(path, describe(model), f"a name declared under models: ({', '.join(sorted(models)) or 'none'})",
                    f"did you mean '{near}'?" if near else "declare it under models: or fix the name")]


def weights_share(endpoint: EndpointSpec) -> dict[str, float]:
    """Each production variant's share of the traffic, 0-1 (one variant: the endpoint's, all of it)."""
    if not endpoint.variants:
        return {endpoint.variant_name: 1.0}
    total = sum(v.weight for v in endpoint.variants)
    return {v.name: (v.weight / total if total else 0.0) for v in endpoint.variants}


def describe_weights(endpoint: EndpointSpec) -> str:
    """``A 90 %, B 10 %``: the split a review sees."""
    return ", ".join(f"{name} {share * 100:.3g} %" for name, share in weights_share(endpoint).items())

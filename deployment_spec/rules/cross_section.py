"""Cross-field rules, in spec terms. Each returns Problems; none raises."""
from __future__ import annotations

import dataclasses
from typing import Mapping, Optional

from deployment_spec.facts import instances, serving_runtimes, triton_metrics
from deployment_spec.rules import component_endpoint, generation_engines, streaming, variant_plan, sagemaker as sagemaker_rules
from deployment_spec.rules import generation_alarms
from deployment_spec.sections import asynchronous
from deployment_spec.sections.capacity_reservation import reservation_problems
from deployment_spec.rules.container_env import container_environment
from deployment_spec.sections.endpoint import EndpointKind, EndpointSpec
from deployment_spec.sections.environment import EnvironmentSpec
from deployment_spec.parsing.errors import Problem, describe
from deployment_spec.sections.model import Backend, InstanceKind, ModelSpec
from deployment_spec.sections.signing import SigningSpec
from deployment_spec.parsing.parse import suggest
from deployment_spec.sections.variants import Shadow, Variant


def unknown_name(path: str, name: str, known: Mapping[str, object], what: str) -> Problem:
    near = suggest(name, known)
    fix = f"did you mean '{near}'?" if near else f"declare it under {what}: or fix the name"
    return Problem(path, describe(name), f"a name declared under {what}: ({', '.join(known) or 'none'})", fix)


def model_rules(models: Mapping[str, ModelSpec], declared: set[str]) -> list[Problem]:
    """``declared`` holds every name written under models:, parsed or not (no cascade of errors)."""
    out: list[Problem] = []
    for name, model in models.items():
        if model.ensemble is None:
            continue
        for i, step in enumerate(model.ensemble.steps):
            path = f"models.{name}.ensemble.steps[{i}].model"
            if step.model == name:
                out.append(Problem(path, describe(step.model), "another declared model", "an ensemble cannot call itself"))
            elif step.model not in declared:
                out.append(unknown_name(path, step.model, models, "models"))
    return out + _ensemble_cycles(models)


def dali_release_rules(models: Mapping[str, ModelSpec], triton_version: str) -> list[Problem]:
    """A ``model.dali`` must be serialized by the DALI release of the image that loads it."""
    release = serving_runtimes.DALI_RELEASES.get(triton_version)
    if release is None or not release.wheel_missing:
        return []
    usable = ", ".join(f"{r.triton_version} (DALI {r.version})" for r in serving_runtimes.buildable_dali())
    newest = serving_runtimes.buildable_dali()[-1].triton_version
    # A task's DALI step (task.preprocess: dali) is named by the entry the user wrote; python is a fix there too.
    return [Problem(f"models.{model.task_entry}.task.preprocess" if model.task_entry else f"models.{name}.backend",
                    f"'dali' with triton_version {triton_version!r}, whose image runs "
                    f"DALI {release.version} ({release.requirement}): {release.wheel_missing}, so the build "
                    "cannot serialize a pipeline in that release's format",
                    f"{'preprocess' if model.task_entry else 'backend'} dali with a triton_version whose DALI the "
                    f"build can install: {usable}", f"set triton_version to one of those (the newest: {newest})"
                    + (", or task.preprocess: python" if model.task_entry else ""))
            for name, model in models.items() if model.backend is Backend.DALI]


def _ensemble_cycles(models: Mapping[str, ModelSpec]) -> list[Problem]:
    """Ensembles that reach themselves through other ensembles (a -> b -> a); one problem per cycle."""
    out, reported = [], set()

    def walk(name: str, trail: list[str]) -> None:
        model = models.get(name)
        if model is None or model.ensemble is None:
            return
        for i, step in enumerate(model.ensemble.steps):
            if step.model in trail:
                cycle = trail[trail.index(step.model):] + [step.model]
                if frozenset(cycle) not in reported and len(cycle) > 2:  # a direct self-call is reported above
                    reported.add(frozenset(cycle))
                    out.append(Problem(f"models.{name}.ensemble.steps[{i}].model", describe(step.model),
                                       "a model that does not lead back to this ensemble",
                                       f"break the cycle {' -> '.join(cycle)}"))
            elif step.model != name:
                walk(step.model, trail + [step.model])

    for name in models:
        walk(name, [name])
    return out


def served_models(endpoint: EndpointSpec, models: Mapping[str, ModelSpec]) -> list[ModelSpec]:
    """The models an endpoint serves, with the steps of its ensembles, in a stable order."""
    seen: dict[str, ModelSpec] = {}

    def add(name: str) -> None:
        if name in seen or name not in models:
            return
        seen[name] = models[name]
        ensemble = models[name].ensemble
        for step in ensemble.steps if ensemble else ():
            add(step.model)

    for name in endpoint.models:
        add(name)
    return list(seen.values())


def endpoint_rules(path: str, ep: EndpointSpec, models: Mapping[str, ModelSpec], triton_version: str,
                   declared: set[str]) -> list[Problem]:
    out: list[Problem] = []
    if not ep.models:
        out.append(Problem(f"{path}.models", "an empty list", "one or more declared model names",
                           "list the models this endpoint serves"))
    for i, name in enumerate(ep.models):
        if name not in declared:
            out.append(unknown_name(f"{path}.models[{i}]", name, models, "models"))
    sme = ep.kind is EndpointKind.SINGLE_MODEL
    served = served_models(ep, models)
    # Inference components: one archive per model, with what it loads (an ensemble's steps).
    per_component = {m: served_models(dataclasses.replace(ep, models=(m,)), models) for m in ep.models}
    out += component_endpoint.endpoint_problems(path, ep, models, per_component)
    out += variant_plan.combination_problems(ep, set(declared), path)
    out += variant_rules(path, ep, models, triton_version)
    if sme:
        if len(ep.models) > 1 and ep.default_model is None:
            out.append(Problem(f"{path}.default_model", "nothing", f"one of {', '.join(ep.models)}",
                               "a single-model endpoint with several models needs default_model (it becomes "
                               "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME)"))
        if ep.default_model is not None and ep.default_model not in ep.models:
            out.append(Problem(f"{path}.default_model", describe(ep.default_model),
                               f"one of this endpoint's models ({', '.join(ep.models)})",
                               "name a model listed under models"))
        for m in served:
            if m.copies > 1:
                out.append(Problem(f"models.{m.name}.copies", str(m.copies), "1 on a single-model endpoint "
                                   f"({path.split('.', 1)[-1]})", "serve the copies from a multi-model endpoint"))
    elif ep.kind is EndpointKind.MULTI_MODEL:
        if ep.default_model is not None:
            out.append(Problem(f"{path}.default_model", describe(ep.default_model),
                               "nothing on a multi-model endpoint (callers pick a TargetModel)", "remove default_model"))
    out += _unique_names(path, served)
    out += streaming.endpoint_problems(path, ep, models, triton_version)
    out += generation_alarms.time_to_first_token_problems(
        ep.alarms.time_to_first_token_ms, ep.container.inference_type, metrics=ep.container.metrics,
        detailed=ep.observability.detailed, path=f"{path}.alarms.time_to_first_token_ms")
    out += generation_engines.endpoint_problems(path, ep, models, triton_version)
    out += _instance_rules(path, ep, served, triton_version)
    environment = container_environment(ep.container, multi_model=ep.kind is EndpointKind.MULTI_MODEL,
                                        default_model=ep.default_model, extra_args=ep.triton_args)
    out += sagemaker_rules.prefixed(path, sagemaker_rules.container_environment_limits(environment))
    return out


def _unique_names(path: str, served: list[ModelSpec]) -> list[Problem]:
    owner: dict[str, str] = {}
    out = []
    for m in served:
        for triton_name in m.triton_names():
            if triton_name in owner and owner[triton_name] != m.name:
                out.append(Problem(f"{path}.models", f"the Triton name '{triton_name}' from both "
                                   f"{owner[triton_name]} and {m.name}", "unique Triton model names per endpoint",
                                   "rename one model or change its copies"))
            owner[triton_name] = m.name
    return out


def _instance_rules(path: str, ep: EndpointSpec, served: list[ModelSpec], triton_version: str) -> list[Problem]:
    # Variant scaling, model caching and data capture are not for inference components (component_endpoint says so).
    variant = ep.kind is not EndpointKind.INFERENCE_COMPONENTS
    out = sagemaker_rules.prefixed(path, sagemaker_rules.endpoint_problems(
        instance_type=ep.instance_type, multi_model=ep.kind is EndpointKind.MULTI_MODEL, triton_version=triton_version,
        initial_instances=ep.initial_instances, scaling=ep.scaling if variant else None,
        volume_size_gb=ep.volume_size_gb, model_cache=ep.model_cache or not variant,
        data_capture=ep.data_capture is not None and variant, instance_facts=ep.instance_facts,
        enhanced_metrics=ep.observability.enhanced, asynchronous=ep.asynchronous is not None))
    if ep.asynchronous is not None:
        out += sagemaker_rules.prefixed(path, asynchronous.combination_problems(
            ep.asynchronous, kind=ep.kind.value, data_capture=ep.data_capture is not None, scaling=ep.scaling,
            triton_version=triton_version))
    out += triton_metrics.graphs_problems(
        ep.observability.graphs, detailed=ep.observability.detailed, container_metrics=ep.container.metrics,
        path=f"{path}.observability.graphs")
    out += sagemaker_rules.prefixed(path, sagemaker_rules.fallback_instance_types(
        ep.instance_type, ep.fallback_instance_types, multi_model=ep.kind is EndpointKind.MULTI_MODEL,
        triton_version=triton_version, volume_size_gb=ep.volume_size_gb, instance_facts=ep.instance_facts))
    ceiling = (ep.scaling.max_instances if variant and ep.scaling else
               None if variant else ep.instance_bounds.max_instances)
    out += sagemaker_rules.prefixed(path, reservation_problems(
        ep.capacity_reservation, instance_type=ep.instance_type, fallbacks=ep.fallback_instance_types,
        initial_instances=ep.initial_instances, max_instances=ceiling,
        max_field="scaling.max_instances" if variant else "managed_instances.max_instances"))
    return out + _served_on_cpu(ep, served, f"{path}.instance_type", f"endpoint {path.split('.', 1)[-1]}")


def _served_on_cpu(ep: EndpointSpec, served: list[ModelSpec], type_path: str, where: str) -> list[Problem]:
    """Models that need a GPU, served on ``ep``'s instance type where that is a CPU type."""
    itype = ep.instance
    if itype is None or itype.is_gpu:
        return []
    out = []
    for m in served:
        if any(g.kind is InstanceKind.GPU for g in m.instance_groups):
            out.append(Problem(f"models.{m.name}.instance_groups", "kind gpu",
                               f"kind cpu or auto on the CPU instance type {ep.instance_type} ({where})",
                               "use kind: cpu (or auto), or a GPU instance type"))
        if m.backend is Backend.TENSORRT:
            out.append(Problem(type_path, describe(ep.instance_type),
                               f"a GPU instance type for the TensorRT model {m.name}",
                               "use a GPU instance type such as ml.g5.xlarge"))
    return out


# What a variant or the shadow may set for itself; everything else is the endpoint's.
VARIANT_FIELDS = ("instance_type", "initial_instances", "scaling")


def variant_rules(path: str, ep: EndpointSpec, models: Mapping[str, ModelSpec], triton_version: str) -> list[Problem]:
    """Each variant and the shadow as it runs: its model on its instance type, with its instance count and scaling,
    under the rules the endpoint's own settings pass (sagemaker_rules.endpoint_problems, the Scaling rules and the
    zero-instance rule among them), reported at the variant's path. Only what the variant's own settings add: a
    problem of the endpoint's settings is reported once, at the endpoint."""
    if ep.kind is not EndpointKind.SINGLE_MODEL or not ep.models or ep.asynchronous is not None:
        return []  # variant_plan.combination_problems refuses these; the views below assume a real-time SME
    own = _endpoint_instance_problems(ep, triton_version)
    out: list[Problem] = []
    named: list[tuple[str, str, Optional[str], Variant | Shadow]] = [
        (f"{path}.variants[{i}]", v.name, v.model, v) for i, v in enumerate(ep.variants)]
    if ep.shadow is not None:
        named.append((f"{path}.shadow", ep.shadow.name, ep.shadow.model, ep.shadow))
    for vpath, name, model, settings in named:
        view = dataclasses.replace(
            ep, models=(model or variant_plan.served_model(ep),), default_model=None, variants=(), shadow=None,
            instance_type=settings.instance_type or ep.instance_type,
            initial_instances=settings.initial_instances or ep.initial_instances,
            scaling=settings.scaling or ep.scaling,
            # instance_facts describe the endpoint's own type; another type must be one the table knows
            instance_facts=ep.instance_facts if settings.instance_type in (None, ep.instance_type) else None)
        for p in _endpoint_instance_problems(view, triton_version):
            if p in own:
                continue
            if p.path.split(".")[0] in VARIANT_FIELDS:
                out.append(_for_variant(p, vpath))
            else:
                out.append(dataclasses.replace(p, path=f"{path}.{p.path}"))
        if view.instance_type != ep.instance_type or view.models[0] not in {m.name for m in served_models(ep, models)}:
            out += _served_on_cpu(view, served_models(view, models), f"{vpath}.instance_type",
                                  f"endpoint {path.split('.', 1)[-1]}, variant {name}")
    return out


def _endpoint_instance_problems(ep: EndpointSpec, triton_version: str) -> list[Problem]:
    """sagemaker_rules.endpoint_problems of a real-time single-model endpoint, paths relative to it."""
    return sagemaker_rules.endpoint_problems(
        instance_type=ep.instance_type, multi_model=False, triton_version=triton_version,
        initial_instances=ep.initial_instances,
        scaling=ep.scaling, volume_size_gb=ep.volume_size_gb, model_cache=ep.model_cache,
        data_capture=ep.data_capture is not None, instance_facts=ep.instance_facts,
        enhanced_metrics=ep.observability.enhanced)


def _for_variant(p: Problem, vpath: str) -> Problem:
    """A problem of the variant's own settings at its path; the variant cannot declare instance_facts."""
    fix = p.fix
    if "instance_facts" in fix:
        fix = "use a type this library knows; instance_facts describes only the endpoint's own instance_type"
    if p.path.endswith("min_instances") and p.got == "0":  # the zero-instance rule's other ways take no variants
        fix = ("raise min_instances to 1: variants and a shadow serve in real time (the endpoints that scale to "
               "zero, asynchronous and inference-components ones, take none)")
    return dataclasses.replace(p, path=f"{vpath}.{p.path}", fix=fix)


def production_rules(env: EnvironmentSpec) -> list[Problem]:
    """A production environment keeps 2+ instances per endpoint, unless the endpoint says why not."""
    if not env.production:
        return []
    out = []
    for name, ep in env.endpoints.items():
        if ep.kind is EndpointKind.INFERENCE_COMPONENTS:
            out += component_endpoint.production_problems(f"endpoints.{name}", ep, env.name)
        if (ep.single_instance_reason or "").strip():
            continue
        out += _production_variants(name, ep, env.name)
        if ep.deploy_instances >= 2 and ep.initial_instances >= 2:
            continue
        floor = "managed_instances.min_instances" if ep.managed_instances else "scaling.min_instances"
        field = floor if ep.deploy_instances < 2 and (ep.scaling or ep.managed_instances) else "initial_instances"
        got = ep.deploy_instances if field == floor else ep.initial_instances
        out.append(Problem(
            f"endpoints.{name}.{field}", str(got),
            f"2 or more in environment {env.name} (production: true), so that SageMaker can place the instances "
            "in different Availability Zones (AWS Config rule SAGEMAKER_ENDPOINT_CONFIG_PROD_INSTANCE_COUNT)",
            f"set initial_instances and {floor} to 2 under environments.{env.name}.overrides."
            f"endpoints.{name}, or give single_instance_reason there"))
    return out


def production_signing(signing: SigningSpec, env: EnvironmentSpec) -> Optional[Problem]:
    """A production environment deploys tarballs signed by the key the spec names, or says why they are unsigned.

    The one rule synth (stacks/model_signatures.py), ``tritonsm validate`` and ``tritonsm verify --signatures`` apply,
    so that none of them passes a spec another refuses. Not a loader rule: a spec without a key still builds and
    serves locally, and its other environments still synthesize.
    """
    if not env.production or signing.public_key is not None or signing.unsigned_reason:
        return None
    return Problem("signing", f"neither signing.public_key nor signing.unsigned_reason, with environment {env.name} "
                   "marked production: true", "in a production environment, model tarballs signed by the team's "
                   "key (signing.public_key), or unsigned ones with the reason in the spec (signing.unsigned_reason)",
                   "set signing.public_key and build with the key (tritonsm build --signing-key KEY), or give "
                   "signing.unsigned_reason (docs/howto/signing.md)")


def _production_variants(name: str, ep: EndpointSpec, env_name: str) -> list[Problem]:
    """The same rule per production variant that sets its own instance count or scaling (the Config rule checks
    every ProductionVariants entry; the others have the endpoint's, checked with it). The shadow is left out: it
    answers no caller, and is listed under ShadowProductionVariants."""
    out = []
    for i, v in enumerate(ep.variants):
        if v.initial_instances is None and v.scaling is None:
            continue
        initial = v.initial_instances or ep.initial_instances
        scaling = v.scaling or ep.scaling
        floor = scaling.min_instances if scaling else initial
        if floor >= 2 and initial >= 2:
            continue
        field = "scaling.min_instances" if scaling and floor < 2 else "initial_instances"
        out.append(Problem(
            f"endpoints.{name}.variants[{i}].{field}", str(floor if field != "initial_instances" else initial),
            f"2 or more in environment {env_name} (production: true) for every production variant, so that "
            "SageMaker can place its instances in different Availability Zones (AWS Config rule "
            "SAGEMAKER_ENDPOINT_CONFIG_PROD_INSTANCE_COUNT)",
            f"set the variant's initial_instances and scaling.min_instances to 2 under environments.{env_name}."
            f"overrides.endpoints.{name}.variants, or give the endpoint single_instance_reason there"))
    return out


def deployment_rules(env: EnvironmentSpec) -> list[Problem]:
    """Guarded (blue/green) updates SageMaker would refuse, per endpoint of a guardrails environment."""
    if not env.guardrails:
        return []
    out = []
    for name, ep in env.endpoints.items():
        if ep.kind is EndpointKind.INFERENCE_COMPONENTS:
            out += component_endpoint.rolling_problems(f"endpoints.{name}", ep)
            continue
        out += sagemaker_rules.prefixed(f"endpoints.{name}", sagemaker_rules.deployment_problems(
            ep.deployment, deploy_instances=ep.deploy_instances, download_timeout_s=ep.download_timeout_s,
            startup_timeout_s=ep.startup_timeout_s, context=f"in environment {env.name} (guardrails: true)"))
    return out


def environment_rules(path: str, env: EnvironmentSpec, triton_version: str) -> list[Problem]:
    out = []
    if env.account and not env.region:
        out.append(Problem(f"{path}.region", "nothing", "a region whenever account is set",
                           "add region, or remove account for an environment-agnostic stage"))
    if env.region:
        out += sagemaker_rules.prefixed(path, sagemaker_rules.image_in_region(triton_version, env.region))
    return out

"""Cross-field rules, in spec terms. Each returns Problems; none raises."""
from __future__ import annotations

from typing import Mapping

from deployment_spec import images, instances, serving_runtimes
from deployment_spec.endpoint import EndpointKind, EndpointSpec, Strategy
from deployment_spec.environment import EnvironmentSpec
from deployment_spec.errors import Problem, describe
from deployment_spec.model import Backend, InstanceKind, ModelSpec
from deployment_spec.parse import suggest


def _gpu_generation(path: str, ep: EndpointSpec, fam: instances.Family, triton_version: str) -> list[Problem]:
    """The image's CUDA kernels are built for compute capability >= its release's minimum (V100 gone in 25.x)."""
    serving = serving_runtimes.RUNTIMES.get(triton_version)
    if serving is None or fam.compute_capability is None or _cc(fam.compute_capability) >= _cc(
            serving.min_compute_capability):
        return []
    older = [v for v, r in sorted(serving_runtimes.RUNTIMES.items())
             if _cc(r.min_compute_capability) <= _cc(fam.compute_capability)]
    fix = "use ml.g4dn/ml.g5" + (f", or triton_version {older[-1]} or older" if older else "")
    return [Problem(f"{path}.instance_type", describe(ep.instance_type),
                    f"a GPU with compute capability >= {serving.min_compute_capability} for Triton {triton_version}",
                    fix)]


def _cc(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


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
    return [Problem(f"models.{name}.backend", f"'dali' with triton_version {triton_version!r}, whose image runs "
                    f"DALI {release.version} ({release.requirement}): {release.wheel_missing}, so the build "
                    "cannot serialize a pipeline in that release's format",
                    f"backend dali with a triton_version whose DALI the build can install: {usable}",
                    f"set triton_version to one of those (the newest: {serving_runtimes.buildable_dali()[-1].triton_version})")
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
        if models[name].ensemble:
            for step in models[name].ensemble.steps:
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
        if not ep.model_cache:
            out.append(Problem(f"{path}.model_cache", "false", "true (model caching is a multi-model setting)",
                               "remove model_cache"))
    else:
        if ep.default_model is not None:
            out.append(Problem(f"{path}.default_model", describe(ep.default_model),
                               "nothing on a multi-model endpoint (callers pick a TargetModel)", "remove default_model"))
        if ep.data_capture is not None:
            out.append(Problem(f"{path}.data_capture", "a data capture setting", "single-model endpoints only",
                               "remove data_capture or make the endpoint single-model"))
    out += _unique_names(path, served)
    out += _instance_rules(path, ep, served, triton_version)
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
    itype = instances.lookup(ep.instance_type)
    if itype is None:
        return [Problem(f"{path}.instance_type", describe(ep.instance_type),
                        f"ml.<family>.<size> with family one of {instances.known_families()}",
                        "use a SageMaker instance type such as ml.g5.xlarge")]
    out = []
    fam = itype.family
    if ep.kind is EndpointKind.MULTI_MODEL and not fam.mme:
        mme_families = ", ".join(f for f, v in instances.FAMILIES.items() if v.mme)
        out.append(Problem(f"{path}.instance_type", describe(ep.instance_type),
                           f"a multi-model endpoint instance family ({mme_families})",
                           "pick an ml.g5 or ml.g4dn size, or make the endpoint single-model"))
    if ep.kind is EndpointKind.MULTI_MODEL and itype.gpu_count > 1:
        out.append(Problem(f"{path}.instance_type", describe(ep.instance_type),
                           "a single-GPU instance type for a multi-model endpoint",
                           "use a single-GPU size such as ml.g5.2xlarge"))
    out += _gpu_generation(path, ep, fam, triton_version)
    if not itype.is_gpu:
        for m in served:
            if any(g.kind is InstanceKind.GPU for g in m.instance_groups):
                out.append(Problem(f"models.{m.name}.instance_groups", "kind gpu",
                                   f"kind cpu or auto on the CPU instance type {ep.instance_type} "
                                   f"(endpoint {path.split('.', 1)[-1]})",
                                   "use kind: cpu (or auto), or a GPU instance type"))
            if m.backend is Backend.TENSORRT:
                out.append(Problem(f"{path}.instance_type", describe(ep.instance_type),
                                   f"a GPU instance type for the TensorRT model {m.name}",
                                   "use a GPU instance type such as ml.g5.xlarge"))
    if ep.volume_size_gb is not None and fam.nvme:
        out.append(Problem(f"{path}.volume_size_gb", str(ep.volume_size_gb),
                           f"nothing on {ep.instance_type}: it has local NVMe storage",
                           "remove volume_size_gb"))
    sc = ep.scaling
    if sc is None:
        return out
    if fam.burstable:
        out.append(Problem(f"{path}.scaling", f"auto-scaling on {ep.instance_type}",
                           "no auto-scaling on burstable ml.t* types",
                           "remove scaling or use a non-burstable type such as ml.c5.xlarge"))
    if not sc.min_instances <= ep.initial_instances <= sc.max_instances:
        out.append(Problem(f"{path}.initial_instances", str(ep.initial_instances),
                           f"an integer within scaling.min_instances..scaling.max_instances "
                           f"({sc.min_instances}..{sc.max_instances})",
                           "move initial_instances into that range or widen the range"))
    if sc.gpu_utilization_target is not None and not itype.is_gpu:
        out.append(Problem(f"{path}.scaling.gpu_utilization_target", describe(sc.gpu_utilization_target),
                           f"nothing on the CPU instance type {ep.instance_type}",
                           "remove it, or use cpu_utilization_target"))
    if sc.max_rps_per_instance is not None and sc.invocations_target is not None:
        out.append(Problem(f"{path}.scaling.invocations_target", describe(sc.invocations_target),
                           "either invocations_target or max_rps_per_instance, not both",
                           "keep one: the target is derived as max_rps_per_instance x 60 x safety_factor"))
    return out


def production_rules(env: EnvironmentSpec) -> list[Problem]:
    """A production environment keeps 2+ instances per endpoint, unless the endpoint says why not."""
    if not env.production:
        return []
    out = []
    for name, ep in env.endpoints.items():
        if ep.deploy_instances >= 2 and ep.initial_instances >= 2 or (ep.single_instance_reason or "").strip():
            continue
        field = "scaling.min_instances" if ep.scaling and ep.scaling.min_instances < 2 else "initial_instances"
        got = ep.scaling.min_instances if field == "scaling.min_instances" else ep.initial_instances
        out.append(Problem(
            f"endpoints.{name}.{field}", str(got),
            f"2 or more in environment {env.name} (production: true), so that SageMaker can place the instances "
            "in different Availability Zones (AWS Config rule SAGEMAKER_ENDPOINT_CONFIG_PROD_INSTANCE_COUNT)",
            f"set initial_instances and scaling.min_instances to 2 under environments.{env.name}.overrides."
            f"endpoints.{name}, or give single_instance_reason there"))
    return out


def deployment_rules(env: EnvironmentSpec) -> list[Problem]:
    """Guarded (blue/green) updates SageMaker would refuse, per endpoint of a guardrails environment."""
    if not env.guardrails:
        return []
    out = []
    for name, ep in env.endpoints.items():
        path, deployment = f"endpoints.{name}.deployment", ep.deployment
        where = f"in environment {env.name} (guardrails: true)"
        if deployment.strategy in (Strategy.CANARY, Strategy.LINEAR) and ep.deploy_instances < 2:
            out.append(Problem(f"{path}.strategy", deployment.strategy.value,
                               f"all_at_once or auto for a variant that can have 1 instance {where}: a canary or "
                               "linear step must be at most 50 % of the variant's instances",
                               "use strategy all_at_once (blue/green with the bake time and auto-rollback) or "
                               "auto, or give the endpoint 2+ instances (initial_instances, scaling.min_instances)"))
        resolved = ep.resolved_deployment()
        needed = resolved.needed_s(ep.fleet_start_s)
        if deployment.max_execution_timeout_s is not None and deployment.max_execution_timeout_s < needed:
            out.append(Problem(
                f"{path}.max_execution_timeout_s", str(deployment.max_execution_timeout_s),
                f"at least {needed} s {where}: new fleet start (download_timeout_s {ep.download_timeout_s} + "
                f"startup_timeout_s {ep.startup_timeout_s}) + {resolved.steps()} step(s) x wait_s "
                f"{deployment.wait_s} + termination_wait_s {deployment.termination_wait_s}",
                "raise it, or leave it out to have it computed"))
    return out


def environment_rules(path: str, env: EnvironmentSpec, triton_version: str) -> list[Problem]:
    out = []
    if env.account and not env.region:
        out.append(Problem(f"{path}.region", "nothing", "a region whenever account is set",
                           "add region, or remove account for an environment-agnostic stage"))
    if env.region and images.account(triton_version, env.region) is None and triton_version in images.versions():
        out.append(Problem(f"{path}.region", describe(env.region),
                           f"a region with sagemaker-tritonserver:{triton_version}-py3 "
                           f"({', '.join(images.regions(triton_version))})",
                           "choose one of those regions or another triton_version"))
    return out

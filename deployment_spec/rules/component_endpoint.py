"""An inference-components endpoint in spec terms: its components' names, reservations and checks.

Maps the plain rules of ``component_rules`` onto spec paths (``endpoints.<name>.components.<model>...``),
and resolves what the CDK app, the local endpoint and the clients share: each component's name and
what one copy reserves on the endpoint's instance type.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

from deployment_spec.facts import component_rules as rules
from deployment_spec.facts import instances
from deployment_spec.rules.container_env import endpoint_name
from deployment_spec.sections.endpoint import Deployment, EndpointKind, EndpointSpec
from deployment_spec.parsing.errors import Problem, describe, prefixed
from deployment_spec.sections.model import InstanceKind, ModelSpec
from deployment_spec.parsing.parse import suggest

# Endpoint settings of the other kinds that an inference-components endpoint replaces, and with what.
_NOT_HERE = {
    "scaling": "components.<model>.scaling (copies per component) and managed_instances (instances)",
    "default_model": "nothing: each component serves its own model; callers name the component",
    "data_capture": "nothing: data capture is not offered for inference-component endpoints here",
    "deployment": "rolling_update (each component updates in rolling batches under guardrails)",
}


def component_name(project: str, environment: str, endpoint: str, model: str) -> str:
    """``<project>-<environment>-<endpoint>-<model>``: the InferenceComponentName callers pass to InvokeEndpoint."""
    return f"{endpoint_name(project, environment, endpoint)}-{model}"


def archive_default_model(archive_models: Sequence[str]) -> str | None:
    """SAGEMAKER_TRITON_DEFAULT_MODEL_NAME of a component's archive: its first model (an ensemble, led by it in
    model_build.packaging) when it holds several; none for one (the container serves the only model)."""
    return archive_models[0] if len(archive_models) > 1 else None


def capacity(instance_type: str, instance_facts: instances.InstanceFacts | None = None
             ) -> rules.InstanceCapacity | None:
    """One instance's GPUs, vCPUs and memory from the instance table or the declared facts (None: unknown type)."""
    itype = instances.lookup(instance_type, instance_facts)
    if itype is None:
        return None
    vcpus_memory = itype.vcpus_memory_gib
    return rules.InstanceCapacity(instance_type, itype.gpu_count, vcpus_memory[0] if vcpus_memory else None,
                                  vcpus_memory[1] if vcpus_memory else None)


def demand(endpoint: EndpointSpec, model: str, copies: int | None = None) -> rules.Demand:
    """What ``copies`` copies (default: the initial count) of ``model``'s component reserve."""
    component = endpoint.component(model)
    itype = endpoint.instance
    gpus = component.reservation.gpus_on(itype.gpu_count if itype else 0)
    return rules.Demand(model, gpus, component.reservation.cpu_cores, component.reservation.memory_mb,
                        component.copies if copies is None else copies)


def endpoint_problems(path: str, endpoint: EndpointSpec, models: Mapping[str, ModelSpec],
                      served: Mapping[str, list[ModelSpec]]) -> list[Problem]:
    """Every problem of an endpoint's inference-component settings; ``served`` maps each model to what its archive loads."""
    if endpoint.kind is not EndpointKind.INFERENCE_COMPONENTS:
        return _only_for_components(path, endpoint)
    out = _replaced_settings(path, endpoint)
    for name in endpoint.components:
        if name not in endpoint.models:
            near = suggest(name, endpoint.models)
            out.append(Problem(f"{path}.components.{name}", describe(name),
                               f"a model listed under {path}.models ({', '.join(endpoint.models)})",
                               f"did you mean '{near}'?" if near else "add it to models or remove its settings"))
    listed = [m for m in endpoint.models if m in models]
    for name in listed:
        if models[name].copies > 1:
            out.append(Problem(f"models.{name}.copies", str(models[name].copies),
                               f"1 on an inference-components endpoint ({path.split('.', 1)[-1]})",
                               f"set {path}.components.{name}.copies instead (each copy is a container)"))
    bounds = endpoint.instance_bounds
    out += prefixed(path, rules.initial_within_instances(endpoint.initial_instances, bounds.min_instances,
                                                         bounds.max_instances))
    out += prefixed(path, rules.scale_to_zero(bounds.min_instances,
                                              {m: endpoint.component(m).min_copies for m in listed}))
    instance = capacity(endpoint.instance_type, endpoint.instance_facts)
    if instance is None:
        return out  # the instance type itself is reported by rules._instance_rules
    for name in listed:
        gpu_groups = any(g.kind is InstanceKind.GPU for m in served.get(name, []) for g in m.instance_groups)
        out += prefixed(f"{path}.components.{name}", rules.gpu_models_need_gpus(
            demand(endpoint, name).gpus, instance.gpus > 0, gpu_groups))
    initial = [demand(endpoint, m) for m in listed]
    most = [demand(endpoint, m, endpoint.component(m).max_copies) for m in listed]
    placed = rules.placement_problems(initial, most, instance, bounds.max_instances)
    for i, fallback in enumerate(endpoint.fallback_instance_types):  # whichever pool SageMaker takes
        pool = capacity(fallback)
        if pool is not None and not placed:  # one root cause, one problem; an unknown type: rules._instance_rules
            placed += prefixed(f"fallback_instance_types[{i}]",
                               rules.placement_problems(initial, most, pool, bounds.max_instances))
    return out + prefixed(path, placed)


def _only_for_components(path: str, endpoint: EndpointSpec) -> list[Problem]:
    out = []
    for field, value in (("components", endpoint.components), ("managed_instances", endpoint.managed_instances)):
        if value:
            out.append(Problem(f"{path}.{field}", "a setting of inference components",
                               f"nothing on a {endpoint.kind.value} endpoint",
                               f"remove {field}, or set kind: inference-components"))
    return out


def _replaced_settings(path: str, endpoint: EndpointSpec) -> list[Problem]:
    out = []
    defaults = {"scaling": None, "default_model": None, "data_capture": None, "deployment": Deployment()}
    for field, default in defaults.items():
        if getattr(endpoint, field) != default:
            out.append(Problem(f"{path}.{field}", "a setting", "nothing on an inference-components endpoint",
                               f"use {_NOT_HERE[field]}" if not _NOT_HERE[field].startswith("nothing")
                               else f"remove it ({_NOT_HERE[field]})"))
    if not endpoint.model_cache:
        out.append(Problem(f"{path}.model_cache", "false", "true (model caching is a multi-model setting)",
                           "remove model_cache"))
    return out


def production_problems(path: str, endpoint: EndpointSpec, environment: str) -> list[Problem]:
    """A production environment answers every request: no component may sit at zero copies."""
    out = []
    for model in endpoint.models:
        scaling = endpoint.component(model).scaling
        if scaling is not None and scaling.scales_to_zero:
            out.append(Problem(
                f"{path}.components.{model}.scaling.min_copies", "0",
                f"1 or more in environment {environment} (production: true): at zero copies requests fail with "
                "NoCapacityInvocationFailures for the minutes a new copy takes to start "
                "(https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-zero-instances.html)",
                f"set scaling.min_copies: 1 under environments.{environment}.overrides.{path}.components.{model}"))
    return out


def rolling_problems(path: str, endpoint: EndpointSpec) -> list[Problem]:
    """The guarded (rolling) update must have time for every batch: copy start plus bake time."""
    update = endpoint.rolling_update
    return prefixed(path, rules.rolling_timeout(update.max_execution_timeout_s, update.batch_percent,
                                                update.wait_s, endpoint.fleet_start_s))


def name_problems(project: str, environments: Mapping[str, object]) -> list[Problem]:
    """Each component's InferenceComponentName must be valid in every environment (one problem per model)."""
    out, reported = [], set()
    for env_name, env in environments.items():
        for ep_name, endpoint in getattr(env, "endpoints", {}).items():
            if endpoint.kind is not EndpointKind.INFERENCE_COMPONENTS:
                continue
            for model in endpoint.models:
                found = rules.component_name_valid(component_name(project, env_name, ep_name, model))
                if found and (ep_name, model) not in reported:
                    reported.add((ep_name, model))
                    out += [dataclasses.replace(p, path=f"endpoints.{ep_name}.models",
                                                got=f"{p.got} (environment {env_name})") for p in found]
    return out

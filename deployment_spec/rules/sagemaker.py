"""SageMaker rules for an endpoint, each once: plain values in, problems out.

The spec validator (``deployment_spec.rules.cross_section``) and the construct library
(``triton_constructs.TritonSageMakerEndpoint``) both call these, so a spec and props built in code
are refused with the same words. Problem paths are relative to the endpoint (``instance_type``,
``scaling.min_instances``); the spec puts ``endpoints.<name>.`` in front, the construct nothing.
One rule per function, in the cdk-nag way; tests/spec/test_sagemaker_rules.py has a compliant and a
non-compliant case for each.

Sources: the CreateEndpointConfig / CreateEndpoint / CreateModel API references (botocore's
SageMaker service model), https://docs.aws.amazon.com/sagemaker/latest/dg/multi-model-endpoint-instance.html
(multi-model GPU types), https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling.html
(auto-scaling) and .../deployment-guardrails-configuration.html (traffic shifting).
"""
from __future__ import annotations

import dataclasses
import re
from typing import Mapping, Optional, Sequence

from deployment_spec.facts import images, instances, serving_runtimes
from deployment_spec.sections.endpoint import Deployment, LoadMetric, Scaling, Strategy
from deployment_spec.parsing.errors import Problem, describe
from deployment_spec.parsing.errors import prefixed as prefixed  # re-exported: its home is errors

# CreateEndpoint's EndpointName: letters, digits and '-', at most 63 characters.
ENDPOINT_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")
# Limits of CreateModel's ContainerDefinition.Environment.
MAX_ENV_ENTRIES, MAX_ENV_VALUE_BYTES, MAX_ENV_TOTAL_BYTES = 100, 1024, 32 * 1024


def triton_version_known(triton_version: str) -> list[Problem]:
    """The image must be a sagemaker-tritonserver release in the SageMaker SDK's registry."""
    if triton_version in images.versions():
        return []
    return [Problem("triton_version", describe(triton_version),
                    f"a sagemaker-tritonserver release of the SageMaker SDK ({', '.join(images.versions())})",
                    "pick one of those tags")]


def image_in_region(triton_version: str, region: str) -> list[Problem]:
    """The image (and so the endpoint) must be in a region that publishes it; the model's region (CreateModel)."""
    if triton_version not in images.versions() or images.account(triton_version, region) is not None:
        return []
    return [Problem("region", describe(region),
                    f"a region with sagemaker-tritonserver:{triton_version}-py3 ({', '.join(images.regions(triton_version))})",
                    "choose one of those regions or another triton_version")]


def instance_type_known(instance_type: str, declared: Optional[instances.InstanceFacts] = None) -> list[Problem]:
    """A real SageMaker type (botocore's enum at the pin) that the Triton image can use, with facts known or declared."""
    found = instances.servable_problem(instance_type, declared)
    if found is None:
        return []
    allowed, fix = found
    return [Problem("instance_facts" if declared is not None and allowed.startswith("no instance_facts")
                    else "instance_type", describe(instance_type), allowed, fix)]


def multi_model_family(found: instances.InstanceType) -> list[Problem]:
    """GPU multi-model endpoints run only on the GPU families SageMaker lists for them (any CPU type may)."""
    if found.family.mme:
        return []
    families = ", ".join(f for f, v in instances.FAMILIES.items() if v.mme and v.gpu)
    return [Problem("instance_type", describe(found.name), f"a CPU type or a GPU family SageMaker lists for "
                    f"multi-model endpoints ({families})",
                    "pick an ml.g5 or ml.g4dn size, or make the endpoint single-model")]


def multi_model_single_gpu(found: instances.InstanceType) -> list[Problem]:
    """GPU multi-model endpoints run on single-GPU instance types only."""
    if found.gpu_count <= 1:
        return []
    return [Problem("instance_type", describe(found.name), "a single-GPU instance type for a multi-model endpoint",
                    "use a single-GPU size such as ml.g5.2xlarge")]


def gpu_generation(found: instances.InstanceType, triton_version: str) -> list[Problem]:
    """The image's CUDA kernels are built for compute capability >= its release's minimum (V100 gone in 25.x)."""
    serving = serving_runtimes.RUNTIMES.get(triton_version)
    cc = found.family.compute_capability
    if serving is None or cc is None or _cc(cc) >= _cc(serving.min_compute_capability):
        return []
    older = [v for v, r in sorted(serving_runtimes.RUNTIMES.items()) if _cc(r.min_compute_capability) <= _cc(cc)]
    fix = "use ml.g4dn/ml.g5" + (f", or triton_version {older[-1]} or older" if older else "")
    return [Problem("instance_type", describe(found.name),
                    f"a GPU with compute capability >= {serving.min_compute_capability} for Triton {triton_version}",
                    fix)]


def _cc(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def volume_size_without_nvme(found: instances.InstanceType, volume_size_gb: Optional[int]) -> list[Problem]:
    """SageMaker rejects VolumeSizeInGB on instance types with local NVMe storage."""
    if volume_size_gb is None or not found.family.nvme:
        return []
    return [Problem("volume_size_gb", str(volume_size_gb), f"nothing on {found.name}: it has local NVMe storage",
                    "remove volume_size_gb")]


def scalable_instance_type(found: instances.InstanceType) -> list[Problem]:
    """Application Auto Scaling does not scale burstable (ml.t*) instance types."""
    if not found.family.burstable:
        return []
    return [Problem("scaling", f"auto-scaling on {found.name}", "no auto-scaling on burstable ml.t* types",
                    "remove scaling or use a non-burstable type such as ml.c5.xlarge")]


def zero_instances_need_components(min_instances: int, field: str = "scaling.min_instances",
                                   asynchronous: bool = False) -> list[Problem]:
    """A variant's instances scale to zero only when the endpoint hosts inference components
    (https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-zero-instances.html) or serves
    asynchronously (developer guide, "Autoscale an asynchronous endpoint": MinCapacity 0)."""
    if min_instances != 0 or asynchronous:
        return []
    return [Problem(field, "0",
                    "1 or more on a real-time variant endpoint: an endpoint scales to zero instances only when it "
                    "hosts inference components (https://docs.aws.amazon.com/sagemaker/latest/dg/"
                    "endpoint-auto-scaling-zero-instances.html) or serves asynchronously",
                    "raise min_instances to 1, add an asynchronous block, or use kind: inference-components with "
                    "managed_instances.min_instances: 0")]


def initial_within_bounds(initial: int, minimum: int, maximum: int) -> list[Problem]:
    """A scaled variant must start within its scaling bounds."""
    if minimum <= initial <= maximum:
        return []
    return [Problem("initial_instances", str(initial),
                    f"an integer within scaling.min_instances..scaling.max_instances ({minimum}..{maximum})",
                    "move initial_instances into that range or widen the range")]


def gpu_target_on_gpu(found: instances.InstanceType, gpu_target: Optional[float]) -> list[Problem]:
    """GPUUtilization exists only on GPU instance types."""
    if gpu_target is None or found.is_gpu:
        return []
    return [Problem("scaling.gpu_utilization_target", describe(gpu_target),
                    f"nothing on the CPU instance type {found.name}", "remove it, or use cpu_utilization_target")]


def traffic_shift_fits(strategy: Strategy, deploy_instances: int, context: str = "") -> list[Problem]:
    """A canary or linear step is at most 50 % of the variant (CapacitySize), so it needs 2+ instances."""
    if strategy not in (Strategy.CANARY, Strategy.LINEAR) or deploy_instances >= 2:
        return []
    where = f" {context}" if context else ""
    return [Problem("deployment.strategy", strategy.value,
                    f"all_at_once or auto for a variant that can have 1 instance{where}: a canary or linear step "
                    "must be at most 50 % of the variant's instances",
                    "use strategy all_at_once (blue/green with the bake time and auto-rollback) or auto, or give "
                    "the endpoint 2+ instances (initial_instances, scaling.min_instances)")]


def execution_timeout_covers(deployment: Deployment, deploy_instances: int, download_timeout_s: int,
                             startup_timeout_s: int, context: str = "") -> list[Problem]:
    """MaximumExecutionTimeoutInSeconds must cover the new fleet's start, every traffic step and the bake time."""
    if deployment.max_execution_timeout_s is None:
        return []
    fleet_start_s = download_timeout_s + startup_timeout_s
    resolved = deployment.resolved(deploy_instances, fleet_start_s)
    needed = resolved.needed_s(fleet_start_s)
    if deployment.max_execution_timeout_s >= needed:
        return []
    where = f" {context}" if context else ""
    return [Problem("deployment.max_execution_timeout_s", str(deployment.max_execution_timeout_s),
                    f"at least {needed} s{where}: new fleet start (download_timeout_s {download_timeout_s} + "
                    f"startup_timeout_s {startup_timeout_s}) + {resolved.steps()} step(s) x wait_s "
                    f"{deployment.wait_s} + termination_wait_s {deployment.termination_wait_s}",
                    "raise it, or leave it out to have it computed")]


def endpoint_name_valid(name: str, field: str, got: str, fix: str) -> list[Problem]:
    """CreateEndpoint's EndpointName: 1-63 letters, digits or '-' (no '_')."""
    if ENDPOINT_NAME.fullmatch(name):
        return []
    return [Problem(field, got, "1-63 letters, digits or '-' (a SageMaker endpoint name)", fix)]


def container_environment_limits(environment: Mapping[str, str], field: str = "container") -> list[Problem]:
    """CreateModel's Environment: at most 100 variables, values of 1024 bytes, 32 KB in all."""
    out = []
    if len(environment) > MAX_ENV_ENTRIES:
        out.append(Problem(field, f"{len(environment)} container environment variables",
                           f"at most {MAX_ENV_ENTRIES}", "remove variables"))
    for key, value in environment.items():
        if len(value.encode()) > MAX_ENV_VALUE_BYTES:
            out.append(Problem(f"{field}.environment.{key}", f"a value of {len(value.encode())} bytes",
                               f"at most {MAX_ENV_VALUE_BYTES} bytes", "shorten it"))
    total = sum(len(k.encode()) + len(v.encode()) for k, v in environment.items())
    if total > MAX_ENV_TOTAL_BYTES:
        out.append(Problem(field, f"a container environment of {total} bytes", f"at most {MAX_ENV_TOTAL_BYTES} bytes",
                           "remove or shorten variables"))
    return out


def model_cache_multi_model_only(multi_model: bool, model_cache: bool) -> list[Problem]:
    """MultiModelConfig.ModelCacheSetting exists on multi-model endpoints only."""
    if multi_model or model_cache:
        return []
    return [Problem("model_cache", "false", "true (model caching is a multi-model setting)", "remove model_cache")]


def data_capture_single_model_only(multi_model: bool, data_capture: bool) -> list[Problem]:
    """This app captures data on single-model endpoints only (DataCaptureConfig on a multi-model endpoint: unconfirmed)."""
    if not multi_model or not data_capture:
        return []
    return [Problem("data_capture", "a data capture setting", "single-model endpoints only",
                    "remove data_capture or make the endpoint single-model")]


MAX_FALLBACKS = 4  # InstancePools: 1-5 pools, priorities 1-5 (botocore's SageMaker model, ProductionVariant)


def fallback_instance_types(primary: str, fallbacks: Sequence[str], *, multi_model: bool, triton_version: str,
                            volume_size_gb: Optional[int],
                            instance_facts: Optional[instances.InstanceFacts] = None) -> list[Problem]:
    """Instance pools (``InstancePools``: the primary type first, then each fallback when SageMaker finds no
    capacity; SageMaker developer guide, realtime-endpoints-heterogeneous.html): single-model endpoints and
    inference components only, every pool a type the endpoint's rules accept, with the primary's GPU count
    (scaling targets, reservations and the GPU memory alarm are per GPU x GPUs)."""
    if not fallbacks:
        return []
    if multi_model:
        return [Problem("fallback_instance_types", f"{len(fallbacks)} fallback type(s) on a multi-model endpoint",
                        "instance pools on single-model endpoints and inference components only "
                        "(realtime-endpoints-heterogeneous.html)", "remove fallback_instance_types")]
    out = []
    if len(fallbacks) > MAX_FALLBACKS:
        out.append(Problem("fallback_instance_types", f"{len(fallbacks)} types", f"at most {MAX_FALLBACKS} (five "
                           "instance pools with the primary instance_type)", "keep the four you would take first"))
    primary_type = instances.lookup(primary, instance_facts)
    seen = [primary]
    for i, name in enumerate(fallbacks):
        where = f"fallback_instance_types[{i}]"
        if name in seen:
            out.append(Problem(where, describe(name), "a type not already in the pools", "remove the duplicate"))
            continue
        seen.append(name)
        known = instance_type_known(name)
        found = instances.lookup(name)
        if known or found is None:
            out += prefixed(where, [dataclasses.replace(p, path="") for p in known])
            continue
        out += prefixed(where, [dataclasses.replace(p, path="") for p in
                                gpu_generation(found, triton_version) + volume_size_without_nvme(found, volume_size_gb)])
        if primary_type is not None and found.gpu_count != primary_type.gpu_count:
            out.append(Problem(where, f"{name} ({found.gpu_count} GPU(s))", f"a type with the {primary_type.gpu_count} "
                               f"GPU(s) of instance_type {primary}: scaling targets and alarms are per GPU x GPUs",
                               f"pick a size with {primary_type.gpu_count} GPU(s)"))
    return out


def concurrency_single_model_only(multi_model: bool, concurrent_requests: Optional[float],
                                  load_metric: LoadMetric = LoadMetric.INVOCATIONS) -> list[Problem]:
    """The high-resolution concurrency metric is documented per model of a single-model variant (and per copy of
    an inference component); for a multi-model endpoint, whose instances hold many models, nothing says what it
    counts (SageMaker developer guide, "Define a scaling policy")."""
    if not multi_model:
        return []
    if concurrent_requests is None:
        if load_metric is not LoadMetric.CONCURRENCY:
            return []
        return [Problem("scaling.load_metric", "concurrency on a multi-model endpoint", "invocations (the "
                        "concurrency metric is per model of a single-model endpoint)", "remove scaling.load_metric")]
    return [Problem("scaling.concurrent_requests_per_model", f"{concurrent_requests:g} on a multi-model endpoint",
                    "single-model endpoints (inference components: concurrent_requests_per_copy)",
                    "scale the multi-model endpoint on max_rps_per_instance or invocations_target")]


def enhanced_metrics_not_multi_model(multi_model: bool, enhanced: Optional[bool]) -> list[Problem]:
    """Enhanced metrics exist for single-model and inference-component endpoints (SageMaker developer guide,
    monitoring-cloudwatch-enhanced-metrics.html)."""
    if not (multi_model and enhanced):
        return []
    return [Problem("observability.enhanced", "true on a multi-model endpoint", "single-model and "
                    "inference-component endpoints only (EnableEnhancedMetrics)", "remove observability.enhanced")]


def endpoint_problems(*, instance_type: str, multi_model: bool, triton_version: str, initial_instances: int,
                      scaling: Optional[Scaling], volume_size_gb: Optional[int], model_cache: bool = True,
                      data_capture: bool = False, instance_facts: Optional[instances.InstanceFacts] = None,
                      enhanced_metrics: Optional[bool] = None, asynchronous: bool = False) -> list[Problem]:
    """Every rule on an endpoint's mode, instance type, storage and scaling, in one list (``asynchronous``: the
    endpoint serves through SageMaker's queue, whose own rules are ``asynchronous.combination_problems``)."""
    out = model_cache_multi_model_only(multi_model, model_cache) + data_capture_single_model_only(
        multi_model, data_capture) + enhanced_metrics_not_multi_model(multi_model, enhanced_metrics)
    known = instance_type_known(instance_type, instance_facts)
    found = instances.lookup(instance_type, instance_facts)
    if known or found is None:
        return out + known  # the other rules need the type's facts
    if multi_model:
        out += multi_model_family(found) + multi_model_single_gpu(found)
    out += gpu_generation(found, triton_version)
    out += volume_size_without_nvme(found, volume_size_gb)
    if scaling is not None:
        out += zero_instances_need_components(scaling.min_instances, asynchronous=asynchronous)
        out += concurrency_single_model_only(multi_model, scaling.concurrent_requests_per_model,
                                              scaling.load_metric)
        for i, schedule in enumerate(scaling.schedules):
            if schedule.min_instances is not None:
                out += zero_instances_need_components(schedule.min_instances, f"scaling.schedules[{i}].min_instances",
                                                      asynchronous)
        out += scalable_instance_type(found)
        out += initial_within_bounds(initial_instances, scaling.min_instances, scaling.max_instances)
        out += gpu_target_on_gpu(found, scaling.gpu_utilization_target)
    return out


def deployment_problems(deployment: Deployment, *, deploy_instances: int, download_timeout_s: int,
                        startup_timeout_s: int, context: str = "") -> list[Problem]:
    """Every rule on a guarded (blue/green) update, in one list."""
    return (traffic_shift_fits(deployment.strategy, deploy_instances, context)
            + execution_timeout_covers(deployment, deploy_instances, download_timeout_s, startup_timeout_s, context))

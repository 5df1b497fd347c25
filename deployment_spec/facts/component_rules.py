"""The rules of inference-component endpoints, one small pure function each.

Plain values in, ``Problem`` list out, with field names relative to what they check (``reservation.gpus``,
``scaling.max_copies``); the spec validator prefixes its paths (``errors.prefixed``) and the CDK construct props
(``triton_constructs.inference_components``) raise the same problems. Sources: the CreateInferenceComponent
and CreateEndpointConfig API references (botocore's sagemaker service model), and
https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-zero-instances.html.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Mapping, Optional, Sequence

from deployment_spec.parsing.errors import Problem, prefixed

# InferenceComponentName: 1-63 characters (CreateInferenceComponent API reference).
COMPONENT_NAME = re.compile(r"[a-zA-Z0-9]([\-a-zA-Z0-9]*[a-zA-Z0-9])?")
MAX_COMPONENT_NAME = 63
# MinMemoryRequiredInMb counts MiB: "if a 32 GiB instance reserved 1024 MB, the MemoryReservation metric
# would be 3.125%" (https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html).
MIB_PER_GIB = 1024


def memory_bounds(memory_mb: int, max_memory_mb: Optional[int]) -> list[Problem]:
    if max_memory_mb is None or max_memory_mb >= memory_mb:
        return []
    return [Problem("max_memory_mb", str(max_memory_mb), f"at least memory_mb ({memory_mb})",
                    "raise max_memory_mb or lower memory_mb")]


def copy_bounds(min_copies: int, max_copies: int) -> list[Problem]:
    if min_copies <= max_copies:
        return []
    return [Problem("max_copies", str(max_copies), f"an integer >= min_copies ({min_copies})",
                    "raise max_copies or lower min_copies")]


def instance_bounds(min_instances: int, max_instances: int) -> list[Problem]:
    if min_instances <= max_instances:
        return []
    return [Problem("max_instances", str(max_instances), f"an integer >= min_instances ({min_instances})",
                    "raise max_instances or lower min_instances")]


def one_per_copy_target(invocations_per_copy: Optional[float], concurrent_requests: Optional[float]) -> list[Problem]:
    """Exactly one per-copy metric to track: target tracking needs one, and two policies would fight."""
    given = [n for n, v in (("invocations_per_copy", invocations_per_copy),
                            ("concurrent_requests_per_copy", concurrent_requests)) if v is not None]
    if len(given) == 1:
        return []
    got = "both" if given else "neither"
    return [Problem("invocations_per_copy", f"{got} of invocations_per_copy and concurrent_requests_per_copy",
                    "exactly one per-copy target (SageMakerInferenceComponentInvocationsPerCopy, or "
                    "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution)",
                    "keep one: invocations per copy per minute, or in-flight requests per copy")]


def copies_within_scaling(copies: int, min_copies: int, max_copies: int) -> list[Problem]:
    if min_copies <= copies <= max_copies:
        return []
    return [Problem("copies", str(copies), f"an integer within scaling.min_copies..scaling.max_copies "
                    f"({min_copies}..{max_copies})", "move copies into that range or widen the range")]


def initial_within_instances(initial: int, min_instances: int, max_instances: int) -> list[Problem]:
    """InitialInstanceCount is at least 1 (the API's minimum) and within the managed bounds."""
    low = max(1, min_instances)
    if low <= initial <= max_instances:
        return []
    return [Problem("initial_instances", str(initial),
                    f"an integer within {low}..managed_instances.max_instances ({low}..{max_instances}); an "
                    "endpoint starts with at least one instance even when it may scale to zero",
                    "move initial_instances into that range or widen managed_instances")]


@dataclasses.dataclass(frozen=True)
class InstanceCapacity:
    """What one instance offers the copies: GPUs, vCPUs and memory (None: not in the instance table)."""

    name: str
    gpus: int
    vcpus: Optional[int]
    memory_gib: Optional[float]


@dataclasses.dataclass(frozen=True)
class Demand:
    """One component's reservation per copy, and a copy count."""

    component: str
    gpus: int
    cpu_cores: Optional[float]
    memory_mb: int
    copies: int


def reservation_fits(demand: Demand, instance: InstanceCapacity) -> list[Problem]:
    """One copy must fit on one instance, or no copy of it is ever placed."""
    out = []
    if demand.gpus > instance.gpus:
        out.append(Problem("reservation.gpus", str(demand.gpus),
                           f"at most the {instance.gpus} GPU(s) of one {instance.name}",
                           "reserve fewer GPUs per copy or choose an instance type with more GPUs"))
    if demand.cpu_cores is not None and instance.vcpus is not None and demand.cpu_cores > instance.vcpus:
        out.append(Problem("reservation.cpu_cores", f"{demand.cpu_cores:g}",
                           f"at most the {instance.vcpus} vCPUs of one {instance.name}",
                           "reserve fewer cores per copy or choose a larger instance type"))
    if instance.memory_gib is not None and demand.memory_mb > instance.memory_gib * MIB_PER_GIB:
        out.append(Problem("reservation.memory_mb", str(demand.memory_mb),
                           f"at most the {instance.memory_gib * MIB_PER_GIB:g} MB ({instance.memory_gib:g} GiB) of one "
                           f"{instance.name}", "reserve less memory per copy or choose a larger instance type"))
    return out


def copies_placeable(demands: Sequence[Demand], instance: InstanceCapacity, instances: int, field: str,
                     bound: str) -> list[Problem]:
    """All ``demands`` together must fit into ``instances`` instances, resource by resource.

    A necessary condition only (a bin-packing of whole GPUs can fail even when the totals fit), so every
    problem it reports is certain: those copies can never all be placed. ``field`` names the copy count
    checked (``copies`` or ``scaling.max_copies``), ``bound`` the instance bound (for the message).
    """
    totals = {
        "GPUs": (sum(d.gpus * d.copies for d in demands), instance.gpus),
        "vCPUs": (sum((d.cpu_cores or 0) * d.copies for d in demands), instance.vcpus),
        "MB of memory": (sum(d.memory_mb * d.copies for d in demands),
                         instance.memory_gib * MIB_PER_GIB if instance.memory_gib is not None else None),
    }
    out = []
    for what, (needed, per_instance) in totals.items():
        if per_instance is None or needed <= per_instance * instances:
            continue
        parts = " + ".join(f"{d.component} {d.copies} x {_per_copy(d, what):g}" for d in demands if d.copies)
        out.append(Problem(field, f"{parts} = {needed:g} {what}",
                           f"at most {per_instance * instances:g} {what}: {bound} ({instances}) x "
                           f"{per_instance:g} per {instance.name}",
                           f"lower {field.rsplit('.', 1)[-1]} or the reservations, or raise {bound}"))
    return out


def placement_problems(initial: Sequence[Demand], maximum: Sequence[Demand], instance: InstanceCapacity,
                       max_instances: int) -> list[Problem]:
    """Every copy fits one instance, and all copies fit ``max_instances`` instances, at creation and at their
    scaling maximum (paths under ``components.``). The totals are reported only when each copy fits alone,
    and the maximum only when the initial count fits: one root cause, one problem."""
    out = []
    for one in initial:
        out += prefixed(f"components.{one.component}", reservation_fits(dataclasses.replace(one, copies=1), instance))
    if out:
        return out
    for field, demands in (("copies", initial), ("scaling.max_copies", maximum)):
        out = copies_placeable(demands, instance, max_instances, f"components.*.{field}",
                               "managed_instances.max_instances")
        if out:
            return out
    return []


def _per_copy(demand: Demand, what: str) -> float:
    return {"GPUs": demand.gpus, "vCPUs": demand.cpu_cores or 0, "MB of memory": demand.memory_mb}[what]


def scale_to_zero(min_instances: int, min_copies: Mapping[str, int]) -> list[Problem]:
    """An endpoint releases its last instance only when no component keeps a copy (min_copies 0 everywhere)."""
    keeping = {name: n for name, n in min_copies.items() if n > 0}
    if min_instances != 0 or not keeping:
        return []
    return [Problem("managed_instances.min_instances", "0",
                    "0 only when every component may reach zero copies (scaling.min_copies: 0); "
                    f"{', '.join(f'{n} keeps {c}' for n, c in keeping.items())}",
                    "set scaling.min_copies: 0 on those components, or min_instances to 1 or more")]


def gpu_models_need_gpus(gpus: int, instance_is_gpu: bool, gpu_groups: bool) -> list[Problem]:
    """A copy without a GPU reservation gets no GPU, so a model whose instance groups ask for one cannot load."""
    if gpus or not instance_is_gpu or not gpu_groups:
        return []
    return [Problem("reservation.gpus", "0", "1 or more for a model with instance_groups of kind gpu",
                    "reserve a GPU, or use instance_groups kind cpu or auto")]


def rolling_update_seconds(batch_percent: int, wait_s: int, copy_start_s: int) -> int:
    """The longest a rolling update takes: each batch starts its copies, then bakes for ``wait_s``."""
    batches = -(-100 // batch_percent)
    return batches * (copy_start_s + wait_s)


def rolling_timeout(max_execution_timeout_s: Optional[int], batch_percent: int, wait_s: int,
                    copy_start_s: int) -> list[Problem]:
    needed = rolling_update_seconds(batch_percent, wait_s, copy_start_s)
    if max_execution_timeout_s is None or max_execution_timeout_s >= needed:
        return []
    batches = -(-100 // batch_percent)
    return [Problem("rolling_update.max_execution_timeout_s", str(max_execution_timeout_s),
                    f"at least {needed} s: {batches} batch(es) of {batch_percent} % x (copy start {copy_start_s} s "
                    f"+ wait_s {wait_s})", "raise it, or leave it out to have it computed")]


def default_model_required(top_level_models: Sequence[str], default_model: Optional[str]) -> list[Problem]:
    """An archive with several top-level models serves ``SAGEMAKER_TRITON_DEFAULT_MODEL_NAME``, which must be one of them.

    With more than one top-level directory and no default, the SageMaker Triton container exits
    ("More than 1 model directory found"; the Triton server's docker/sagemaker/serve script).
    """
    if default_model is None and len(top_level_models) > 1:
        return [Problem("default_model", "nothing", f"one of the archive's models ({', '.join(top_level_models)})",
                        "name the model callers reach (an ensemble, not one of its steps)")]
    if default_model is not None and default_model not in top_level_models:
        return [Problem("default_model", repr(default_model),
                        f"one of the archive's models ({', '.join(top_level_models) or 'none'})",
                        "name a model directory at the top of the archive")]
    return []


def component_name_valid(name: str) -> list[Problem]:
    if len(name) <= MAX_COMPONENT_NAME and COMPONENT_NAME.fullmatch(name):
        return []
    return [Problem("name", f"the inference component name '{name}'",
                    "<project>-<environment>-<endpoint>-<model> of 1-63 letters, digits or '-'",
                    "rename the model or endpoint (no '_') or shorten the project, environment or endpoint name")]

"""``kind: inference-components``: one endpoint, one SageMaker inference component per model.

An inference component is one model archive on a shared endpoint with its own compute reservation
(``ComputeResourceRequirements``), its own copy count scaled by Application Auto Scaling on
``sagemaker:inference-component:DesiredCopyCount``, and its own rolling updates
(CreateInferenceComponent / UpdateInferenceComponent API reference,
https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateInferenceComponent.html). The endpoint's
variant has no model; SageMaker adds and removes instances within ``ManagedInstanceScaling`` to fit the
copies, down to zero instances when every component may reach zero copies
(https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-zero-instances.html).

The rules these settings obey live in ``component_rules`` as plain functions; ``problems`` here calls
them (when the loader parses them, and when they are built in code as the construct's props:
``Validated`` raises PropsError), with the field names as paths the spec validator prefixes.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from deployment_spec.facts import component_rules as rules
from deployment_spec.parsing.errors import Problem, prefixed
from deployment_spec.parsing.parse import Validated, join, meta
from deployment_spec.sections.scheduled_scaling import ScheduledCopies, schedules_problems

# The documented wake-up step policy's cooldown (endpoint-auto-scaling-zero-instances: "Cooldown": 60).
WAKE_COOLDOWN_S = 60


@dataclasses.dataclass(frozen=True)
class Reservation(Validated):
    """What one copy reserves on an instance (``InferenceComponentComputeResourceRequirements``).

    ``gpus`` left out reserves one GPU on a GPU instance type and none on a CPU type. The API takes a
    number of accelerators >= 1 (a float in botocore's model, ``NumberOfAcceleratorDevices``); whole GPUs
    are what a copy can use without a MIG partition layout, which CloudFormation cannot express yet
    (``AcceleratorPartitionType`` is in the API model but not in ``AWS::SageMaker::InferenceComponent``).
    ``memory_mb`` is required by the API (``MinMemoryRequiredInMb``, >= 128).
    """

    gpus: Optional[int] = dataclasses.field(default=None, metadata=meta(minimum=0, maximum=8))
    cpu_cores: Optional[float] = dataclasses.field(default=None, metadata=meta(minimum=0.25))
    memory_mb: int = dataclasses.field(default=1024, metadata=meta(minimum=128))
    max_memory_mb: Optional[int] = dataclasses.field(default=None, metadata=meta(minimum=128))

    def problems(self, path: str) -> list[Problem]:
        return prefixed(path, rules.memory_bounds(self.memory_mb, self.max_memory_mb))

    def gpus_on(self, instance_gpus: int) -> int:
        """The GPUs one copy reserves on an instance type with ``instance_gpus`` GPUs."""
        if self.gpus is not None:
            return self.gpus
        return 1 if instance_gpus else 0


@dataclasses.dataclass(frozen=True)
class CopyScaling(Validated):
    """Target tracking of one component's copy count, on one predefined per-copy metric.

    ``invocations_per_copy`` is ``SageMakerInferenceComponentInvocationsPerCopy`` (invocations per copy per
    minute); ``concurrent_requests_per_copy`` is
    ``SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution`` (in-flight requests per copy,
    sampled every 10 s) (Application Auto Scaling ``MetricType``; DG endpoint-auto-scaling-add-code-define).
    ``min_copies: 0`` lets the component scale to zero; a step scaling policy on
    ``NoCapacityInvocationFailures`` brings a copy back (DG endpoint-auto-scaling-zero-instances).
    """

    min_copies: int = dataclasses.field(default=1, metadata=meta(minimum=0, maximum=1000))
    max_copies: int = dataclasses.field(default=2, metadata=meta(minimum=1, maximum=1000))
    invocations_per_copy: Optional[float] = dataclasses.field(default=None, metadata=meta(minimum=0.001))
    concurrent_requests_per_copy: Optional[float] = dataclasses.field(default=None, metadata=meta(minimum=0.001))
    scale_in_cooldown_s: int = dataclasses.field(default=300, metadata=meta(minimum=0, maximum=86400))
    scale_out_cooldown_s: int = dataclasses.field(default=300, metadata=meta(minimum=0, maximum=86400))
    # Scheduled actions on the component's scalable target (office hours up, nights down).
    schedules: tuple[ScheduledCopies, ...] = ()

    def problems(self, path: str) -> list[Problem]:
        bounds = rules.copy_bounds(self.min_copies, self.max_copies)
        out = prefixed(path, bounds + rules.one_per_copy_target(self.invocations_per_copy,
                                                                self.concurrent_requests_per_copy))
        if bounds:
            return out
        out += schedules_problems(path, self.schedules, self.min_copies, self.max_copies, "scaling.max_copies")
        for i, schedule in enumerate(self.schedules):
            if schedule.min_copies == 0 and not self.scales_to_zero:
                # At zero copies only the wake-up policy (made for min_copies: 0) brings a copy back.
                out.append(Problem(join(path, f"schedules[{i}].min_copies"), "0", "0 only where scaling.min_copies "
                                   "is 0 (that adds the policy that starts a copy when a request finds none)",
                                   "set scaling.min_copies: 0 too, or keep the schedule at 1 or more"))
        return out

    @property
    def scales_to_zero(self) -> bool:
        return self.min_copies == 0

    @property
    def per_copy_target(self) -> tuple[str, float]:
        """(CloudWatch metric, target): ``InvocationsPerCopy`` or ``ConcurrentRequestsPerCopy`` (problems() makes
        sure exactly one is set)."""
        if self.invocations_per_copy is not None:
            return "InvocationsPerCopy", self.invocations_per_copy
        return "ConcurrentRequestsPerCopy", self.concurrent_requests_per_copy or 0.0


class CopyCount:
    """A component's copy count at creation (``copies``) and, with ``scaling``, the range the autoscaler keeps it
    in: the one home of that arithmetic for the spec's ``ComponentSpec`` and the construct's ``ComponentProps``."""

    copies: int
    scaling: Optional[CopyScaling]

    def copy_problems(self) -> list[Problem]:
        if self.scaling is None:
            return []
        return rules.copies_within_scaling(self.copies, self.scaling.min_copies, self.scaling.max_copies)

    @property
    def min_copies(self) -> int:
        return self.scaling.min_copies if self.scaling else self.copies

    @property
    def max_copies(self) -> int:
        return self.scaling.max_copies if self.scaling else self.copies


@dataclasses.dataclass(frozen=True)
class ComponentSpec(CopyCount, Validated):
    """One model (an ensemble with its steps) as an inference component of the endpoint.

    ``copies`` is the copy count at creation (``RuntimeConfig.CopyCount``); with ``scaling`` the
    autoscaler owns the count afterwards. Without ``scaling`` the count is fixed at ``copies``.
    """

    reservation: Reservation = Reservation()
    copies: int = dataclasses.field(default=1, metadata=meta(minimum=0, maximum=1000))
    scaling: Optional[CopyScaling] = None

    def problems(self, path: str) -> list[Problem]:
        return prefixed(path, self.copy_problems())


@dataclasses.dataclass(frozen=True)
class ManagedInstances(Validated):
    """The variant's ``ManagedInstanceScaling``: SageMaker keeps between these many instances to fit the copies.

    ``min_instances: 0`` (``ManagedInstanceScalingMinInstanceCount``, minimum 0) lets an idle endpoint
    release every instance; it takes every component's ``scaling.min_copies`` at 0 as well.
    """

    min_instances: int = dataclasses.field(default=1, metadata=meta(minimum=0, maximum=100))
    max_instances: int = dataclasses.field(default=2, metadata=meta(minimum=1, maximum=100))

    def problems(self, path: str) -> list[Problem]:
        return prefixed(path, rules.instance_bounds(self.min_instances, self.max_instances))


@dataclasses.dataclass(frozen=True)
class RollingUpdate(Validated):
    """How an environment with ``guardrails: true`` updates a component: ``RollingUpdatePolicy`` + auto-rollback.

    Each batch is ``batch_percent`` of the component's copies (``MaximumBatchSize`` of type
    ``CAPACITY_PERCENT``, which the API reference bounds to 5-50 % of the copy count); after each batch
    SageMaker watches the rollback alarms for ``wait_s``. A rollback restores ``rollback_batch_percent`` of
    the old copies at a time (all at once when left out). ``max_execution_timeout_s`` left out is computed to
    cover every batch (``InferenceComponentRollingUpdatePolicy``).
    """

    batch_percent: int = dataclasses.field(default=50, metadata=meta(minimum=5, maximum=50))
    wait_s: int = dataclasses.field(default=300, metadata=meta(minimum=0, maximum=3600))
    max_execution_timeout_s: Optional[int] = dataclasses.field(default=None, metadata=meta(minimum=600, maximum=28800))
    rollback_batch_percent: Optional[int] = dataclasses.field(default=None, metadata=meta(minimum=5, maximum=100))
    auto_rollback: bool = True

    def timeout_s(self, copy_start_s: int) -> int:
        """The execution timeout: as given, else every batch's copy start and wait, in whole minutes (600-28800)."""
        if self.max_execution_timeout_s is not None:
            return self.max_execution_timeout_s
        needed = rules.rolling_update_seconds(self.batch_percent, self.wait_s, copy_start_s)
        return min(max(600, -(-needed // 60) * 60), 28800)

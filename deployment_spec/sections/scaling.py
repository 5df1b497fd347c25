"""An endpoint's ``scaling:``: target tracking on one scalable target per variant."""
from __future__ import annotations

import dataclasses
import enum
from typing import Optional

from deployment_spec.parsing.errors import Problem, describe
from deployment_spec.parsing.parse import Validated, join, meta
from deployment_spec.sections.scheduled_scaling import ScheduledScaling, schedules_problems

DEFAULT_GPU_TARGET = 70.0


class LoadMetric(str, enum.Enum):
    """What the variant's load policy tracks."""

    INVOCATIONS = "invocations"  # SageMakerVariantInvocationsPerInstance, a one-minute metric
    CONCURRENCY = "concurrency"  # SageMakerVariantConcurrentRequestsPerModelHighResolution, every 10 s


@dataclasses.dataclass(frozen=True)
class Scaling(Validated):
    """Target tracking on one scalable target per variant (https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling.html)."""

    # 0 parses, so that the spec can say where zero is allowed (rules.py: inference components only).
    min_instances: int = dataclasses.field(default=1, metadata=meta(minimum=0, maximum=100))
    max_instances: int = dataclasses.field(default=2, metadata=meta(minimum=1, maximum=100))
    max_rps_per_instance: Optional[float] = dataclasses.field(default=None, metadata=meta(minimum=0.001))
    safety_factor: float = dataclasses.field(default=0.5, metadata=meta(minimum=0.05, maximum=1))
    invocations_target: Optional[float] = dataclasses.field(default=None, metadata=meta(minimum=1))
    # Per-GPU percent; defaults to DEFAULT_GPU_TARGET on GPU instance types, none on CPU types.
    gpu_utilization_target: Optional[float] = dataclasses.field(default=None, metadata=meta(minimum=1, maximum=100))
    cpu_utilization_target: Optional[float] = dataclasses.field(default=None, metadata=meta(minimum=1, maximum=100))
    scale_in_cooldown_s: int = dataclasses.field(default=600, metadata=meta(minimum=0, maximum=86400))
    scale_out_cooldown_s: int = dataclasses.field(default=300, metadata=meta(minimum=0, maximum=86400))
    # SageMakerVariantConcurrentRequestsPerModelHighResolution: in-flight requests per model, sampled every
    # 10 s, so a scale-out starts within a minute (SageMaker developer guide, "Define a scaling policy").
    concurrent_requests_per_model: Optional[float] = dataclasses.field(default=None, metadata=meta(minimum=0.1))
    # concurrency without concurrent_requests_per_model: the target is capacity.json's measured concurrency x
    # safety_factor (deployment_spec.cost.capacity.load_target).
    load_metric: LoadMetric = LoadMetric.INVOCATIONS
    schedules: tuple[ScheduledScaling, ...] = ()

    @property
    def on_concurrency(self) -> bool:
        """The load policy tracks concurrency: asked for, or a concurrency target given."""
        return self.load_metric is LoadMetric.CONCURRENCY or self.concurrent_requests_per_model is not None

    def invocations_per_instance_target(self) -> Optional[float]:
        """SageMakerVariantInvocationsPerInstance target: explicit, or max RPS x 60 x safety factor."""
        if self.invocations_target is not None:
            return self.invocations_target
        if self.max_rps_per_instance is not None:
            return self.target_for_rps(self.max_rps_per_instance)
        return None

    def target_for_rps(self, rps: float) -> float:
        """Invocations per instance per minute for a sustained ``rps`` (https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling.html: RPS x 60 x safety factor)."""
        return round(rps * 60 * self.safety_factor, 2)

    def problems(self, path: str) -> list[Problem]:
        if self.min_instances > self.max_instances:
            return [Problem(join(path, "max_instances"), str(self.max_instances),
                            f"an integer >= min_instances ({self.min_instances})",
                            "raise max_instances or lower min_instances")]
        if self.max_rps_per_instance is not None and self.invocations_target is not None:
            return [Problem(join(path, "invocations_target"), describe(self.invocations_target),
                            "either invocations_target or max_rps_per_instance, not both",
                            "keep one: the target is derived as max_rps_per_instance x 60 x safety_factor")]
        if self.load_metric is LoadMetric.CONCURRENCY and self.invocations_per_instance_target() is not None:
            field = "invocations_target" if self.invocations_target is not None else "max_rps_per_instance"
            return [Problem(join(path, field), f"{getattr(self, field):g}", "no invocations target with "
                            "load_metric: concurrency", f"remove {field}, or set load_metric: invocations")]
        if self.concurrent_requests_per_model is not None and self.invocations_per_instance_target() is not None:
            # Two load targets on one variant: each policy scales out on its own reading and in only when both
            # agree, so the instance count follows whichever is tighter and the other never matters.
            return [Problem(join(path, "concurrent_requests_per_model"), describe(self.concurrent_requests_per_model),
                            "one load target: concurrent_requests_per_model, or invocations_target / "
                            "max_rps_per_instance", "keep one; concurrency reacts within a minute, invocations "
                            "per instance within several")]
        return schedules_problems(path, self.schedules, self.min_instances, self.max_instances,
                                  "scaling.max_instances")

"""What a measurement in capacity.json costs per million inferences, kept beside it with what the figure assumes.

`tritonsm bench load --record` and `tritonsm bench recommender --import` price the measured throughput in each
region the spec serves the endpoint in (tritonsm.benchmarking.cost_per_million) and write the figures into the
measurement's ``cost_per_million``: a reviewer of capacity.json sees what a change of capacity costs, with the
price it was computed from (its source and date) and where the throughput was measured, without rerunning
anything. A price the tool does not have is kept as unknown (``usd_per_million`` null) with the reason, never as a
number.

An imported Inference Recommender job also keeps AWS's own figures (``recommender_cost``: ``CostPerHour`` and
``CostPerInference`` of botocore's sagemaker ``RecommendationMetrics``), to compare with ours.

Pure data: the CDK app reads capacity.json for scaling targets and ignores these figures; files written before
them have neither key and read as before.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Optional

LOCAL_CPU = "local CPU"


@dataclasses.dataclass(frozen=True)
class RegionCost:
    """One region's cost per million inferences at the measured throughput, or why there is none."""

    region: str
    instance_type: str            # what the endpoint is served on: the type priced
    measured_on: str              # what the throughput ran on: LOCAL_CPU, an instance type, or the measurement's text
    stand_in: bool                # measured_on is not instance_type: the figure is not the endpoint's cost
    rps_within_sla: float         # requests/s per instance within the latency SLA
    latency_sla_ms: float
    usd_per_million: Optional[float]  # None: unknown (see ``unknown``)
    usd_per_hour: Optional[float] = None  # the on-demand price used
    price_source: Optional[str] = None
    price_date: Optional[str] = None
    unknown: Optional[str] = None  # why there is no figure (PriceTable.missing, or no throughput within the SLA)

    @property
    def cpu_stand_in(self) -> bool:
        return self.stand_in and self.measured_on == LOCAL_CPU


@dataclasses.dataclass(frozen=True)
class RecommenderCost:
    """AWS's own cost figures of an Inference Recommender job's result for one instance type."""

    job: str
    region: str                   # where the job ran (its JobArn): the region AWS priced
    instance_type: str
    cost_per_hour: Optional[float]       # RecommendationMetrics.CostPerHour, as AWS reported it
    cost_per_inference: Optional[float]  # RecommendationMetrics.CostPerInference
    not_reported: Optional[str] = None   # why either is missing


def _build(cls: type, where: str, body: Any) -> Any:
    if not isinstance(body, dict):
        raise ValueError(f"{where}: got {body!r}; a JSON object of {', '.join(f.name for f in dataclasses.fields(cls))} "
                         "is expected")
    try:
        return cls(**body)
    except TypeError as exc:
        raise ValueError(f"{where}: {exc}; the fields are {', '.join(f.name for f in dataclasses.fields(cls))}"
                         ) from None


def region_costs_from_json(where: str, raw: Any) -> tuple[RegionCost, ...]:
    """``cost_per_million`` as written; ValueError naming the entry that is not one."""
    if not isinstance(raw, list):
        raise ValueError(f"{where}: got {raw!r}; a list of per-region cost objects is expected")
    return tuple(_build(RegionCost, f"{where}[{i}]", entry) for i, entry in enumerate(raw))


def recommender_cost_from_json(where: str, raw: Any) -> RecommenderCost:
    built: RecommenderCost = _build(RecommenderCost, where, raw)
    return built


def measured_hardware(measured_on: str) -> str:
    """What a measurement ran on, from its ``measured_on`` text: LOCAL_CPU, the instance type it starts with, or the
    whole text when it names neither (then it counts as a stand-in: nothing shows it ran on the served type)."""
    if measured_on.startswith(LOCAL_CPU):
        return LOCAL_CPU
    first = re.split(r"[ ,]", measured_on, maxsplit=1)[0]
    return first if first.startswith("ml.") else measured_on


def is_stand_in(measured_on: str, instance_type: str) -> bool:
    """A figure for ``instance_type`` from a measurement taken on other hardware: not the endpoint's cost."""
    return measured_hardware(measured_on) != instance_type


"""Measured capacity: the highest requests/s one instance sustains under the latency SLA.

`tritonsm bench load --record` writes ``capacity.json`` (commit it: it is reviewed like
code, and `cdk diff` shows the scaling target it moves). The CDK app derives the
SageMakerVariantInvocationsPerInstance target from it when the spec gives neither
``scaling.invocations_target`` nor ``scaling.max_rps_per_instance``, and with
``scaling.load_metric: concurrency`` the high-resolution concurrency target when the spec gives
no ``scaling.concurrent_requests_per_model``.

An asynchronous endpoint's measurement is its drain rate (`tritonsm bench drain --record`, the file's ``drain``
section): the backlog-per-instance target follows from it and the latency SLA (``backlog_target``).
"""
from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any, Callable, Mapping, Optional

from deployment_spec.sections.endpoint import EndpointSpec
from deployment_spec.cost.measured_cost import (RecommenderCost, RegionCost, recommender_cost_from_json,
                                           region_costs_from_json)

DEFAULT_CAPACITY = pathlib.Path("capacity.json")
SCHEMA_VERSION = 1


class CapacityError(ValueError):
    """capacity.json is unreadable or malformed."""


@dataclasses.dataclass(frozen=True)
class Measurement:
    max_rps_per_instance: float
    latency_sla_ms: float
    p99_ms: float
    measured_on: str          # where the load test ran, e.g. "local CPU (2 cores)" or "ml.g5.xlarge"
    command: str              # how to repeat it
    # Requests in flight per instance in that phase (the load test's concurrency): the concurrency policy's
    # basis. Absent in files recorded before it was measured.
    max_concurrency: Optional[float] = None
    # What this throughput costs per million inferences in each region the spec serves the endpoint in, as priced
    # when it was recorded (deployment_spec.cost.measured_cost). Absent in files recorded before costs were kept.
    cost_per_million: Optional[tuple[RegionCost, ...]] = None
    # An imported Inference Recommender job's own CostPerHour and CostPerInference, to compare with.
    recommender_cost: Optional[RecommenderCost] = None


@dataclasses.dataclass(frozen=True)
class Drain:
    """How fast one instance empties a full queue (``tritonsm bench drain``)."""

    drain_rps_per_instance: float  # answers written per second while requests waited
    concurrency: int               # MaxConcurrentInvocationsPerInstance it ran with
    requests: int                  # queued at once
    measured_on: str
    command: str


@dataclasses.dataclass(frozen=True)
class Target:
    value: float
    source: str               # "spec: invocations_target", "spec: max_rps_per_instance", "capacity.json: ..."
    metric: str = "invocations"  # or "concurrency" (deployment_spec.sections.endpoint.LoadMetric)

    @property
    def measured(self) -> bool:
        return self.source.startswith("capacity.json")


def _read(path: pathlib.Path) -> dict[str, Any]:
    """The file's JSON object (schema checked); an absent file is an empty one."""
    if not path.exists():
        return {"schema": SCHEMA_VERSION, "endpoints": {}}
    try:
        raw = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CapacityError(f"{path}: malformed capacity file ({exc}); rerun `tritonsm bench load --record` "
                            "or delete the file") from None
    if not isinstance(raw, dict):
        raise CapacityError(f"{path}: malformed capacity file (a JSON object is expected); rerun `tritonsm bench "
                            "load --record` or delete the file")
    if raw.get("schema") != SCHEMA_VERSION:
        raise CapacityError(f"{path}: schema {raw.get('schema')!r}, this tool reads {SCHEMA_VERSION}; "
                            "rerun `tritonsm bench load --record`")
    return raw


def _section(path: pathlib.Path, key: str, build: Callable[[str, dict[str, Any]], Any]) -> dict[str, Any]:
    raw = _read(path)
    try:
        return {name: build(f"{key}.{name}", body) for name, body in raw.get(key, {}).items()}
    except (TypeError, AttributeError, ValueError) as exc:
        raise CapacityError(f"{path}: malformed capacity file ({exc}); rerun `tritonsm bench load --record` "
                            "or delete the file") from None


def _measurement(where: str, body: dict[str, Any]) -> Measurement:
    """A measurement as written; its cost figures (nested objects) become their dataclasses."""
    fields = dict(body)
    costs, aws = fields.pop("cost_per_million", None), fields.pop("recommender_cost", None)
    return Measurement(**fields,
                       cost_per_million=None if costs is None else region_costs_from_json(
                           f"{where}.cost_per_million", costs),
                       recommender_cost=None if aws is None else recommender_cost_from_json(
                           f"{where}.recommender_cost", aws))


def _write_section(path: pathlib.Path, key: str, values: Mapping[str, Any]) -> None:
    """Replaces one section, keeping the other (a load test and a drain test of different endpoints)."""
    raw = _read(path)
    # An unmeasured field is left out: a recommender import writes what it wrote before.
    raw[key] = {k: {f: x for f, x in dataclasses.asdict(v).items() if x is not None} for k, v in sorted(values.items())}
    tmp = pathlib.Path(f"{path}.tmp")
    tmp.write_text(json.dumps(raw, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


def load_capacity(path: str | pathlib.Path = DEFAULT_CAPACITY) -> dict[str, Measurement]:
    """Endpoint name -> measurement; an absent file means no measurements."""
    return _section(pathlib.Path(path), "endpoints", _measurement)


def save_capacity(measurements: dict[str, Measurement], path: str | pathlib.Path = DEFAULT_CAPACITY) -> None:
    _write_section(pathlib.Path(path), "endpoints", measurements)


def load_drains(path: str | pathlib.Path = DEFAULT_CAPACITY) -> dict[str, "Drain"]:
    """Endpoint name -> drain measurement of an asynchronous endpoint."""
    return _section(pathlib.Path(path), "drain", lambda _where, body: Drain(**body))


def save_drains(drains: dict[str, "Drain"], path: str | pathlib.Path = DEFAULT_CAPACITY) -> None:
    _write_section(pathlib.Path(path), "drain", drains)


def invocations_target(endpoint: EndpointSpec, capacity: dict[str, Measurement]) -> Optional[Target]:
    """The invocations-per-instance target: the spec wins, then the measurement, else none."""
    sc = endpoint.scaling
    if sc is None or sc.on_concurrency:
        return None
    if sc.invocations_target is not None:
        return Target(sc.invocations_target, "spec: scaling.invocations_target")
    if sc.max_rps_per_instance is not None:
        return Target(sc.target_for_rps(sc.max_rps_per_instance),
                      f"spec: {sc.max_rps_per_instance} rps x 60 x {sc.safety_factor}")
    m = capacity.get(endpoint.name)
    if m is None:
        return None
    return Target(sc.target_for_rps(m.max_rps_per_instance),
                  f"capacity.json: {m.max_rps_per_instance} rps measured on {m.measured_on} x 60 x {sc.safety_factor}")


def concurrency_target(endpoint: EndpointSpec, capacity: dict[str, Measurement]) -> Optional[Target]:
    """The concurrent-requests-per-model target: the spec wins, then the measured concurrency x safety factor."""
    sc = endpoint.scaling
    if sc is None or not sc.on_concurrency:
        return None
    if sc.concurrent_requests_per_model is not None:
        return Target(sc.concurrent_requests_per_model, "spec: scaling.concurrent_requests_per_model", "concurrency")
    m = capacity.get(endpoint.name)
    if m is None or m.max_concurrency is None:
        return None
    # Below 0.1 the policy could not be created (the spec's own minimum); one request in flight is the floor
    # a load test can show anyway.
    value = max(0.1, round(m.max_concurrency * sc.safety_factor, 2))
    return Target(value, f"capacity.json: concurrency {m.max_concurrency:g} within the SLA measured on "
                         f"{m.measured_on} x {sc.safety_factor}", "concurrency")


def load_target(endpoint: EndpointSpec, capacity: dict[str, Measurement]) -> Optional[Target]:
    """The load policy's target, on the metric the spec's scaling tracks."""
    sc = endpoint.scaling
    if sc is not None and sc.on_concurrency:
        return concurrency_target(endpoint, capacity)
    return invocations_target(endpoint, capacity)


def backlog_target(endpoint: EndpointSpec, drains: dict[str, Drain]) -> Optional[Target]:
    """An asynchronous endpoint's backlog-per-instance target: the spec's, else from the measured drain rate.

    A request behind a backlog of B per instance waits about B / drain seconds, so B = drain rate x the latency
    SLA (``asynchronous.oldest_request_age_s``) x the safety factor keeps the oldest request at that share of the
    SLA while the scale-out comes.
    """
    settings = endpoint.asynchronous
    if settings is None:
        return None
    if settings.backlog_per_instance is not None:
        return Target(settings.backlog_per_instance, "spec: asynchronous.backlog_per_instance", "backlog")
    m = drains.get(endpoint.name)
    if m is None:
        return None
    safety = endpoint.scaling.safety_factor if endpoint.scaling else 0.5
    value = max(0.1, round(m.drain_rps_per_instance * settings.oldest_request_age_s * safety, 1))
    return Target(value, f"capacity.json: drain {m.drain_rps_per_instance:g} requests/s per instance at concurrency "
                         f"{m.concurrency} measured on {m.measured_on} x SLA {settings.oldest_request_age_s} s x "
                         f"{safety}", "backlog")

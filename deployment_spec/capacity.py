"""Measured capacity: the highest requests/s one instance sustains under the latency SLA.

`tritonsm bench load --record` writes ``capacity.json`` (commit it: it is reviewed like
code, and `cdk diff` shows the scaling target it moves). The CDK app derives the
SageMakerVariantInvocationsPerInstance target from it when the spec gives neither
``scaling.invocations_target`` nor ``scaling.max_rps_per_instance``, and with
``scaling.load_metric: concurrency`` the high-resolution concurrency target when the spec gives
no ``scaling.concurrent_requests_per_model``.
"""
from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Optional

from deployment_spec.endpoint import EndpointSpec

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


@dataclasses.dataclass(frozen=True)
class Target:
    value: float
    source: str               # "spec: invocations_target", "spec: max_rps_per_instance", "capacity.json: ..."
    metric: str = "invocations"  # or "concurrency" (deployment_spec.endpoint.LoadMetric)

    @property
    def measured(self) -> bool:
        return self.source.startswith("capacity.json")


def load_capacity(path: str | pathlib.Path = DEFAULT_CAPACITY) -> dict[str, Measurement]:
    """Endpoint name -> measurement; an absent file means no measurements."""
    path = pathlib.Path(path)
    if not path.exists():
        return {}
    try:
        raw = json.loads(path.read_text())
        if not isinstance(raw, dict):
            raise TypeError("a JSON object is expected")
        if raw.get("schema") != SCHEMA_VERSION:
            raise CapacityError(f"{path}: schema {raw.get('schema')!r}, this tool reads {SCHEMA_VERSION}; "
                                "rerun `tritonsm bench load --record`")
        return {name: Measurement(**body) for name, body in raw["endpoints"].items()}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise CapacityError(f"{path}: malformed capacity file ({exc}); rerun `tritonsm bench load --record` "
                            "or delete the file") from None


def save_capacity(measurements: dict[str, Measurement], path: str | pathlib.Path = DEFAULT_CAPACITY) -> None:
    body = {"schema": SCHEMA_VERSION,
            # An unmeasured concurrency is left out: a recommender import writes what it wrote before.
            "endpoints": {k: {f: x for f, x in dataclasses.asdict(v).items() if x is not None}
                          for k, v in sorted(measurements.items())}}
    tmp = pathlib.Path(f"{path}.tmp")
    tmp.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


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

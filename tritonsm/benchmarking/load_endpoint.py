"""`tritonsm bench load --endpoint NAME`: load phases against a spec endpoint's own built model.

The capacity a scaling target should come from is the endpoint's own model's, so this drives
the SME tarball `tritonsm build` wrote (served as `tritonsm serve` serves it; ONNX Runtime
models only through the labelled `--cpu-stand-in`) instead of the load test's synthetic model.
Its numbers are still this CPU's, not the endpoint's GPU instance's, and say so.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import types
from typing import Callable, Optional

from tritonsm.benchmarking.load_phases import PhasePlan, best_within_threshold, run_phases


@dataclasses.dataclass(frozen=True)
class EndpointLoad:
    endpoint: str
    model: str                 # what was measured, for capacity.json's measured_on
    phases: list               # PhaseResult, in order
    best_rps: Optional[float]  # highest req/s of a phase within the threshold
    best_p99_ms: Optional[float]
    best_concurrency: Optional[float] = None  # requests in flight per instance in that phase


def measure(spec_path: pathlib.Path, endpoint: str, *, environment: Optional[str], manifest: pathlib.Path,
            input_path: Optional[pathlib.Path], text: str, cpu_stand_in: bool, binary: bool, plan: PhasePlan,
            log: Callable[[str], None], image: Optional[list] = None) -> EndpointLoad:
    from tritonsm.benchmarking.load_local import _spec_endpoint
    from local_endpoint import SingleModelEndpoint, encode_request

    served = _spec_endpoint(types.SimpleNamespace(spec=spec_path, endpoint=endpoint, environment=environment,
                                                  manifest=manifest, input=input_path, text=text,
                                                  image=image))
    request = encode_request(served.tensors, binary=binary)
    with SingleModelEndpoint(served.tarball, default_model=served.default_model, env=served.env,
                             cpu_stand_in=cpu_stand_in, triton_version=served.triton_version) as local:
        for note in local.stand_in_notes:
            log(note)
        log(f"  endpoint {endpoint}: {served.tarball.name} ({local.default_model}) at {local.url}")
        phases = run_phases(local.port, request.body, request.content_type, plan, log)
    best = best_within_threshold(phases)
    what = (f"local CPU ({os.cpu_count()} cores), endpoint {endpoint}'s own model {served.default_model}"
            + (" as a CPU stand-in" if cpu_stand_in else ""))
    return EndpointLoad(endpoint, what, phases, best.rps if best else None, best.p99_ms if best else None,
                        best.concurrency if best else None)


def markdown(result: EndpointLoad) -> str:
    lines = [f"Endpoint {result.endpoint}: {result.model}", "",
             "| users | req/s | invocations/min | p50 ms | p99 ms | errors | within threshold |",
             "|---:|---:|---:|---:|---:|---:|---|"]
    for p in result.phases:
        lines.append(f"| {p.concurrency} | {p.rps:.1f} | {p.invocations_per_minute:.0f} | {p.p50_ms:.1f} | "
                     f"{p.p99_ms:.1f} | {p.errors}/{p.requests} | {'yes' if p.within_threshold else 'no'} |")
    return "\n".join(lines) + "\n"

"""`tritonsm bench load --endpoint E --deployed`: the load phases against the deployed SageMaker endpoint.

The same rising-concurrency phases and stop rule as the local load test (benchmarking.load_phases:
stop after a phase whose p99 or error rate is over the threshold), sent through sagemaker-runtime
InvokeEndpoint with the smoke test's request (benchmarking.smoke). Bounded twice: each phase
lasts at most ``plan.seconds`` and sends at most ``plan.max_requests``. Its best phase is a
measurement of the endpoint's own instance type, which is what capacity.json should hold.

Latency here is what the caller sees (network included), a little above the endpoint's ModelLatency.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Optional

from benchmarking.load_endpoint import EndpointLoad
from benchmarking.load_phases import PhasePlan, PhaseResult, best_within_threshold, phase_result, phases_until_stop
from benchmarking.smoke import DeployedClient, SmokeCase
from local_endpoint.errors import InvokeError
from local_endpoint.payload import encode_request


def measure(endpoint: str, endpoint_name: str, instance_type: str, instances: int, case: SmokeCase,
            plan: PhasePlan, log: Callable[[str], None], *, region: Optional[str] = None,
            client: Any = None) -> EndpointLoad:
    """Phases against ``endpoint_name``; its best RPS is divided by ``instances`` (the variant's count during
    the test) for a per-instance figure. ``client`` is a sagemaker-runtime client (default: a new one)."""
    if client is None:
        import boto3
        from botocore.config import Config

        # One pooled connection per user, and no retries: a throttled request counts as an error.
        client = boto3.client("sagemaker-runtime", region_name=region, config=Config(
            max_pool_connections=max(plan.concurrencies), retries={"max_attempts": 1}))
    target = DeployedClient(endpoint_name, region, client)
    request = encode_request(case.tensors(), binary=True)

    def one(_: int) -> None:
        target.invoke(request, case.target_model)

    log(f"  endpoint {endpoint}: deployed {endpoint_name} ({instance_type}), model {case.model}")
    phases = phases_until_stop(plan, lambda concurrency: run_phase(one, concurrency, plan), log)
    best = best_within_threshold(phases)
    what = f"{instance_type}, deployed endpoint {endpoint_name} ({instances} instance(s); req/s divided by {instances})"
    return EndpointLoad(endpoint, what, phases, best.rps / instances if best else None, best.p99_ms if best else None)


def run_phase(call: Callable[[int], None], concurrency: int, plan: PhasePlan) -> PhaseResult:
    """``concurrency`` users calling ``call`` back to back until the phase's time or request budget is spent."""
    lock = threading.Lock()
    latencies: list[float] = []
    errors: list[str] = []
    issued = [0]
    deadline = time.monotonic() + plan.seconds

    def user() -> None:
        while time.monotonic() < deadline:
            with lock:
                if issued[0] >= plan.max_requests:
                    return
                issued[0] += 1
                number = issued[0]
            started = time.perf_counter()
            try:
                call(number)
                error = None
            except InvokeError as exc:
                error = str(exc)
            except Exception as exc:  # noqa: BLE001  (any failed call is an error of the phase, never a dead user)
                error = f"{type(exc).__name__}: {exc}"
            elapsed_ms = (time.perf_counter() - started) * 1000
            with lock:
                (errors.append(error) if error else latencies.append(elapsed_ms))

    threads = [threading.Thread(target=user, daemon=True) for _ in range(concurrency)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return phase_result(concurrency, latencies, errors, time.perf_counter() - started, plan)

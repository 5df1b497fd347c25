"""`tritonsm bench load --endpoint E --deployed`: the load phases against the deployed SageMaker endpoint.

The same rising-concurrency phases and stop rule as the local load test (tritonsm.benchmarking.load_phases:
stop after a phase whose p99 or error rate is over the threshold), sent through sagemaker-runtime
InvokeEndpoint with the smoke test's request (tritonsm.checks.smoke_requests). Bounded twice: each phase
lasts at most ``plan.seconds`` and sends at most ``plan.max_requests``. Its best phase is a
measurement of the endpoint's own instance type, which is what capacity.json should hold.

Latency here is what the caller sees (network included), a little above the endpoint's ModelLatency.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from tritonsm.benchmarking.load_endpoint import EndpointLoad
from tritonsm.benchmarking.load_phases import CallFailed, PhasePlan, best_within_threshold, phases_until_stop, run_users
from tritonsm.checks.smoke_requests import DeployedClient, SmokeCase
from local_endpoint.client.payload import encode_request
from local_endpoint.errors import InvokeError


def measure(endpoint: str, endpoint_name: str, instance_type: str, instances: int, case: SmokeCase,
            plan: PhasePlan, log: Callable[[str], None], *, region: Optional[str] = None,
            client: Any = None, per: str = "instance") -> EndpointLoad:
    """Phases against ``endpoint_name``; its best RPS is divided by ``instances`` (the variant's count during
    the test, or with ``per="copy"`` the component's copies) for a per-instance (per-copy) figure. ``client`` is
    a sagemaker-runtime client (default: a new one)."""
    if client is None:
        import boto3
        from botocore.config import Config

        # One pooled connection per user, and no retries: a throttled request counts as an error.
        client = boto3.client("sagemaker-runtime", region_name=region, config=Config(
            max_pool_connections=max(plan.concurrencies), retries={"max_attempts": 1}))
    target = DeployedClient(endpoint_name, region, client)
    request = encode_request(case.tensors(), binary=True)

    def one() -> None:
        try:
            target.invoke(request, case.target_model, case.inference_component)
        except InvokeError as exc:
            raise CallFailed(str(exc)) from None

    component = f", inference component {case.inference_component}" if case.inference_component else ""
    log(f"  endpoint {endpoint}: deployed {endpoint_name} ({instance_type}), model {case.model}{component}")
    phases = phases_until_stop(plan, lambda concurrency: run_users(lambda: one, concurrency, plan), log)
    best = best_within_threshold(phases)
    what = f"{instance_type}, deployed endpoint {endpoint_name} ({instances} {per}(s); req/s divided by {instances})"
    return EndpointLoad(endpoint, what, phases, best.rps / instances if best else None, best.p99_ms if best else None,
                        best.concurrency / instances if best else None)


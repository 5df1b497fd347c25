"""Phases of rising concurrency against one local endpoint, like Inference Recommender's traffic phases.

Each phase keeps ``concurrency`` users busy (one keep-alive connection each, a new request as
soon as the last answered) for a bounded time and a bounded number of requests. After a phase
whose p99 exceeds the latency threshold or whose error rate exceeds the limit, the test stops,
as an Inference Recommender job stops at ModelLatencyThresholds. Only 127.0.0.1.
"""
from __future__ import annotations

import dataclasses
import http.client
import threading
import time
from typing import Callable, Optional

from tritonsm.benchmarking import stats

HOST = "127.0.0.1"
REQUEST_TIMEOUT_S = 60  # SageMaker's InvokeEndpoint limit


@dataclasses.dataclass(frozen=True)
class PhasePlan:
    concurrencies: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    seconds: float = 10.0
    max_requests: int = 5000        # per phase, whatever the duration
    latency_threshold_ms: float = 500.0
    max_error_rate: float = 0.01
    must_reach: Optional[int] = 16  # still measured after a stop, flagged, for like-for-like comparisons


@dataclasses.dataclass
class PhaseResult:
    concurrency: int
    requests: int
    errors: int
    seconds: float
    rps: float
    p50_ms: float
    p99_ms: float
    within_threshold: bool
    after_stop: bool = False
    first_error: Optional[str] = None
    load_average: Optional[list[float]] = None  # the machine's load when the phase ended
    # What Triton's own metrics say happened in the phase (load_compare.triton_figures): average batch
    # formed, queue share of the server's request time, queue and compute ms per request.
    triton: Optional[dict[str, float]] = None

    @property
    def invocations_per_minute(self) -> float:
        return self.rps * 60


def run_phases(port: int, body: bytes, content_type: str, plan: PhasePlan,
               log: Callable[[str], None]) -> list[PhaseResult]:
    return phases_until_stop(plan, lambda concurrency: run_phase(port, body, content_type, concurrency, plan), log)


def phases_until_stop(plan: PhasePlan, measure: Callable[[int], PhaseResult],
                      log: Callable[[str], None]) -> list[PhaseResult]:
    """Rising concurrency until a phase misses the threshold; then only ``must_reach``, flagged as after the stop."""
    results: list[PhaseResult] = []
    stopped = False
    for concurrency in plan.concurrencies:
        if stopped and concurrency != plan.must_reach:
            continue
        result = measure(concurrency)
        result.after_stop = stopped
        results.append(result)
        log(f"    concurrency {concurrency:3d}: {result.rps:7.1f} req/s ({result.invocations_per_minute:8.0f}/min), "
            f"p50 {result.p50_ms:7.1f} ms, p99 {result.p99_ms:7.1f} ms, errors {result.errors}/{result.requests}"
            + ("" if result.within_threshold else "  <- over the threshold") + ("  (after stop)" if stopped else ""))
        if not result.within_threshold and not stopped:
            stopped = True
    return results


class CallFailed(Exception):
    """One request of a phase failed; its message is the error the phase records."""


def run_phase(port: int, body: bytes, content_type: str, concurrency: int, plan: PhasePlan) -> PhaseResult:
    """A phase against a local endpoint: each user keeps one keep-alive connection."""
    return run_users(lambda: _HttpUser(port, body, {"Content-Type": content_type}), concurrency, plan)


def run_users(new_user: Callable[[], Callable[[], None]], concurrency: int, plan: PhasePlan) -> PhaseResult:
    """``concurrency`` users, each calling its own ``new_user()`` back to back, until the phase's time or
    request budget is spent. A call that raises is an error of the phase (``CallFailed``: its message),
    never a dead user; a user with a ``close`` method is closed at the end."""
    lock = threading.Lock()
    latencies: list[float] = []
    errors: list[str] = []
    issued = [0]
    deadline = time.monotonic() + plan.seconds

    def user() -> None:
        call = new_user()
        try:
            while time.monotonic() < deadline:
                with lock:
                    if issued[0] >= plan.max_requests:
                        return
                    issued[0] += 1
                started = time.perf_counter()
                try:
                    call()
                    error = None
                except CallFailed as exc:
                    error = str(exc)
                except Exception as exc:  # noqa: BLE001
                    error = f"{type(exc).__name__}: {exc}"
                elapsed_ms = (time.perf_counter() - started) * 1000
                with lock:
                    (errors.append(error) if error else latencies.append(elapsed_ms))
        finally:
            getattr(call, "close", lambda: None)()

    threads = [threading.Thread(target=user, daemon=True) for _ in range(concurrency)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=plan.seconds + REQUEST_TIMEOUT_S + 5)
    return phase_result(concurrency, latencies, errors, time.perf_counter() - started, plan)


class _HttpUser:
    """POST /invocations on one keep-alive connection; a new connection after a failed one."""

    def __init__(self, port: int, body: bytes, headers: dict[str, str]) -> None:
        self._port, self._body, self._headers = port, body, headers
        self._connection = http.client.HTTPConnection(HOST, port, timeout=REQUEST_TIMEOUT_S)

    def __call__(self) -> None:
        try:
            self._connection.request("POST", "/invocations", body=self._body, headers=self._headers)
            response = self._connection.getresponse()
            payload = response.read()
        except Exception:
            self.close()
            self._connection = http.client.HTTPConnection(HOST, self._port, timeout=REQUEST_TIMEOUT_S)
            raise
        if response.status != 200:
            raise CallFailed(f"HTTP {response.status}: {payload[:200]!r}")

    def close(self) -> None:
        self._connection.close()


def phase_result(concurrency: int, latencies: list[float], errors: list[str], elapsed: float,
                 plan: PhasePlan) -> PhaseResult:
    """One phase's figures; it meets the threshold when p99 and the error rate both stay within the plan."""
    done = len(latencies) + len(errors)
    error_rate = len(errors) / done if done else 1.0
    p99 = stats.percentile(latencies, 99)
    within = bool(latencies) and p99 <= plan.latency_threshold_ms and error_rate <= plan.max_error_rate
    return PhaseResult(concurrency, done, len(errors), round(elapsed, 2), len(latencies) / elapsed,
                       stats.percentile(latencies, 50), p99, within, first_error=errors[0] if errors else None,
                       load_average=stats.load_average())


def best_within_threshold(phases: list[PhaseResult]) -> Optional[PhaseResult]:
    """The phase with the highest throughput that met the latency threshold and error limit."""
    ok = [p for p in phases if p.within_threshold and not p.after_stop]
    return max(ok, key=lambda p: p.rps) if ok else None

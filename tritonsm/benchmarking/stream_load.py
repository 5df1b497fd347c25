"""`tritonsm bench stream`: a generating endpoint measured through InvokeEndpointWithResponseStream.

At each concurrency level, ``concurrency`` users send generate requests back to back (the next prompt of the list
each time) until the level's request budget or duration is spent; each request's event arrivals give its figures,
named as vllm's ``bench serve`` and AIPerf name them: TTFT (request sent to the first event with text), ITL (the
gaps between successive events with text), TPOT ((E2EL - TTFT) / (tokens - 1)) and E2EL (request sent to the end
of the stream). Output tokens are the events with text: the generation model (hf_generate.py) sends one text delta
per event and its final flag carries no usage figures, so counting events is counting what it streamed.

The same boto3 call reaches the local runtime of ``tritonsm serve`` (an ``endpoint_url``) and a deployed endpoint;
the stream is read by the client of ``tritonsm invoke --stream`` (local_endpoint.client.invoke_stream).
"""
from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any, Callable, Optional, Union

from local_endpoint.client.invoke_stream import generate_body, stream_sagemaker_endpoint
from local_endpoint.errors import InvokeError
from tritonsm.benchmarking import stats

PERCENTILES = (50, 90, 99)
PROGRESS_S = 5.0   # at most one progress line this often while a level runs
NO_TEXT = "the stream ended without any text_output"

# Sends one request body and calls its second argument with each event's text_output as it arrives.
Send = Callable[[bytes, Callable[[str], None]], None]


@dataclasses.dataclass(frozen=True)
class StreamPlan:
    concurrencies: tuple[int, ...]
    requests: Optional[int]     # per level; None: the level lasts ``seconds`` instead
    seconds: Optional[float]    # requests still in flight at the end finish and count
    warmup: int = 1             # untimed requests before the first level (the first one pays for allocation)


@dataclasses.dataclass(frozen=True)
class Timing:
    """One request that streamed text, in seconds from the moment it was sent."""
    arrivals: tuple[float, ...]   # of each event with text
    e2e: float

    @property
    def ttft(self) -> float:
        return self.arrivals[0]

    @property
    def gaps(self) -> list[float]:
        return [b - a for a, b in zip(self.arrivals, self.arrivals[1:])]

    @property
    def tpot(self) -> Optional[float]:
        tokens = len(self.arrivals)
        return (self.e2e - self.ttft) / (tokens - 1) if tokens > 1 else None


@dataclasses.dataclass
class Level:
    """One concurrency level's figures; milliseconds as ``{"p50": ..., "p90": ..., "p99": ..., "mean": ...}``."""
    concurrency: int
    requests: int
    errors: int
    seconds: float                    # from the level's start to the end of its last request
    requests_per_s: float             # completed requests (errors excluded)
    output_tokens: int                # all streams of the level together
    output_tokens_per_s: float
    ttft_ms: dict[str, float]
    itl_ms: dict[str, float]
    tpot_ms: dict[str, float]
    e2el_ms: dict[str, float]
    first_error: Optional[str] = None


def runtime_client(endpoint_url: Optional[str], region: Optional[str], timeout: float, connections: int) -> Any:
    """A sagemaker-runtime client with one pooled connection per user and no retries: a throttled or failed
    request counts as an error instead of being hidden in a retried one's latency."""
    from local_endpoint.client.local_clients import local_client

    if endpoint_url is not None:
        return local_client("sagemaker-runtime", endpoint_url, region, read_timeout=timeout,
                            max_connections=connections)
    import boto3
    from botocore.config import Config

    return boto3.client("sagemaker-runtime", region_name=region, config=Config(
        max_pool_connections=connections, read_timeout=timeout, retries={"total_max_attempts": 1}))


def sender(endpoint_name: str, client: Any, endpoint_url: Optional[str] = None) -> Send:
    """InvokeEndpointWithResponseStream on ``endpoint_name``; ``endpoint_url`` only words the errors."""
    def send(body: bytes, write: Callable[[str], None]) -> None:
        stream_sagemaker_endpoint(endpoint_name, body, write, endpoint_url=endpoint_url, client=client)
    return send


def bodies(prompts: list[str], parameters: dict[str, object]) -> list[bytes]:
    """The generate JSON of each prompt, the same parameters for all."""
    return [generate_body(prompt, parameters) for prompt in prompts]


def one_request(send: Send, body: bytes) -> Union[Timing, str]:
    """The request's timing, or the message of its failure (never raised: one failed request is not the run's)."""
    arrivals: list[float] = []
    started = time.perf_counter()

    def write(text: str) -> None:
        if text:
            arrivals.append(time.perf_counter() - started)

    try:
        send(body, write)
    except InvokeError as error:
        return str(error)
    except Exception as error:  # noqa: BLE001 - e.g. urllib3's errors mid-stream, which botocore passes on as they are
        return f"{type(error).__name__}: {error}"
    if not arrivals:
        return NO_TEXT
    return Timing(tuple(arrivals), time.perf_counter() - started)


def measure(send: Send, requests: list[bytes], plan: StreamPlan, log: Callable[[str], None],
            progress_s: float = PROGRESS_S) -> list[Level]:
    """Every level of ``plan`` in turn, after the warm-up requests."""
    for index in range(plan.warmup):
        outcome = one_request(send, requests[index % len(requests)])
        if isinstance(outcome, str):
            log(f"    warm-up request failed: {outcome}")
    levels = []
    for concurrency in plan.concurrencies:
        level = run_level(send, requests, concurrency, plan, log, progress_s)
        log(f"    concurrency {concurrency:3d}: {level.output_tokens_per_s:8.1f} output tok/s, "
            f"{level.requests_per_s:6.2f} req/s, TTFT p50 {level.ttft_ms['p50']:7.1f} ms, "
            f"ITL p50 {level.itl_ms['p50']:6.1f} ms, errors {level.errors}/{level.requests}")
        if level.first_error:
            log(f"      first error: {level.first_error}")
        levels.append(level)
    return levels


def run_level(send: Send, requests: list[bytes], concurrency: int, plan: StreamPlan, log: Callable[[str], None],
              progress_s: float = PROGRESS_S) -> Level:
    lock = threading.Lock()
    timings: list[Timing] = []
    errors: list[str] = []
    issued = [0]
    started = time.perf_counter()
    deadline = None if plan.seconds is None else started + plan.seconds
    last_progress = [started]

    def user() -> None:
        while True:
            with lock:
                if (plan.requests is not None and issued[0] >= plan.requests) or (
                        deadline is not None and time.perf_counter() >= deadline):
                    return
                body = requests[issued[0] % len(requests)]
                issued[0] += 1
            outcome = one_request(send, body)
            with lock:
                (errors.append(outcome) if isinstance(outcome, str) else timings.append(outcome))
                now = time.perf_counter()
                if now - last_progress[0] >= progress_s:
                    last_progress[0] = now
                    of = f"/{plan.requests}" if plan.requests is not None else ""
                    log(f"    concurrency {concurrency:3d}: {len(timings) + len(errors)}{of} requests done, "
                        f"{len(errors)} failed, {now - started:.0f} s")

    threads = [threading.Thread(target=user, daemon=True) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return level(concurrency, timings, errors, time.perf_counter() - started)


def level(concurrency: int, timings: list[Timing], errors: list[str], seconds: float) -> Level:
    tokens = sum(len(t.arrivals) for t in timings)
    tpots = [t.tpot for t in timings if t.tpot is not None]
    return Level(concurrency=concurrency, requests=len(timings) + len(errors), errors=len(errors),
                 seconds=seconds, requests_per_s=len(timings) / seconds if seconds > 0 else 0.0,
                 output_tokens=tokens, output_tokens_per_s=tokens / seconds if seconds > 0 else 0.0,
                 ttft_ms=_ms([t.ttft for t in timings]), itl_ms=_ms([g for t in timings for g in t.gaps]),
                 tpot_ms=_ms(tpots), e2el_ms=_ms([t.e2e for t in timings]),
                 first_error=errors[0] if errors else None)


def _ms(seconds: list[float]) -> dict[str, float]:
    """p50/p90/p99 and mean in milliseconds (nan with no values: a level whose every request failed)."""
    values = [s * 1000 for s in seconds]
    figures = {f"p{q}": stats.percentile(values, q) for q in PERCENTILES}
    figures["mean"] = sum(values) / len(values) if values else float("nan")
    return figures

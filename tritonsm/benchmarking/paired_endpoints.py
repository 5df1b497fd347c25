"""Two single-model endpoints on the real Triton server, up at once, measured in turns: a candidate and its
baseline (a task ensemble fed what applications send, and its model step fed the very tensors the ensemble's
first step makes of it).

Each side's tarball is served by its own ``SingleModelEndpoint`` (ONNX Runtime and PyTorch models as the
labelled CPU stand-ins), warmed with up to 20 requests at concurrency 1 as it comes up. Then ``repeats`` rounds:
in each, concurrency by concurrency, one load phase per side (``load_phases.run_phase``, the same request body
every time), the two taking turns in an order rotated each round, so load that lasts longer than a phase lands
on both alike. Per concurrency: the median throughput and p99 of each side over the rounds, the candidate's
throughput over the baseline's paired per round and over the quieter half of the rounds
(``stats.paired_and_quieter``), the errors, and Triton's own counters per model (average batch formed, queue
share, queue and compute ms per request: ``local_endpoint.server.triton_metrics``) of the median round's phase.

Used by benchmarks/raw_text_load.py (raw text vs token ids) and benchmarks/raw_image_load.py (JPEG bytes vs
pixel_values).
"""
from __future__ import annotations

import contextlib
import dataclasses
import pathlib
import statistics
from typing import TYPE_CHECKING, Callable, Mapping

from tritonsm.benchmarking import stats
from tritonsm.benchmarking.load_compare import SERVER_ENV
from tritonsm.benchmarking.load_phases import PhasePlan, PhaseResult, run_phase

if TYPE_CHECKING:
    from local_endpoint.client.payload import EncodedRequest

    # One side: the model archive, the model /invocations serves, the request sent in every phase.
    Side = tuple[pathlib.Path, str, EncodedRequest]

WARMUP_REQUESTS = 20
WARMUP_SECONDS = 20.0
KEYS = ("candidate", "baseline")  # the sides' names in the summary's keys, unless the caller names them


def compare(sides: Mapping[str, Side], plan: PhasePlan, repeats: int, *, keys: tuple[str, str] = KEYS,
            triton_version: str = "25.09", log: Callable[[str], None] | None = None) -> dict:
    """Measures ``sides`` ({label: (tarball, default_model, request)}: the candidate first, then the baseline).

    ``keys`` name the two sides in the summary (``<key>_rps``, ``<key>_p99_ms``, ``steps_<key>``); the result is
    ``{"per_concurrency": [...]}`` (``summarize``).
    """
    from local_endpoint import SingleModelEndpoint
    from local_endpoint.server import triton_metrics

    log = log or _print
    if len(sides) != 2 or len(keys) != 2:
        raise ValueError(f"two sides to compare (the candidate, then the baseline); got {list(sides)}, keys {keys}")
    labels = list(sides)
    runs: dict[str, dict[int, list[PhaseResult]]] = {label: {c: [] for c in plan.concurrencies} for label in labels}
    with contextlib.ExitStack() as stack:
        servers = {}
        for label in labels:
            path, model, request = sides[label]
            servers[label] = stack.enter_context(SingleModelEndpoint(path, default_model=model, env=SERVER_ENV,
                                                                     cpu_stand_in=True, triton_version=triton_version))
            warm = dataclasses.replace(plan, seconds=WARMUP_SECONDS, max_requests=WARMUP_REQUESTS)
            run_phase(servers[label].port, request.body, request.content_type, 1, warm)
        for round_index in range(repeats):
            for concurrency in plan.concurrencies:
                order = labels[round_index % 2:] + labels[:round_index % 2]
                for label in order:
                    request = sides[label][2]
                    before = triton_metrics.scrape(servers[label].metrics_url)
                    result = run_phase(servers[label].port, request.body, request.content_type, concurrency, plan)
                    steps = triton_metrics.since(triton_metrics.scrape(servers[label].metrics_url), before)
                    result.triton = {model: triton_metrics.figures(c) for model, c in steps.items()}
                    runs[label][concurrency].append(result)
                    log(f"round {round_index + 1}, concurrency {concurrency}, {label}: {result.rps:.1f} req/s, "
                        f"p99 {result.p99_ms:.1f} ms, errors {result.errors}")
    return summarize(runs, plan, keys)


def summarize(runs: Mapping[str, Mapping[int, list[PhaseResult]]], plan: PhasePlan,
              keys: tuple[str, str] = KEYS) -> dict:
    """Per concurrency: each side's median req/s and p99, the paired ratio (candidate / baseline) and over the
    quieter half of the rounds (ranked by the candidate's phase load), errors, the median round's step figures."""
    (candidate_label, baseline_label), (cand, base) = list(runs), keys
    out: dict = {"per_concurrency": []}
    for concurrency in plan.concurrencies:
        candidate, baseline = runs[candidate_label][concurrency], runs[baseline_label][concurrency]
        measured = [(c, b) for c, b in zip(candidate, baseline) if b.rps]
        ratios = [c.rps / b.rps for c, b in measured]
        loads = [(c.load_average or [0.0])[0] for c, _ in measured]
        paired, quieter = stats.paired_and_quieter(ratios, loads)
        out["per_concurrency"].append({
            "concurrency": concurrency,
            f"{cand}_rps": statistics.median(c.rps for c in candidate),
            f"{base}_rps": statistics.median(b.rps for b in baseline),
            f"{cand}_p99_ms": statistics.median(c.p99_ms for c in candidate),
            f"{base}_p99_ms": statistics.median(b.p99_ms for b in baseline),
            "ratio_paired": round(paired, 3), "ratio_quieter_half": round(quieter, 3),
            "errors": sum(r.errors for r in candidate + baseline),
            f"steps_{cand}": candidate[len(candidate) // 2].triton, f"steps_{base}": baseline[len(baseline) // 2].triton})
    return out


def _print(line: str) -> None:
    print(line, flush=True)

"""Load-test configurations side by side on the local endpoint, interleaved, and compared.

Every configuration gets its own server (started like the SageMaker container, single-model
mode), all up at once: an idle server costs next to no CPU. Then, concurrency by concurrency,
``repeats`` rounds in which the configurations take turns, in an order rotated each round (as
runtime_compare does with engines), so background load lands on all of them alike. The
1-minute load average is recorded with every phase. Reported per configuration: invocations per
minute, p50/p99 (medians over the rounds), errors, the highest throughput within the latency
threshold; per dynamic-batching pair: the gain as a ratio of medians, paired (median of the
per-round ratios) and over the quieter half of the rounds (stats.paired_and_quieter).
"""
from __future__ import annotations

import contextlib
import dataclasses
import pathlib
import time
from typing import TYPE_CHECKING, Callable, Optional

from deployment_spec.facts.triton_metrics import DEFAULT_METRICS_PORT
from tritonsm.benchmarking import stats
from tritonsm.benchmarking.load_model import CONFIGS, MODEL_NAME, LoadConfig, request_tensor, write_tarball
from tritonsm.benchmarking.load_phases import PhasePlan, PhaseResult, best_within_threshold, run_phase

if TYPE_CHECKING:
    from local_endpoint.server.triton_metrics import ModelCounters

WARMUP_REQUESTS = 20
# Quiet server log: verbose logging costs CPU that the model needs on a small machine. Triton's metrics on,
# as the spec's container turns them on (the local launcher gives each server a free metrics port).
SERVER_ENV = {"SAGEMAKER_TRITON_LOG_VERBOSE": "false", "SAGEMAKER_TRITON_ALLOW_METRICS": "true",
              "SAGEMAKER_TRITON_METRICS_PORT": str(DEFAULT_METRICS_PORT)}
TRITON_FIGURES = ("average_batch", "queue_share", "queue_ms", "compute_ms")
GAIN_CONCURRENCY = 16


def compare(config_names: list[str], plan: PhasePlan, work: pathlib.Path, log: Callable[[str], None],
            binary: bool = True, repeats: int = 1) -> dict:
    from local_endpoint import SingleModelEndpoint, encode_request
    from local_endpoint.server import triton_metrics

    request = encode_request([request_tensor()], binary=binary)
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        endpoints = {}
        for name in config_names:
            config = CONFIGS[name]
            log(f"[{name}] {config.describe()}: starting the local endpoint")
            endpoints[name] = stack.enter_context(SingleModelEndpoint(write_tarball(config, work),
                                                                      default_model=MODEL_NAME, env=SERVER_ENV))
            warm = dataclasses.replace(plan, seconds=30, max_requests=WARMUP_REQUESTS)
            run_phase(endpoints[name].port, request.body, request.content_type, 1, warm)
        def measure(name: str, concurrency: int) -> PhaseResult:
            url = endpoints[name].metrics_url
            before = triton_metrics.scrape(url) if url else {}
            result = run_phase(endpoints[name].port, request.body, request.content_type, concurrency, plan)
            if url:
                result.triton = triton_figures(triton_metrics.since(triton_metrics.scrape(url), before))
            return result

        rounds = interleaved_phases(config_names, plan, repeats, measure, log)
        for endpoint in endpoints.values():
            endpoint.check_running()
    configs = {name: _summary(CONFIGS[name], [median_phase(runs) for runs in rounds[name]], rounds[name])
               for name in config_names}
    return {"model": f"{MODEL_NAME} (torch Transformer encoder in the Python backend)",
            "payload": "binary+json" if binary else "JSON", "repeats": repeats,
            "plan": dataclasses.asdict(plan), "configs": configs, "gains": _gains(configs),
            "seconds": round(time.monotonic() - started, 1)}


def interleaved_phases(names: list[str], plan: PhasePlan, repeats: int,
                       measure: Callable[[str, int], PhaseResult],
                       log: Callable[[str], None]) -> dict[str, list[list[PhaseResult]]]:
    """name -> one list of ``repeats`` phase results per concurrency measured, in plan order.

    Round r of the k-th concurrency runs the configurations starting at index (k + r) mod n, so
    none always goes first. A configuration stops rising after a concurrency where any round
    missed the threshold; it is still measured at ``plan.must_reach``, flagged as after the stop.
    """
    out: dict[str, list[list[PhaseResult]]] = {name: [] for name in names}
    stopped: set[str] = set()
    for k, concurrency in enumerate(plan.concurrencies):
        active = [n for n in names if n not in stopped or concurrency == plan.must_reach]
        if not active:
            break
        runs: dict[str, list[PhaseResult]] = {n: [] for n in active}
        for r in range(repeats):
            shift = (k + r) % len(active)
            for name in active[shift:] + active[:shift]:
                result = measure(name, concurrency)
                result.after_stop = name in stopped
                runs[name].append(result)
        for name in active:
            out[name].append(runs[name])
            mid = median_phase(runs[name])
            log(f"[{name}] concurrency {concurrency:3d}: {mid.rps:7.1f} req/s, p50 {mid.p50_ms:7.1f} ms, p99 "
                f"{mid.p99_ms:7.1f} ms, errors {mid.errors}/{mid.requests}{_triton_text(mid.triton)} (median of "
                f"{repeats}; load {', '.join(_load_text(x) for x in runs[name])})" + ("" if mid.within_threshold else
                                                                      "  <- over the threshold")
                + ("  (after stop)" if mid.after_stop else ""))
            if not mid.within_threshold:
                stopped.add(name)
    return out


def median_phase(runs: list[PhaseResult]) -> PhaseResult:
    """One concurrency's rounds as one phase: medians of req/s, p50 and p99; summed requests and errors.

    Within the threshold only if every round was, so one bad round is not hidden by the others.
    """
    first = runs[0]
    return dataclasses.replace(
        first, requests=sum(r.requests for r in runs), errors=sum(r.errors for r in runs),
        seconds=round(sum(r.seconds for r in runs), 2), rps=stats.median([r.rps for r in runs]),
        p50_ms=stats.median([r.p50_ms for r in runs]), p99_ms=stats.median([r.p99_ms for r in runs]),
        within_threshold=all(r.within_threshold for r in runs),
        first_error=next((r.first_error for r in runs if r.first_error), None),
        load_average=max((r.load_average for r in runs if r.load_average), key=lambda x: x[0], default=None),
        triton={k: stats.median([r.triton[k] for r in runs if r.triton]) for k in TRITON_FIGURES}
        if all(r.triton for r in runs) else None)


def triton_figures(counters: dict[str, "ModelCounters"]) -> Optional[dict[str, float]]:
    """The load model's figures for one phase, from Triton's counters (None when it saw no request)."""
    from local_endpoint.server import triton_metrics

    model = counters.get(MODEL_NAME)
    return triton_metrics.figures(model) if model is not None else None


def explain(figures: dict[str, float], concurrency: int) -> str:
    """What the figures mean for the configuration, in one sentence."""
    from local_endpoint.server import triton_metrics

    return f"at concurrency {concurrency}: {triton_metrics.meaning(figures)}"


def _triton_text(figures: Optional[dict[str, float]]) -> str:
    if not figures:
        return ""
    return f", batch {figures['average_batch']:.1f}, queue {figures['queue_share']:.0%}"


def _load_text(phase: PhaseResult) -> str:
    return f"{phase.load_average[0]:.2f}" if phase.load_average else "-"


def _summary(config: LoadConfig, phases: list[PhaseResult], rounds: list[list[PhaseResult]]) -> dict:
    best = best_within_threshold(phases)
    return {
        "description": config.describe(), "dynamic_batching": config.dynamic_batching,
        "instances": config.instances,
        "phases": [dict(dataclasses.asdict(p), invocations_per_minute=p.invocations_per_minute,
                        rounds=[{"rps": r.rps, "p50_ms": r.p50_ms, "p99_ms": r.p99_ms, "errors": r.errors,
                                 "requests": r.requests, "load_average": r.load_average} for r in runs])
                   for p, runs in zip(phases, rounds)],
        "max_rps_within_threshold": round(best.rps, 2) if best else None,
        "at_concurrency": best.concurrency if best else None,
        "p50_ms_at_max": round(best.p50_ms, 1) if best else None,
        "p99_ms_at_max": round(best.p99_ms, 1) if best else None,
        "invocations_per_minute_at_max": round(best.invocations_per_minute) if best else None,
        "errors": sum(p.errors for p in phases),
        "requests": sum(p.requests for p in phases),
    }


def _phase_at(summary: dict, concurrency: int) -> Optional[dict]:
    return next((p for p in summary["phases"] if p["concurrency"] == concurrency), None)


def _gains(configs: dict) -> list[dict]:
    """Dynamic batching on vs off, same instance count, at concurrency 16.

    ``gain``: ratio of the median req/s; ``paired_gain``: median of the per-round ratios (the two
    ran in the same round, minutes apart at most); ``quieter_half_gain``: that median over the
    half of the rounds with the lowest load (a round's load: the higher of the two phases').
    """
    out = []
    for without, with_ in (("pt-base", "pt-db"), ("pt-ig", "pt-ig-db")):
        if without in configs and with_ in configs:
            a, b = _phase_at(configs[without], GAIN_CONCURRENCY), _phase_at(configs[with_], GAIN_CONCURRENCY)
            gain = {"baseline": without, "batched": with_, "concurrency": GAIN_CONCURRENCY,
                    "baseline_rps": a and a["rps"], "batched_rps": b and b["rps"],
                    "gain": round(b["rps"] / a["rps"], 2) if a and b and a["rps"] else None,
                    "paired_gain": None, "quieter_half_gain": None, "round_loads": []}
            rounds = list(zip(a.get("rounds") or [a], b.get("rounds") or [b])) if a and b else []
            if rounds and all(x["rps"] for x, _ in rounds):
                ratios = [y["rps"] / x["rps"] for x, y in rounds]
                loads = [stats.loudest([(x.get("load_average") or [float("nan")])[0],
                                        (y.get("load_average") or [float("nan")])[0]]) for x, y in rounds]
                paired, quieter = stats.paired_and_quieter(ratios, loads)
                gain.update(paired_gain=round(paired, 2), quieter_half_gain=round(quieter, 2), round_loads=loads)
            out.append(gain)
    return out


def best_config(result: dict) -> Optional[str]:
    scored = [(c["max_rps_within_threshold"], name) for name, c in result["configs"].items()
              if c["max_rps_within_threshold"]]
    return max(scored)[1] if scored else None


def markdown(result: dict) -> str:
    plan = result["plan"]
    lines = [
        f"Model: {result['model']}; payload {result['payload']}; phases at concurrency "
        f"{', '.join(map(str, plan['concurrencies']))}, {plan['seconds']:g} s each (at most {plan['max_requests']} "
        f"requests); stop after a phase with p99 > {plan['latency_threshold_ms']:g} ms or error rate > "
        f"{plan['max_error_rate']:.0%}. {result.get('repeats', 1)} interleaved round(s) per concurrency "
        "(configurations take turns, order rotated each round); figures are medians over the rounds.",
        "",
        "| config | dynamic batching | instances | max req/s within threshold | invocations/min | at concurrency "
        "| p50 ms | p99 ms | errors |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, c in result["configs"].items():
        def fmt(v, spec=""):
            return "-" if v is None else format(v, spec)
        lines.append(f"| {name} | {'yes' if c['dynamic_batching'] else 'no'} | {c['instances']} | "
                     f"{fmt(c['max_rps_within_threshold'], '.1f')} | {fmt(c['invocations_per_minute_at_max'])} | "
                     f"{fmt(c['at_concurrency'])} | {fmt(c['p50_ms_at_max'])} | {fmt(c['p99_ms_at_max'])} | "
                     f"{c['errors']}/{c['requests']} |")
    lines += ["", "Per phase, with what Triton's own metrics say (average batch formed = inferences / executions; "
              "queue = share of the server's request time spent waiting; ms per request):", "",
              "| config | concurrency | req/s | p50 ms | p99 ms | errors | avg batch | queue | queue ms | compute ms "
              "| load (1 min) per round |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, c in result["configs"].items():
        for p in c["phases"]:
            flag = "" if p["within_threshold"] else " (over threshold)"
            t = p.get("triton") or {}
            triton = (f"{t['average_batch']:.2f} | {t['queue_share']:.0%} | {t['queue_ms']:.1f} | {t['compute_ms']:.1f}"
                      if t else "- | - | - | -")
            lines.append(f"| {name} | {p['concurrency']}{' (after stop)' if p['after_stop'] else ''} | "
                         f"{p['rps']:.1f} | {p['p50_ms']:.1f} | {p['p99_ms']:.1f}{flag} | {p['errors']} | {triton} | "
                         f"{', '.join(_load_cell(r) for r in p.get('rounds') or [p])} |")
    lines.append("")
    for name, c in result["configs"].items():
        measured = [p for p in c["phases"] if p.get("triton")]
        if measured:
            top = max(measured, key=lambda p: p["concurrency"])
            lines.append(f"- {name} ({c['description']}): {explain(top['triton'], top['concurrency'])}.")
    for g in result["gains"]:
        def x(v):
            return "n/a" if v is None else f"{v:.2f}x"
        lines.append(f"\nDynamic batching gain at concurrency {g['concurrency']}: {g['batched']} vs {g['baseline']} = "
                     f"{x(g['gain'])} ({g['batched_rps'] or 0:.1f} vs {g['baseline_rps'] or 0:.1f} req/s); paired "
                     f"{x(g.get('paired_gain'))}, quieter half of the rounds {x(g.get('quieter_half_gain'))}.")
    if result.get("cost"):
        from tritonsm.benchmarking import load_cost

        lines += load_cost.markdown(result["cost"])
    return "\n".join(lines) + "\n"


def _load_cell(phase: dict) -> str:
    return f"{phase['load_average'][0]:.2f}" if phase.get("load_average") else "-"

"""Load-test configurations one after another on the local endpoint and compare them.

Each configuration gets its own server (started like the SageMaker container, single-model
mode), a short warm-up, then the traffic phases. Reported per configuration: invocations per
minute, p50/p99, errors, and the highest throughput within the latency threshold.
"""
from __future__ import annotations

import dataclasses
import pathlib
import time
from typing import Callable, Optional

from benchmarking.load_model import CONFIGS, MODEL_NAME, LoadConfig, request_tensor, write_tarball
from benchmarking.load_phases import PhasePlan, PhaseResult, best_within_threshold, run_phase, run_phases

WARMUP_REQUESTS = 20
# Quiet server log: verbose logging costs CPU that the model needs on a small machine.
SERVER_ENV = {"SAGEMAKER_TRITON_LOG_VERBOSE": "false"}
GAIN_CONCURRENCY = 16


def compare(config_names: list[str], plan: PhasePlan, work: pathlib.Path, log: Callable[[str], None],
            binary: bool = True) -> dict:
    from local_endpoint import SingleModelEndpoint, encode_request

    request = encode_request([request_tensor()], binary=binary)
    started = time.monotonic()
    configs = {}
    for name in config_names:
        config = CONFIGS[name]
        tarball = write_tarball(config, work)
        log(f"[{name}] {config.describe()}: starting the local endpoint")
        with SingleModelEndpoint(tarball, default_model=MODEL_NAME, env=SERVER_ENV) as endpoint:
            warm = dataclasses.replace(plan, seconds=30, max_requests=WARMUP_REQUESTS)
            run_phase(endpoint.port, request.body, request.content_type, 1, warm)
            phases = run_phases(endpoint.port, request.body, request.content_type, plan, log)
            endpoint.check_running()
        configs[name] = _summary(config, phases)
    return {"model": f"{MODEL_NAME} (torch Transformer encoder in the Python backend)",
            "payload": "binary+json" if binary else "JSON",
            "plan": dataclasses.asdict(plan), "configs": configs, "gains": _gains(configs),
            "seconds": round(time.monotonic() - started, 1)}


def _summary(config: LoadConfig, phases: list[PhaseResult]) -> dict:
    best = best_within_threshold(phases)
    return {
        "description": config.describe(), "dynamic_batching": config.dynamic_batching,
        "instances": config.instances,
        "phases": [dict(dataclasses.asdict(p), invocations_per_minute=p.invocations_per_minute) for p in phases],
        "max_rps_within_threshold": round(best.rps, 2) if best else None,
        "at_concurrency": best.concurrency if best else None,
        "p50_ms_at_max": round(best.p50_ms, 1) if best else None,
        "p99_ms_at_max": round(best.p99_ms, 1) if best else None,
        "invocations_per_minute_at_max": round(best.invocations_per_minute) if best else None,
        "errors": sum(p.errors for p in phases),
        "requests": sum(p.requests for p in phases),
    }


def _rps_at(summary: dict, concurrency: int) -> Optional[float]:
    return next((p["rps"] for p in summary["phases"] if p["concurrency"] == concurrency), None)


def _gains(configs: dict) -> list[dict]:
    """Dynamic batching on vs off, same instance count, at concurrency 16."""
    out = []
    for without, with_ in (("pt-base", "pt-db"), ("pt-ig", "pt-ig-db")):
        if without in configs and with_ in configs:
            a, b = _rps_at(configs[without], GAIN_CONCURRENCY), _rps_at(configs[with_], GAIN_CONCURRENCY)
            out.append({"baseline": without, "batched": with_, "concurrency": GAIN_CONCURRENCY,
                        "baseline_rps": a, "batched_rps": b,
                        "gain": round(b / a, 2) if a and b else None})
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
        f"{plan['max_error_rate']:.0%}.",
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
    lines += ["", "| config | concurrency | req/s | p50 ms | p99 ms | errors | load (1 min) |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for name, c in result["configs"].items():
        for p in c["phases"]:
            flag = "" if p["within_threshold"] else " (over threshold)"
            lines.append(f"| {name} | {p['concurrency']}{' (after stop)' if p['after_stop'] else ''} | "
                         f"{p['rps']:.1f} | {p['p50_ms']:.1f} | {p['p99_ms']:.1f}{flag} | {p['errors']} | "
                         f"{(p.get('load_average') or ['-'])[0]} |")
    for g in result["gains"]:
        gain = "n/a" if g["gain"] is None else f"{g['gain']:.2f}x"
        lines.append(f"\nDynamic batching gain at concurrency {g['concurrency']}: {g['batched']} vs {g['baseline']} = "
                     f"{gain} ({g['batched_rps'] or 0:.1f} vs {g['baseline_rps'] or 0:.1f} req/s).")
    return "\n".join(lines) + "\n"

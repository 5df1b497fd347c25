"""Eager PyTorch vs ONNX Runtime on this CPU, measured side by side in one run.

For each model and batch size, every engine warms up, then the engines take turns: repeat r
runs one timed block per engine, in an order rotated each repeat, so a burst of background
load lands on all engines alike. A block is K calls (K chosen from the warm-up so a block lasts
about ``block_seconds``); the headline number is the median over repeats of the block's mean
latency. p50/p99 are over all calls. The 1-minute load average is recorded with every block; a
repeat's load is the highest of its blocks', and the speedup is also given over the quieter half
of the repeats (stats.paired_and_quieter).
"""
from __future__ import annotations

import dataclasses
import math
import multiprocessing
import os
import pathlib
import platform
import time
from typing import Any, Callable

from tritonsm.benchmarking import stats
from tritonsm.benchmarking.runtime_worker import EAGER, ONNXRUNTIME, EngineSpec, serve

EAGER_LABEL, FP32_LABEL, INT8_LABEL, RAW_LABEL = ("pytorch-eager", "onnxruntime-fp32", "onnxruntime-int8",
                                                   "onnxruntime-fp32-unoptimized")
BUILD_RUNTIME_LABEL = "onnxruntime-fp32-build-ort"  # the same shipped file in this machine's newer ONNX Runtime
MAX_CALLS_PER_BLOCK = 50
PAUSE_BETWEEN_BLOCKS_S = 0.05  # lets the previous engine's spinning thread pool go idle
# Issue 6 targets at batch 1: (recipe, engine) -> minimum speedup over eager PyTorch.
TARGETS = {("resnet50", FP32_LABEL): 1.5, ("bert-base", FP32_LABEL): 1.2, ("bert-base", INT8_LABEL): 1.8}


@dataclasses.dataclass
class Settings:
    batches: list[int]
    repeats: int = 5
    warmup: int = 3
    threads: int = os.cpu_count() or 1
    block_seconds: float = 1.0
    unoptimized: bool = False
    build_runtime: bool = False  # also time the shipped graph in the build machine's ONNX Runtime


@dataclasses.dataclass
class Cell:
    model: str
    recipe: str
    engine: str
    batch: int
    median_ms: float
    p50_ms: float
    p99_ms: float
    throughput_per_s: float      # samples per second at the median latency
    speedup: float               # eager median / this median, same batch
    paired_speedup: float        # median over repeats of eager block mean / this block mean
    calls: int
    block_means_ms: list[float]
    block_loads: list[float] = dataclasses.field(default_factory=list)  # 1-min load average after each block
    quieter_half_speedup: float = math.nan  # the paired speedup over the quieter half of the repeats
    peak_rss_mib: float = math.nan
    model_rss_mib: float = math.nan


def compare(spec, names: list[str], int8_models: set[str], settings: Settings, work: pathlib.Path,
            log: Callable[[str], None]) -> dict[str, Any]:
    from tritonsm.benchmarking.runtime_prepare import prepare
    from deployment_spec.facts.serving_runtimes import runtime
    from model_build.verification import side_env

    started = time.monotonic()
    serving = runtime(spec.triton_version)
    env = side_env.ensure("onnxruntime", serving.onnxruntime_wheel, log)
    result: dict[str, Any] = {"machine": machine(), "settings": dataclasses.asdict(settings), "models": []}
    # Every ONNX Runtime engine runs the image's release unless labelled otherwise.
    result["serving"] = {"triton_version": spec.triton_version, "onnxruntime": env.version}
    result["machine"]["load_average_start"] = stats.load_average()
    for name in names:
        model = spec.models[name]
        batches = [b for b in settings.batches if b <= max(model.max_batch_size, 1)]
        log(f"[{name}] recipe {model.source.recipe}, batch sizes {batches}: preparing ONNX files")
        prepared = prepare(model, spec.root, work / name, batches, name in int8_models, serving, log)
        engines = _engines(spec, name, prepared, settings, env)
        cells, peaks, outputs = _measure(name, model.source.recipe, engines, prepared.feeds, settings, log)
        result["models"].append({
            "name": name, "recipe": model.source.recipe, "sequence_length": model.sequence_length,
            "optimize": prepared.optimize_report, "quantize": prepared.quantize_report,
            "shipped_graph": prepared.parity["graph"], "rejected": prepared.parity.get("rejected", {}),
            "parity_fp32_vs_pytorch": prepared.parity, "agreement": _agreement(outputs),
            "memory": peaks, "cells": [dataclasses.asdict(c) for c in cells]})
    result["machine"]["load_average_end"] = stats.load_average()
    result["targets"] = check_targets(result)
    result["seconds"] = round(time.monotonic() - started, 1)
    return result


def _engines(spec, name: str, prepared, settings: Settings, env) -> list[EngineSpec]:
    out = [EngineSpec(EAGER_LABEL, EAGER, settings.threads, spec_path=str(spec.path), model_name=name)]
    serving = {"ort_site": str(env.site_dir), "ort_version": env.version}
    if settings.unoptimized:
        out.append(EngineSpec(RAW_LABEL, ONNXRUNTIME, settings.threads, onnx_path=str(prepared.exported), **serving))
    out.append(EngineSpec(FP32_LABEL, ONNXRUNTIME, settings.threads, onnx_path=str(prepared.optimized), **serving))
    if settings.build_runtime:
        out.append(EngineSpec(BUILD_RUNTIME_LABEL, ONNXRUNTIME, settings.threads, onnx_path=str(prepared.optimized)))
    if prepared.int8 is not None:
        out.append(EngineSpec(INT8_LABEL, ONNXRUNTIME, settings.threads, onnx_path=str(prepared.int8), **serving))
    return out


class _Worker:
    def __init__(self, engine: EngineSpec) -> None:
        ctx = multiprocessing.get_context("spawn")  # a clean process: no torch/ORT state from the parent
        self.engine = engine
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=serve, args=(child, engine), daemon=True)
        self.process.start()

    def call(self, *command: Any) -> dict:
        self.conn.send(command)
        status, body = self.conn.recv()
        if status != "ok":
            raise RuntimeError(f"{self.engine.label}: {body}")
        return body

    def close(self) -> dict:
        try:
            return self.call("stop")
        finally:
            self.process.join(timeout=30)
            if self.process.is_alive():
                self.process.kill()


def _measure(name: str, recipe: str, engines: list[EngineSpec], feeds: dict, settings: Settings,
             log: Callable[[str], None]):
    workers = [_Worker(e) for e in engines]
    try:
        baseline = {}
        for w in workers:  # one at a time: loading is CPU-heavy and would disturb the others
            baseline[w.engine.label] = w.call("load")["rss_before_load_mib"]
        cells, outputs = [], {}
        for batch, feed in feeds.items():
            calls, latencies, blocks, loads = {}, {}, {}, {}
            for w in workers:
                warm = w.call("run", feed, settings.warmup)
                per_call = stats.median(warm["latencies_ms"][1:] or warm["latencies_ms"]) / 1000
                calls[w.engine.label] = max(1, min(MAX_CALLS_PER_BLOCK, round(settings.block_seconds / per_call)))
                latencies[w.engine.label], blocks[w.engine.label], loads[w.engine.label] = [], [], []
                outputs.setdefault(w.engine.label, []).append(warm["output"])
            for rep in range(settings.repeats):
                order = workers[rep % len(workers):] + workers[:rep % len(workers)]
                for w in order:
                    time.sleep(PAUSE_BETWEEN_BLOCKS_S)
                    body = w.call("run", feed, calls[w.engine.label])
                    latencies[w.engine.label] += body["latencies_ms"]
                    blocks[w.engine.label].append(sum(body["latencies_ms"]) / len(body["latencies_ms"]))
                    loads[w.engine.label].append(stats.load_1min())
                log(f"[{name}] batch {batch}: repeat {rep + 1}/{settings.repeats} " + ", ".join(
                    f"{label} {blocks[label][-1]:.1f} ms" for label in blocks))
            repeat_loads = [stats.loudest([per[r] for per in loads.values()]) for r in range(settings.repeats)]
            for w in workers:
                label = w.engine.label
                med = stats.median(blocks[label])
                of_medians, paired = stats.speedups(blocks[EAGER_LABEL], blocks[label])
                ratios = [stats.ratio(e, x) for e, x in zip(blocks[EAGER_LABEL], blocks[label])]
                quieter = stats.paired_and_quieter(ratios, repeat_loads)[1]
                cells.append(Cell(name, recipe, label, batch, med, stats.percentile(latencies[label], 50),
                                  stats.percentile(latencies[label], 99), batch * 1000 / med,
                                  of_medians, paired, len(latencies[label]), blocks[label], loads[label], quieter))
        peaks = {}
        for w in workers:
            peak = w.close()["peak_rss_mib"]
            peaks[w.engine.label] = {"peak_rss_mib": round(peak, 1),
                                     "model_rss_mib": round(peak - baseline[w.engine.label], 1)}
        for c in cells:
            c.peak_rss_mib, c.model_rss_mib = peaks[c.engine]["peak_rss_mib"], peaks[c.engine]["model_rss_mib"]
        return cells, peaks, outputs
    finally:
        for w in workers:
            if w.process.is_alive():
                w.process.kill()


def _agreement(outputs: dict[str, list]) -> dict[str, dict]:
    """Each ONNX Runtime engine against eager PyTorch on the same inputs (all measured batches)."""
    import numpy as np

    reference = np.concatenate([o.reshape(o.shape[0], -1) for o in outputs[EAGER_LABEL]])
    out = {}
    for label, outs in outputs.items():
        if label == EAGER_LABEL:
            continue
        got = np.concatenate([o.reshape(o.shape[0], -1) for o in outs])
        cos = (got * reference).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(reference, axis=1) + 1e-12)
        out[label] = {"rows": int(got.shape[0]), "max_abs_error": float(np.abs(got - reference).max()),
                      "top1_agreement": float((got.argmax(1) == reference.argmax(1)).mean()),
                      "min_cosine_similarity": float(cos.min())}
    return out


def check_targets(result: dict) -> list[dict]:
    found = []
    for model in result["models"]:
        for c in model["cells"]:
            wanted = TARGETS.get((c["recipe"], c["engine"]))
            if wanted is not None and c["batch"] == 1:
                found.append({"model": c["model"], "recipe": c["recipe"], "engine": c["engine"], "batch": 1,
                              "target": wanted, "speedup": round(c["speedup"], 2),
                              "paired_speedup": round(c["paired_speedup"], 2),
                              "quieter_half_speedup": round(c.get("quieter_half_speedup", math.nan), 2),
                              "met": min(c["speedup"], c["paired_speedup"]) >= wanted})
    return found


def machine() -> dict[str, Any]:
    import onnxruntime
    import torch

    return {"cpu": _cpu_name(), "logical_cores": os.cpu_count(), "python": platform.python_version(),
            "torch": torch.__version__, "onnxruntime": onnxruntime.__version__, "platform": platform.platform()}


def _cpu_name() -> str:
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


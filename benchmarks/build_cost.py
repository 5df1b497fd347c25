"""What `tritonsm build` costs per example: wall time, peak memory of the whole process tree, exit status.

    .venv/bin/python benchmarks/build_cost.py --label after [--spec examples/x.yaml ...] [--checkout DIR]

Builds every spec (default: triton.yaml and examples/*.yaml) with `tritonsm build --spec X --out
F/assets --work-dir F/work`, each into its own fresh folder F (so every model is really exported,
verified and packed), under `/usr/bin/time -v`. Meanwhile a thread sums the resident set sizes of
the build and all its descendants every 0.2 s (benchmarks/tooling/build_cost.py) and remembers the peak
and the build step printed last before it. Per spec it records the wall time, the 1-minute load
average at start and end (timings on a shared machine are noisy: read them with it), the peak
summed RSS, `/usr/bin/time`'s maximum RSS of the largest single process, the largest model's fp32
weight bytes (model_build/memory_budget.py, from what exists before a build: the recipe's
architecture config, or the weights files) and the largest model file the build wrote, the budget
3 x weights + 1.5 GB, whether the serving-runtime and Python-environment cache was warm, the exit
status and the sha256 of every tarball (from the manifest).

`--checkout DIR` builds with another checkout's code (e.g. a worktree of an older commit: the
"before" table); this checkout's code only measures. TensorRT models stop before their export on
a machine without a GPU, so for them the row measures the rest of the spec (the table says so).
The serving-runtime and Python-environment cache ($TRITONSM_CACHE_DIR, else ~/.cache/tritonsm) is
shared with ordinary builds; the table says whether a build found what it needed there.

Writes build_cost-<label>.json (raw) and build_cost-<label>.md (the table) to --out.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tooling import build_cost  # noqa: E402
from model_build import memory_budget  # noqa: E402

TIME = "/usr/bin/time"
MODEL_FILES = ("model.onnx", "model.pt", "model.plan", "model.safetensors")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", action="append", default=[], help="spec path relative to the checkout; repeatable "
                        "(default: triton.yaml and examples/*.yaml)")
    parser.add_argument("--checkout", type=pathlib.Path, default=ROOT, help="the code that builds (default: this one)")
    parser.add_argument("--label", required=True, help="names the output files: build_cost-<label>.json/.md")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks")
    parser.add_argument("--keep", type=pathlib.Path, help="keep each build's folder under this one (default: deleted)")
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between RSS samples")
    args = parser.parse_args()
    checkout = args.checkout.resolve()
    specs = args.spec or ["triton.yaml"] + sorted(str(p.relative_to(checkout)) for p in (checkout / "examples").glob("*.yaml"))
    record = {"label": args.label, "checkout": str(checkout), "commit": _commit(checkout), "started":
              datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "cpus": os.cpu_count(),
              "memory_bytes": _total_memory(), "python": platform.python_version(), "interval_s": args.interval,
              "cache": str(_cache_root()), "runs": []}
    half_machine = record["memory_bytes"] // 2
    print(f"build cost of {len(specs)} spec(s) with {checkout} at {record['commit']}; "
          f"{record['memory_bytes'] / 1e9:.1f} GB memory, {record['cpus']} CPUs", flush=True)
    keep = args.keep.resolve() if args.keep else None
    with tempfile.TemporaryDirectory(prefix="tritonsm-buildcost-") as tmp:
        for index, spec in enumerate(specs, 1):
            folder = (keep or pathlib.Path(tmp)) / pathlib.Path(spec).stem
            if folder.exists():
                shutil.rmtree(folder)
            folder.mkdir(parents=True)
            print(f"[{index}/{len(specs)}] {spec}: building into {folder} ...", flush=True)
            run = _measure(checkout, spec, folder, args.interval, half_machine)
            record["runs"].append(run)
            print(f"[{index}/{len(specs)}] {spec}: exit {run['exit_code']}, {run['wall_s']:.1f} s (load "
                  f"{run['load_start']:.2f}-{run['load_end']:.2f}), peak RSS {run['peak_tree_rss_bytes'] / 1e9:.2f} GB "
                  f"during \"{run['peak_step']}\"; met: {run['met']}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    raw = args.out / f"build_cost-{args.label}.json"
    # A run of some specs replaces their rows in an earlier run of the same label and keeps the others.
    if raw.is_file():
        record["runs"] = build_cost.merge_runs(json.loads(raw.read_text())["runs"], record["runs"])
    raw.write_text(json.dumps(record, indent=2) + "\n")
    text = build_cost.table(record["runs"])
    (args.out / f"build_cost-{args.label}.md").write_text(
        f"# Build cost ({args.label}): {checkout.name} at {record['commit']}\n\n{_machine(record)}\n\n{text}\n")
    print(text)
    return 0


def _measure(checkout: pathlib.Path, spec: str, folder: pathlib.Path, interval: float, half_machine: int) -> dict:
    from deployment_spec import load_spec
    from model_build.backends.tensorrt import gpu

    loaded = load_spec(checkout / spec)
    here = [m for m in loaded.models.values() if memory_budget.buildable_here(m, gpu.detect)]
    skipped = sorted(set(loaded.models) - {m.name for m in here})
    weights = memory_budget.largest(loaded, here)
    cache_folders = [_cache_root() / "serving-runtimes", _cache_root() / "python-envs"]
    cached_before = build_cost.cache_entries(cache_folders)
    log_path, time_path = folder / "build.log", folder / "time.txt"
    cmd = [sys.executable, "-m", "tritonsm", "build", "--spec", str(checkout / spec), "--out", str(folder / "assets"),
           "--work-dir", str(folder / "work")]
    if os.path.exists(TIME):
        cmd = [TIME, "-v", "-o", str(time_path)] + cmd
    env = dict(os.environ, PYTHONPATH=str(checkout), PYTHONUNBUFFERED="1")
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    load_start, start = os.getloadavg()[0], time.monotonic()
    with log_path.open("w") as log, subprocess.Popen(cmd, cwd=checkout, env=env, stdout=subprocess.PIPE,
                                                     stderr=subprocess.STDOUT, text=True) as proc:
        with build_cost.TreeSampler(proc.pid, interval) as sampler:
            for line in proc.stdout:
                log.write(line)
                line = line.rstrip("\n")
                if build_cost.is_step_line(line):
                    sampler.step(line.strip())
                print(f"    [{time.monotonic() - start:6.1f} s, {sampler.current / 1e9:5.2f} GB] {line}", flush=True)
            exit_code = proc.wait()
    wall, load_end = time.monotonic() - start, os.getloadavg()[0]
    peak = sampler.peak
    time_maxrss = build_cost.time_maxrss_bytes(time_path.read_text()) if time_path.is_file() else None
    budget = memory_budget.need_bytes(weights.bytes) if weights else None  # the build's own refusal bound
    notes = [f"TensorRT model(s) {', '.join(skipped)} not built here (no GPU): the build stops before their "
             "export; this row is the rest of the spec"] if skipped else []
    built_file = _largest_model_file(folder / "work")
    return {"spec": spec, "commit": _commit(checkout), "started": started, "exit_code": exit_code,
            "wall_s": round(wall, 1), "load_start": load_start,
            "load_end": load_end, "peak_tree_rss_bytes": peak.rss_bytes, "peak_at_s": round(peak.at_s, 1),
            "peak_step": peak.step, "peak_processes": peak.processes, "samples": peak.samples,
            "peak_by_step": peak.by_step, "time_maxrss_bytes": time_maxrss,
            "weights": {"model": weights.model, "bytes": weights.bytes, "how": weights.how} if weights else None,
            "largest_built_file": built_file, "budget_bytes": budget,
            # A child shorter than one sample can escape the sampler, never /usr/bin/time: judged on the larger.
            "met": build_cost.verdict(max(peak.rss_bytes, time_maxrss or 0), budget, half_machine),
            "cache": build_cost.cache_note(cached_before, build_cost.cache_entries(cache_folders)),
            "notes": notes, "artifacts": _artifacts(folder / "assets" / "manifest.json"),
            "step_seconds": build_cost.durations(log_path.read_text().splitlines()),
            "log_tail": log_path.read_text().splitlines()[-5:]}


def _largest_model_file(work: pathlib.Path) -> dict | None:
    """The biggest weights file the build wrote: a cross-check of the weight bytes counted beforehand."""
    found = [p for p in (work / "models").rglob("*") if p.name in MODEL_FILES and p.is_file()] if work.is_dir() else []
    if not found:
        return None
    biggest = max(found, key=lambda p: p.stat().st_size)
    return {"file": str(biggest.relative_to(work)), "bytes": biggest.stat().st_size}


def _artifacts(manifest: pathlib.Path) -> dict:
    if not manifest.is_file():
        return {}
    data = json.loads(manifest.read_text())
    return {a["file"]: a["sha256"] for ep in data.get("endpoints", {}).values() for a in ep.get("artifacts", ())}


def _commit(checkout: pathlib.Path) -> str:
    head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(checkout), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True)
    return head.stdout.strip() + (" (with uncommitted changes)" if dirty.stdout.strip() else "")


def _total_memory() -> int:
    import psutil

    return int(psutil.virtual_memory().total)


def _cache_root() -> pathlib.Path:
    from model_build.verification.side_env import cache_root

    return cache_root()


def _machine(record: dict) -> str:
    return (f"{record['cpus']} CPUs, {record['memory_bytes'] / 1e9:.1f} GB memory, Python {record['python']}; "
            f"started {record['started']}; RSS of the build's process tree summed every {record['interval_s']} s; "
            f"cache {record['cache']}. GB = 10^9 bytes. Wall times on a shared machine: read them with the load.")


if __name__ == "__main__":
    sys.exit(main())

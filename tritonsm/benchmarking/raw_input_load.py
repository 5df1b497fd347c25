"""What the raw-input load benchmarks share: benchmarks/raw_text_load.py (raw text vs token ids) and
benchmarks/raw_image_load.py (JPEG bytes vs pixel_values) build one spec, serve two of its endpoints
(paired_endpoints.py) and send the model step the very tensors the ensemble's first step makes in this process.

Here: their command line and phase plan, their spec, its checkpoint saved once, the build, an endpoint's
tarball, the built first step loaded as the ensemble runs it, and the written results (benchmarks/<name>.json
and .md).
"""
from __future__ import annotations

import argparse
import json
import pathlib
import tempfile
import types
from typing import Any, Callable

from tritonsm.benchmarking.load_phases import PhasePlan

RESULTS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"


def arguments(description: str, name: str, argv: list[str]) -> tuple[argparse.Namespace, PhasePlan]:
    """The options (``--work`` defaults to <temp>/<name>) and the phase plan they ask for."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--concurrency", default="1,4,16")
    parser.add_argument("--phase-seconds", type=float, default=8.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work", type=pathlib.Path, default=pathlib.Path(tempfile.gettempdir()) / name)
    args = parser.parse_args(argv)
    plan = PhasePlan(concurrencies=tuple(int(c) for c in args.concurrency.split(",")), seconds=args.phase_seconds,
                     max_requests=100_000, latency_threshold_ms=60_000, must_reach=None)
    return args, plan


def task_model(kind: str, weights: pathlib.Path, max_batch_size: int, **more: object) -> dict[str, object]:
    """A spec's `task:` entry (its fields, values as YAML): ONNX Runtime, dynamic batching with a 1 ms queue
    delay, ``more`` fields before that."""
    return {"task": f"{{kind: {kind}}}", "backend": "onnxruntime", "weights": weights,
            "max_batch_size": max_batch_size, **more, "dynamic_batching": "{max_queue_delay_us: 1000}"}


def spec(models: dict[str, dict[str, object]], endpoints: dict[str, str], triton_version: str) -> str:
    """The benchmark's spec: ``models`` (``task_model``) and single-model ``endpoints`` (name -> the model it
    serves)."""
    lines = ["project: Bench", f'triton_version: "{triton_version}"', "models:"]
    for name, fields in models.items():
        lines += [f"  {name}:", *(f"    {key}: {value}" for key, value in fields.items())]
    lines += ["endpoints:", *(f"  {name}: {{kind: single-model, models: [{model}], instance_type: ml.g5.xlarge}}"
                              for name, model in endpoints.items()),
              "environments:", "  dev: {region: us-east-1}", ""]
    return "\n".join(lines)


def saved_once(folder: pathlib.Path, save: Callable[[pathlib.Path], None]) -> pathlib.Path:
    """``folder``, where ``save`` saves a checkpoint with torch seeded 0 unless one is there: every build and run
    serves the same weights."""
    import torch

    if not (folder / "config.json").is_file():
        torch.manual_seed(0)
        save(folder)
    return folder


def build(work: pathlib.Path, spec: str, tritonsm: Callable[[list[str]], int]) -> dict[str, Any]:
    """Builds ``spec`` in ``work`` with ``tritonsm`` (the CLI's main, which this layer does not import); returns
    the manifest as JSON."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "spec.yaml").write_text(spec)
    code = tritonsm(["build", "--spec", str(work / "spec.yaml"), "--out", str(work / "assets"),
                     "--work-dir", str(work / "build")])
    if code != 0:
        raise SystemExit(f"the build failed (exit {code}); see its log above")
    manifest: dict[str, Any] = json.loads((work / "assets" / "manifest.json").read_text())
    return manifest


def tarball(work: pathlib.Path, manifest: dict[str, Any], endpoint: str) -> tuple[pathlib.Path, str]:
    """The endpoint's model archive and the model it serves."""
    (artifact,) = manifest["endpoints"][endpoint]["artifacts"]
    return work / "assets" / artifact["file"], artifact["models"][0]


def built_step(work: pathlib.Path, manifest: dict[str, Any], name: str) -> tuple[types.ModuleType, dict[str, str],
                                                                                 pathlib.Path]:
    """The built step ``name``: its model.py as a module, its parameters as it reads them, its version folder."""
    from model_build import layout
    from model_build.backends.ensemble.task_check import step_module, step_parameters

    step = work / "build" / "models" / f"{name}-{manifest['models'][name]['build_hash'][:16]}" / name
    return step_module(step, "bench"), step_parameters(step), layout.version_dir(step)


def write(name: str, result: dict[str, Any], markdown: str) -> None:
    """benchmarks/<name>.json and .md, the markdown printed too."""
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    (RESULTS / f"{name}.md").write_text(markdown)
    print(markdown)

#!/usr/bin/env python3
"""Wall time of synthesizing every stage of the app (``python app.py``, cdk-nag included): median of 5.

Each run is a fresh process, as under ``cdk synth`` (interpreter, jsii/Node start-up, every stage,
cdk-nag, templates and assets written). Target: under 30 s on the 2-core development machine.

    .venv/bin/python benchmarks/synth_time.py [--spec triton.yaml] [--manifest assets/manifest.json] [--runs 5]

Without a build manifest the tests' fabricated build (placeholder tarballs, test data) stands in.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def fabricated_manifest(spec_path: pathlib.Path, out_dir: pathlib.Path) -> pathlib.Path:
    sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "infra" / "fixtures")]
    from deployment_spec import load_spec
    from fake_build import fake_build
    return fake_build(load_spec(spec_path), out_dir)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=pathlib.Path, default=ROOT / "triton.yaml")
    parser.add_argument("--manifest", type=pathlib.Path, default=ROOT / "assets" / "manifest.json")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        manifest, source = args.manifest, "build manifest"
        if not manifest.exists():
            manifest, source = fabricated_manifest(args.spec, pathlib.Path(tmp) / "assets"), "fabricated test build"
        times = []
        for run in range(args.runs):
            env = {k: v for k, v in os.environ.items() if not k.startswith("CDK_")}
            env.update(CDK_OUTDIR=str(pathlib.Path(tmp) / f"cdk.out.{run}"),
                       CDK_CONTEXT_JSON=json.dumps({"spec": str(args.spec), "manifest": str(manifest)}))
            start = time.perf_counter()
            done = subprocess.run([sys.executable, str(ROOT / "app.py")], cwd=ROOT, env=env, capture_output=True,
                                  text=True)
            times.append(time.perf_counter() - start)
            if done.returncode != 0:
                print(done.stderr, file=sys.stderr)
                return done.returncode
            print(f"run {run + 1}: {times[-1]:.2f} s (load average {os.getloadavg()[0]:.2f})")
    print(f"synth of all stages ({args.spec.name}, {source}, {os.cpu_count()} CPUs): "
          f"median {statistics.median(times):.2f} s over {args.runs} runs (target < 30 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

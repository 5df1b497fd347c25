"""What the tokenizer step's execution environment costs a text task, before and after it was cut to what the step
imports (issue #60): packages, archive and unpacked size, the endpoint tarball, and on the local multi-model endpoint
the time from the first request for a model that is not loaded to its answer (medians of --runs fresh servers).

    .venv/bin/python benchmarks/task_env_size.py [--runs 3] [--out benchmarks]

"before" builds the same spec with the step's former requirements (tokenizers with every package it declares:
huggingface_hub and its dependencies); "after" with the shipped ones (``task_steps.TOKENIZE_REQUIREMENTS``:
tokenizers and numpy, pip --no-deps). One text-classification entry on a tiny BERT checkpoint
(benchmarks/tooling/text_checkpoints), both built for this machine's Python (`--python-env-for local`), so the
server loads what was built. Writes task_env_size.json and .md; every timing carries the 1-minute load average.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SPEC = """\
project: EnvSize
triton_version: "25.09"
signing: {unsigned_reason: "a benchmark"}
models:
  sentiment:
    task: {kind: text-classification, top_k: 2}
    backend: onnxruntime
    weights: sentiment-bert
    max_batch_size: 8
    sequence_length: 48
endpoints:
  text: {kind: multi-model, models: [sentiment], instance_type: ml.g5.xlarge}
environments:
  dev: {region: us-east-1}
"""
BEFORE = ("tokenizers==0.23.3", "numpy==1.26.4")  # the step's requirements until issue #60


def _build(root: pathlib.Path, requirements: tuple[str, ...]) -> dict:
    from model_build.recipes import task_steps
    from tritonsm.cli import main as tritonsm_main

    shipped = task_steps.TOKENIZE_REQUIREMENTS
    task_steps.TOKENIZE_REQUIREMENTS = requirements
    try:
        assert tritonsm_main(["build", "--spec", str(root / "spec.yaml"), "--out", str(root / "assets"),
                              "--work-dir", str(root / "work"), "--python-env-for", "local", "--force"]) == 0
    finally:
        task_steps.TOKENIZE_REQUIREMENTS = shipped
    manifest = json.loads((root / "assets" / "manifest.json").read_text())
    (artifact,) = manifest["endpoints"]["text"]["artifacts"]
    env = manifest["models"]["sentiment-tokenize"]["execution_environment"]
    return {"requirements": list(requirements), "tarball_bytes": artifact["size"], "packages": len(env["packages"]),
            "archive_bytes": env["archive_bytes"], "unpacked_bytes": env["unpacked_bytes"]}


def _cold_loads(root: pathlib.Path, runs: int) -> list[dict]:
    import numpy as np

    from deployment_spec.served import resolve_endpoint
    from local_endpoint.client.invoke import invoke_url
    from local_endpoint.client.payload import NamedTensor, encode_request
    from local_endpoint.endpoints.multi_model import MultiModelEndpoint

    local = resolve_endpoint(root / "spec.yaml", "text", None, root / "assets" / "manifest.json")
    request = encode_request([NamedTensor("TEXT", "BYTES", np.array([[b"a fine film"]], dtype=np.object_))],
                             binary=False)
    out = []
    for run in range(runs):
        with MultiModelEndpoint(list(local.tarballs), env=local.env, cpu_stand_in=True,
                                triton_version=local.triton_version) as server:
            start = time.monotonic()
            invoke_url(server.url, request, target_model=local.tarballs[0].name)
            cold = time.monotonic() - start
            start = time.monotonic()
            invoke_url(server.url, request, target_model=local.tarballs[0].name)
            warm = time.monotonic() - start
        out.append({"cold_s": round(cold, 2), "warm_s": round(warm, 3), "load": round(os.getloadavg()[0], 2)})
        print(f"  run {run + 1}/{runs}: first request {cold:.2f} s, second {warm * 1000:.0f} ms", flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks")
    args = parser.parse_args()
    from benchmarks.tooling import text_checkpoints
    from model_build.recipes import task_steps

    record: dict = {}
    with tempfile.TemporaryDirectory(prefix="tritonsm-envsize-") as tmp:
        for name, requirements in (("before", BEFORE), ("after", task_steps.TOKENIZE_REQUIREMENTS)):
            root = pathlib.Path(tmp) / name
            text_checkpoints.save(root / "sentiment-bert", "text-classification", "bert")
            (root / "spec.yaml").write_text(SPEC)
            print(f"{name}: tritonsm build with {', '.join(requirements)} ...", flush=True)
            record[name] = _build(root, requirements)
            print(f"{name}: {record[name]['packages']} packages, archive {record[name]['archive_bytes'] / 1e6:.1f} "
                  f"MB, tarball {record[name]['tarball_bytes'] / 1e6:.1f} MB; cold loads on the local MME ...",
                  flush=True)
            record[name]["loads"] = _cold_loads(root, args.runs)
            record[name]["cold_median_s"] = statistics.median(r["cold_s"] for r in record[name]["loads"])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "task_env_size.json").write_text(json.dumps(record, indent=1) + "\n")
    b, a = record["before"], record["after"]
    rows = [("packages", b["packages"], a["packages"], "{}"),
            ("environment archive (MB)", b["archive_bytes"] / 1e6, a["archive_bytes"] / 1e6, "{:.1f}"),
            ("environment unpacked (MB)", b["unpacked_bytes"] / 1e6, a["unpacked_bytes"] / 1e6, "{:.1f}"),
            ("endpoint tarball (MB)", b["tarball_bytes"] / 1e6, a["tarball_bytes"] / 1e6, "{:.1f}"),
            ("first request, model not loaded (s, median)", b["cold_median_s"], a["cold_median_s"], "{:.2f}")]
    lines = ["# A text task's tokenizer-step environment, before and after (issue #60)", "",
             f"`benchmarks/task_env_size.py --runs {args.runs}`: one text-classification entry (tiny BERT) on the "
             "local multi-model endpoint (Triton 24.10 of nvidia-pytriton, this machine's CPU); each first request "
             "on a fresh server (Triton unpacks the tarball and the environment, loads the three steps).", "",
             "| | before | after | after / before |", "|---|---:|---:|---:|"]
    lines += [f"| {label} | {fmt.format(x)} | {fmt.format(y)} | {y / x:.2f} |" for label, x, y, fmt in rows]
    lines += ["", f"before: {', '.join(b['requirements'])} with their dependencies; after: {', '.join(a['requirements'])}.",
              "Loads (1-minute average) at each first request: before "
              + ", ".join(str(r["load"]) for r in b["loads"]) + "; after " + ", ".join(str(r["load"]) for r in a["loads"])
              + "."]
    (args.out / "task_env_size.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

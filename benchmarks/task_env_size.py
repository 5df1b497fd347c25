"""What a task's Python-step execution environment costs, before and after it was cut to what the step imports
(issue #60): packages, archive and unpacked size, the endpoint tarball, and on the local multi-model endpoint the
time from the first request for a model that is not loaded to its answer (medians of --runs fresh servers).

    .venv/bin/python benchmarks/task_env_size.py [--runs 3] [--tasks text image audio] [--out benchmarks]

One entry per task on a tiny checkpoint (benchmarks/tooling): text-classification (BERT; the tokenizer step),
image-classification (ViT; the image preprocessing step), audio-classification (wav2vec2; the audio
preprocessing step). "before" builds it with the step's former requirements (its pins with every package they
declare); "after" with the shipped ones (pip --no-deps and the packages the step imports: task_steps,
image_steps, audio_steps ``*_REQUIREMENTS``). Both are built for this machine's Python (`--python-env-for
local`), so the server loads what was built. Writes task_env_size.json and .md; every timing carries the 1-minute
load average.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import re
import statistics
import sys
import tempfile
import time
from typing import Any, Callable

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SPEC = """\
project: EnvSize
triton_version: "25.09"
signing: {{unsigned_reason: "a benchmark"}}
models:
  task:
    task: {{kind: {kind}}}
    backend: onnxruntime
    weights: checkpoint
    max_batch_size: 8
endpoints:
  tasks: {{kind: multi-model, models: [task], instance_type: ml.g5.xlarge}}
environments:
  dev: {{region: us-east-1}}
"""


@dataclasses.dataclass(frozen=True)
class Case:
    kind: str
    module: str  # model_build.recipes.<module>.<attribute>: the step's requirements
    attribute: str
    step: str  # the ensemble step that carries the environment
    before: tuple[str, ...]  # the step's requirements until issue #60, resolved with their dependencies
    save: Callable[[pathlib.Path], object]
    request: Callable[[], tuple[str, bytes]]  # (input tensor, one row)

    def recipes(self) -> Any:
        """The recipe module whose ``attribute`` the build reads."""
        import importlib
        return importlib.import_module(f"model_build.recipes.{self.module}")


def _save_text(folder: pathlib.Path) -> object:
    from benchmarks.tooling import text_checkpoints
    return text_checkpoints.save(folder, "text-classification", "bert")


def _save_image(folder: pathlib.Path) -> object:
    from benchmarks.tooling import image_checkpoints
    return image_checkpoints.save(folder, "vit")


def _save_audio(folder: pathlib.Path) -> object:
    from benchmarks.tooling import audio_checkpoints
    return audio_checkpoints.save(folder, "audio-classification", "wav2vec2")


def _image_row() -> tuple[str, bytes]:
    from model_build.backends.ensemble import image_samples
    return "IMAGE", image_samples.images()[0].data


def _audio_row() -> tuple[str, bytes]:
    from model_build.backends.ensemble import audio_samples
    return "AUDIO", audio_samples.clips(16000)[0].data


CASES = {
    "text": Case("text-classification", "task_steps", "TOKENIZE_REQUIREMENTS", "task-tokenize",
                 ("tokenizers==0.23.3", "numpy==1.26.4"), _save_text, lambda: ("TEXT", b"a fine film")),
    "image": Case("image-classification", "image_steps", "PREPROCESS_REQUIREMENTS", "task-preprocess",
                  ("transformers==5.23.0", "pillow==13.0.0", "numpy==1.26.4"), _save_image, _image_row),
    "audio": Case("audio-classification", "audio_steps", "PREPROCESS_REQUIREMENTS", "task-preprocess",
                  ("transformers==5.23.0", "numpy==1.26.4", "soundfile==0.14.0"), _save_audio, _audio_row),
}


def _build(case: Case, root: pathlib.Path, requirements: tuple[str, ...]) -> dict[str, Any]:
    from tritonsm.cli import main as tritonsm_main

    module = case.recipes()
    shipped = getattr(module, case.attribute)
    setattr(module, case.attribute, requirements)
    try:
        assert tritonsm_main(["build", "--spec", str(root / "spec.yaml"), "--out", str(root / "assets"),
                              "--work-dir", str(root / "work"), "--python-env-for", "local", "--force"]) == 0
    finally:
        setattr(module, case.attribute, shipped)
    manifest = json.loads((root / "assets" / "manifest.json").read_text())
    (artifact,) = manifest["endpoints"]["tasks"]["artifacts"]
    env = manifest["models"][case.step]["execution_environment"]
    return {"requirements": list(requirements), "tarball_bytes": artifact["size"], "packages": len(env["packages"]),
            "archive_bytes": env["archive_bytes"], "unpacked_bytes": env["unpacked_bytes"]}


def _cold_load(case: Case, root: pathlib.Path, run: int) -> dict[str, Any]:
    """One fresh local multi-model endpoint of the build in ``root``: its first request (the model not loaded) and
    its second, timed; the step's load split from Triton's log."""
    import numpy as np

    from deployment_spec.served import resolve_endpoint
    from local_endpoint.client.invoke import invoke_url
    from local_endpoint.client.payload import NamedTensor, encode_request
    from local_endpoint.endpoints.multi_model import MultiModelEndpoint

    local = resolve_endpoint(root / "spec.yaml", "tasks", None, root / "assets" / "manifest.json")
    name, row = case.request()
    request = encode_request([NamedTensor(name, "BYTES", np.array([[row]], dtype=np.object_))], binary=True)
    log = root / f"server-{run}.log"
    with MultiModelEndpoint(list(local.tarballs), env=local.env, cpu_stand_in=True, log_file=log,
                            triton_version=local.triton_version) as server:
        start = time.monotonic()
        invoke_url(server.url, request, target_model=local.tarballs[0].name)
        cold = time.monotonic() - start
        start = time.monotonic()
        invoke_url(server.url, request, target_model=local.tarballs[0].name)
        warm = time.monotonic() - start
    steps = _step_times(log.read_text(), case.step)
    print(f"  {root.name} run {run + 1}: first request {cold:.2f} s (the step's environment {steps['env_s']:.2f} s, "
          f"its initialize {steps['initialize_s']:.2f} s), second {warm * 1000:.0f} ms", flush=True)
    return {"cold_s": round(cold, 2), "warm_s": round(warm, 3), **steps, "load": round(os.getloadavg()[0], 2)}


# Triton's log lines (python_backend src/python_be.cc, core src/model_lifecycle.cc) that mark a step's load: its
# execution environment taken (the stub unpacks it and starts in it), its instance initialized (model.py's
# initialize() runs), loaded.
_STAMP = re.compile(r"^I\d{4} (\d\d):(\d\d):(\d\d\.\d+) ")


def _step_times(log: str, step: str) -> dict[str, Any]:
    """Seconds from "Using Python execution env" to the step's ModelInstanceInitialize (unpacking the environment,
    starting the stub in it) and from there to "successfully loaded" (the step's initialize())."""
    marks: dict[str, float] = {}
    for line in log.splitlines():
        stamp = _STAMP.match(line)
        if stamp is None:
            continue
        seconds = int(stamp.group(1)) * 3600 + int(stamp.group(2)) * 60 + float(stamp.group(3))
        if "Using Python execution env" in line and f"/{step}/" in line:
            marks.setdefault("env", seconds)
        elif f"ModelInstanceInitialize: {step}_0 " in line:
            marks.setdefault("instance", seconds)
        elif "successfully loaded '" in line and line.rstrip().endswith(f"::{step}'\""):
            marks.setdefault("loaded", seconds)
    if set(marks) != {"env", "instance", "loaded"}:
        raise RuntimeError(f"the server log does not show {step}'s load (found {sorted(marks)})")
    return {"env_s": round(marks["instance"] - marks["env"], 2), "initialize_s": round(marks["loaded"] -
                                                                                      marks["instance"], 2)}


def _measured(case: Case, tmp: pathlib.Path, runs: int) -> dict[str, Any]:
    """Both builds, then their cold loads taking turns (before first in even rounds, after first in odd ones): each
    load writes the unpacked environment to /tmp, and the disk's write-back of one run slows the next, so running
    all of one build's loads first would favour it."""
    shipped = getattr(case.recipes(), case.attribute)
    record: dict[str, Any] = {}
    roots = {}
    for name, requirements in (("before", case.before), ("after", shipped)):
        roots[name] = root = tmp / case.kind / name
        case.save(root / "checkpoint")
        (root / "spec.yaml").write_text(SPEC.format(kind=case.kind))
        print(f"{case.kind} {name}: tritonsm build with {', '.join(requirements)} ...", flush=True)
        record[name] = {**_build(case, root, requirements), "loads": []}
        print(f"{case.kind} {name}: {record[name]['packages']} packages, archive "
              f"{record[name]['archive_bytes'] / 1e6:.1f} MB, tarball {record[name]['tarball_bytes'] / 1e6:.1f} MB",
              flush=True)
    print(f"{case.kind}: cold loads on the local MME, before and after taking turns ...", flush=True)
    for run in range(runs):
        for name in (("before", "after") if run % 2 == 0 else ("after", "before")):
            record[name]["loads"].append(_cold_load(case, roots[name], run))
    for name in roots:
        for key in ("cold_s", "env_s", "initialize_s"):
            record[name][key.replace("_s", "_median_s")] = statistics.median(r[key] for r in record[name]["loads"])
    return record


def _table(task: str, case: Case, record: dict[str, Any]) -> list[str]:
    b, a = record["before"], record["after"]
    rows = [("packages", b["packages"], a["packages"], "{}"),
            ("environment archive (MB)", b["archive_bytes"] / 1e6, a["archive_bytes"] / 1e6, "{:.1f}"),
            ("environment unpacked (MB)", b["unpacked_bytes"] / 1e6, a["unpacked_bytes"] / 1e6, "{:.1f}"),
            ("endpoint tarball (MB)", b["tarball_bytes"] / 1e6, a["tarball_bytes"] / 1e6, "{:.1f}"),
            ("first request, model not loaded (s, median)", b["cold_median_s"], a["cold_median_s"], "{:.2f}"),
            ("of which the step's environment: unpacked, stub started (s)", b["env_median_s"], a["env_median_s"],
             "{:.2f}"),
            ("of which the step's initialize() (s)", b["initialize_median_s"], a["initialize_median_s"], "{:.2f}")]
    lines = [f"## {task}: {case.kind}, the `{case.step}` step", "",
             "| | before | after | after / before |", "|---|---:|---:|---:|"]
    lines += [f"| {label} | {fmt.format(x)} | {fmt.format(y)} | {y / x:.2f} |" for label, x, y, fmt in rows]
    return lines + ["", f"before: {', '.join(b['requirements'])} with their dependencies; after: "
                    f"{', '.join(a['requirements'])}.", "Loads (1-minute average) at each first request: before "
                    + ", ".join(str(r["load"]) for r in b["loads"]) + "; after "
                    + ", ".join(str(r["load"]) for r in a["loads"]) + ".", ""]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tasks", nargs="+", choices=sorted(CASES), default=["text", "image", "audio"])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks")
    args = parser.parse_args()
    records: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="tritonsm-envsize-") as tmp:
        for task in args.tasks:
            records[task] = _measured(CASES[task], pathlib.Path(tmp), args.runs)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "task_env_size.json").write_text(json.dumps(records, indent=1) + "\n")
    lines = ["# Task steps' execution environments, before and after (issue #60)", "",
             f"`benchmarks/task_env_size.py --runs {args.runs}`: one entry per task on a tiny checkpoint, on the "
             "local multi-model endpoint (Triton 24.10 of nvidia-pytriton, this machine's CPU); each first request "
             "on a fresh server (Triton unpacks the tarball and the environment, loads the ensemble's steps); "
             "before's and after's servers take turns.", ""]
    for task, record in records.items():
        lines += _table(task, CASES[task], record)
    (args.out / "task_env_size.md").write_text("\n".join(lines))
    print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

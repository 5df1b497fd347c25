"""Which transformers image classifiers an image-classification `task:` entry serves from raw images: built,
verified, served, refused.

    .venv/bin/python benchmarks/hf_image_coverage.py [--only vit,convnext] [--limit N] [--batch 8]
        [--work /tmp/hf_image_coverage] [--fresh] [--keep-builds]

Every model type the pinned transformers (5.23.0) maps in MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES
(transformers.models.auto.modeling_auto; the first class of a tuple of variants) gets a tiny random checkpoint
made offline from its own config (tritonsm/benchmarking/tiny_checkpoints.py, ``save``: the shrunk config, image
size 64 where the config has one, 3 labels, seed 0, checked to run eagerly on pixel_values, ``save_pretrained``)
and, beside it, the image processor transformers maps for that model type
(transformers.models.auto.image_processing_auto.IMAGE_PROCESSOR_MAPPING_NAMES, its PIL backend class: the one
the product serves) at the model's image size: ``size`` and, where the processor has one, ``crop_size`` set to
the model's height x width (a processor resizing the shortest edge keeps that rule, with the shortest edge at
the model's size). An architecture that does not instantiate that way (timm backbones need timm, which is
absent; ...) is listed as not instantiable with its reason, and one without a PIL image processor as "no image
processor"; neither is counted in the share.

The checkpoints are built in batches (one spec per batch, one ``task: {kind: image-classification, top_k: 2}``
entry per checkpoint, backend onnxruntime, max_batch_size 4, Triton 25.09) by the real `tritonsm build
--python-env-for local`, which verifies each ensemble, encoded images in, labels out, against transformers'
pipeline('image-classification') on raw images; then the built ones are packed as one multi-model endpoint,
served on the local Triton server with CPU stand-ins (`tritonsm serve ENDPOINT --cpu-stand-in`) and each
answers one encoded JPEG (640x480, the image `tritonsm smoke` makes for DALI inputs) sent with `tritonsm invoke
--endpoint ENDPOINT --model NAME --image FILE`; the answer must be top_k labels of the checkpoint with finite
scores, and agree with the pipeline on the same file (same labels, scores within 1e-3). Not `tritonsm smoke
--local`: smoke sends its sample text to an image task's IMAGE input (deployment_spec/dali.py ``image_inputs``
names only DALI inputs as image inputs). Every ONNX refusal is tried again as the same entry with backend
pytorch (the pytorch way out). A build failure fails its model only; each model's outcome comes from the
manifest and the commands' output, and any "Traceback (most recent call last)" in a command's output is counted
against the model it came with (the server's output: against every model it served).

Resumable: results accumulate in <work>/results.json and an architecture with a result is not run again
(`--fresh` forgets them). A recorded batch keeps its spec, command log and checkpoints; its build cache and
tarballs are removed unless `--keep-builds`. `--limit N` runs at most N architectures not run before. Writes
benchmarks/hf_image_coverage.json and .md after every batch.

The run itself (batches, builds, the pytorch way out, resuming, the reports' common parts) is
tritonsm/benchmarking/coverage_runs.py, shared with benchmarks/hf_task_coverage.py; here: the rows, their
checkpoints and spec entries, serving judged by `tritonsm invoke --image` against the pipeline, the summary.
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import pathlib
import re
import signal
import subprocess
import sys
import time
from typing import Any, Optional

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tritonsm.benchmarking import coverage_runs, tiny_checkpoints  # noqa: E402
from tritonsm.benchmarking.coverage_runs import (BACKENDS, BIN, ENDPOINT, NOT_INSTANTIABLE, SERVED,  # noqa: E402
                                                 TRACEBACK, TRITON_VERSION, Row, cell)
from tritonsm.benchmarking.run_log import run_logged  # noqa: E402

TASK = "image-classification"
PREFIX = "img"
MAX_BATCH, TOP_K = 4, 2
NO_PROCESSOR = "no image processor"
SAMPLE_IMAGE = (640, 480)   # as tritonsm/benchmarking/smoke.py's SAMPLE_IMAGE
SCORE_ATOL = 1e-3
# A random tiny checkpoint whose scores for all labels are within this of each other answers alike whatever the
# pixels: its agreement with the pipeline says little (the report counts them).
FLAT = 1e-4
FLAT_NOTE = "all labels score alike: a weak check"
SERVER_START_S = 900        # the Python steps' execution environments unpack on the first start


class NoProcessor(Exception):
    """transformers maps no PIL image processor for the model type; the message says what it maps."""


# --- what to run -------------------------------------------------------------------------------------------

def mapped() -> dict[str, str]:
    """model_type -> the class transformers maps for image classification (the first of a tuple of variants)."""
    from transformers.models.auto import modeling_auto as auto

    names = auto.MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES
    return {t: c if isinstance(c, str) else c[0] for t, c in sorted(names.items())}


def architectures() -> list[Row]:
    return [{"task": TASK, "model_type": model_type, "class": class_name, "key": model_type}
            for model_type, class_name in mapped().items()]


def entry_name(row: Row) -> str:
    return f"{PREFIX}_" + re.sub(r"\W", "_", row["model_type"])


# --- checkpoints -------------------------------------------------------------------------------------------

def processor_class(model_type: str) -> Any:
    """The PIL-backend image processor class transformers maps for ``model_type``; NoProcessor where none."""
    import transformers
    from transformers.models.auto import image_processing_auto

    names = vars(image_processing_auto)["IMAGE_PROCESSOR_MAPPING_NAMES"].get(model_type)
    if not names:
        raise NoProcessor(f"{NO_PROCESSOR}: transformers maps none for model type {model_type}")
    name = names.get("pil") if isinstance(names, dict) else None
    if not name:
        others = ", ".join(f"{backend}: {cls}" for backend, cls in names.items()) if isinstance(names, dict) else names
        raise NoProcessor(f"{NO_PROCESSOR}: transformers maps no PIL-backend processor for {model_type} ({others})")
    cls = getattr(transformers, name, None)
    if cls is None:
        raise NoProcessor(f"{NO_PROCESSOR}: transformers maps {name}, which it does not export")
    return cls


def save_processor(model_type: str, folder: pathlib.Path) -> str:
    """Saves the model type's image processor at the saved model's image size beside it; its description."""
    from transformers import AutoConfig

    from model_build.recipes import model_facts

    cls = processor_class(model_type)
    height, width = model_facts.image_size(AutoConfig.from_pretrained(folder), tiny_checkpoints.IMAGE)
    try:
        default = cls()
        changes: dict[str, Any] = {}
        size = dict(default.size) if getattr(default, "size", None) is not None else {}
        if "height" in size or "width" in size:
            changes["size"] = {"height": height, "width": width}
        elif "shortest_edge" in size:
            changes["size"] = {"shortest_edge": min(height, width)}
        if getattr(default, "crop_size", None) is not None:
            changes["crop_size"] = {"height": height, "width": width}
        processor = cls(**changes)
    except Exception as exc:  # processors raise what they like (a missing library); reported as the reason
        raise NoProcessor(f"{NO_PROCESSOR}: {cls.__name__}() fails: {tiny_checkpoints._first(exc)}") from None
    processor.save_pretrained(folder)
    said = ", ".join(f"{k} {v}" for k, v in changes.items()) or "its default sizes (no size field)"
    return f"{cls.__name__} ({said})"


def make_checkpoint(row: Row, folder: pathlib.Path) -> None:
    """Saves the row's model and image processor into ``folder``; NotInstantiable where the model does not
    instantiate, NoProcessor where transformers maps no PIL image processor for it."""
    from transformers.utils import logging

    logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # "Writing model shards" per checkpoint
    row["weights"] = str(folder)
    row["parameters"] = tiny_checkpoints.save(row["model_type"], row["class"], folder)
    row["processor"] = save_processor(row["model_type"], folder)


# --- build and serve (tritonsm/benchmarking/coverage_runs.py; here: the spec and how serving is judged) -------

def spec_text(rows: list[Row], backend: str, served: list[str]) -> str:
    return coverage_runs.spec_document("ImageCoverage", [
        f"  {row['name']}: {{task: {{kind: {TASK}, top_k: {TOP_K}}}, backend: {backend}, "
        f"weights: {row['weights']}, max_batch_size: {MAX_BATCH}}}" for row in rows], served)


def invoke(built: list[Row], batch: coverage_runs.Batch) -> coverage_runs.Answers:
    """Serves the packed endpoint on the local Triton server and sends each built entry one encoded JPEG; the
    server's tracebacks count against every model it served."""
    from model_build.backends.dali.check_images import jpeg

    folder, log_file = batch.folder, batch.log_file
    image = folder / "sample.jpg"
    image.write_bytes(jpeg(*SAMPLE_IMAGE))
    common = ["--spec", str(batch.spec), "--manifest", str(batch.manifest)]
    answers: dict[str, tuple[bool, str]] = {}
    tracebacks: collections.Counter[str] = collections.Counter()
    with ServedEndpoint(common, folder, log_file) as (url, server_lines):
        if url is not None:
            for row in built:
                name = row["name"]
                answer_file = folder / f"answer-{name}.json"
                answer_file.unlink(missing_ok=True)
                command = [str(BIN / "tritonsm"), "invoke", "--endpoint", ENDPOINT, *common, "--model", name,
                           "--url", url, "--image", str(image), "--output", str(answer_file), "--timeout", "300"]
                status, said = run_logged(command, log_file, ROOT)
                tracebacks[name] += sum(TRACEBACK in line for _, line in said)
                if status != 0 or not answer_file.is_file():
                    error = next((line for _, line in reversed(said) if line.startswith("error")),
                                 said[-1][1] if said else f"exit status {status}")
                    answers[name] = (False, f"tritonsm invoke failed: {error}")
                    continue
                answers[name] = check_answer(json.loads(answer_file.read_text()), pathlib.Path(row["weights"]), image)
    tracebacks[""] += sum(TRACEBACK in line for line in server_lines)
    not_started = None if url else next(
        (line for line in reversed(server_lines) if line.startswith("error")),
        f"tritonsm serve did not announce its address (see {log_file})")
    return answers, tracebacks, f"not served: {not_started}" if not_started else "no answer"


class ServedEndpoint:
    """`tritonsm serve ENDPOINT --cpu-stand-in` in the background, its output in the batch's command log: (the
    address it announces, or None where it stopped or did not start in time; its output lines). Stopped on exit
    with SIGINT (it stops its Triton server on the way out), SIGKILL after a minute."""

    def __init__(self, common: list[str], folder: pathlib.Path, log_file: pathlib.Path) -> None:
        self.command = [str(BIN / "tritonsm"), "serve", ENDPOINT, *common, "--cpu-stand-in",
                        "--startup-timeout", str(SERVER_START_S), "--log-file", str(folder / "server.log")]
        self.output, self.log_file = folder / "serve.out", log_file
        self.proc: Optional[subprocess.Popen[str]] = None
        self.lines: list[str] = []

    def __enter__(self) -> tuple[Optional[str], list[str]]:
        with self.log_file.open("a") as log:
            log.write(f"$ {' '.join(self.command)} &  (its output follows the requests)\n")
        handle = self.output.open("w")
        self.proc = subprocess.Popen(self.command, stdout=handle, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                                     stdin=subprocess.DEVNULL)
        handle.close()
        deadline = time.monotonic() + SERVER_START_S + 60
        while time.monotonic() < deadline:
            text = self.output.read_text()
            found = re.search(r"^serving .* at (http://\S+)", text, re.M)
            if found:
                return found.group(1), self.lines
            if self.proc.poll() is not None:
                break
            time.sleep(2)
        return None, self.lines

    def __exit__(self, *_: object) -> None:
        assert self.proc is not None  # __enter__
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        text = self.output.read_text()
        self.lines.extend(text.splitlines())
        with self.log_file.open("a") as log:
            log.write(f"[output of tritonsm serve]\n{text}")


def check_answer(document: dict[str, Any], folder: pathlib.Path, image: pathlib.Path) -> tuple[bool, str]:
    """(ok, what): the served labels and scores for the one image, against the checkpoint's labels and
    transformers' pipeline on the same file."""
    import transformers
    from PIL import Image

    outputs = {o["name"]: o["data"] for o in document.get("outputs", [])}
    labels, scores = outputs.get("labels"), outputs.get("scores")
    if labels is None or scores is None:
        return False, f"the answer has outputs {', '.join(outputs) or 'none'}, not labels and scores"
    config = json.loads((folder / "config.json").read_text())
    known = set((config.get("id2label") or {}).values())
    if len(labels) != TOP_K or any(label not in known for label in labels) or \
            not all(isinstance(s, (int, float)) and math.isfinite(s) for s in scores):
        return False, f"the answer is not {TOP_K} labels of the checkpoint with finite scores: {labels} {scores}"
    pipe = transformers.pipeline("image-classification", model=str(folder), device="cpu")
    want = {w["label"]: w["score"] for w in pipe(Image.open(image), top_k=len(known))}
    got = ", ".join(f"{label} {score:.4f}" for label, score in zip(labels, scores))
    # Labels of (nearly) tied scores may come in either order: each served score must be the pipeline's for its
    # label, and none left out may score higher.
    difference = max(abs(score - want[label]) for label, score in zip(labels, scores))
    left_out = max((score for label, score in want.items() if label not in labels), default=-math.inf)
    if difference > SCORE_ATOL or left_out > min(scores) + SCORE_ATOL:
        return False, (f"served {got}; the pipeline answers "
                       + ", ".join(f"{label} {score:.4f}" for label, score in list(want.items())[:TOP_K]))
    flat = max(want.values()) - min(want.values()) < FLAT
    return True, f"{got} (as the pipeline, score difference {difference:.1g}" + (
        f"; {FLAT_NOTE})" if flat else ")")


COVERAGE = coverage_runs.Coverage(
    spec_text=spec_text, serve=invoke, make_checkpoint=make_checkpoint, entry_name=entry_name,
    label=lambda row: [row["model_type"]], first_step="preprocess", cases="raw images",
    not_counted={tiny_checkpoints.NotInstantiable: NOT_INSTANTIABLE, NoProcessor: NO_PROCESSOR},
    not_ready="not instantiable or without an image processor", answer_key="served")


# --- reports -----------------------------------------------------------------------------------------------

def summary_of(rows: list[Row]) -> Row:
    done = {r["model_type"] for r in rows}
    counted = [r for r in rows if r["outcome"] not in (NOT_INSTANTIABLE, NO_PROCESSOR)]
    outcomes = coverage_runs.outcomes(counted)
    return {
        "mapped": len(mapped()), "run": len(rows), "not_run_yet": len(set(mapped()) - done),
        "not_instantiable": sum(r["outcome"] == NOT_INSTANTIABLE for r in rows),
        "no_image_processor": sum(r["outcome"] == NO_PROCESSOR for r in rows),
        "instantiable": len(counted), **outcomes,
        "served_with_flat_scores": sum(FLAT_NOTE in r.get(b, {}).get("served", "") for r in rows for b in BACKENDS),
        "with_tracebacks": sum(coverage_runs.tracebacks(r) > 0 for r in rows),
        "tracebacks": sum(coverage_runs.tracebacks(r) for r in rows),
        "served_percent": coverage_runs.percent(outcomes["built_verified_served"], len(counted)),
    }


def write_reports(progress: coverage_runs.Progress, out: pathlib.Path) -> Row:
    rows = sorted(progress.results.values(), key=lambda r: r["model_type"])
    summary = summary_of(rows)
    coverage_runs.write_reports(out, "hf_image_coverage", progress, summary, rows, markdown)
    return summary


def markdown(s: Row, rows: list[Row], batches: list[Row], started: str, machine: str) -> str:
    share = f"{s['served_percent']:.0f} %" if s["served_percent"] is not None else "-"
    head = ["| mapped | run | not instantiable | no image processor | instantiable | built+verified+served | served "
            "of instantiable | built, not served | refused (ONNX) | pytorch way out: served / tried | "
            "with tracebacks |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            f"| {s['mapped']} | {s['run']} | {s['not_instantiable']} | {s['no_image_processor']} | {s['instantiable']} "
            f"| {s['built_verified_served']} | {share} | {s['built_verified_not_served']} | {len(s['refused'])} | "
            f"{s['pytorch_way_out']['served']} / {s['pytorch_way_out']['tried']} | {s['with_tracebacks']} |"]
    refusals = [coverage_runs.refusal_line(model_type, why, next(r for r in rows if r["model_type"] == model_type))
                for model_type, why in s["refused"].items()]
    table = ["| architecture | image processor | checkpoint | outcome (onnxruntime) | reason / verification | "
             "served answer | pytorch way out | build s | tracebacks |", "|---|---|---|---|---|---|---|---:|---:|"]
    for r in rows:
        onnx, torch_way = r.get("onnxruntime", {}), r.get("pytorch", {})
        answer = (torch_way if torch_way.get("outcome") == SERVED else onnx).get("served", "")
        table.append(f"| {r['model_type']} ({r['class']}) | {cell(r.get('processor', ''))} | "
                     f"{r.get('parameters', '')} | {r['outcome']} | {cell(coverage_runs.verdict(r))} "
                     f"| {cell(answer)} | {cell(coverage_runs.way_out(r))} | {onnx.get('build_seconds', '')} | "
                     f"{coverage_runs.tracebacks(r)} |")
    line = (f"Summary: {s['mapped']} mapped ({s['run']} run, {s['not_run_yet']} not run yet), {s['not_instantiable']} "
            f"not instantiable, {s['no_image_processor']} without an image processor, {s['instantiable']} "
            f"instantiable, {s['built_verified_served']} built+verified+served ({share} of instantiable), "
            f"{len(s['refused'])} refused with onnxruntime, pytorch way out {s['pytorch_way_out']['served']} served of "
            f"{s['pytorch_way_out']['tried']} tried, {s['tracebacks']} tracebacks; {s['served_with_flat_scores']} "
            "served "
            "checkpoint(s) score all labels alike (random tiny weights whose logits do not tell labels apart: their "
            "answers agree with the pipeline whatever the pixels).")
    return (f"# Raw-image classification coverage of `task:` entries over transformers' architectures\n\n"
            f"Made by `benchmarks/hf_image_coverage.py` (started {started}, {machine}; Triton {TRITON_VERSION}, "
            f"backend onnxruntime, max_batch_size {MAX_BATCH}, top_k {TOP_K}). Served: built, verified at build "
            "time against transformers' pipeline('image-classification') on raw images, and answering one encoded "
            "JPEG on the local Triton server (`tritonsm serve --cpu-stand-in`, `tritonsm invoke --image`) as the "
            "pipeline does. Not instantiable and no image processor: not counted.\n\n"
            + line + "\n\n" + coverage_runs.sections(head, refusals, batches, table))


# --- main --------------------------------------------------------------------------------------------------

def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    coverage_runs.add_arguments(parser, "/tmp/hf_image_coverage", only="model types, comma-separated",
                                limit="run at most N architectures not run before", build_size="")
    args = parser.parse_args()
    args.only = {t for t in args.only.split(",") if t}
    unknown = sorted(args.only - set(mapped()))
    if unknown:
        parser.error(f"--only {', '.join(unknown)}: not a model type transformers maps for image classification")
    return args


def main() -> int:
    args = arguments()
    progress = coverage_runs.Progress.load(args)
    todo = [row for row in architectures()
            if row["key"] not in progress.results and (not args.only or row["model_type"] in args.only)][:args.limit]
    summary = coverage_runs.run(todo, progress, args, COVERAGE, lambda done: write_reports(done, args.out))
    print(json.dumps({k: v for k, v in summary.items() if k not in ("refused", "pytorch_way_out")}, indent=1),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

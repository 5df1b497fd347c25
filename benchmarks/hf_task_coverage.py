"""Which transformers architectures a `task:` entry serves from raw text, per task: built, verified, served, refused.

    .venv/bin/python benchmarks/hf_task_coverage.py [--tasks text-classification,question-answering]
        [--only bert,gpt2] [--limit N] [--batch 8] [--work /tmp/hf_task_coverage] [--fresh] [--keep-builds]

For each task kind of deployment_spec/sections/tasks.py, every architecture the pinned transformers maps for it
(transformers.models.auto.modeling_auto):

    text-classification    MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES
    token-classification   MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES
    question-answering     MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES
    sentence-embedding     MODEL_MAPPING_NAMES of the model types that classify sequences (text encoders),
                           saved as the bare model (AutoModel): sentence-transformers pools its tokens

gets a tiny random checkpoint made offline from its own config (benchmarks/tooling/tiny_checkpoints.py,
``save_with_tokenizer``) with a tokenizer of a real algorithm trained offline
(benchmarks/tooling/text_checkpoints.py): WordPiece, byte-level BPE or Unigram, picked from the family of
the architecture's own tokenizer where transformers names one (else byte-level BPE for decoder-only language
models, else WordPiece); the config's vocabulary and special-token ids are the tokenizer's. An architecture
that does not instantiate that way is listed with its reason and not counted. The trained all-MiniLM-L6-v2
the project ships (model_build/recipes/minilm.py) is one more sentence-embedding row.

The checkpoints are built in batches (one spec per batch, one ``task:`` entry per checkpoint, backend
onnxruntime, max_batch_size 4, sequence_length 32, Triton 25.09) by the real `tritonsm build
--python-env-for local`, which verifies each ensemble's raw text in, answers out against transformers'
pipeline (sentence-transformers' encode); then the built ones are served on the local Triton server (one
multi-model endpoint, CPU stand-ins) and answer one raw-text request each (`tritonsm smoke --local`). Every
ONNX refusal is tried again as the same entry with backend pytorch (the pytorch way out). A build failure
fails its model only; each model's outcome comes from the manifest and the command's output, and any
"Traceback (most recent call last)" in either command's output is counted against the model it came with.

Resumable: results accumulate in <work>/results.json and a (task, architecture) with a result is not run
again (`--fresh` forgets them). A recorded batch keeps its spec, command log and checkpoints; its build cache
and tarballs (about 75 MB a model) are removed unless `--keep-builds`. `--limit N` runs at most N
architectures per task. Writes benchmarks/hf_task_coverage.json and .md after every batch.

The run itself (batches, builds, the pytorch way out, resuming, the reports' common parts) is
benchmarks/tooling/coverage_runs.py, shared with benchmarks/hf_image_coverage.py; here: the rows, their
checkpoints and spec entries, serving judged by `tritonsm smoke --local`, the summary per task.
"""
from __future__ import annotations

import argparse
import collections
import inspect
import json
import pathlib
import re
import sys
from typing import Any, Mapping

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tooling import coverage_runs, text_checkpoints, tiny_checkpoints  # noqa: E402
from benchmarks.tooling.coverage_runs import (BIN, ENDPOINT, NOT_INSTANTIABLE, TRACEBACK,  # noqa: E402
                                                 TRITON_VERSION, Row, cell)
from benchmarks.tooling.run_log import run_logged  # noqa: E402

TASKS = ("text-classification", "token-classification", "question-answering", "sentence-embedding")
PREFIX = {"text-classification": "cls", "token-classification": "tok", "question-answering": "qa",
          "sentence-embedding": "emb"}
LABELS = {"text-classification": text_checkpoints.LABELS["text-classification"],
          "token-classification": text_checkpoints.LABELS["token-classification"],
          "question-answering": ["LABEL_0", "LABEL_1"]}  # QA heads split num_labels outputs into start and end
MINILM = "all-MiniLM-L6-v2"
MAX_BATCH, SEQUENCE = 4, 32


# --- what to run -------------------------------------------------------------------------------------------

def mapped(task: str) -> dict[str, str]:
    """model_type -> the class transformers maps for ``task`` (the first of a tuple of variants)."""
    from transformers.models.auto import modeling_auto as auto

    if task == "sentence-embedding":
        encoders = set(auto.MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES)
        names: Mapping[str, Any] = {t: c for t, c in auto.MODEL_MAPPING_NAMES.items() if t in encoders}
    else:
        names = {"text-classification": auto.MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES,
                 "token-classification": auto.MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES,
                 "question-answering": auto.MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES}[task]
    return {t: c if isinstance(c, str) else c[0] for t, c in sorted(names.items())}


def architectures(tasks: list[str]) -> list[Row]:
    """Every (task, architecture), the tasks interleaved in proportion so that a run stopped early covered them
    all alike; the trained MiniLM first."""
    out: list[Row] = []
    if "sentence-embedding" in tasks:
        out.append({"task": "sentence-embedding", "model_type": MINILM, "class": "BertModel, trained",
                    "key": f"sentence-embedding:{MINILM}", "place": -1.0})
    for task in tasks:
        names = mapped(task)
        for index, (model_type, class_name) in enumerate(names.items()):
            out.append({"task": task, "model_type": model_type, "class": class_name,
                        "key": f"{task}:{model_type}", "place": (index + 0.5) / len(names)})
    return sorted(out, key=lambda row: row["place"])


def entry_name(row: Row) -> str:
    return f"{PREFIX[row['task']]}_" + re.sub(r"\W", "_", row["model_type"])


# --- checkpoints -------------------------------------------------------------------------------------------

def algorithm(model_type: str) -> tuple[str, str]:
    """(tokenizer algorithm, why): the family of the architecture's own tokenizer class where its module builds
    one model only; else byte-level BPE for a decoder-only language model; else WordPiece."""
    import transformers
    from transformers.models.auto import modeling_auto as auto
    from transformers.models.auto import tokenization_auto

    name = tokenization_auto.TOKENIZER_MAPPING_NAMES.get(model_type)
    name = next((n for n in name if n), None) if isinstance(name, tuple) else name
    cls = getattr(transformers, name, None) if name else None
    if cls is not None:
        try:
            source = inspect.getsource(inspect.getmodule(cls))  # type: ignore[arg-type]
        except (OSError, TypeError):
            source = ""
        found = [algo for algo, mark in (("wordpiece", "WordPiece("), ("unigram", "Unigram("), ("bpe-bytes", "BPE("))
                 if mark in source]
        if len(found) == 1:
            return found[0], f"{name} builds a {found[0]} tokenizer"
    if model_type in auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and model_type not in auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return "bpe-bytes", "decoder-only language model"
    return "wordpiece", "family not told by its tokenizer"


def make_checkpoint(row: Row, folder: pathlib.Path) -> None:
    """Saves the row's checkpoint into ``folder`` and fills its tokenizer and parameters (the MiniLM row points at
    the shipped folder); NotInstantiable where the architecture does not instantiate."""
    if row["model_type"] == MINILM:
        from model_build.recipes import minilm

        row.update(weights=str(minilm.model_dir()), tokenizer="its own (WordPiece)", parameters="trained weights")
        return
    algo, why = algorithm(row["model_type"])
    row.update(weights=str(folder), tokenizer=algo, tokenizer_why=why)
    row["parameters"] = tiny_checkpoints.save_with_tokenizer(
        row["model_type"], row["class"], folder, text_checkpoints.tokenizer(algo), LABELS.get(row["task"]))


# --- build and serve (benchmarks/tooling/coverage_runs.py; here: the spec and how serving is judged) -------

def spec_text(rows: list[Row], backend: str, served: list[str]) -> str:
    return coverage_runs.spec_document("TaskCoverage", [
        f"  {row['name']}: {{task: {{kind: {row['task']}}}, backend: {backend}, weights: {row['weights']}, "
        f"max_batch_size: {MAX_BATCH}, sequence_length: {SEQUENCE}}}" for row in rows], served)


def smoke_log(lines: list[tuple[float, str]]) -> tuple[dict[str, tuple[bool, str]], collections.Counter[str]]:
    """Each model's answer (ok, detail) and the tracebacks printed before it (those after the last answer: "")."""
    answers: dict[str, tuple[bool, str]] = {}
    tracebacks: collections.Counter[str] = collections.Counter()
    pending = 0
    for _, line in lines:
        pending += TRACEBACK in line
        found = re.match(r"  (\w+): (ok|FAILED)(.*)", line)
        if found:
            answers[found.group(1)] = (found.group(2) == "ok", found.group(3).lstrip(":, (").rstrip(")"))
            tracebacks[found.group(1)] += pending
            pending = 0
    tracebacks[""] += pending
    return answers, tracebacks


def smoke(built: list[Row], batch: coverage_runs.Batch) -> coverage_runs.Answers:
    """Each built entry sends one raw-text request on the local Triton server (`tritonsm smoke --local`)."""
    command = [str(BIN / "tritonsm"), "smoke", ENDPOINT, "--local", "--spec", str(batch.spec), "--manifest",
               str(batch.manifest)]
    _, served_lines = run_logged(command, batch.log_file, ROOT)
    answers, tracebacks = smoke_log(served_lines)
    not_started = next((line for _, line in served_lines if line.startswith(f"error: smoke test of {ENDPOINT}")),
                       None)
    return answers, tracebacks, not_started or f"no answer (see {batch.log_file})"


COVERAGE = coverage_runs.Coverage(
    spec_text=spec_text, serve=smoke, make_checkpoint=make_checkpoint, entry_name=entry_name,
    label=lambda row: [row["task"], row["model_type"]], first_step="tokenize", cases="",
    not_counted={tiny_checkpoints.NotInstantiable: NOT_INSTANTIABLE}, not_ready="not instantiable")


# --- reports -----------------------------------------------------------------------------------------------

def task_summary(task: str, rows: list[Row]) -> Row:
    run = [r for r in rows if r["task"] == task]
    done = {r["model_type"] for r in run}
    expected = set(mapped(task)) | ({MINILM} if task == "sentence-embedding" else set())
    counted = [r for r in run if r["outcome"] != NOT_INSTANTIABLE]
    outcomes = coverage_runs.outcomes(counted)
    served_either = outcomes["built_verified_served"] + outcomes["pytorch_way_out"]["served"]
    return {
        "mapped": len(mapped(task)), "run": len(run), "not_run_yet": len(expected - done),
        "trained_checkpoints": sum(r["model_type"] == MINILM for r in run),
        "not_instantiable": len(run) - len(counted), "instantiable": len(counted), **outcomes,
        "with_tracebacks": sum(coverage_runs.tracebacks(r) > 0 for r in run),
        "served_percent": coverage_runs.percent(outcomes["built_verified_served"], len(counted)),
        # What a user gets from a `task:` entry: served with onnxruntime, or with backend: pytorch where the ONNX
        # path refuses the architecture and the way out serves it.
        "served_either_backend": served_either,
        "served_either_percent": coverage_runs.percent(served_either, len(counted)),
    }


def write_reports(progress: coverage_runs.Progress, tasks: list[str], out: pathlib.Path) -> dict[str, Row]:
    rows = sorted(progress.results.values(), key=lambda r: (TASKS.index(r["task"]), r["model_type"]))
    summary = {task: task_summary(task, rows) for task in TASKS
               if task in tasks or any(r["task"] == task for r in rows)}
    coverage_runs.write_reports(out, "hf_task_coverage", progress, summary, rows, markdown, dropped=("place",))
    return summary


def markdown(summary: dict[str, Row], rows: list[Row], batches: list[Row], started: str, machine: str) -> str:
    head = ["| task | mapped | run | not instantiable | instantiable | built+verified+served | served of "
            "instantiable | built, not served | refused (ONNX) | pytorch way out: served / tried | served with either "
            "backend | with tracebacks |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for task, s in summary.items():
        share = f"{s['served_percent']:.0f} %" if s["served_percent"] is not None else "-"
        trained = f" (+{s['trained_checkpoints']} trained)" if s["trained_checkpoints"] else ""
        head.append(f"| {task} | {s['mapped']}{trained} | {s['run']} | {s['not_instantiable']} | {s['instantiable']} | "
                    f"{s['built_verified_served']} | {share} | {s['built_verified_not_served']} | {len(s['refused'])} | "
                    f"{s['pytorch_way_out']['served']} / {s['pytorch_way_out']['tried']} | "
                    f"{s['served_either_backend']} ({s['served_either_percent']:.0f} %) | {s['with_tracebacks']} |")
    refusals = [coverage_runs.refusal_line(f"{task} / {model_type}", why, next(
                    r for r in rows if r["task"] == task and r["model_type"] == model_type))
                for task, s in summary.items() for model_type, why in s["refused"].items()]
    table = ["| task | architecture | tokenizer | checkpoint | outcome (onnxruntime) | reason / verification | "
             "pytorch way out | build s | tracebacks |", "|---|---|---|---|---|---|---|---:|---:|"]
    for r in rows:
        onnx = r.get("onnxruntime", {})
        table.append(f"| {r['task']} | {r['model_type']} ({r['class']}) | {r.get('tokenizer', '')} | "
                     f"{r.get('parameters', '')} | {r['outcome']} | {cell(coverage_runs.verdict(r))} "
                     f"| {cell(coverage_runs.way_out(r))} | {onnx.get('build_seconds', '')} | "
                     f"{coverage_runs.tracebacks(r)} |")
    return (f"# Raw-text task coverage of `task:` entries over transformers' architectures\n\n"
            f"Made by `benchmarks/hf_task_coverage.py` (started {started}, {machine}; Triton {TRITON_VERSION}, "
            f"backend onnxruntime, max_batch_size {MAX_BATCH}, sequence_length {SEQUENCE}). Served: built, "
            "verified at build time against transformers' pipeline (sentence-transformers' encode) and answering "
            "one raw-text request on the local Triton server. Not instantiable: not counted.\n\n"
            + coverage_runs.sections(head, refusals, batches, table))


# --- main --------------------------------------------------------------------------------------------------

def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tasks", default=",".join(TASKS), help=f"comma-separated, of {', '.join(TASKS)}")
    coverage_runs.add_arguments(parser, "/tmp/hf_task_coverage",
                                only=f"model types, comma-separated ({MINILM}: the trained row)",
                                limit="run at most N architectures not run before, per task",
                                build_size="about 75 MB a model; ")
    args = parser.parse_args()
    args.tasks = [t for t in args.tasks.split(",") if t]
    unknown = [t for t in args.tasks if t not in TASKS]
    if unknown:
        parser.error(f"--tasks {', '.join(unknown)}: not a task; one of {', '.join(TASKS)}")
    args.only = {t for t in args.only.split(",") if t}
    return args


def to_run(args: argparse.Namespace, results: dict[str, Row]) -> list[Row]:
    """The rows to run now: at most ``--limit`` per task, the MiniLM row beside them."""
    todo: list[Row] = []
    taken: collections.Counter[str] = collections.Counter()
    for row in architectures(args.tasks):
        if (args.only and row["model_type"] not in args.only) or row["key"] in results:
            continue
        trained = row["model_type"] == MINILM
        if args.limit is None or trained or taken[row["task"]] < args.limit:
            todo.append(row)
            taken[row["task"]] += not trained
    return todo


def main() -> int:
    args = arguments()
    progress = coverage_runs.Progress.load(args)
    summary = coverage_runs.run(to_run(args, progress.results), progress, args, COVERAGE,
                                lambda done: write_reports(done, args.tasks, args.out))
    print(json.dumps({task: {k: v for k, v in s.items() if k not in ("refused", "pytorch_way_out")}
                      for task, s in summary.items()}, indent=1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

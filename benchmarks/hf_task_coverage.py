"""Which transformers architectures a `task:` entry serves from raw text, per task: built, verified, served, refused.

    .venv/bin/python benchmarks/hf_task_coverage.py [--tasks text-classification,question-answering]
        [--only bert,gpt2] [--limit N] [--batch 8] [--work /tmp/hf_task_coverage] [--fresh] [--keep-builds]

For each task kind of deployment_spec/tasks.py, every architecture the pinned transformers maps for it
(transformers.models.auto.modeling_auto):

    text-classification    MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES
    token-classification   MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES
    question-answering     MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES
    sentence-embedding     MODEL_MAPPING_NAMES of the model types that classify sequences (text encoders),
                           saved as the bare model (AutoModel): sentence-transformers pools its tokens

gets a tiny random checkpoint made offline from its own config (tritonsm/benchmarking/tiny_checkpoints.py,
``save_with_tokenizer``) with a tokenizer of a real algorithm trained offline
(tritonsm/benchmarking/text_checkpoints.py): WordPiece, byte-level BPE or Unigram, picked from the family of
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
"""
from __future__ import annotations

import argparse
import collections
import datetime
import inspect
import json
import os
import pathlib
import platform
import re
import shutil
import sys
import time
from typing import Any, Mapping

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tritonsm.benchmarking import text_checkpoints, tiny_checkpoints  # noqa: E402
from tritonsm.benchmarking.run_log import run_logged  # noqa: E402

TASKS = ("text-classification", "token-classification", "question-answering", "sentence-embedding")
PREFIX = {"text-classification": "cls", "token-classification": "tok", "question-answering": "qa",
          "sentence-embedding": "emb"}
LABELS = {"text-classification": text_checkpoints.LABELS["text-classification"],
          "token-classification": text_checkpoints.LABELS["token-classification"],
          "question-answering": ["LABEL_0", "LABEL_1"]}  # QA heads split num_labels outputs into start and end
MINILM = "all-MiniLM-L6-v2"
TRITON_VERSION = "25.09"
MAX_BATCH, SEQUENCE = 4, 32
ENDPOINT = "coverage"
BACKENDS = ("onnxruntime", "pytorch")
SERVED, NOT_SERVED, REFUSED, NOT_JUDGED = ("built+verified+served", "built+verified, not served", "refused",
                                            "not judged")
NOT_INSTANTIABLE = "not instantiable"
TRACEBACK = "Traceback (most recent call last)"
BIN = pathlib.Path(sys.executable).parent
Row = dict[str, Any]


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


# --- build and serve ---------------------------------------------------------------------------------------

def spec_text(rows: list[Row], backend: str, served: list[str]) -> str:
    models = [f"  {row['name']}: {{task: {{kind: {row['task']}}}, backend: {backend}, weights: {row['weights']}, "
              f"max_batch_size: {MAX_BATCH}, sequence_length: {SEQUENCE}}}" for row in rows]
    endpoint = (f"  {ENDPOINT}: {{kind: multi-model, models: [{', '.join(served)}], instance_type: ml.g5.xlarge}}"
                if served else "  {}")
    return (f'project: TaskCoverage\ntriton_version: "{TRITON_VERSION}"\nmodels:\n' + "\n".join(models) +
            f"\nendpoints:\n{endpoint}\nenvironments:\n  dev: {{region: us-east-1}}\n")


def owner(step: str) -> str:
    """The task entry a Triton model belongs to (cls_bert-model -> cls_bert): entry names have no '-'."""
    return step.split("-", 1)[0]


def build_log(lines: list[tuple[float, str]]) -> tuple[dict[str, float], collections.Counter[str]]:
    """Seconds spent building each entry (its steps and ensemble together), and tracebacks per entry (those
    printed while it was being built; "" before any)."""
    seconds: dict[str, float] = collections.defaultdict(float)
    tracebacks: collections.Counter[str] = collections.Counter()
    current, started = "", 0.0
    for at, line in lines:
        found = re.match(r"\[\d+/\d+\] ([\w-]+): (building|built in|FAILED|cannot be built)", line)
        if found and found.group(2) == "building":
            current, started = owner(found.group(1)), at
        elif found and owner(found.group(1)) == current:
            seconds[current] += at - started
        if TRACEBACK in line:
            tracebacks[current] += 1
    return dict(seconds), tracebacks


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


def refusal(name: str, not_built: dict[str, str], fallback: str) -> str:
    """The first line of the error that stopped ``name``: its model step's, tokenizer step's or answer step's
    before the ensemble's own (a step's failure also fails the ensemble, which then says only that)."""
    for key in (f"{name}-model", f"{name}-tokenize", f"{name}-answer", name):
        why = not_built.get(f"models.{key}")
        if why:
            return first_line(why)
    return fallback


def first_line(message: str) -> str:
    """The message's first line; where it only announces what follows ("...failed (exit 1):"), with the
    message's last line (the exception) after it."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    return f"{lines[0]} ... {lines[-1]}" if lines[0].endswith(":") and len(lines) > 1 else lines[0]


def build_and_serve(rows: list[Row], folder: pathlib.Path, backend: str) -> None:
    """Builds ``rows`` as one spec with ``backend``, then serves what built; each row's ``backend`` key gets its
    outcome, reason, build seconds, verification and tracebacks."""
    from deployment_spec.manifest import load_manifest

    folder.mkdir(parents=True, exist_ok=True)
    spec, out, log_file = folder / "spec.yaml", folder / "assets", folder / "commands.log"
    build = [str(BIN / "tritonsm"), "build", "--spec", str(spec), "--out", str(out), "--work-dir",
             str(folder / "work"), "--python-env-for", "local"]
    spec.write_text(spec_text(rows, backend, []))
    status, lines = run_logged(build, log_file, ROOT)
    seconds, tracebacks = build_log(lines)
    manifest = load_manifest(out / "manifest.json") if (out / "manifest.json").is_file() else None
    error = next((line for _, line in reversed(lines) if line.startswith("error: ")), f"exit status {status}")
    built = []
    for row in rows:
        name, entry = row["name"], (manifest.models.get(row["name"]) if manifest else None)
        result: Row = {"build_seconds": round(seconds.get(name, 0.0), 1),
                       "tracebacks": tracebacks[name] + tracebacks[""]}
        if entry is not None and entry.verification.ran:
            details = entry.verification.details or {}
            result.update(outcome=NOT_SERVED, verified=f"{entry.verification.runtime} {entry.verification.version} "
                          f"vs {details.get('reference', '?')}: {details.get('measure', 'difference')} "
                          f"{entry.verification.max_abs_error:.2g}")
            built.append(name)
        elif entry is not None:
            result.update(outcome=REFUSED, reason="built but not verified: " + (entry.verification.why or "?"))
        elif manifest is not None and any(k.startswith(f"models.{name}") for k in manifest.not_built):
            result.update(outcome=REFUSED, reason=refusal(name, manifest.not_built, error))
        else:  # the build stopped as a whole before judging this model
            result.update(outcome=NOT_JUDGED, reason=f"tritonsm build stopped: {error} (see {log_file})")
        row[backend] = result
    if built:
        serve(rows, built, folder, backend, build)


def serve(rows: list[Row], built: list[str], folder: pathlib.Path, backend: str, build: list[str]) -> None:
    """Packs the built ones into one multi-model endpoint (cached: this build only packs) and sends each one
    raw-text request on the local Triton server."""
    spec, out, log_file = folder / "spec.yaml", folder / "assets", folder / "commands.log"
    spec.write_text(spec_text(rows, backend, built))
    _, lines = run_logged(build, log_file, ROOT)
    _, packing_tracebacks = build_log(lines)
    smoke = [str(BIN / "tritonsm"), "smoke", ENDPOINT, "--local", "--spec", str(spec), "--manifest",
             str(out / "manifest.json")]
    _, served_lines = run_logged(smoke, log_file, ROOT)
    answers, tracebacks = smoke_log(served_lines)
    not_started = next((line for _, line in served_lines if line.startswith(f"error: smoke test of {ENDPOINT}")),
                       None)
    for row in rows:
        if row["name"] not in built:
            continue
        result = row[backend]
        result["tracebacks"] += packing_tracebacks[row["name"]] + packing_tracebacks[""] + \
            tracebacks[row["name"]] + tracebacks[""]
        ok, detail = answers.get(row["name"], (False, not_started or f"no answer (see {log_file})"))
        if ok:
            result["outcome"] = SERVED
        else:
            result["reason"] = first_line(detail) or "no answer"


def run_batch(rows: list[Row], folder: pathlib.Path, started: float) -> None:
    """Checkpoints, the ONNX build and serving, then the pytorch way out for the ONNX refusals."""
    ready = []
    for row in rows:
        row["name"] = entry_name(row)
        try:
            make_checkpoint(row, folder / "checkpoints" / row["name"])
            ready.append(row)
        except tiny_checkpoints.NotInstantiable as exc:
            row.update(outcome=NOT_INSTANTIABLE, reason=str(exc))
    say(started, f"  {len(ready)} checkpoints ready ({len(rows) - len(ready)} not instantiable); building "
                 f"{', '.join(r['name'] for r in ready) or 'nothing'} with onnxruntime")
    if ready:
        build_and_serve(ready, folder / "onnxruntime", "onnxruntime")
    for row in ready:
        row.update(outcome=row["onnxruntime"]["outcome"], reason=row["onnxruntime"].get("reason", ""))
    refused = [row for row in ready if row["outcome"] == REFUSED]
    if refused:
        say(started, f"  pytorch way out for {', '.join(r['name'] for r in refused)}")
        build_and_serve(refused, folder / "pytorch", "pytorch")


def drop_builds(folder: pathlib.Path) -> None:
    """Removes a recorded batch's build caches and tarballs (the results do not need them)."""
    for backend in BACKENDS:
        for name in ("work", "assets"):
            shutil.rmtree(folder / backend / name, ignore_errors=True)


def say(started: float, text: str) -> None:
    print(f"[{time.monotonic() - started:6.0f} s] {text}", flush=True)


# --- reports -----------------------------------------------------------------------------------------------

def task_summary(task: str, rows: list[Row]) -> Row:
    run = [r for r in rows if r["task"] == task]
    done = {r["model_type"] for r in run}
    expected = set(mapped(task)) | ({MINILM} if task == "sentence-embedding" else set())
    counted = [r for r in run if r["outcome"] != NOT_INSTANTIABLE]
    served = [r for r in counted if r["outcome"] == SERVED]
    refused = [r for r in counted if r["outcome"] == REFUSED]
    tried = [r for r in refused if "pytorch" in r]
    return {
        "mapped": len(mapped(task)), "run": len(run), "not_run_yet": len(expected - done),
        "trained_checkpoints": sum(r["model_type"] == MINILM for r in run),
        "not_instantiable": len(run) - len(counted), "instantiable": len(counted),
        "built_verified_served": len(served),
        "built_verified_not_served": sum(r["outcome"] == NOT_SERVED for r in counted),
        "refused": {r["model_type"]: r["reason"] for r in refused},
        "not_judged": sum(r["outcome"] == NOT_JUDGED for r in counted),
        "pytorch_way_out": {"tried": len(tried), "served": sum(r["pytorch"]["outcome"] == SERVED for r in tried),
                            "refused": {r["model_type"]: r["pytorch"].get("reason", "") for r in tried
                                        if r["pytorch"]["outcome"] != SERVED}},
        "with_tracebacks": sum(any(r.get(b, {}).get("tracebacks", 0) for b in BACKENDS) for r in run),
        "served_percent": round(100 * len(served) / len(counted), 1) if counted else None,
        # What a user gets from a `task:` entry: served with onnxruntime, or with backend: pytorch where the ONNX
        # path refuses the architecture and the way out serves it.
        "served_either_backend": len(served) + sum(r["pytorch"]["outcome"] == SERVED for r in tried),
        "served_either_percent": round(100 * (len(served) + sum(r["pytorch"]["outcome"] == SERVED for r in tried))
                                       / len(counted), 1) if counted else None,
    }


def write_reports(results: dict[str, Row], batches: list[Row], tasks: list[str],
                  out: pathlib.Path, started: str) -> dict[str, Row]:
    rows = sorted(results.values(), key=lambda r: (TASKS.index(r["task"]), r["model_type"]))
    summary = {task: task_summary(task, rows) for task in TASKS
               if task in tasks or any(r["task"] == task for r in rows)}
    machine = f"{platform.machine()}, {os.cpu_count()} cores, shared"
    document = {"started": started, "machine": machine, "triton_version": TRITON_VERSION, "summary": summary,
                "batches": batches, "results": [{k: v for k, v in r.items() if k != "place"} for r in rows]}
    (out / "hf_task_coverage.json").write_text(json.dumps(document, indent=1) + "\n")
    (out / "hf_task_coverage.md").write_text(markdown(summary, rows, batches, started, machine))
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
    refusals = []
    for task, s in summary.items():
        for model_type, why in s["refused"].items():
            row = next(r for r in rows if r["task"] == task and r["model_type"] == model_type)
            way_out = row.get("pytorch", {})
            refusals.append(f"- {task} / {model_type}: {cell(why)} — pytorch: {way_out.get('outcome', 'not tried')}"
                            + (f" ({cell(way_out['reason'])})" if way_out.get("reason") else ""))
    table = ["| task | architecture | tokenizer | checkpoint | outcome (onnxruntime) | reason / verification | "
             "pytorch way out | build s | tracebacks |", "|---|---|---|---|---|---|---|---:|---:|"]
    for r in rows:
        onnx, torch_way = r.get("onnxruntime", {}), r.get("pytorch", {})
        what = r.get("reason") or onnx.get("verified", "")
        way_out = (f"{torch_way['outcome']}" + (f": {torch_way['reason']}" if torch_way.get("reason") else "")
                   if torch_way else "")
        tracebacks = sum(r.get(b, {}).get("tracebacks", 0) for b in BACKENDS)
        table.append(f"| {r['task']} | {r['model_type']} ({r['class']}) | {r.get('tokenizer', '')} | "
                     f"{r.get('parameters', '')} | {r['outcome']} | {cell(what)} | {cell(way_out)} | "
                     f"{onnx.get('build_seconds', '')} | {tracebacks} |")
    times = ", ".join(f"{b['rows']} in {b['seconds']:.0f} s" for b in batches)
    return (f"# Raw-text task coverage of `task:` entries over transformers' architectures\n\n"
            f"Made by `benchmarks/hf_task_coverage.py` (started {started}, {machine}; Triton {TRITON_VERSION}, "
            f"backend onnxruntime, max_batch_size {MAX_BATCH}, sequence_length {SEQUENCE}). Served: built, "
            "verified at build time against transformers' pipeline (sentence-transformers' encode) and answering "
            "one raw-text request on the local Triton server. Not instantiable: not counted.\n\n"
            + "\n".join(head) + "\n\n## Refusals (onnxruntime) and the pytorch way out\n\n"
            + ("\n".join(refusals) or "None.") + f"\n\n## Batches\n\n{times or 'None yet.'}\n\n## Per architecture\n\n"
            + "\n".join(table) + "\n")


def cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


# --- main --------------------------------------------------------------------------------------------------

def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tasks", default=",".join(TASKS), help=f"comma-separated, of {', '.join(TASKS)}")
    parser.add_argument("--only", default="", help=f"model types, comma-separated ({MINILM}: the trained row)")
    parser.add_argument("--limit", type=int, help="run at most N architectures not run before, per task")
    parser.add_argument("--batch", type=int, default=8, help="checkpoints per `tritonsm build` (default 8)")
    parser.add_argument("--work", type=pathlib.Path, default=pathlib.Path("/tmp/hf_task_coverage"))
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks")
    parser.add_argument("--fresh", action="store_true", help="forget earlier results and build caches")
    parser.add_argument("--keep-builds", action="store_true",
                        help="keep each batch's build cache and tarballs (about 75 MB a model; by default only its "
                             "spec, command log and checkpoints stay)")
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
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    store = args.work / "results.json"
    if args.fresh:
        for old in args.work.glob("batch-*"):
            shutil.rmtree(old)
    saved = json.loads(store.read_text()) if store.is_file() and not args.fresh else {}
    results: dict[str, Row] = saved.get("results", {})
    batches: list[Row] = saved.get("batches", [])
    started = saved.get("started") or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    todo = to_run(args, results)
    clock = time.monotonic()
    say(clock, f"{len(results)} done before; {len(todo)} to run in batches of {args.batch}")
    for first in range(0, len(todo), args.batch):
        batch, batch_start = todo[first:first + args.batch], time.monotonic()
        folder = args.work / f"batch-{len(batches):03d}"
        say(clock, f"batch {first // args.batch + 1} of {-(-len(todo) // args.batch)} ({folder.name}): "
                   + ", ".join(f"{r['task']}/{r['model_type']}" for r in batch))
        run_batch(batch, folder, clock)
        for row in batch:
            results[row["key"]] = row
            say(clock, f"  {row['task']} {row['model_type']}: {row['outcome']}"
                       + (f" ({row['reason']})" if row.get("reason") else "")
                       + (f"; pytorch: {row['pytorch']['outcome']}" if "pytorch" in row else ""))
        batches.append({"folder": folder.name, "rows": len(batch),
                        "seconds": round(time.monotonic() - batch_start, 1)})
        store.write_text(json.dumps({"started": started, "batches": batches, "results": results}, indent=1))
        if not args.keep_builds:
            drop_builds(folder)
        write_reports(results, batches, args.tasks, args.out, started)
        say(clock, f"batch done in {time.monotonic() - batch_start:.0f} s")
    summary = write_reports(results, batches, args.tasks, args.out, started)
    print(json.dumps({task: {k: v for k, v in s.items() if k not in ("refused", "pytorch_way_out")}
                      for task, s in summary.items()}, indent=1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

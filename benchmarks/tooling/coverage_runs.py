"""What the coverage benchmarks share: benchmarks/hf_task_coverage.py (raw text, per task) and
benchmarks/hf_image_coverage.py (raw images) run architectures the same way and differ only in what a
``Coverage`` names.

A run: rows (one architecture each) in batches; per batch, each row's checkpoint (``Coverage.make_checkpoint``;
an exception of ``Coverage.not_counted`` makes the row's outcome and it goes no further), one spec of the ready
ones built with onnxruntime by the real `tritonsm build --python-env-for local` (``Coverage.spec_text``), the
built ones packed as one multi-model endpoint and served (``Coverage.serve``: how serving is judged), then the
same for the ONNX refusals with backend pytorch (the pytorch way out). Each model's outcome comes from the
manifest and the commands' output; any "Traceback (most recent call last)" in a command's output is counted
against the model it came with.

Resumable: results accumulate in <work>/results.json (``Progress``) and a row with a result is not run again;
the reports are written after every batch. Also here: serving a batch's endpoint on the local Triton server and
sending each model one file (``invoke_each``, ``ServedEndpoint``), judging labels and scores against a pipeline's
(``label_answer``), and the parts of the reports that read alike.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime
import json
import math
import os
import pathlib
import platform
import re
import shutil
import signal
import subprocess
import sys
import time
from typing import Any, Callable, Iterable, Mapping, Optional, Protocol

from benchmarks.tooling.run_log import run_logged

ROOT = pathlib.Path(__file__).resolve().parents[2]  # the checkout: the commands run in it
TRITON_VERSION = "25.09"
ENDPOINT = "coverage"
BACKENDS = ("onnxruntime", "pytorch")
SERVED, NOT_SERVED, REFUSED, NOT_JUDGED = ("built+verified+served", "built+verified, not served", "refused",
                                            "not judged")
NOT_INSTANTIABLE = "not instantiable"
TRACEBACK = "Traceback (most recent call last)"
BIN = pathlib.Path(sys.executable).parent
Row = dict[str, Any]
# What serving the built ones told: each model's (ok, detail), the tracebacks per model ("": counted against
# every model), and the detail of a model that got no answer.
Answers = tuple[dict[str, tuple[bool, str]], collections.Counter[str], str]
SERVER_START_S = 900  # the Python steps' execution environments unpack on the first start
SCORE_ATOL = 1e-3  # a served score against the pipeline's for the same label
# A random tiny checkpoint whose scores for all labels are within this of each other answers alike whatever the
# input: its agreement with the pipeline says little (the reports count them).
FLAT = 1e-4
FLAT_NOTE = "all labels score alike: a weak check"


class Batch:
    """One backend's build of a batch: its folder, the files in it and the build command."""

    def __init__(self, folder: pathlib.Path) -> None:
        self.folder = folder
        self.spec, self.assets, self.log_file = folder / "spec.yaml", folder / "assets", folder / "commands.log"
        self.manifest = self.assets / "manifest.json"
        self.build = [str(BIN / "tritonsm"), "build", "--spec", str(self.spec), "--out", str(self.assets),
                      "--work-dir", str(folder / "work"), "--python-env-for", "local"]


@dataclasses.dataclass(frozen=True)
class Coverage:
    """What differs between the coverage benchmarks."""
    spec_text: Callable[[list[Row], str, list[str]], str]  # (rows, backend, entries the endpoint serves) -> spec
    serve: Callable[[list[Row], Batch], Answers]  # the built rows, answering on the local Triton server
    make_checkpoint: Callable[[Row, pathlib.Path], None]  # saves the row's checkpoint, fills its keys
    entry_name: Callable[[Row], str]  # the row's `task:` entry name (no '-')
    label: Callable[[Row], list[str]]  # what names a row in the progress lines
    first_step: str  # the ensemble's step before its model step ("tokenize", "preprocess")
    cases: str  # what the build's verification cases are, named in the verification line ("": not named)
    not_counted: Mapping[type[Exception], str]  # a checkpoint's exception -> the row's outcome
    not_ready: str  # what the rows without a checkpoint are, said in the progress line
    answer_key: Optional[str] = None  # the backend's key that keeps the served answer (None: not kept)


# --- build and serve ---------------------------------------------------------------------------------------

def spec_document(project: str, models: list[str], served: list[str]) -> str:
    """The spec of ``models`` (their lines), with one multi-model endpoint of ``served`` where there are any."""
    endpoint = (f"  {ENDPOINT}: {{kind: multi-model, models: [{', '.join(served)}], instance_type: ml.g5.xlarge}}"
                if served else "  {}")
    return (f'project: {project}\ntriton_version: "{TRITON_VERSION}"\nmodels:\n' + "\n".join(models) +
            f"\nendpoints:\n{endpoint}\nenvironments:\n  dev: {{region: us-east-1}}\n")



class MappedTask(Protocol):
    """A benchmark's task: the kind, the transformers mapping its rows come from, the entries' name prefix."""

    @property
    def kind(self) -> str: ...
    @property
    def mapping(self) -> str: ...
    @property
    def prefix(self) -> str: ...


def mapped(task: MappedTask) -> dict[str, str]:
    """model_type -> the class transformers maps for the task (the first of a tuple of variants)."""
    from transformers.models.auto import modeling_auto

    names = getattr(modeling_auto, task.mapping)
    return {t: c if isinstance(c, str) else c[0] for t, c in sorted(names.items())}


def architectures(task: MappedTask) -> list[Row]:
    return [{"task": task.kind, "model_type": model_type, "class": class_name, "key": model_type}
            for model_type, class_name in mapped(task).items()]


def entry_name(task: MappedTask, row: Row) -> str:
    return f"{task.prefix}_" + re.sub(r"\W", "_", row["model_type"])


def owner(step: str) -> str:
    """The entry a Triton model belongs to (cls_bert-model -> cls_bert): entry names have no '-'."""
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


def refusal(name: str, not_built: dict[str, str], fallback: str, first_step: str) -> str:
    """The first line of the error that stopped ``name``: its model step's, first step's or answer step's before
    the ensemble's own (a step's failure also fails the ensemble, which then says only that)."""
    for key in (f"{name}-model", f"{name}-{first_step}", f"{name}-answer", name):
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


def build_and_serve(rows: list[Row], folder: pathlib.Path, backend: str, coverage: Coverage) -> None:
    """Builds ``rows`` as one spec with ``backend``, then serves what built; each row's ``backend`` key gets its
    outcome, reason, build seconds, verification and tracebacks."""
    from deployment_spec.builds.manifest import load_manifest

    batch = Batch(folder)
    folder.mkdir(parents=True, exist_ok=True)
    batch.spec.write_text(coverage.spec_text(rows, backend, []))
    status, lines = run_logged(batch.build, batch.log_file, ROOT)
    seconds, tracebacks = build_log(lines)
    manifest = load_manifest(batch.manifest) if batch.manifest.is_file() else None
    error = next((line for _, line in reversed(lines) if line.startswith("error: ")), f"exit status {status}")
    built = []
    for row in rows:
        name, entry = row["name"], (manifest.models.get(row["name"]) if manifest else None)
        result: Row = {"build_seconds": round(seconds.get(name, 0.0), 1),
                       "tracebacks": tracebacks[name] + tracebacks[""]}
        if entry is not None and entry.verification.ran:
            details = entry.verification.details or {}
            cases = f"{entry.verification.cases} {coverage.cases}, " if coverage.cases else ""
            result.update(outcome=NOT_SERVED, verified=f"{entry.verification.runtime} {entry.verification.version} "
                          f"vs {details.get('reference', '?')}: {cases}{details.get('measure', 'difference')} "
                          f"{entry.verification.max_abs_error:.2g}")
            built.append(name)
        elif entry is not None:
            result.update(outcome=REFUSED, reason="built but not verified: " + (entry.verification.why or "?"))
        elif manifest is not None and any(k.startswith(f"models.{name}") for k in manifest.not_built):
            result.update(outcome=REFUSED, reason=refusal(name, manifest.not_built, error, coverage.first_step))
        else:  # the build stopped as a whole before judging this model
            result.update(outcome=NOT_JUDGED, reason=f"tritonsm build stopped: {error} (see {batch.log_file})")
        row[backend] = result
    if built:
        serve(rows, built, batch, backend, coverage)


def serve(rows: list[Row], built: list[str], batch: Batch, backend: str, coverage: Coverage) -> None:
    """Packs the built ones into one multi-model endpoint (cached: this build only packs) and has them answer
    (``Coverage.serve``); each built row's result gets its outcome and tracebacks."""
    batch.spec.write_text(coverage.spec_text(rows, backend, built))
    _, lines = run_logged(batch.build, batch.log_file, ROOT)
    _, packing_tracebacks = build_log(lines)
    answers, tracebacks, no_answer = coverage.serve([row for row in rows if row["name"] in built], batch)
    for row in rows:
        if row["name"] not in built:
            continue
        result = row[backend]
        result["tracebacks"] += packing_tracebacks[row["name"]] + packing_tracebacks[""] + \
            tracebacks[row["name"]] + tracebacks[""]
        ok, detail = answers.get(row["name"], (False, no_answer))
        if coverage.answer_key:
            result[coverage.answer_key] = detail
        if ok:
            result["outcome"] = SERVED
        else:
            result["reason"] = first_line(detail) or "no answer"


def run_batch(rows: list[Row], folder: pathlib.Path, started: float, coverage: Coverage) -> None:
    """Checkpoints, the ONNX build and serving, then the pytorch way out for the ONNX refusals."""
    ready = []
    for row in rows:
        row["name"] = coverage.entry_name(row)
        try:
            coverage.make_checkpoint(row, folder / "checkpoints" / row["name"])
            ready.append(row)
        except tuple(coverage.not_counted) as exc:
            outcome = next(o for kind, o in coverage.not_counted.items() if isinstance(exc, kind))
            row.update(outcome=outcome, reason=str(exc))
    say(started, f"  {len(ready)} checkpoints ready ({len(rows) - len(ready)} {coverage.not_ready}); building "
                 f"{', '.join(r['name'] for r in ready) or 'nothing'} with onnxruntime")
    if ready:
        build_and_serve(ready, folder / "onnxruntime", "onnxruntime", coverage)
    for row in ready:
        row.update(outcome=row["onnxruntime"]["outcome"], reason=row["onnxruntime"].get("reason", ""))
    refused = [row for row in ready if row["outcome"] == REFUSED]
    if refused:
        say(started, f"  pytorch way out for {', '.join(r['name'] for r in refused)}")
        build_and_serve(refused, folder / "pytorch", "pytorch", coverage)


# --- serving on the local Triton server ---------------------------------------------------------------------

def invoke_each(built: list[Row], batch: Batch, request: Callable[[Row], list[str]],
                judge: Callable[[Row, dict[str, Any]], tuple[bool, str]]) -> Answers:
    """Serves the batch's packed endpoint on the local Triton server and sends each built entry one request
    (``request``: its `tritonsm invoke` input options, e.g. ["--image", FILE]); ``judge`` makes (ok, what) of the
    answer document (`tritonsm invoke --output`). The server's tracebacks count against every model it served."""
    folder, log_file = batch.folder, batch.log_file
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
                           "--url", url, *request(row), "--output", str(answer_file), "--timeout", "300"]
                status, said = run_logged(command, log_file, ROOT)
                tracebacks[name] += sum(TRACEBACK in line for _, line in said)
                if status != 0 or not answer_file.is_file():
                    error = next((line for _, line in reversed(said) if line.startswith("error")),
                                 said[-1][1] if said else f"exit status {status}")
                    answers[name] = (False, f"tritonsm invoke failed: {error}")
                    continue
                answers[name] = judge(row, json.loads(answer_file.read_text()))
    tracebacks[""] += sum(TRACEBACK in line for line in server_lines)
    not_started = None if url else next(
        (line for line in reversed(server_lines) if line.startswith("error")),
        f"tritonsm serve did not announce its address (see {log_file})")
    return answers, tracebacks, f"not served: {not_started}" if not_started else "no answer"


class ServedEndpoint:
    """`tritonsm serve ENDPOINT --cpu-stand-in` in the background, its output in the batch's command log: (the
    address it announces, or None where it stopped or did not start in time; its output lines). Stopped on exit
    with SIGINT (it stops its Triton server on the way out), SIGKILL after a minute."""

    def __init__(self, common: list[str], folder: pathlib.Path, log_file: pathlib.Path,
                 target: tuple[str, ...] = (ENDPOINT,)) -> None:
        # ``target``: the endpoint, or ("--all",) for every endpoint of the spec behind one port (streaming
        # generation needs single-model endpoints, one per model).
        # With --all each server logs to a file of its own (the start-up lines name them).
        log = [] if "--all" in target else ["--log-file", str(folder / "server.log")]
        self.command = [str(BIN / "tritonsm"), "serve", *target, *common, "--cpu-stand-in",
                        "--startup-timeout", str(SERVER_START_S), *log]
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
            found = re.search(r"^serving .* at (http://[^\s/]+?):?$", text, re.M)  # --all ends with ':'
            found = found or re.search(r"^serving .* at (http://\S+)", text, re.M)
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


def label_answer(document: dict[str, Any], known: set[str], top_k: int,
                 reference: Callable[[], dict[str, float]]) -> tuple[bool, str]:
    """(ok, what): a served answer's ``labels`` and ``scores`` (`tritonsm invoke --output`'s document) must be
    ``top_k`` of the checkpoint's labels (``known``) with finite scores, and agree with ``reference`` (the
    pipeline's score of every label, called only for an answer of that shape): each served score within
    SCORE_ATOL of the pipeline's for its label, and none left out scoring higher (labels of nearly tied scores
    may come in either order)."""
    outputs = {o["name"]: o["data"] for o in document.get("outputs", [])}
    labels, scores = outputs.get("labels"), outputs.get("scores")
    if labels is None or scores is None:
        return False, f"the answer has outputs {', '.join(outputs) or 'none'}, not labels and scores"
    if len(labels) != top_k or any(label not in known for label in labels) or \
            not all(isinstance(s, (int, float)) and math.isfinite(s) for s in scores):
        return False, f"the answer is not {top_k} labels of the checkpoint with finite scores: {labels} {scores}"
    want = reference()
    got = ", ".join(f"{label} {score:.4f}" for label, score in zip(labels, scores))
    difference = max(abs(score - want[label]) for label, score in zip(labels, scores))
    left_out = max((score for label, score in want.items() if label not in labels), default=-math.inf)
    if difference > SCORE_ATOL or left_out > min(scores) + SCORE_ATOL:
        best = sorted(want.items(), key=lambda item: -item[1])[:top_k]
        return False, f"served {got}; the pipeline answers " + ", ".join(f"{k} {v:.4f}" for k, v in best)
    flat = max(want.values()) - min(want.values()) < FLAT
    return True, f"{got} (as the pipeline, score difference {difference:.1g}" + (f"; {FLAT_NOTE})" if flat else ")")


def drop_builds(folder: pathlib.Path) -> None:
    """Removes a recorded batch's build caches and tarballs (the results do not need them)."""
    for backend in BACKENDS:
        for name in ("work", "assets"):
            shutil.rmtree(folder / backend / name, ignore_errors=True)


def say(started: float, text: str) -> None:
    print(f"[{time.monotonic() - started:6.0f} s] {text}", flush=True)


# --- a run -------------------------------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser, work: str, only: str, limit: str, build_size: str) -> None:
    """The options every coverage benchmark has; ``only`` and ``limit`` are their help, ``build_size`` what a
    model's build cache and tarballs take ("" where not said)."""
    parser.add_argument("--only", default="", help=only)
    parser.add_argument("--limit", type=int, help=limit)
    parser.add_argument("--batch", type=int, default=8, help="checkpoints per `tritonsm build` (default 8)")
    parser.add_argument("--work", type=pathlib.Path, default=pathlib.Path(work))
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks")
    parser.add_argument("--fresh", action="store_true", help="forget earlier results and build caches")
    parser.add_argument("--again", default="", help="result keys to forget and run again, comma-separated (a row "
                        "that failed for a reason outside the product: a file someone was editing, a reinstall)")
    parser.add_argument("--keep-builds", action="store_true",
                        help=f"keep each batch's build cache and tarballs ({build_size}by default only its spec, "
                             "command log and checkpoints stay)")


def parse_only(parser: argparse.ArgumentParser, args: argparse.Namespace, known: Iterable[str], what: str) -> None:
    """``args.only`` as a set of model types; an exit naming those transformers does not map for ``what``."""
    args.only = {t for t in args.only.split(",") if t}
    unknown = sorted(args.only - set(known))
    if unknown:
        parser.error(f"--only {', '.join(unknown)}: not a model type transformers maps for {what}")


def pending(rows: list[Row], progress: Progress, args: argparse.Namespace) -> list[Row]:
    """The rows not run before, of ``--only``'s model types where given, at most ``--limit`` of them."""
    return [row for row in rows if row["key"] not in progress.results
            and (not args.only or row["model_type"] in args.only)][:args.limit]


@dataclasses.dataclass
class Progress:
    """A run's results so far (<work>/results.json): each row's by key, the batches recorded, when it started."""
    store: pathlib.Path
    results: dict[str, Row]
    batches: list[Row]
    started: str

    @classmethod
    def load(cls, args: argparse.Namespace) -> Progress:
        """The work folder's progress (none with ``--fresh``, which removes the batches too)."""
        args.work.mkdir(parents=True, exist_ok=True)
        args.out.mkdir(parents=True, exist_ok=True)
        store = args.work / "results.json"
        if args.fresh:
            for old in args.work.glob("batch-*"):
                shutil.rmtree(old)
        saved = json.loads(store.read_text()) if store.is_file() and not args.fresh else {}
        started = saved.get("started") or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        again = {key for key in args.again.split(",") if key}
        results = {key: row for key, row in saved.get("results", {}).items() if key not in again}
        return cls(store, results, saved.get("batches", []), started)

    def save(self) -> None:
        self.store.write_text(json.dumps({"started": self.started, "batches": self.batches, "results": self.results},
                                         indent=1))


def run(todo: list[Row], progress: Progress, args: argparse.Namespace, coverage: Coverage,
        write: Callable[[Progress], Row]) -> Row:
    """Runs ``todo`` in batches of ``--batch``, recording each batch and writing the reports (``write``) after it;
    the last summary ``write`` returns."""
    clock = time.monotonic()
    say(clock, f"{len(progress.results)} done before; {len(todo)} to run in batches of {args.batch}")
    for first in range(0, len(todo), args.batch):
        batch, batch_start = todo[first:first + args.batch], time.monotonic()
        folder = args.work / f"batch-{len(progress.batches):03d}"
        say(clock, f"batch {first // args.batch + 1} of {-(-len(todo) // args.batch)} ({folder.name}): "
                   + ", ".join("/".join(coverage.label(r)) for r in batch))
        run_batch(batch, folder, clock, coverage)
        for row in batch:
            progress.results[row["key"]] = row
            say(clock, f"  {' '.join(coverage.label(row))}: {row['outcome']}"
                       + (f" ({row['reason']})" if row.get("reason") else "")
                       + (f"; pytorch: {row['pytorch']['outcome']}" if "pytorch" in row else ""))
        progress.batches.append({"folder": folder.name, "rows": len(batch),
                                 "seconds": round(time.monotonic() - batch_start, 1)})
        progress.save()
        if not args.keep_builds:
            drop_builds(folder)
        write(progress)
        say(clock, f"batch done in {time.monotonic() - batch_start:.0f} s")
    return write(progress)


# --- reports -----------------------------------------------------------------------------------------------

def outcomes(counted: list[Row]) -> Row:
    """The counted rows' outcomes: served, not served, refused (with the reasons), not judged, and the pytorch
    way out of the refusals."""
    refused = [r for r in counted if r["outcome"] == REFUSED]
    tried = [r for r in refused if "pytorch" in r]
    return {
        "built_verified_served": sum(r["outcome"] == SERVED for r in counted),
        "built_verified_not_served": sum(r["outcome"] == NOT_SERVED for r in counted),
        "refused": {r["model_type"]: r["reason"] for r in refused},
        "not_judged": sum(r["outcome"] == NOT_JUDGED for r in counted),
        "pytorch_way_out": {"tried": len(tried), "served": sum(r["pytorch"]["outcome"] == SERVED for r in tried),
                            "refused": {r["model_type"]: r["pytorch"].get("reason", "") for r in tried
                                        if r["pytorch"]["outcome"] != SERVED}},
    }


def percent(part: int, whole: int) -> Optional[float]:
    return round(100 * part / whole, 1) if whole else None


def tracebacks(row: Row) -> int:
    """The tracebacks counted against the row, both backends."""
    return sum(row.get(b, {}).get("tracebacks", 0) for b in BACKENDS)


def write_reports(out: pathlib.Path, stem: str, progress: Progress, summary: Row, rows: list[Row],
                  markdown: Callable[[Any, list[Row], list[Row], str, str], str],
                  dropped: tuple[str, ...] = ()) -> None:
    """<out>/<stem>.json (the summary, batches and rows, less their ``dropped`` keys) and <stem>.md
    (``markdown(summary, rows, batches, started, machine)``)."""
    machine = f"{platform.machine()}, {os.cpu_count()} cores, shared"
    document = {"started": progress.started, "machine": machine, "triton_version": TRITON_VERSION,
                "summary": summary, "batches": progress.batches,
                "results": [{k: v for k, v in r.items() if k not in dropped} for r in rows]}
    (out / f"{stem}.json").write_text(json.dumps(document, indent=1) + "\n")
    (out / f"{stem}.md").write_text(markdown(summary, rows, progress.batches, progress.started, machine))


def refusal_line(label: str, why: str, row: Row) -> str:
    """A refusals list item: the ONNX refusal and what the pytorch way out made of it."""
    way_out = row.get("pytorch", {})
    return (f"- {label}: {cell(why)} — pytorch: {way_out.get('outcome', 'not tried')}"
            + (f" ({cell(way_out['reason'])})" if way_out.get("reason") else ""))


def verdict(row: Row) -> str:
    """The per-architecture table's reason / verification: why the row stopped, else its ONNX verification."""
    return str(row.get("reason") or row.get("onnxruntime", {}).get("verified", ""))


def way_out(row: Row) -> str:
    """The per-architecture table's pytorch way out: its outcome and reason ("" where not tried)."""
    torch_way = row.get("pytorch", {})
    return (f"{torch_way['outcome']}" + (f": {torch_way['reason']}" if torch_way.get("reason") else "")
            if torch_way else "")


def sections(head: list[str], refusals: list[str], batches: list[Row], table: list[str]) -> str:
    """The report after its introduction: the summary table, the refusals, the batches' times, the table per
    architecture."""
    times = ", ".join(f"{b['rows']} in {b['seconds']:.0f} s" for b in batches)
    return ("\n".join(head) + "\n\n## Refusals (onnxruntime) and the pytorch way out\n\n"
            + ("\n".join(refusals) or "None.") + f"\n\n## Batches\n\n{times or 'None yet.'}\n\n## Per architecture\n\n"
            + "\n".join(table) + "\n")


def cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")

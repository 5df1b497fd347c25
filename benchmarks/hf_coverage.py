"""Which transformers architectures `tritonsm build` turns into a served model: built, verified, served, or refused.

    .venv/bin/python benchmarks/hf_coverage.py [--only bert,swin] [--limit N] [--batch 6] [--fresh]

For every architecture the pinned transformers maps for sequence classification
(MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES) and image classification
(MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES), a tiny random checkpoint is saved from its own
config class, offline (benchmarks/tooling/tiny_checkpoints.py); an architecture that does not
instantiate that way is listed with its reason and left out of the count. The others are built in
batches by the real `tritonsm build` (recipes hf-sequence-classification / hf-image-classification,
backend onnxruntime, triton_version 25.09: the serving-runtime verification in ONNX Runtime 1.23.0 as
the product runs it), then the built ones of a batch are served on the local Triton server (one
multi-model endpoint, CPU stand-ins) and each answers one request (`tritonsm smoke --local`).
A traceback in either command's output is counted as such.

Resumable: results accumulate in <work>/results.json, and an architecture with a result is not
run again (`--fresh` starts over). Writes benchmarks/hf_coverage.json and .md, and the summary
section of benchmarks/RESULTS.md, after every batch.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import re
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tooling import tiny_checkpoints  # noqa: E402
from benchmarks.tooling.run_log import run_logged  # noqa: E402

TRITON_VERSION = "25.09"
SEQUENCE = 16
RECIPES = {"text": "hf-sequence-classification", "vision": "hf-image-classification"}
TRACEBACK = "Traceback (most recent call last)"
SECTION = "## 7. Architecture coverage of the checkpoint recipes (`benchmarks/hf_coverage.py`)"
BIN = pathlib.Path(sys.executable).parent


def architectures() -> list[dict[str, str]]:
    """(task, model_type, class name) for every mapped architecture, both tasks interleaved in proportion (each
    sorted by name), so that a run stopped early has covered text and vision alike."""
    from transformers.models.auto import modeling_auto

    out = []
    for task, mapping in (("text", modeling_auto.MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES),
                          ("vision", modeling_auto.MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES)):
        for index, (model_type, names) in enumerate(sorted(mapping.items())):
            class_name = names if isinstance(names, str) else names[0]  # a tuple lists variants, the first is default
            out.append({"task": task, "model_type": model_type, "class": class_name,
                        "key": f"{task}:{model_type}", "place": (index + 0.5) / len(mapping)})
    return sorted(out, key=lambda arch: arch["place"])


def spec_name(model_type: str) -> str:
    return "m_" + re.sub(r"\W", "_", model_type)


def spec_text(batch: list[dict], served: list[str]) -> str:
    models = []
    for arch in batch:
        extra = (f", sequence_length: {SEQUENCE}, samples: checkpoints/{arch['name']}.npz" if arch["task"] == "text"
                 else "")
        models.append(f"  {arch['name']}: {{backend: onnxruntime, source: {{recipe: {RECIPES[arch['task']]}}}, "
                      f"weights: checkpoints/{arch['name']}, max_batch_size: 2{extra}}}")
    endpoint = (f"  coverage: {{kind: multi-model, models: [{', '.join(served)}], instance_type: ml.g5.xlarge}}"
                if served else "  {}")
    return (f'project: Coverage\ntriton_version: "{TRITON_VERSION}"\nmodels:\n' + "\n".join(models) +
            f"\nendpoints:\n{endpoint}\nenvironments:\n  dev: {{region: us-east-1}}\n")


def build_batch(batch: list[dict], folder: pathlib.Path) -> None:
    """Builds the batch, then serves what built; fills each architecture's result in place."""
    from deployment_spec.builds.manifest import load_manifest

    spec, out, log_file = folder / "spec.yaml", folder / "assets", folder / "commands.log"
    spec.write_text(spec_text(batch, []))
    build = [str(BIN / "tritonsm"), "build", "--spec", str(spec), "--out", str(out), "--work-dir", str(folder / "work")]
    status, lines = run_logged(build, log_file, ROOT)
    traceback = any(TRACEBACK in line for _, line in lines)
    started: dict[str, float] = {}
    for at, line in lines:
        found = re.match(r"\[\d+/\d+\] (\w+): (building|built in|FAILED)", line)
        if found and found.group(2) == "building":
            started[found.group(1)] = at
        elif found and found.group(1) in started:
            for arch in batch:
                if arch["name"] == found.group(1):
                    arch["build_seconds"] = round(at - started[found.group(1)], 1)
    manifest = load_manifest(out / "manifest.json") if (out / "manifest.json").is_file() else None
    built = []
    for arch in batch:
        entry = manifest.models.get(arch["name"]) if manifest else None
        if entry is not None:
            arch["fallbacks"] = list((entry.verification.details or {}).get("fallbacks", []))
            arch["graph"] = entry.verification.graph
            built.append(arch["name"])
        else:
            why = (manifest.not_built.get(f"models.{arch['name']}") if manifest else None)
            error = next((line for _, line in reversed(lines) if line.startswith("error: ")), "")
            # A build refused as a whole (e.g. a batch mate too large for the memory) did not judge this model.
            arch["outcome"] = "refused" if why else ("traceback" if traceback else "not judged")
            arch["reason"] = why or f"tritonsm build exited {status} before building it: {error} (see {log_file})"
    if not built:
        return
    spec.write_text(spec_text(batch, built))  # the built models are cached: this build only packs them
    status, lines = run_logged(build, log_file, ROOT)
    smoke = [str(BIN / "tritonsm"), "smoke", "coverage", "--local", "--spec", str(spec), "--manifest",
             str(out / "manifest.json")]
    _, served_lines = run_logged(smoke, log_file, ROOT)
    traceback = traceback or any(TRACEBACK in line for _, line in lines + served_lines)
    answers = {}
    for _, line in served_lines:
        found = re.match(r"  (\w+): (ok|FAILED)(.*)", line)
        if found:
            answers[found.group(1)] = (found.group(2) == "ok", found.group(3).lstrip(":, ( ").rstrip(")"))
    failed_start = next((line for _, line in served_lines if line.startswith("error: smoke test of coverage failed:")),
                        None)
    for arch in batch:
        if arch["name"] not in built:
            continue
        ok, detail = answers.get(arch["name"], (False, failed_start or f"no answer (see {log_file})"))
        arch["outcome"] = "built+served" if ok else ("traceback" if traceback else "built, not served")
        if not ok:
            arch["reason"] = detail


def write_reports(results: dict[str, dict], out: pathlib.Path, skipped: dict[str, str], started: str) -> dict:
    rows = sorted(results.values(), key=lambda r: (r["task"], r["model_type"]))
    counted = [r for r in rows if r["outcome"] != "not instantiable"]
    served = [r for r in counted if r["outcome"] == "built+served"]
    summary = {"architectures": len(rows), "instantiable": len(counted), "built_and_served": len(served),
               "refused": sum(r["outcome"] == "refused" for r in counted),
               "built_not_served": sum(r["outcome"] == "built, not served" for r in counted),
               "tracebacks": sum(r["outcome"] == "traceback" for r in counted),
               "with_fallbacks": sum(bool(r.get("fallbacks")) for r in served),
               "not_run_yet": skipped, "started": started,
               "machine": f"{platform.machine()}, {os.cpu_count()} cores, shared", "triton_version": TRITON_VERSION}
    (out / "hf_coverage.json").write_text(json.dumps({"summary": summary, "results": rows}, indent=1) + "\n")
    share = f"{100 * len(served) / len(counted):.0f} %" if counted else "-"
    head = (f"{len(served)} of {len(counted)} architectures that instantiate offline from their config built, "
            f"verified in ONNX Runtime 1.23.0 (Triton {TRITON_VERSION}'s) and served on the local Triton server "
            f"({share}); {summary['refused']} refused with their cause, {summary['built_not_served']} built but not "
            f"served, {summary['tracebacks']} tracebacks; {summary['with_fallbacks']} of the served needed a "
            f"fallback. {len(rows) - len(counted)} mapped architectures do not instantiate offline from their config "
            "(or not at sizes this benchmark can make: tiny, else only shallower, at most 60 M parameters) and are "
            "listed with the reason, not counted.")
    if skipped:
        head += f" Not run yet: {len(skipped)} ({', '.join(sorted(skipped))})."
    table = ["| task | architecture | checkpoint | outcome | reason / graph shipped | fallbacks | build s |",
             "|---|---|---|---|---|---|---:|"]
    for r in rows:
        what = r.get("reason") or r.get("graph") or ""
        fallbacks = "; ".join(r.get("fallbacks", []))
        table.append(f"| {r['task']} | {r['model_type']} ({r['class']}) | {r.get('parameters', '')} | {r['outcome']} | "
                     f"{_cell(what)} | "
                     f"{_cell(fallbacks)} | {r.get('build_seconds', '')} |")
    (out / "hf_coverage.md").write_text(
        f"# Architecture coverage of hf-sequence-classification / hf-image-classification\n\n"
        f"Made by `benchmarks/hf_coverage.py` (started {started}, {summary['machine']}).\n\n{head}\n\n"
        + "\n".join(table) + "\n")
    _results_section(out / "RESULTS.md", head)
    return summary


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _results_section(results_md: pathlib.Path, head: str) -> None:
    text = results_md.read_text() if results_md.is_file() else "# Benchmark results\n"
    section = (f"{SECTION}\n\nTiny random checkpoints of every architecture the pinned transformers maps for "
               "sequence and image classification, each built by `tritonsm build` and served on the local Triton "
               f"server with one request. {head} The table, with every refusal's reason, the fallbacks and the "
               "build seconds: [hf_coverage.md](hf_coverage.md).\n")
    if SECTION in text:
        before, _, rest = text.partition(SECTION)
        after = rest[rest.find("\n## ") + 1:] if "\n## " in rest else ""
        text = before + section + ("\n" + after if after else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    results_md.write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[], help="model types, comma-separated; repeatable")
    parser.add_argument("--limit", type=int, help="run at most N architectures not run before")
    parser.add_argument("--batch", type=int, default=6, help="architectures per `tritonsm build` (default 6)")
    parser.add_argument("--work", type=pathlib.Path, default=pathlib.Path("/tmp/hf_coverage"))
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks")
    parser.add_argument("--fresh", action="store_true", help="forget earlier results")
    parser.add_argument("--retry", nargs="*", metavar="OUTCOME",
                        help="run again the architectures not built+served (or only those with these outcomes, "
                             "e.g. 'not instantiable')")
    parser.add_argument("--again", action="store_true",
                        help="run the --only architectures again whatever their outcome (after a change to the build)")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    store = args.work / "results.json"
    saved = json.loads(store.read_text()) if store.is_file() and not args.fresh else {}
    results = {key: row for key, row in saved.get("results", {}).items()
               if args.retry is None or row["outcome"] == "built+served"
               or (args.retry and row["outcome"] not in args.retry)}
    started = saved.get("started") or datetime.datetime.now(
        datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    only = {name for item in args.only for name in item.split(",") if name}
    if args.again:
        if not only:
            parser.error("--again needs --only: name the architectures to run again")
        results = {key: row for key, row in results.items() if row["model_type"] not in only}
    todo = [a for a in architectures() if (not only or a["model_type"] in only) and a["key"] not in results]
    if args.limit is not None:
        todo = todo[:args.limit]
    total = len(results) + len(todo)
    print(f"{len(results)} architectures done before; {len(todo)} to run", flush=True)
    for first in range(0, len(todo), args.batch):
        batch_start = time.monotonic()
        folder = args.work / f"batch-{len(results):03d}"
        ready = []
        for arch in todo[first:first + args.batch]:
            arch["name"] = spec_name(arch["model_type"])
            try:
                arch["parameters"] = tiny_checkpoints.save(arch["model_type"], arch["class"],
                                                           folder / "checkpoints" / arch["name"])
                ready.append(arch)
            except tiny_checkpoints.NotInstantiable as exc:
                results[arch["key"]] = {**arch, "outcome": "not instantiable", "reason": str(exc)}
        if ready:
            build_batch(ready, folder)
        for arch in ready:
            results[arch["key"]] = arch
        for arch in todo[first:first + args.batch]:
            row = results[arch["key"]]
            print(f"[{len(results)}/{total}] {row['task']} {row['model_type']}: {row['outcome']}"
                  + (f" ({row['reason']})" if row.get("reason") else "")
                  + (f" [fallbacks: {'; '.join(row['fallbacks'])}]" if row.get("fallbacks") else ""), flush=True)
        store.write_text(json.dumps({"started": started, "results": results}, indent=1))
        left = {a["key"]: "not run" for a in architectures() if a["key"] not in results and (not only or a["model_type"] in only)}
        write_reports(results, args.out, left, started)
        print(f"batch done in {time.monotonic() - batch_start:.0f} s", flush=True)
    summary = write_reports(results, args.out, {a["key"]: "not run" for a in architectures()
                                                  if a["key"] not in results}, started)
    print(json.dumps({k: v for k, v in summary.items() if k != "not_run_yet"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

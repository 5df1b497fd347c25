"""Which transformers image architectures an image `task:` entry serves from raw images, per task: built,
verified, served, refused.

    .venv/bin/python benchmarks/hf_image_coverage.py [--task image-classification|object-detection|image-embedding]
        [--only vit,convnext] [--again vit] [--limit N] [--batch 8] [--work /tmp/hf_image_coverage] [--fresh]
        [--keep-builds]

The rows of a task are every model type the pinned transformers (5.23.0) maps for it in
transformers.models.auto.modeling_auto (the first class of a tuple of variants), and the reports are per task:

    --task                          rows                                          reports (benchmarks/, .json and .md)
    image-classification (default)  MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES  hf_image_coverage
    object-detection                MODEL_FOR_OBJECT_DETECTION_MAPPING_NAMES      hf_detection_coverage
    image-embedding                 MODEL_FOR_IMAGE_MAPPING_NAMES                 hf_image_embedding_coverage

image-embedding's rows: MODEL_FOR_IMAGE_MAPPING_NAMES is the mapping transformers itself pairs with
pipeline("image-feature-extraction") (MODELS_TO_PIPELINE in transformers/utils/doc.py, 5.23.0): the image models
AutoModel loads, vision towers among them (siglip_vision_model, aimv2_vision_model, DINOv2 ...). The pipeline's
own model list is AutoModel's (MODEL_MAPPING_NAMES: text models too), so it is no row set; whole CLIP/SigLIP
models (text and vision) are in neither image list and are covered by the tests (image_checkpoints.py "clip").

Each row gets a tiny random checkpoint made offline from its own config (benchmarks/tooling/tiny_checkpoints.py,
``save``: the shrunk config, image size 64 where the config has one, 3 labels, seed 0, checked to run eagerly on
pixel_values, ``save_pretrained``; a detector's timm backbone, timm being absent, swapped for transformers' own
ResNet giving the same stages, a backbone shrunk in depth only, 10 object queries; a detector whose best scores on
the sample JPEG tie, as DETR's queries do at random initialisation, gets seeded noise on its weights,
image_checkpoints.spread) and, beside it, the image processor transformers
maps for that model type (transformers.models.auto.image_processing_auto.IMAGE_PROCESSOR_MAPPING_NAMES, its PIL
backend class: the one the product serves), else the one it maps for the model type's module
(configuration_auto.model_type_to_module_name: siglip_vision_model -> siglip), else for a detector the one the
answer step names for it (model_build/python_models/answer_object_detection.py DEFAULT_PROCESSOR: what the hub's
D-FINE, DAB-DETR and RT-DETRv2 checkpoints name), at the model's image size (a detector whose config has none:
128): ``size`` and, where the processor has one, ``crop_size`` set to the model's height x width (a processor
resizing the shortest edge keeps that rule, with the shortest edge at the model's size and a longest edge in the
same proportion as its default's). An
architecture that does not instantiate that way (timm backbones need timm, which is absent; video models take
5-D pixels ...) is listed as not instantiable with its reason, one without a PIL image processor as "no image
processor", and (image-embedding) one for which pipeline("image-feature-extraction", pool=True) itself answers no
pooled output as "no pooled output" (the task serves the pooled output: there is none to serve or verify); none
of these is counted in the share.

The checkpoints are built in batches (one spec per batch, one `task:` entry per checkpoint, backend onnxruntime,
max_batch_size 4, Triton 25.09; classification ``top_k: 2``; detection ``threshold`` in the widest gap between
the best 6 scores the pipeline gives the sample JPEG at threshold 0, so that 1 to 5 detections are compared) by
the real `tritonsm build --python-env-for local`, which verifies each ensemble, encoded images in, answers out,
against the task's reference (model_build/backends/ensemble/image_check.py); then the built ones are packed as one
multi-model endpoint, served on the local Triton server with CPU stand-ins (`tritonsm serve ENDPOINT
--cpu-stand-in`) and each answers one encoded JPEG (640x480, the image `tritonsm smoke` makes for DALI inputs) sent
with `tritonsm invoke --endpoint ENDPOINT --model NAME --image FILE`, judged against transformers' pipeline on the
same file (benchmarks/tooling/image_answers.py): classification the same top_k labels of the checkpoint,
scores within 1e-3; detection as many detections, each matched to one of the same label with its box within 1
pixel or IoU >= 0.99, scores within 1e-3; embedding cosine >= 0.9999 with pipeline("image-feature-extraction",
pool=True). Not `tritonsm smoke --local`: smoke sends its sample text to an image task's IMAGE input
(deployment_spec/sections/dali.py ``image_inputs`` names only DALI inputs as image inputs). Every ONNX refusal is tried
again as the same entry with backend pytorch (the pytorch way out). A build failure fails its model only; each
model's outcome comes from the manifest and the commands' output, and any "Traceback (most recent call last)" in
a command's output is counted against the model it came with (the server's output: against every model it
served).

Resumable: results accumulate in <work>/results.json and an architecture with a result is not run again
(`--fresh` forgets them, `--again mobilevit,bit` those of these model types); each task has a work folder of its
own (default /tmp/hf_image_coverage, /tmp/hf_detection_coverage, /tmp/hf_image_embedding_coverage). A recorded batch keeps its spec, command log and
checkpoints; its build cache and tarballs are removed unless `--keep-builds`. `--limit N` runs at most N
architectures not run before. Writes the task's reports after every batch.

The run itself (batches, builds, the pytorch way out, resuming, the reports' common parts) is
benchmarks/tooling/coverage_runs.py, shared with benchmarks/hf_task_coverage.py; here: the rows, their
checkpoints and spec entries, serving judged by `tritonsm invoke --image` against the pipeline, the summary.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import pathlib
import sys
from typing import Any, Callable

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tooling import coverage_runs, image_answers, tiny_checkpoints  # noqa: E402
from benchmarks.tooling.coverage_runs import (BACKENDS, NOT_INSTANTIABLE, SERVED, TRITON_VERSION,  # noqa: E402
                                                 Row, architectures, cell, entry_name, mapped)

MAX_BATCH, TOP_K = 4, 2
NO_PROCESSOR = "no image processor"
NO_POOLED = "no pooled output"
SAMPLE_IMAGE = (640, 480)   # as tritonsm/checks/smoke_requests.py's SAMPLE_IMAGE
# A detector's shortest edge where its config names no image size: Deformable DETR's extra feature level is a
# stride-64 map, normalised over 32 groups; at 64 pixels it is 1 x 1 and group norm refuses a single image.
DETECTOR_IMAGE = 128


class NoProcessor(Exception):
    """transformers maps no PIL image processor for the model type; the message says what it maps."""


class NoPooledOutput(Exception):
    """pipeline('image-feature-extraction', pool=True) answers no pooled output for the checkpoint."""


# --- the tasks -----------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ImageTask:
    """What differs between the image tasks' runs and reports."""
    kind: str
    mapping: str           # the modeling_auto mapping whose model types are the rows
    prefix: str            # of the entry names
    stem: str              # of the report files
    work: str              # the default work folder
    title: str             # of the markdown report
    served_text: str       # what "served" means, in the report's introduction
    options: str           # the entry's task options beyond kind ("" where none)
    weak: tuple[str, str, str]  # (summary key, the note marking a weak check in the served answer, what it means)
    not_counted: tuple[str, ...] = (NOT_INSTANTIABLE, NO_PROCESSOR)
    rows_text: str = ""    # what the rows are, in the report's introduction ("" for classification, as it was)


CLASSIFICATION = ImageTask(
    "image-classification", "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES", "img", "hf_image_coverage",
    "/tmp/hf_image_coverage", "Raw-image classification coverage of `task:` entries over transformers' architectures",
    "verified at build time against transformers' pipeline('image-classification') on raw images, and answering "
    "one encoded JPEG on the local Triton server (`tritonsm serve --cpu-stand-in`, `tritonsm invoke --image`) as "
    "the pipeline does", f", top_k: {TOP_K}",
    ("served_with_flat_scores", coverage_runs.FLAT_NOTE,
     "checkpoint(s) score all labels alike (random tiny weights whose logits do not tell labels apart: their answers "
     "agree with the pipeline whatever the pixels)"))
DETECTION = ImageTask(
    "object-detection", "MODEL_FOR_OBJECT_DETECTION_MAPPING_NAMES", "det", "hf_detection_coverage",
    "/tmp/hf_detection_coverage", "Raw-image object-detection coverage of `task:` entries over transformers' "
    "architectures",
    "verified at build time against transformers' pipeline('object-detection') on raw images (at the entry's "
    "threshold and at 0), and answering one encoded JPEG on the local Triton server (`tritonsm serve "
    "--cpu-stand-in`, `tritonsm invoke --image`) with the pipeline's detections (matched by label, boxes within 1 "
    "pixel or IoU >= 0.99, scores within 1e-3)", "",
    ("served_with_weak_check", image_answers.WEAK_DETECTION_NOTE,
     "checkpoint(s) detect nothing at their threshold or score within 1e-4 of it (their agreement says little)"),
    rows_text="Rows: transformers 5.23.0 `MODEL_FOR_OBJECT_DETECTION_MAPPING_NAMES`. ")
EMBEDDING = ImageTask(
    "image-embedding", "MODEL_FOR_IMAGE_MAPPING_NAMES", "emb", "hf_image_embedding_coverage",
    "/tmp/hf_image_embedding_coverage", "Raw-image embedding coverage of `task:` entries over transformers' "
    "architectures",
    "verified at build time against the eager checkpoint as its users embed images (model_build/backends/"
    "ensemble/image_check.py), and answering one encoded JPEG on the local Triton server (`tritonsm serve "
    "--cpu-stand-in`, `tritonsm invoke --image`) with the embedding of transformers' "
    "pipeline('image-feature-extraction', pool=True) (cosine >= 0.9999)", "",
    ("served_image_independent", image_answers.SAME_EMBEDDING_NOTE,
     "checkpoint(s) embed the sample and its mirror image alike (cosine > 0.99999: the agreement says little about "
     "the pixels)"),
    (NOT_INSTANTIABLE, NO_PROCESSOR, NO_POOLED),
    "Rows: transformers 5.23.0 `MODEL_FOR_IMAGE_MAPPING_NAMES`, the mapping transformers pairs with "
    "pipeline('image-feature-extraction') (`MODELS_TO_PIPELINE`, transformers/utils/doc.py); the embedding served "
    "is the pooled output. ")
TASKS = {task.kind: task for task in (CLASSIFICATION, DETECTION, EMBEDDING)}


# --- what to run -------------------------------------------------------------------------------------------



# --- checkpoints -------------------------------------------------------------------------------------------

def processor_names(model_type: str, detector: bool) -> Any:
    """What transformers maps as the model type's image processor ({backend: class}), else its module's, else
    (a detector) the class the answer step names for it; None where none."""
    from transformers.models.auto import image_processing_auto
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    from model_build.python_models import answer_object_detection

    table = vars(image_processing_auto)["IMAGE_PROCESSOR_MAPPING_NAMES"]
    names = table.get(model_type) or table.get(model_type_to_module_name(model_type))
    named = answer_object_detection.DEFAULT_PROCESSOR.get(model_type) if detector else None
    return names or ({"pil": f"{named}Pil"} if named else None)


def processor_class(model_type: str, detector: bool = False) -> Any:
    """The PIL-backend image processor class for ``model_type`` (``processor_names``); NoProcessor where none."""
    import transformers

    names = processor_names(model_type, detector)
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


def processor_sizes(default: Any, height: int, width: int) -> dict[str, Any]:
    """The processor's size fields at the model's height x width, each keeping its default's rule."""
    changes: dict[str, Any] = {}
    size = dict(default.size) if getattr(default, "size", None) is not None else {}
    if "height" in size or "width" in size:
        changes["size"] = {"height": height, "width": width}
    elif "shortest_edge" in size:
        changes["size"] = {"shortest_edge": min(height, width)}
        if size.get("longest_edge") and size.get("shortest_edge"):  # DETR's 800 / 1333: the same proportion
            changes["size"]["longest_edge"] = round(min(height, width) * size["longest_edge"] / size["shortest_edge"])
    if getattr(default, "crop_size", None) is not None:
        changes["crop_size"] = {"height": height, "width": width}
    return changes


def save_processor(model_type: str, folder: pathlib.Path, detector: bool) -> str:
    """Saves the model type's image processor at the saved model's image size beside it; its description."""
    from transformers import AutoConfig

    from model_build.recipes import model_facts

    cls = processor_class(model_type, detector)
    default = DETECTOR_IMAGE if detector else tiny_checkpoints.IMAGE
    height, width = model_facts.image_size(AutoConfig.from_pretrained(folder), default)
    try:
        changes = processor_sizes(cls(), height, width)
        processor = cls(**changes)
    except Exception as exc:  # processors raise what they like (a missing library); reported as the reason
        raise NoProcessor(f"{NO_PROCESSOR}: {cls.__name__}() fails: {tiny_checkpoints._first(exc)}") from None
    processor.save_pretrained(folder)
    said = ", ".join(f"{k} {v}" for k, v in changes.items()) or "its default sizes (no size field)"
    return f"{cls.__name__} ({said})"


@functools.lru_cache(maxsize=1)
def sample_jpeg() -> bytes:
    from model_build.backends.dali.check_images import jpeg

    return jpeg(*SAMPLE_IMAGE)


def sample_file(folder: pathlib.Path) -> pathlib.Path:
    """The sample JPEG, written into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    image = folder / "sample.jpg"
    image.write_bytes(sample_jpeg())
    return image


def make_checkpoint(task: ImageTask, row: Row, folder: pathlib.Path) -> None:
    """Saves the row's model and image processor into ``folder`` (and, for the task, picks the detector's
    threshold or checks the embedder has a pooled output); NotInstantiable where the model does not instantiate,
    NoProcessor where transformers maps no PIL image processor for it, NoPooledOutput where the pipeline answers
    no embedding."""
    from transformers.utils import logging

    logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # "Writing model shards" per checkpoint
    row["weights"] = str(folder)
    row["parameters"] = tiny_checkpoints.save(row["model_type"], row["class"], folder)
    row["processor"] = save_processor(row["model_type"], folder, task is DETECTION)
    if task is DETECTION:
        pick_threshold(row, folder)
    elif task is EMBEDDING:
        require_pooled(folder)


def spread_detector(folder: pathlib.Path) -> None:
    """The saved detector with seeded noise on its weights (image_checkpoints.spread)."""
    import transformers

    from benchmarks.tooling import image_checkpoints

    net = transformers.AutoModelForObjectDetection.from_pretrained(folder, local_files_only=True)
    image_checkpoints.spread(net)
    net.save_pretrained(folder)


def detector_scores(folder: pathlib.Path) -> list[float]:
    """The scores of the pipeline's detections of the sample JPEG at threshold 0, best first (none where the
    pipeline fails: the build's own check runs it again and refuses the row with its error)."""
    try:
        found = image_answers.detections(folder, sample_file(folder.parent), 0.0)
    except Exception:
        return []
    return sorted((float(d["score"]) for d in found), reverse=True)


def pick_threshold(row: Row, folder: pathlib.Path) -> None:
    """The entry's threshold: in the widest gap between the pipeline's best scores on the sample JPEG (0.5, the
    pipeline's default, where there are none); the least distance of a score from it is kept with the row. At
    random initialisation every object query of a DETR answers the same box and score: where the best scores tie,
    the weights are spread first (a comparison of tied detections says little; spreading every detector would
    blow up the deep ones, D-FINE's scores turn NaN)."""
    scores = detector_scores(folder)
    best = scores[:image_answers.MOST_DETECTIONS + 1]
    if len(best) > 1 and best[0] - best[-1] < coverage_runs.FLAT:
        spread_detector(folder)
        scores = detector_scores(folder)
        row["parameters"] += " (weights spread: its queries tied)"
    row["threshold"] = image_answers.threshold_between(scores)
    row["threshold_margin"] = min((abs(score - row["threshold"]) for score in scores), default=None)


def require_pooled(folder: pathlib.Path) -> None:
    """NoPooledOutput where pipeline('image-feature-extraction', pool=True) raises for want of a pooled output (the
    model returns no pooler_output); any other failure is left to the build's check."""
    from PIL import Image

    try:
        image_answers.pooled(folder, Image.open(sample_file(folder.parent)))
    except ValueError as exc:
        if "No pooled output" not in str(exc):
            return
        raise NoPooledOutput(f"{NO_POOLED}: pipeline('image-feature-extraction', pool=True) raises "
                             f"{tiny_checkpoints._first(exc)} (the model returns no pooler_output: it has no image "
                             "embedding of its own, only its hidden states)") from None
    except Exception:
        return


# --- build and serve (benchmarks/tooling/coverage_runs.py; here: the spec and how serving is judged) -------

def spec_text(task: ImageTask, rows: list[Row], backend: str, served: list[str]) -> str:
    return coverage_runs.spec_document("ImageCoverage", [
        f"  {row['name']}: {{task: {{kind: {task.kind}{options(task, row)}}}, backend: {backend}, "
        f"weights: {row['weights']}, max_batch_size: {MAX_BATCH}}}" for row in rows], served)


def options(task: ImageTask, row: Row) -> str:
    return f", threshold: {row['threshold']}" if task is DETECTION else task.options


def check_answer(task: ImageTask, document: dict[str, Any], row: Row, image: pathlib.Path) -> tuple[bool, str]:
    folder = pathlib.Path(row["weights"])
    if task is DETECTION:
        return image_answers.check_detection(document, folder, image, float(row["threshold"]),
                                             row.get("threshold_margin"))
    if task is EMBEDDING:
        return image_answers.check_embedding(document, folder, image)
    return image_answers.check_classification(document, folder, image, TOP_K)


def invoke(task: ImageTask, built: list[Row], batch: coverage_runs.Batch) -> coverage_runs.Answers:
    """Serves the packed endpoint on the local Triton server and sends each built entry one encoded JPEG
    (coverage_runs.invoke_each: the server's tracebacks count against every model it served)."""
    image = sample_file(batch.folder)
    return coverage_runs.invoke_each(built, batch, lambda _row: ["--image", str(image)],
                                     lambda row, document: check_answer(task, document, row, image))


def coverage(task: ImageTask) -> coverage_runs.Coverage:
    exceptions: dict[str, type[Exception]] = {NOT_INSTANTIABLE: tiny_checkpoints.NotInstantiable,
                                              NO_PROCESSOR: NoProcessor, NO_POOLED: NoPooledOutput}
    return coverage_runs.Coverage(
        spec_text=functools.partial(spec_text, task), serve=functools.partial(invoke, task),
        make_checkpoint=functools.partial(make_checkpoint, task), entry_name=functools.partial(entry_name, task),
        label=lambda row: [row["model_type"]], first_step="preprocess", cases="raw images",
        not_counted={exceptions[outcome]: outcome for outcome in task.not_counted},
        not_ready=" or ".join(task.not_counted), answer_key="served")


# --- reports -----------------------------------------------------------------------------------------------

def summary_of(task: ImageTask, rows: list[Row]) -> Row:
    done = {r["model_type"] for r in rows}
    counted = [r for r in rows if r["outcome"] not in task.not_counted]
    outcomes = coverage_runs.outcomes(counted)
    weak_key, weak_note, _ = task.weak
    return {
        "mapped": len(mapped(task)), "run": len(rows), "not_run_yet": len(set(mapped(task)) - done),
        **{key(outcome): sum(r["outcome"] == outcome for r in rows) for outcome in task.not_counted},
        "instantiable": len(counted), **outcomes,
        weak_key: sum(weak_note in r.get(b, {}).get("served", "") for r in rows for b in BACKENDS),
        "with_tracebacks": sum(coverage_runs.tracebacks(r) > 0 for r in rows),
        "tracebacks": sum(coverage_runs.tracebacks(r) for r in rows),
        "served_percent": coverage_runs.percent(outcomes["built_verified_served"], len(counted)),
    }


def key(outcome: str) -> str:
    """The summary's key for a not-counted outcome."""
    return {NOT_INSTANTIABLE: "not_instantiable", NO_PROCESSOR: "no_image_processor", NO_POOLED: "no_pooled_output"}[
        outcome]


def write_reports(task: ImageTask, progress: coverage_runs.Progress, out: pathlib.Path) -> Row:
    rows = sorted(progress.results.values(), key=lambda r: r["model_type"])
    summary = summary_of(task, rows)
    coverage_runs.write_reports(out, task.stem, progress, summary, rows, functools.partial(markdown, task))
    return summary


def markdown(task: ImageTask, s: Row, rows: list[Row], batches: list[Row], started: str, machine: str) -> str:
    share = f"{s['served_percent']:.0f} %" if s["served_percent"] is not None else "-"
    weak_key, _, weak_text = task.weak
    head = ["| mapped | run | " + " | ".join(task.not_counted) + " | instantiable | built+verified+served | served "
            "of instantiable | built, not served | refused (ONNX) | pytorch way out: served / tried | "
            "with tracebacks |",
            "|---:|---:|" + "---:|" * len(task.not_counted) + "---:|---:|---:|---:|---:|---:|---:|",
            f"| {s['mapped']} | {s['run']} | " + " | ".join(str(s[key(o)]) for o in task.not_counted)
            + f" | {s['instantiable']} | {s['built_verified_served']} | {share} | {s['built_verified_not_served']} "
            f"| {len(s['refused'])} | {s['pytorch_way_out']['served']} / {s['pytorch_way_out']['tried']} | "
            f"{s['with_tracebacks']} |"]
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
    line = (f"Summary: {s['mapped']} mapped ({s['run']} run, {s['not_run_yet']} not run yet), "
            + ", ".join(f"{s[key(o)]} {said(o)}" for o in task.not_counted) + f", {s['instantiable']} "
            f"instantiable, {s['built_verified_served']} built+verified+served ({share} of instantiable), "
            f"{len(s['refused'])} refused with onnxruntime, pytorch way out {s['pytorch_way_out']['served']} served of "
            f"{s['pytorch_way_out']['tried']} tried, {s['tracebacks']} tracebacks; {s[weak_key]} served {weak_text}.")
    settings = f"top_k {TOP_K}" if task is CLASSIFICATION else (
        "threshold per checkpoint (see its spec entry)" if task is DETECTION else "normalize false")
    command = "benchmarks/hf_image_coverage.py" + ("" if task is CLASSIFICATION else f" --task {task.kind}")
    return (f"# {task.title}\n\n"
            f"Made by `{command}` (started {started}, {machine}; Triton {TRITON_VERSION}, backend onnxruntime, "
            f"max_batch_size {MAX_BATCH}, {settings}). {task.rows_text}Served: built, {task.served_text}. "
            + ", ".join(task.not_counted[:-1]).capitalize() + f" and {task.not_counted[-1]}: not counted.\n\n"
            + line + "\n\n" + coverage_runs.sections(head, refusals, batches, table))


def said(outcome: str) -> str:
    """A not-counted outcome as the summary line says it."""
    return {NO_PROCESSOR: "without an image processor", NO_POOLED: "without a pooled output"}.get(outcome, outcome)


# --- main --------------------------------------------------------------------------------------------------

def arguments() -> argparse.Namespace:
    chooser = argparse.ArgumentParser(add_help=False)
    chooser.add_argument("--task", choices=sorted(TASKS), default=CLASSIFICATION.kind)
    task = TASKS[chooser.parse_known_args()[0].task]
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0], parents=[chooser])
    coverage_runs.add_arguments(parser, task.work, only="model types, comma-separated",
                                limit="run at most N architectures not run before", build_size="")
    args = parser.parse_args()
    coverage_runs.parse_only(parser, args, mapped(task), f"{task.kind} ({task.mapping})")
    return args


def main() -> int:
    args = arguments()
    task = TASKS[args.task]
    progress = coverage_runs.Progress.load(args)
    todo = coverage_runs.pending(architectures(task), progress, args)
    write: Callable[[coverage_runs.Progress], Row] = functools.partial(write_reports, task, out=args.out)
    summary = coverage_runs.run(todo, progress, args, coverage(task), write)
    print(json.dumps({k: v for k, v in summary.items() if k not in ("refused", "pytorch_way_out")}, indent=1),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

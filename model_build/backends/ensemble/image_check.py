"""An image task's ensemble verified as a whole at build time: encoded images through the files that ship,
against ``transformers.pipeline`` of the task on the same bytes.

The preprocessing step's and the answer step's ``model.py`` are the built files themselves, imported here with
their own ``preprocessor_config.json`` and config.pbtxt parameters (transformers of the same release as the
execution environment's, on this machine's Python); the model step's file runs in the serving runtime
(task_check.run_model). The images are image_samples.py's: sizes, aspect ratios, modes, formats, a rotated
JPEG. A difference fails the build with the images that differ; the manifest records what ran, the reference,
the processor and the worst difference.
"""
from __future__ import annotations

import io
import json
import pathlib
import re
import sys
from typing import Any, Callable

import numpy as np
import numpy.typing as npt

from deployment_spec.builds.manifest import Verification
from deployment_spec.sections.tasks import TaskKind
from model_build import layout
from model_build.backends.ensemble import image_samples, task_check, task_reference
from model_build.errors import BuildError
from model_build.verification import verify

# Same pixels, other answers: only the model file and its runtime are left.
ANSWERS_DIFFER = ("The preprocessing step's pixel_values equal the pipeline's; the model answers otherwise in the "
                  "serving runtime; try the other backend (onnxruntime or pytorch), or another architecture")
PIXELS_DIFFER = ("The preprocessing step runs the checkpoint's preprocessor_config.json with transformers' image "
                 "processor; if the checkpoint's processor needs code of its own, save one transformers has")
PIXEL_ATOL = 1e-5
LOW_THRESHOLD = 0.0  # a detector is also compared at it: every query the post-processing keeps is answered


def check(chain: task_check.Chain, scratch: pathlib.Path, log: Callable[[str], None]) -> Verification:
    """Raw images through the chain's files against the pipeline; BuildError naming the images that differ."""
    task = chain.task
    samples = image_samples.images(task.max_image_bytes, task.max_image_pixels)
    if not samples:
        raise BuildError(f"models.{chain.name}.task: no raw image of the check fits max_image_bytes "
                         f"{task.max_image_bytes} and max_image_pixels {task.max_image_pixels} (the smallest is "
                         f"{image_samples.SMALLEST}); raise them to what the application sends")
    params = task_check.step_parameters(chain.dirs[0])
    step = task_check.step_module(chain.dirs[0], "preprocess").Preprocess(str(layout.version_dir(chain.dirs[0])),
                                                                        params)
    answer, answer_params = task_check.answer_step(chain) if len(chain.dirs) == 3 else (None, {})
    detector = task.kind is TaskKind.OBJECT_DETECTION
    if detector:  # one image per request: a detector's pixels keep each image's aspect ratio
        made = [step.tensors(np.array([s.data], dtype=np.object_)) for s in samples]
        sizes = [tuple(int(d) for d in m["pixel_values"].shape[1:]) for m in made]
        try:
            outs, ran = task_check.run_model_requests(chain, [{"pixel_values": m["pixel_values"]} for m in made],
                                                      scratch, log)
        except BuildError as exc:  # "... failed on case raw N: ...": name the size the graph held fixed
            failed = re.search(r"case raw (\d+)", str(exc))
            hint = frozen_size(chain, sizes, {int(failed.group(1))} if failed else set())
            raise BuildError(f"{exc}; {hint}" if hint else str(exc)) from None
        pixels = [m["pixel_values"][0] for m in made]
        ours = []
        for threshold in (task.threshold, LOW_THRESHOLD):  # the spec's, and one low enough to answer every query
            ours += [json.loads(answer.answer(task.kind.value, {**answer_params, "threshold": threshold},
                                              {**out, "image_size": m["image_size"]})["detections"][0][0])
                     for out, m in zip(outs, made)]
    else:
        rows = np.array([s.data for s in samples], dtype=np.object_)
        batch = step.pixels(rows)
        got, ran = task_check.run_model(chain, {"pixel_values": batch}, scratch, log)
        pixels = list(batch)
        ours = (list(got["image_embedding"]) if answer is None else
                task_check.label_rows(answer.answer(task.kind.value, answer_params, got)))
    where, theirs, their_pixels = _reference_or_refuse(chain, samples)
    wrong_pixels = _pixel_problems(pixels, their_pixels)
    described = [s.what for s in samples]
    if detector:  # two answers per image, at each threshold: a pixel problem is both answers'
        described = [f"{what}, threshold {t:g}" for t in (task.threshold, LOW_THRESHOLD) for what in described]
        wrong_pixels = {i + k * len(samples): p for k in range(2) for i, p in wrong_pixels.items()}
    worst, problems = task_reference.compare(task, ours, theirs, chain.model_step.tolerance.atol, wrong_pixels)
    if problems:
        named = [p.replace(f"row {i}:", f"row {i} ({described[i]}):", 1) if p.startswith(f"row {i}:") else p
                 for i, p in _numbered(problems)]
        cause = PIXELS_DIFFER if wrong_pixels else ANSWERS_DIFFER
        if detector and not wrong_pixels:  # the images that differ may be those of another size than the export's
            hint = frozen_size(chain, sizes, {i % len(samples) for i, _ in _numbered(problems)})
            cause = hint[:1].upper() + hint[1:] if hint else cause
        raise BuildError(f"model {chain.name}: raw images through its steps do not answer as {where} on "
                         f"{len(problems)} of {len(described)} {'answers' if detector else 'images'}: " + "; ".join(named[:3]) + ". " +
                         cause)
    measure = "1 - cosine" if task.kind is TaskKind.IMAGE_EMBEDDING else "max score difference"
    log(f"  {chain.name}: {len(samples)} raw images answer as {where} ({measure} {worst:.2g})")
    return Verification(ran=True, triton_version=chain.triton_version, runtime=ran["runtime"],
                        version=ran["version"], device="cpu", cases=len(described), max_abs_error=worst,
                        details={"reference": where, "measure": measure, "task": task.kind.value,
                                 "processor": params["processor_class"], "images": [s.what for s in samples],
                                 "preprocess": f"transformers {task_check.package_version('transformers')}, Pillow "
                                               f"{task_check.package_version('pillow')} (Python {sys.version_info.major}."
                                               f"{sys.version_info.minor} of the build)"})


def frozen_size(chain: task_check.Chain, sizes: list[tuple[int, ...]], failing: set[int]) -> str:
    """Why a detector's model step fails on some images, where all of them are images whose pixel_values are not
    the size it was exported (and traced) at; "" where that is not so."""
    from model_build.recipes import checkpoint_image

    return frozen_size_text(chain.name, checkpoint_image.processor_class(chain.checkpoint),
                            checkpoint_image.probe_shape(chain.checkpoint), sizes, failing)


def frozen_size_text(name: str, processor: str, exported: tuple[int, ...], sizes: list[tuple[int, ...]],
                     failing: set[int]) -> str:
    """The cause and fix of ``frozen_size`` in words ("" where the failing images are not those of other sizes
    than ``exported``, or where no image of that size passed)."""
    other = {i for i, size in enumerate(sizes) if size != exported}
    if not failing or not failing <= other or len(other) == len(sizes):
        return ""
    seen = sorted({sizes[i] for i in failing})
    _, height, width = exported
    return (f"the images it fails on are those whose pixel_values are not {list(exported)}, the size its model step "
            f"was exported and traced at ({', '.join(str(list(s)) for s in seen[:3])}): its graph holds that size "
            "fixed (a multi-scale detector's spatial shapes: Deformable DETR's), while the image processor "
            f"({processor}) keeps each image's aspect ratio, so pixel_values follow the image; backend pytorch "
            "traces the same fixed size. Fix: if the model was trained so, save a processor that resizes every "
            f"image to one size (preprocessor_config.json of models.{name}.weights: size {{\"height\": {height}, "
            f"\"width\": {width}}}), else use another architecture")


def reference(chain: task_check.Chain, samples: list[image_samples.RawImage]
              ) -> tuple[str, list[Any], list[npt.NDArray[np.float32]]]:
    """(what answered, its answer per image (detectors: at the spec's threshold, then at LOW_THRESHOLD), the
    pixel_values its processor made of each image)."""
    import transformers
    from PIL import Image

    kind = chain.task.kind
    opened: list[Any] = [Image.open(io.BytesIO(s.data)) for s in samples]
    if kind is TaskKind.IMAGE_EMBEDDING:
        return _embedding_reference(chain, opened)
    pipe = transformers.pipeline(kind.value, model=str(chain.checkpoint), device="cpu")
    if kind is TaskKind.OBJECT_DETECTION:
        answers = [list(pipe(image, threshold=t)) for t in (chain.task.threshold, LOW_THRESHOLD) for image in opened]
    else:
        answers = [list(a) for a in pipe(opened, top_k=task_reference.reference_top_k(chain.task))]
    # The pipeline's own preprocessing of each image, to tell a pixel difference from a model difference.
    pixels = [np.asarray(pipe.preprocess(Image.open(io.BytesIO(s.data)))["pixel_values"])[0] for s in samples]
    where = f"transformers {transformers.__version__} pipeline('{kind.value}') ({type(pipe.image_processor).__name__})"
    return where, answers, pixels


def _embedding_reference(chain: task_check.Chain, opened: list[Any]
                         ) -> tuple[str, list[Any], list[npt.NDArray[np.float32]]]:
    """The checkpoint in eager transformers as its users embed images: the image processor transformers loads for
    it (as a pipeline would), then get_image_features (CLIP, SigLIP) or the pooled output; normalised where the
    spec says. (pipeline('image-feature-extraction') cannot run a CLIP checkpoint: its AutoModel wants text too.)"""
    import torch
    import transformers
    from PIL import ImageOps

    from model_build.recipes.image_steps import image_embedding

    processor = transformers.AutoImageProcessor.from_pretrained(chain.checkpoint, local_files_only=True)
    net = transformers.AutoModel.from_pretrained(chain.checkpoint, local_files_only=True).eval()
    upright = [ImageOps.exif_transpose(image).convert("RGB") for image in opened]  # transformers' load_image
    pixels = [np.asarray(processor(images=[image], return_tensors="np")["pixel_values"])[0] for image in upright]
    with torch.no_grad():
        vectors = image_embedding(net, torch.from_numpy(np.stack(pixels)))
        if chain.task.normalize:
            vectors = torch.nn.functional.normalize(vectors, dim=-1)
    how = "get_image_features" if hasattr(net, "get_image_features") else "pooler_output"
    where = (f"transformers {transformers.__version__} {type(net).__name__}.{how} ({type(processor).__name__})"
             + (", L2-normalised" if chain.task.normalize else ""))
    return where, list(vectors.numpy()), pixels


def _reference_or_refuse(chain: task_check.Chain, samples: list[image_samples.RawImage]
                         ) -> tuple[str, list[Any], list[npt.NDArray[np.float32]]]:
    """The reference's answers; a BuildError naming the first image the reference itself cannot answer."""
    try:
        return reference(chain, samples)
    except Exception as whole:  # the model's own library fails: find the image, say it in one line
        failed = whole
        said = "the raw images together"
        for sample in samples:
            try:
                reference(chain, [sample])
            except Exception as exc:
                failed, said = exc, f"the image {sample.what}"
                break
        raise BuildError(
            f"model {chain.name}: the {chain.task.kind.value} reference (the checkpoint in transformers' pipeline, "
            f"as its users run it) itself fails on {said}: {verify.last_line(failed)}; so this checkpoint cannot be "
            "verified for raw images, and would fail on such requests when served; fix: use another "
            "architecture or checkpoint") from None


def _pixel_problems(ours: list[npt.NDArray[np.float32]], theirs: list[npt.NDArray[np.float32]]) -> dict[int, str]:
    """Row -> how the preprocessing step's pixels differ from the pipeline's, where they do."""
    out = {}
    for row, (a, b) in enumerate(zip(ours, theirs)):
        if a.shape != b.shape:
            out[row] = f"pixel_values shape {list(a.shape)}, the pipeline's {list(b.shape)}"
        elif not np.allclose(a, b, atol=PIXEL_ATOL, rtol=0):
            where = np.unravel_index(int(np.argmax(np.abs(a - b))), a.shape)
            out[row] = (f"pixel_values differ from the pipeline's by up to {float(np.max(np.abs(a - b))):.3g} "
                        f"(at channel, y, x {tuple(int(i) for i in where)})")
    return out


def _numbered(problems: list[str]) -> list[tuple[int, str]]:
    return [(int(p.split(":", 1)[0].split()[1]), p) for p in problems]


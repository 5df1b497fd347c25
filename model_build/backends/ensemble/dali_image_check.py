"""An image task with ``task.preprocess: dali`` verified as a whole at build time: the shipped ``model.dali`` on
DALI's CPU operators, then the model and answer steps' shipped files, against the checkpoint's own processor and
``transformers.pipeline`` (image_check.reference) on the same encoded images.

Two comparisons, each with its own tolerance:

1. pixel_values: the DALI step's against the processor's, in pixel levels (the difference times the pipeline's std
   on 0..255: one level is one step of the decoded 8-bit image), within the dali backend's own tolerance for the
   filter (model_build/dali_pipeline/reference.py MAX_LEVELS, MEAN_LEVELS). transformers' PIL backend resizes
   8-bit images with Pillow, as that reference does, so the same causes leave the same differences (rounding of
   the 8-bit resize; cubic and Lanczos ringing clipped by Pillow's first pass). The manifest records the bound in
   normalised units too: levels / std per channel.
2. answers through the model and answer steps: labels in the pipeline's order, scores within the model step's
   tolerance.atol; embeddings at cosine >= task_reference.EMBEDDING_COSINE.

Images: image_samples.py's, except those DALI's ``fn.decoders.image`` decodes otherwise than Pillow by design
(SKIPPED: it disregards EXIF orientation, per its docs); the manifest lists both. Only DALI's CPU operators run
here: nvJPEG and the GPU resize of a GPU endpoint are not measured (no GPU on the build machine).
"""
from __future__ import annotations

import pathlib
from typing import Callable

import numpy as np
import numpy.typing as npt

from deployment_spec.sections.dali import DaliPipeline
from deployment_spec.builds.manifest import Verification
from deployment_spec.sections.model import ModelSpec
from deployment_spec.facts.serving_runtimes import DALI_RELEASES
from deployment_spec.sections.tasks import TaskKind
from model_build import layout
from model_build.dali_pipeline import placement, reference as levels, run as dali_build
from model_build.backends.ensemble import image_check, image_samples, task_check, task_reference
from model_build.errors import BuildError

# Images whose pixels differ from the processor's for a documented reason, not a defect (what -> why).
SKIPPED = {"JPEG 400x300 with EXIF orientation 6 (shown rotated)":
           "DALI's fn.decoders.image disregards EXIF orientation (its docs): served unrotated"}
PIXELS_DIFFER = ("The DALI step is derived from the checkpoint's preprocessor_config.json "
                 "(deployment_spec/sections/task_dali.py); where DALI cannot make the processor's pixels, set "
                 "task.preprocess: python")
ANSWERS_DIFFER = ("The DALI step's pixel_values are within the tolerance; the model answers otherwise on them: its "
                  "answers change with differences that small; set task.preprocess: python for the processor's "
                  "exact pixels, or, where the labels agree and you accept the measured score difference as the "
                  "price of GPU preprocessing, raise models.{name}.tolerance.atol above it")
GPU_NOT_MEASURED = "nvJPEG decoding and the GPU resize on the endpoint not measured"


def check(step: ModelSpec, chain: task_check.Chain, scratch: pathlib.Path, log: Callable[[str], None]) -> Verification:
    """``step``: the task's DALI step (its spec). BuildError naming the images that differ."""
    assert step.dali is not None  # the loader made it from preprocessor_config.json
    task, pipeline = chain.task, step.dali
    release = DALI_RELEASES[chain.triton_version]
    samples = [s for s in image_samples.images(task.max_image_bytes, task.max_image_pixels) if s.what not in SKIPPED]
    if not samples:
        raise BuildError(f"models.{chain.name}.task: no raw image of the check fits max_image_bytes "
                         f"{task.max_image_bytes} and max_image_pixels {task.max_image_pixels} (the smallest is "
                         f"{image_samples.SMALLEST}); raise them to what the application sends")
    pixels = run_pipeline(step, chain.dirs[0], [s.data for s in samples], scratch, release.triton_version)
    where, theirs, their_pixels = image_check.reference(chain, samples)
    wrong, worst_levels = pixel_problems(pipeline, pixels, their_pixels)
    got, ran = task_check.run_model(chain, {"pixel_values": np.stack(pixels)}, scratch, log)
    if len(chain.dirs) == 3:
        answer, params = task_check.answer_step(chain)
        ours = task_check.label_rows(answer.answer(task.kind.value, params, got))
    else:
        ours = list(got["image_embedding"])
    worst, problems = task_reference.compare(task, ours, theirs, chain.model_step.tolerance.atol, wrong)
    if problems:
        named = [p.replace(f"row {i}:", f"row {i} ({samples[i].what}):", 1)
                 for i, p in enumerate_rows(problems)]
        raise BuildError(f"model {chain.name}: raw images through its DALI step (DALI {release.version}'s CPU "
                         f"operators) and its other steps do not answer as {where} on {len(problems)} of "
                         f"{len(samples)} images: " + "; ".join(named[:3]) + ". "
                         + (PIXELS_DIFFER if wrong else ANSWERS_DIFFER.format(name=chain.name)))
    measure = "1 - cosine" if task.kind is TaskKind.IMAGE_EMBEDDING else "max score difference"
    log(f"  {chain.name}: {len(samples)} raw images through DALI {release.version} (CPU) answer as {where} "
        f"({measure} {worst:.2g}; pixels within {worst_levels['max_levels']:.1f} levels)")
    return Verification(
        ran=True, triton_version=chain.triton_version, runtime=ran["runtime"], version=ran["version"], device="cpu",
        cases=len(samples), max_abs_error=worst,
        details={"reference": where, "measure": measure, "task": task.kind.value,
                 "preprocess": f"DALI {release.version} CPU operators here (model.dali with its operators moved to "
                               "the CPU)" + (f"; {GPU_NOT_MEASURED}" if on_gpu(chain.dirs[0]) else
                                             "; the endpoint runs the same CPU operators"),
                 "pixels": {**worst_levels, "tolerance_levels": {"max": levels.max_levels(pipeline),
                                                                 "mean": levels.MEAN_LEVELS},
                            "tolerance_normalised": [round(levels.max_levels(pipeline) / s, 6)
                                                     for s in _per_channel(pipeline.std)]},
                 "images": [s.what for s in samples],
                 "not_checked": [f"{what}: {why}" for what, why in SKIPPED.items()]})


def run_pipeline(step: ModelSpec, step_dir: pathlib.Path, encoded: list[bytes], scratch: pathlib.Path,
                 triton_version: str) -> list[npt.NDArray[np.float32]]:
    """The shipped model.dali, its operators moved to the CPU, on the encoded images (fed padded, in batches)."""
    from model_build.verification import side_env

    release = DALI_RELEASES[triton_version]
    env = side_env.ensure(release.package, release.version)
    work = scratch / "dali-task-check"
    (work / "images").mkdir(parents=True, exist_ok=True)
    cpu_file = work / "model.cpu.dali"
    cpu_file.write_bytes(placement.to_cpu((layout.version_dir(step_dir) / dali_build.MODEL_FILE).read_bytes()))
    files = []
    for index, data in enumerate(encoded):
        files.append(work / "images" / f"image{index}")
        files[-1].write_bytes(data)
    return dali_build.run_on_cpu(env, step, cpu_file, files, work, release)


def pixel_problems(pipeline: DaliPipeline, ours: list[npt.NDArray[np.float32]],
                   theirs: list[npt.NDArray[np.float32]]
                   ) -> tuple[dict[int, str], dict[str, float]]:
    """(row -> how the DALI step's pixel_values differ from the processor's beyond the tolerance, the worst in
    levels over all rows)."""
    out, worst = {}, {"max_levels": 0.0, "mean_levels": 0.0}
    for row, (a, b) in enumerate(zip(ours, theirs)):
        if a.shape != b.shape:
            out[row] = f"pixel_values shape {list(a.shape)}, the processor's {list(b.shape)}"
            continue
        diff = levels.compare(a, b, pipeline)
        worst = {key: max(worst[key], value) for key, value in diff.items()}
        if not levels.within(diff, pipeline):
            out[row] = (f"pixel_values differ from the processor's by up to {diff['max_levels']:.1f} levels "
                        f"({diff['mean_levels']:.2f} on average; allowed {levels.max_levels(pipeline):g} and "
                        f"{levels.MEAN_LEVELS:g})")
    return out, worst


def on_gpu(step_dir: pathlib.Path) -> bool:
    """Whether the shipped model.dali decodes or resizes on the GPU (a GPU endpoint's placement)."""
    found = placement.devices((layout.version_dir(step_dir) / dali_build.MODEL_FILE).read_bytes())
    return any(d.endswith((":gpu", ":mixed")) for d in found)


def enumerate_rows(problems: list[str]) -> list[tuple[int, str]]:
    return [(int(p.split(":", 1)[0].split()[1]), p) for p in problems]


def _per_channel(values: tuple[float, ...]) -> tuple[float, ...]:
    return values if len(values) == 3 else values * 3

"""What an image ``task:`` reads from its checkpoint folder, once for all its steps (deployment_spec/sections/tasks.py).

The preprocessing step, the model step and the answer step must agree on the pixel tensor's shape and the
labels; each fact has one function here. The processor is transformers' own image processor of the folder
(``preprocessor_config.json``), on its PIL backend: numpy and Pillow only, so the step can run it in an
execution environment without torch, and the build verifies with the same code that serves. Imports
transformers (build only).
"""
from __future__ import annotations

import functools
import json
import pathlib
from typing import Any

import numpy as np

from deployment_spec.sections.model import ModelSpec
from model_build.errors import BuildError, first_line

# transformers' PIL backend (transformers/image_processing_backends.py); the torchvision one needs torch.
BACKEND = "pil"
# Two sizes of different aspect ratio: a processor that gives both the same shape makes fixed-size pixels.
PROBES = ((480, 640), (300, 200))


@functools.lru_cache(maxsize=8)
def processor(folder: pathlib.Path) -> Any:
    """The checkpoint's image processor as transformers loads it, on the PIL backend."""
    from transformers import AutoImageProcessor

    if not (folder / "preprocessor_config.json").is_file():
        raise BuildError(f"{folder}: no preprocessor_config.json; an image task preprocesses as the checkpoint's "
                         "own image processor does; save it there (AutoImageProcessor.from_pretrained(<the "
                         "checkpoint>).save_pretrained(folder))")
    try:
        found = AutoImageProcessor.from_pretrained(folder, local_files_only=True, backend=BACKEND)
    except (OSError, ValueError, TypeError, KeyError, ImportError) as exc:
        raise BuildError(f"{folder}: transformers cannot load an image processor from it ({first_line(exc)}); "
                         "save the checkpoint's image processor there (image_processor.save_pretrained)") from None
    needs = [b for b in vars(type(found)).get("__backends", ()) if b in ("torch", "torchvision")]
    if needs:  # it loaded here, but would not start in the step's environment (transformers, Pillow, numpy)
        raise BuildError(f"{folder}: its image processor {type(found).__name__} needs {' and '.join(needs)} "
                         "(transformers has no PIL form of it), and the preprocessing step's environment has "
                         "transformers, Pillow and numpy only; fix: use a checkpoint whose image processor has a "
                         "PIL form (most: ViT, ConvNeXT, DeiT, BEiT, CLIP, DINOv2...)")
    return found


def processor_class(folder: pathlib.Path) -> str:
    return type(processor(folder)).__name__


def pixel_shape(folder: pathlib.Path) -> tuple[int, ...]:
    """[channels, height, width] of the processor's ``pixel_values``; -1 where it follows the image's size."""
    shapes = [_probe(folder, height, width) for height, width in PROBES]
    return tuple(a if a == b else -1 for a, b in zip(*shapes))


def probe_shape(folder: pathlib.Path) -> tuple[int, ...]:
    """The pixel tensor's shape for the first probe image (480x640): an example size for an export."""
    return _probe(folder, *PROBES[0])


def _probe(folder: pathlib.Path, height: int, width: int) -> tuple[int, ...]:
    from PIL import Image

    image = Image.fromarray(np.full((height, width, 3), 127, dtype=np.uint8))
    return tuple(int(d) for d in processor(folder)(images=image, return_tensors="np")["pixel_values"].shape[1:])


def detection_params(model: ModelSpec, folder: pathlib.Path, threshold: float) -> dict[str, Any]:
    """What the detection answer step needs (model_build/python_models/answer_object_detection.py), with the
    spec's threshold; refused where its post-processing is not one the step has."""
    from model_build.python_models import answer_object_detection

    try:
        params = answer_object_detection.load_params(folder)
    except ValueError as exc:
        raise BuildError(f"models.{model.task_entry or model.name}.weights: {exc}") from None
    if params["model_outputs"] != ["logits", "pred_boxes"]:
        raise BuildError(f"models.{model.task_entry or model.name}.weights: a {params['model_type']} detector "
                         f"answers with {', '.join(params['model_outputs'])} (reading order); the object-detection "
                         "task serves detectors answering logits and pred_boxes (DETR, Conditional/Deformable DETR, "
                         "RT-DETR, YOLOS...); fix: use one of them")
    return {**params, "threshold": threshold}


def classification_params(folder: pathlib.Path, top_k: int) -> dict[str, Any]:
    """What the answer step needs, as ImageClassificationPipeline.postprocess decides it (transformers 5.23.0
    pipelines/image_classification.py): none for regression, sigmoid for multi-label or one label, else softmax."""
    from model_build.recipes.checkpoint_text import labels

    config = json.loads((folder / "config.json").read_text())
    names = labels(folder)
    problem = config.get("problem_type")
    function = ("none" if problem == "regression" else
                "sigmoid" if problem == "multi_label_classification" or len(names) == 1 else "softmax")
    return {"id2label": names, "top_k": top_k, "function": function}



def require_task(model: ModelSpec) -> None:
    if model.task is None or not model.task.takes_image():
        raise BuildError(f"models.{model.name}: recipe {model.source.recipe if model.source else ''} is a step of "
                         "an image task; declare the model with task: {kind: image-classification} and weights")

"""The ``dali:`` section of a ``backend: dali`` model: image preprocessing as a small declarative pipeline.

Encoded image bytes (one ``UINT8`` vector per request, dims ``[-1]``) are decoded, resized, centre
cropped, normalised with a per-channel mean and standard deviation, and laid out as NCHW or NHWC;
model_build serializes the pipeline with the DALI release of the spec's Triton image
(``deployment_spec.facts.serving_runtimes.DALI_RELEASES``) into the model's ``1/model.dali``.
Standard library only: the spec knows the settings, model_build knows DALI.
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Any, Mapping, Optional

from deployment_spec.parsing.errors import Problem
from deployment_spec.parsing.parse import meta
from deployment_spec.sections.tasks import IMAGE

INPUT = "DALI_INPUT_0"    # the external_source's name is the model's input name (dali_backend README, "Tips & Tricks")
OUTPUT = "DALI_OUTPUT_0"


class Color(str, enum.Enum):
    RGB = "rgb"
    BGR = "bgr"


class Interpolation(str, enum.Enum):
    """Resampling filters, antialiased when shrinking (DALI's default). No nearest-neighbour: which source
    pixel it takes at half positions differs between implementations, so no reference could check it."""

    LINEAR = "linear"
    CUBIC = "cubic"
    LANCZOS = "lanczos"


class Layout(str, enum.Enum):
    NCHW = "nchw"
    NHWC = "nhwc"


class PixelType(str, enum.Enum):
    FP32 = "fp32"
    FP16 = "fp16"


TRITON_TYPE = {PixelType.FP32: "TYPE_FP32", PixelType.FP16: "TYPE_FP16"}


class SizeRule(str, enum.Enum):
    """How the resized size and the crop's position are rounded.

    ``dali``: DALI's own rules (``resize_shorter`` rounds the longer side, keeps the exact scale on both axes;
    the centre crop's offset rounds halves up). ``transformers``: as a checkpoint's image processor does it
    (transformers 5.23.0 ``image_transforms.get_resize_output_image_size``: the longer side is
    ``int(shorter_size * long / short)``, each axis scaled to its own integer size; ``center_crop``: the offset is
    ``(size - crop) // 2``), so a task's DALI step makes the processor's pixels (deployment_spec/sections/task_dali.py).
    """

    DALI = "dali"
    TRANSFORMERS = "transformers"


@dataclasses.dataclass(frozen=True)
class Resize:
    """Either the shorter side (aspect ratio kept) or a fixed height and width."""

    shorter: Optional[int] = dataclasses.field(default=None, metadata=meta(minimum=1, maximum=16384))
    height: Optional[int] = dataclasses.field(default=None, metadata=meta(minimum=1, maximum=16384))
    width: Optional[int] = dataclasses.field(default=None, metadata=meta(minimum=1, maximum=16384))
    interpolation: Interpolation = Interpolation.LINEAR

    def problems(self, path: str) -> list[Problem]:
        given = [k for k in ("shorter", "height", "width") if getattr(self, k) is not None]
        if given not in (["shorter"], ["height", "width"]):
            return [Problem(path, ", ".join(given) or "no size", "either shorter, or height and width",
                            "write resize: {shorter: 256} (keeps the aspect ratio) or {height: 299, width: 299}")]
        return []


@dataclasses.dataclass(frozen=True)
class DaliPipeline:
    """Decode, resize, centre crop, normalise: what the ``dali`` backend runs in front of an image classifier.

    ``mean`` and ``std`` are on the decoded pixel values (0..255), one per channel or one for all,
    as DALI's ``crop_mirror_normalize`` takes them: ``(pixel - mean) / std``.
    """

    resize: Resize = dataclasses.field(metadata=meta(help="{shorter: N} or {height: H, width: W}"))
    crop: tuple[int, ...] = dataclasses.field(metadata=meta(minimum=1, maximum=16384,
                                                            help="[height, width] of the centre crop"))
    mean: tuple[float, ...] = (0.0,)
    std: tuple[float, ...] = (1.0,)
    color: Color = Color.RGB
    layout: Layout = Layout.NCHW
    dtype: PixelType = PixelType.FP32
    num_threads: int = dataclasses.field(default=4, metadata=meta(minimum=1, maximum=256))
    # Set by the loader for a task's DALI step only (never read from the spec file).
    sizes: SizeRule = dataclasses.field(default=SizeRule.DALI, metadata=meta(yaml=False))

    def problems(self, path: str) -> list[Problem]:
        out = []
        if len(self.crop) != 2:
            out.append(Problem(f"{path}.crop", f"{len(self.crop)} values", "[height, width]",
                               "write crop: [224, 224]"))
        for key in ("mean", "std"):
            if len(getattr(self, key)) not in (1, 3):
                out.append(Problem(f"{path}.{key}", f"{len(getattr(self, key))} values",
                                   "1 value (all channels) or 3 (one per channel)", f"give {key} 1 or 3 numbers"))
        if any(s <= 0 for s in self.std):
            out.append(Problem(f"{path}.std", str(list(self.std)), "numbers > 0", "every std divides: make it positive"))
        size = self.resize
        limit = (size.shorter, size.shorter) if size.shorter else (size.height or 0, size.width or 0)
        if len(self.crop) == 2 and all(limit):
            if self.crop[0] > limit[0] or self.crop[1] > limit[1]:
                out.append(Problem(f"{path}.crop", str(list(self.crop)),
                                   f"at most the resized size ({limit[0]}x{limit[1]})",
                                   "crop no more than the resize keeps, or resize to a larger size"))
        return out

    def output_dims(self) -> tuple[int, int, int]:
        """The per-image output shape, without the batch axis."""
        height, width = self.crop
        return (3, height, width) if self.layout is Layout.NCHW else (height, width, 3)


def image_inputs(models: Mapping[str, Any], name: str) -> frozenset[str]:
    """The inputs of model ``name`` that take encoded image bytes as UINT8 rows: a dali model's, ensemble inputs fed
    to one, and an image task's IMAGE with ``task.preprocess: dali`` (a Python first step takes BYTES instead)."""
    model = models.get(name)
    if model is None:
        return frozenset()
    if model.backend.value == "dali":
        return frozenset({INPUT})
    if model.task is not None and model.task.dali_preprocess():  # its DALI step's input, IMAGE in the ensemble
        return frozenset({IMAGE})
    out: set[str] = set()
    for step in (model.ensemble.steps if model.ensemble else ()):
        if step.model != name:  # a self-call is a spec error reported elsewhere
            inner = image_inputs(models, step.model)
            out |= {tensor for own, tensor in step.input_map.items() if own in inner}
    return frozenset(out)

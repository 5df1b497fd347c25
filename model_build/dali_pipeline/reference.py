"""The spec's image pipeline in plain PIL and numpy: what the serialized DALI pipeline is checked against.

Sizes and positions follow DALI's documented rules, so a difference left is the decoder's or the
resampling kernel's, not a different crop:
* ``resize_shorter``: the shorter side becomes N, the longer one ``round(long * N / short)``, and
  with ``subpixel_scale`` (default true) both axes keep the exact scale N / short: the input
  region read is the output size divided by that scale, centred (DALI ``fn.resize`` docs,
  "resize_shorter", "subpixel_scale"). PIL's filters antialias when shrinking, as DALI's
  ``antialias`` default does.
* the centre crop starts at ``floor((size - crop) * 0.5 + 0.5)`` (``crop_pos_x``/``crop_pos_y`` default
  0.5, DALI ``fn.crop_mirror_normalize`` docs; halves round up, measured).
* a task's pipeline (``sizes: transformers``, deployment_spec/sections/dali.py SizeRule): the longer side floored,
  each axis scaled to its own size, the crop at ``(size - crop) // 2``, as transformers' processors do.
"""
from __future__ import annotations

import io
import math

import numpy as np

from deployment_spec.sections.dali import Color, DaliPipeline, Interpolation, Layout, PixelType, SizeRule

_FILTERS = {Interpolation.LINEAR: "BILINEAR", Interpolation.CUBIC: "BICUBIC", Interpolation.LANCZOS: "LANCZOS"}

_PAD = 8  # more than the widest filter's reach (Lanczos-3 upscaling: 3 pixels)

# The tolerance, in levels of the decoded 0..255 pixels (the output times std). DALI's CPU decoder
# and PIL both decode with libjpeg-turbo. Linear: the resize rounds its 8-bit result once in each,
# from float (DALI) or fixed-point (PIL) weights, so a pixel may land one level apart. Cubic and
# Lanczos have negative lobes: PIL resamples in two passes and clips the first pass to 8 bits,
# DALI keeps it in float, so the ringing at hard edges differs by more on a few pixels. Measured on
# six JPEGs of 224x224 to 1920x1080 (model_build/backends/dali/check_images.py): linear at most 1.0 level with
# DALI 1.31.0 and 2.1.0, cubic 8 and Lanczos 11 with 2.1.0, each under 0.19 on average. Headroom above.
# nvJPEG and the GPU resize of the endpoint are not measured here (no GPU on the build machine).
MAX_LEVELS = {Interpolation.LINEAR: 2.0, Interpolation.CUBIC: 12.0, Interpolation.LANCZOS: 16.0}
MEAN_LEVELS = 0.5


def preprocess(encoded: bytes, pipeline: DaliPipeline) -> np.ndarray:
    """One image, as the pipeline's output for it."""
    from PIL import Image

    image = Image.open(io.BytesIO(encoded)).convert("RGB")
    resize = pipeline.resize
    width, height = image.size
    if resize.shorter and pipeline.sizes is SizeRule.TRANSFORMERS:  # each axis to its own floored size
        size: tuple[int, int] = (resize.shorter * width // min(width, height),
                                 resize.shorter * height // min(width, height))
        scale_x, scale_y = size[0] / width, size[1] / height
    elif resize.shorter:
        scale_x = scale_y = resize.shorter / min(width, height)
        size = (resize.shorter, round(height * scale_y)) if width <= height else (round(width * scale_x), resize.shorter)
    else:
        size = (resize.width, resize.height)
        scale_x, scale_y = resize.width / width, resize.height / height
    # The region read (output size / scale, centred) may overhang the image, and every filter reaches
    # past its edges, where DALI repeats the border pixels: so does this edge-padded copy (PIL
    # would renormalise its weights at the border instead, and refuses a box outside the image).
    image = Image.fromarray(np.pad(np.asarray(image), ((_PAD, _PAD), (_PAD, _PAD), (0, 0)), mode="edge"))
    read_w, read_h = size[0] / scale_x, size[1] / scale_y
    box = ((width - read_w) / 2 + _PAD, (height - read_h) / 2 + _PAD,
           (width + read_w) / 2 + _PAD, (height + read_h) / 2 + _PAD)
    image = image.resize(size, getattr(Image.Resampling, _FILTERS[resize.interpolation]), box=box)
    pixels = np.asarray(image, dtype=np.float32)
    crop_h, crop_w = pipeline.crop
    if pipeline.sizes is SizeRule.TRANSFORMERS:
        top, left = (pixels.shape[0] - crop_h) // 2, (pixels.shape[1] - crop_w) // 2
    else:
        top, left = math.floor((pixels.shape[0] - crop_h) * 0.5 + 0.5), math.floor((pixels.shape[1] - crop_w) * 0.5 + 0.5)
    pixels = pixels[top:top + crop_h, left:left + crop_w]
    if pipeline.color is Color.BGR:
        pixels = pixels[..., ::-1]
    out = (pixels - np.asarray(pipeline.mean, np.float32)) / np.asarray(pipeline.std, np.float32)
    if pipeline.layout is Layout.NCHW:
        out = out.transpose(2, 0, 1)
    return np.ascontiguousarray(out, dtype=np.float16 if pipeline.dtype is PixelType.FP16 else np.float32)


def compare(got: np.ndarray, want: np.ndarray, pipeline: DaliPipeline) -> dict[str, float]:
    """Differences in pixel levels (the output times std), the units the tolerance is stated in."""
    std = np.asarray(pipeline.std, np.float32)
    std = std.reshape((-1, 1, 1) if pipeline.layout is Layout.NCHW else (1, 1, -1)) if std.size > 1 else std
    levels = np.abs(got.astype(np.float32) - want.astype(np.float32)) * std
    return {"max_levels": float(levels.max()), "mean_levels": float(levels.mean())}


def max_levels(pipeline: DaliPipeline) -> float:
    return MAX_LEVELS[pipeline.resize.interpolation]


def within(difference: dict[str, float], pipeline: DaliPipeline) -> bool:
    return difference["max_levels"] <= max_levels(pipeline) and difference["mean_levels"] <= MEAN_LEVELS

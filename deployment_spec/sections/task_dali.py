"""``task.preprocess: dali``: the DALI pipeline of an image task, derived from the checkpoint's own
``preprocessor_config.json``; whatever the processor does that the pipeline cannot express is refused.

The processor's steps, as transformers 5.23.0 runs them (``image_processing_backends.py`` ``PilBackend._preprocess``:
resize, centre crop, rescale, normalise, in that order; ``image_transforms.py`` ``get_resize_output_image_size``,
``center_crop``; ``models/convnext/image_processing_pil_convnext.py`` for ``crop_pct``), become
``deployment_spec.sections.dali.DaliPipeline``: decode to RGB, ``fn.resize`` with the processor's filter, the centre crop,
and ``fn.crop_mirror_normalize``'s mean and std on the decoded 0..255 values, NCHW fp32. Rescaling folds into
them: ``(p * r - m) / s == (p - m / r) / (s / r)``. Sizes and crop offsets round as transformers rounds them
(``SizeRule.TRANSFORMERS``). Standard library only: it runs when the spec loads.

Only processor classes whose ``resize`` and ``center_crop`` are PilBackend's own (or ConvNeXT's crop_pct rule) are
derived: another class may read the same keys its own way (LeViT's shortest_edge, PoolFormer's crop_pct).
"""
from __future__ import annotations

import json
import math
import pathlib
from typing import Any, Mapping, Optional

from deployment_spec.sections.dali import DaliPipeline, Interpolation, Resize, SizeRule
from deployment_spec.parsing.errors import Problem, describe

CONFIG = "preprocessor_config.json"
FIX = "set task.preprocess: python (the checkpoint's own processor in a Python step runs any processor)"
# PIL's resampling numbers (PIL.Image.Resampling) as preprocessor_config.json stores them; DALI's antialiased filters
# of the same shape (DALI fn.resize docs, interp_type). NEAREST (0), BOX (4), HAMMING (5): no DALI filter matches.
RESAMPLE = {2: Interpolation.LINEAR, 3: Interpolation.CUBIC, 1: Interpolation.LANCZOS}
RESAMPLE_NAMES = "2 (bilinear), 3 (bicubic) or 1 (lanczos)"
_ONE_255 = 1 / 255
_BASE: dict[str, Any] = {"do_resize": True, "do_rescale": True, "rescale_factor": _ONE_255, "do_normalize": True,
                         "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}
_CLIP_MEAN, _CLIP_STD = [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]
# Each class's defaults for the keys a saved config may leave out (transformers 5.23.0
# models/<family>/image_processing_pil_<family>.py class attributes; to_dict omits the None ones).
CLASS_DEFAULTS: Mapping[str, Mapping[str, Any]] = {
    "ViTImageProcessor": {**_BASE, "size": {"height": 224, "width": 224}, "resample": 2, "default_to_square": True},
    "DeiTImageProcessor": {**_BASE, "size": {"height": 256, "width": 256}, "resample": 3, "do_center_crop": True,
                           "crop_size": {"height": 224, "width": 224}, "default_to_square": True},
    "CLIPImageProcessor": {**_BASE, "size": {"shortest_edge": 224}, "resample": 3, "do_center_crop": True,
                           "crop_size": {"height": 224, "width": 224}, "image_mean": _CLIP_MEAN,
                           "image_std": _CLIP_STD, "default_to_square": False},
    "BitImageProcessor": {**_BASE, "size": {"shortest_edge": 224}, "resample": 3, "do_center_crop": True,
                          "crop_size": {"height": 224, "width": 224}, "image_mean": _CLIP_MEAN,
                          "image_std": _CLIP_STD, "default_to_square": False},
    "SiglipImageProcessor": {**_BASE, "size": {"height": 224, "width": 224}, "resample": 3,
                             "default_to_square": False},
    "ConvNextImageProcessor": {**_BASE, "size": {"shortest_edge": 384}, "resample": 3, "crop_pct": 224 / 256,
                               "default_to_square": False},
}
HANDLED = {"do_resize", "size", "resample", "do_center_crop", "crop_size", "crop_pct", "do_rescale", "rescale_factor",
           "do_normalize", "image_mean", "image_std", "default_to_square", "image_processor_type"}
# Keys that never change the pixels of one RGB image: names, the return type, and do_convert_rgb (DALI decodes to
# RGB; the pipeline converts every image to RGB before its processor, transformers image_utils.load_image).
NEUTRAL = {"processor_class", "feature_extractor_type", "do_convert_rgb", "return_tensors", "disable_grouping",
           "input_data_format", "device", "data_format"}
# Keys known to change pixels in a way the pipeline does not express.
REASONS = {"do_pad": "pads images to a common or divisible size", "pad_size": "pads images",
           "size_divisor": "rounds sizes to a multiple", "do_flip_channel_order": "flips RGB to BGR after normalising",
           "rescale_offset": "shifts the rescaled values", "do_reduce_labels": "a segmentation setting"}
CROP_PCT_LIMIT = 384  # ConvNeXT: below it, resize to shortest_edge / crop_pct then crop; at or above, warp square


def derive(weights: pathlib.Path, label: str, path: str) -> tuple[Optional[DaliPipeline], list[Problem]]:
    """The pipeline for the checkpoint folder ``weights`` (``label``: how the spec names it), or the problems."""
    file = f"{label}/{CONFIG}"
    try:
        config = json.loads((weights / CONFIG).read_text())
    except (OSError, ValueError) as exc:
        return None, [Problem(path, f"'dali' with {file} unreadable ({type(exc).__name__})",
                              f"a readable {CONFIG} (as save_pretrained writes it)",
                              f"save the checkpoint's image processor into {label}, or {FIX}")]
    if not isinstance(config, dict):
        return None, [Problem(path, f"'dali' with {file} holding {describe(config)}", "a JSON object", FIX)]
    return from_config(config, file, path)


def from_config(config: Mapping[str, Any], file: str, path: str) -> tuple[Optional[DaliPipeline], list[Problem]]:
    def refuse(key: str, why: str, allowed: str) -> tuple[None, list[Problem]]:
        value = json.dumps(config.get(key), sort_keys=True)
        return None, [Problem(path, f"'dali' with {file} {key}: {value} ({why})", allowed, FIX)]

    kind = str(config.get("image_processor_type", "")).removesuffix("Fast").removesuffix("Pil")
    if kind not in CLASS_DEFAULTS:
        return refuse("image_processor_type", "a processor whose resize and crop rules are not derived here",
                      ", ".join(CLASS_DEFAULTS))
    for key in sorted(config):
        if key not in HANDLED | NEUTRAL and config[key] not in (None, False):
            return refuse(key, REASONS.get(key, "a setting this derivation does not know: it may change the pixels"),
                          "only " + ", ".join(sorted(HANDLED)) + " change pixels (others null or false)")
    if config.get("data_format") not in (None, "channels_first"):
        return refuse("data_format", "the model takes NCHW pixel_values", "channels_first")
    got = {**CLASS_DEFAULTS[kind], **{k: v for k, v in config.items() if v is not None}}
    if got["do_resize"] is not True:
        return refuse("do_resize", "each image keeps its own size; DALI batches one size", "true")
    size, crop_size = _size(got["size"], got["default_to_square"]), _size(got.get("crop_size"), True)
    if size is None:
        return refuse("size", "resizes by the longest edge or to a maximum, keeping each image's own size",
                      "{shortest_edge: N} or {height: H, width: W}")
    if got["resample"] not in RESAMPLE:
        return refuse("resample", "no DALI filter resamples as it does", RESAMPLE_NAMES)
    crop: Optional[tuple[int, int]] = None
    if got.get("do_center_crop") is True:
        if crop_size is None or "height" not in crop_size:
            return refuse("crop_size", "not a fixed crop", "{height: H, width: W}")
        crop = (crop_size["height"], crop_size["width"])
    resize = Resize(interpolation=RESAMPLE[got["resample"]], **(
        {"shorter": size["shortest_edge"]} if "shortest_edge" in size else size))
    if kind == "ConvNextImageProcessor":
        if "shortest_edge" not in size:
            return refuse("size", "ConvNeXT resizes by shortest_edge", "{shortest_edge: N}")
        edge, pct = size["shortest_edge"], got["crop_pct"]
        if not isinstance(pct, (int, float)) or not 0 < pct <= 1:
            return refuse("crop_pct", "not a fraction", "a number in (0, 1]")
        # The processor's own rule (image_processing_pil_convnext.py resize): crop_pct only below 384.
        resize = (Resize(shorter=int(edge / pct), interpolation=resize.interpolation) if edge < CROP_PCT_LIMIT else
                  Resize(height=edge, width=edge, interpolation=resize.interpolation))
        crop = crop or (edge, edge)
    if crop is None:  # no crop: the resized image as it is, so it must have one size
        if resize.shorter is not None:
            return refuse("size", "shortest_edge without a centre crop keeps each image's aspect ratio",
                          "{height: H, width: W}, or do_center_crop: true with crop_size")
        crop = (resize.height or 0, resize.width or 0)
    scale = got["rescale_factor"] if got["do_rescale"] is True else 1.0
    mean, std = ((got["image_mean"], got["image_std"]) if got["do_normalize"] is True else ([0.0], [1.0]))
    for key, values in (("image_mean", mean), ("image_std", std), ("rescale_factor", [scale])):
        if not isinstance(values, list) or len(values) not in (1, 3) or not all(
                isinstance(v, (int, float)) and math.isfinite(v) for v in values):
            return refuse(key, "not 1 or 3 numbers", "1 or 3 finite numbers")
    if scale <= 0 or any(s <= 0 for s in std):
        return refuse("image_std" if scale > 0 else "rescale_factor", "DALI divides by it", "numbers > 0")
    pipeline = DaliPipeline(resize=resize, crop=crop, mean=tuple(float(m) / scale for m in mean),
                            std=tuple(float(s) / scale for s in std), sizes=SizeRule.TRANSFORMERS)
    found = pipeline.problems(path)
    if found:  # a crop larger than a fixed resize: the processor would pad with zeros
        return refuse("crop_size", "larger than the resized image: the processor pads it", "at most the resized size")
    return pipeline, []


def _size(value: Any, square: bool) -> Optional[dict[str, int]]:
    """A size as transformers' get_size_dict reads it (an int: a square, or the shortest edge), if DALI can make it."""
    if isinstance(value, int) and not isinstance(value, bool):
        return {"height": value, "width": value} if square else {"shortest_edge": value}
    if not isinstance(value, dict) or not all(isinstance(v, int) and v > 0 for v in value.values()):
        return None
    if set(value) in ({"height", "width"}, {"shortest_edge"}):
        return dict(value)
    return None  # longest_edge, max_height/max_width: each image keeps its own aspect ratio and size

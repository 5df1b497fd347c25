"""``task.preprocess: dali``: the image task's first step is a DALI pipeline the loader derives from the checkpoint's
preprocessor_config.json (deployment_spec/sections/task_dali.py); what DALI cannot make is refused with its exact message."""
import copy
import json
import pathlib

import pytest
import yaml

from deployment_spec import SpecError
from deployment_spec.sections.dali import Interpolation, SizeRule, image_inputs
from deployment_spec.sections.model import Backend
from deployment_spec.spec import parse_spec

ROOT = pathlib.Path(__file__).resolve().parents[2]
BASE = yaml.safe_load((ROOT / "triton.yaml").read_text())
# As save_pretrained writes them (transformers 5.23.0): ViT resizes to a fixed size; CLIP the shortest edge, then
# crops; ConvNeXT the shortest edge / crop_pct, then crops.
VIT = {"image_processor_type": "ViTImageProcessor", "do_normalize": True, "do_rescale": True, "do_resize": True,
       "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "resample": 2,
       "rescale_factor": 0.00392156862745098, "size": {"height": 224, "width": 224}}
CLIP = {"image_processor_type": "CLIPImageProcessor", "crop_size": {"height": 224, "width": 224},
        "do_center_crop": True, "do_convert_rgb": True, "resample": 3, "size": {"shortest_edge": 224}}
CONVNEXT = {"image_processor_type": "ConvNextImageProcessor", "crop_pct": 0.875, "resample": 3,
            "size": {"shortest_edge": 224}}
FILE = "ckpt/preprocessor_config.json"
FIX = "fix: set task.preprocess: python (the checkpoint's own processor in a Python step runs any processor)"


def _spec(tmp_path: pathlib.Path, processor: dict | None, task: dict, triton_version: str = "26.05"):
    if processor is not None:
        (tmp_path / "ckpt").mkdir(exist_ok=True)
        (tmp_path / FILE).write_text(json.dumps(processor))
    raw = copy.deepcopy(BASE)
    raw["triton_version"] = triton_version
    raw["models"]["pets"] = {"backend": "onnxruntime", "weights": "ckpt", "max_batch_size": 8,
                             "task": {"kind": "image-classification", "preprocess": "dali", **task}}
    raw["endpoints"]["classifier"]["models"] = ["pets"]
    return parse_spec(raw, tmp_path / "triton.yaml")


def test_the_first_step_is_a_dali_model_derived_from_the_processor(tmp_path):
    spec = _spec(tmp_path, VIT, {})
    step = spec.models["pets-preprocess"]
    assert step.backend is Backend.DALI and step.source is None and step.max_batch_size == 8
    # Rescale and normalise fold into mean and std on 0..255: (p / 255 - 0.5) / 0.5 == (p - 127.5) / 127.5.
    assert (step.dali.mean, step.dali.std, step.dali.crop) == ((127.5,) * 3, (127.5,) * 3, (224, 224))
    assert (step.dali.resize.height, step.dali.resize.width) == (224, 224)
    assert step.dali.resize.interpolation is Interpolation.LINEAR and step.dali.sizes is SizeRule.TRANSFORMERS
    assert [s.model for s in spec.models["pets"].ensemble.steps] == ["pets-preprocess", "pets-model", "pets-answer"]
    # Clients send IMAGE as UINT8 rows (tritonsm invoke --image picks it as the encoded-image input).
    assert image_inputs(spec.models, "pets") == {"IMAGE"}


def test_clip_and_convnext_rules(tmp_path):
    clip = _spec(tmp_path, CLIP, {}).models["pets-preprocess"].dali
    assert (clip.resize.shorter, clip.crop, clip.resize.interpolation) == (224, (224, 224), Interpolation.CUBIC)
    assert clip.mean == pytest.approx((0.48145466 * 255, 0.4578275 * 255, 0.40821073 * 255))  # CLIP's defaults
    convnext = _spec(tmp_path, CONVNEXT, {}).models["pets-preprocess"].dali
    assert (convnext.resize.shorter, convnext.crop) == (256, (224, 224))  # int(224 / 0.875), then the crop
    large = _spec(tmp_path, {**CONVNEXT, "size": {"shortest_edge": 384}}, {}).models["pets-preprocess"].dali
    assert (large.resize.height, large.resize.width, large.crop) == (384, 384, (384, 384))  # warped, no crop


def test_python_stays_the_default(tmp_path):
    spec = _spec(tmp_path, None, {"preprocess": "python"})  # no processor file read
    assert spec.models["pets-preprocess"].backend is Backend.PYTHON
    assert image_inputs(spec.models, "pets") == frozenset()


PATH = "models.pets.task.preprocess: got 'dali' with "
REFUSED = {
    "padding": ({**VIT, "do_pad": True}, {},
                f"{PATH}{FILE} do_pad: true (pads images to a common or divisible size); allowed: only crop_pct, "
                "crop_size, default_to_square, do_center_crop, do_normalize, do_rescale, do_resize, image_mean, "
                f"image_processor_type, image_std, resample, rescale_factor, size change pixels (others null or "
                f"false); {FIX}"),
    "longest edge": ({**CLIP, "size": {"shortest_edge": 224, "longest_edge": 400}}, {},
                     f"{PATH}{FILE} size: {{\"longest_edge\": 400, \"shortest_edge\": 224}} (resizes by the longest "
                     "edge or to a maximum, keeping each image's own size); allowed: {shortest_edge: N} or "
                     f"{{height: H, width: W}}; {FIX}"),
    "nearest neighbour": ({**VIT, "resample": 0}, {},
                          f"{PATH}{FILE} resample: 0 (no DALI filter resamples as it does); allowed: 2 (bilinear), "
                          f"3 (bicubic) or 1 (lanczos); {FIX}"),
    "an unknown key": ({**VIT, "do_something": 1}, {},
                       f"{PATH}{FILE} do_something: 1 (a setting this derivation does not know: it may change the "
                       "pixels); allowed: only crop_pct, crop_size, default_to_square, do_center_crop, do_normalize, "
                       "do_rescale, do_resize, image_mean, image_processor_type, image_std, resample, rescale_factor, "
                       f"size change pixels (others null or false); {FIX}"),
    "another processor": ({**VIT, "image_processor_type": "LevitImageProcessor"}, {},
                          f"{PATH}{FILE} image_processor_type: \"LevitImageProcessor\" (a processor whose resize and "
                          "crop rules are not derived here); allowed: ViTImageProcessor, DeiTImageProcessor, "
                          "CLIPImageProcessor, BitImageProcessor, SiglipImageProcessor, ConvNextImageProcessor; "
                          f"{FIX}"),
    "per-image sizes": ({**VIT, "do_resize": False}, {},
                        f"{PATH}{FILE} do_resize: false (each image keeps its own size; DALI batches one size); "
                        f"allowed: true; {FIX}"),
    "shortest edge without a crop": ({**CLIP, "do_center_crop": False}, {},
                                     f"{PATH}{FILE} size: {{\"shortest_edge\": 224}} (shortest_edge without a centre "
                                     "crop keeps each image's aspect ratio); allowed: {height: H, width: W}, or "
                                     f"do_center_crop: true with crop_size; {FIX}"),
    "no processor file": (None, {},
                          f"{PATH}{FILE} unreadable (FileNotFoundError); allowed: a readable preprocessor_config.json "
                          "(as save_pretrained writes it); fix: save the checkpoint's image processor into ckpt, or "
                          "set task.preprocess: python (the checkpoint's own processor in a Python step runs any "
                          "processor)"),
    "a detector": (VIT, {"kind": "object-detection"},
                   "models.pets.task.preprocess: got 'dali' with object-detection (a detector needs each image's own "
                   "size, which a fixed-size DALI pipeline does not keep); allowed: dali only with "
                   "image-classification, image-embedding; python with every kind; fix: remove preprocess (python, "
                   "the default)"),
    "a release without a DALI wheel": (VIT, {"__triton_version": "25.09"},
                                       "models.pets.task.preprocess: got 'dali' with triton_version '25.09', whose "
                                       "image runs DALI 1.51.2 (nvidia-dali-cuda130==1.51.2): PyPI holds only a "
                                       "wheel-stub sdist of it, which downloads the wheel from NVIDIA's own index at "
                                       "install time, so the build cannot serialize a pipeline in that release's "
                                       "format; allowed: preprocess dali with a triton_version whose DALI the build "
                                       "can install: 23.12 (DALI 1.31.0), 24.01 (DALI 1.31.0), 24.03 (DALI 1.31.0), "
                                       "26.05 (DALI 2.1.0); fix: set triton_version to one of those (the newest: "
                                       "26.05), or task.preprocess: python"),
}


@pytest.mark.parametrize("processor, task, message", REFUSED.values(), ids=REFUSED.keys())
def test_what_dali_cannot_make_is_refused(tmp_path, processor, task, message):
    task = dict(task)
    version = task.pop("__triton_version", "26.05")
    with pytest.raises(SpecError) as raised:
        _spec(tmp_path, processor, task, version)
    assert [str(p) for p in raised.value.problems] == [message]

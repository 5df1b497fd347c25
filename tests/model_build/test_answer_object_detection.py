"""model_build/python_models/answer_object_detection.py against ``transformers.pipeline("object-detection")``.

Per architecture of transformers 5.23.0's MODEL_FOR_OBJECT_DETECTION_MAPPING_NAMES that instantiates offline, a
tiny random checkpoint (torch.manual_seed(0); a tiny ResNet backbone where the config defaults to timm, which is
not installed) is saved with the PIL backend of the image processor its published checkpoints name. Random
initialisation gives near-identical queries (equal boxes, scores tied to 1e-6), which would hide a box gathered from
the wrong query, so every weight outside the norm layers gets seeded noise (std 0.3 for most) before saving.

The pipeline runs on three PIL images of different sizes and aspect ratios; ``answer`` gets the same model's raw
outputs on the processor's pixel_values. Expected: the same labels in the same order, scores within 1e-5, boxes
*equal*: ``answer`` computes the corners with the pipeline's float32 operations in the same order on the same model
outputs, and truncates as ``box.int()`` does, so there is no rounding to forgive. Entries whose pipeline scores tie
within 1e-6, or that share a box (one query under several labels), may come in any order: torch leaves the order
of ties open (``topk``; for PP-DocLayout an unstable ``torch.sort``). (On x86 with torch 2.13 every architecture
matched position by position, scores within 6e-8.) Each architecture is compared at threshold 0 (every candidate)
and at a threshold between two well-separated scores (about five detections).

RF-DETR and PP-DocLayoutV2/V3: their image processors are torchvision-only (torchvision is not installed), so the
pipeline gets a stand-in processor: the PIL RT-DETR preprocessing (any pixel_values do) with the architecture's
own ``post_process_object_detection`` (and ``_get_order_seqs``) compiled from transformers' source. For V3 the
polygon extraction (OpenCV, absent; the pipeline drops polygons) is stubbed.
"""
from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import pathlib
import platform
import textwrap
import types
from typing import Any, Callable

import numpy as np
import pytest
import torch
import transformers
from PIL import Image
from transformers.image_transforms import center_to_corners_format
from transformers.models.auto.image_processing_auto import IMAGE_PROCESSOR_MAPPING_NAMES
from transformers.models.auto.modeling_auto import (MODEL_FOR_OBJECT_DETECTION_MAPPING_NAMES,
                                                    MODEL_FOR_ZERO_SHOT_OBJECT_DETECTION_MAPPING_NAMES)
from transformers.pipelines.object_detection import ObjectDetectionPipeline

from model_build.python_models import answer_object_detection as od

SCORE_TOL = 1e-5
TIE = 1e-6
NOISE = 0.3  # less or more where boxes would all come out alike (sigmoids saturate, or stay near one value)
IMAGE_SIZES = [(50, 90), (120, 40), (64, 64)]  # (height, width): wide, tall, square
LABELS = 3
SITE = pathlib.Path(transformers.__file__).parent

RESNET = {"model_type": "resnet", "embedding_size": 8, "hidden_sizes": [8, 16, 16, 16], "depths": [1, 1, 1, 1],
          "layer_type": "basic", "out_features": ["stage4"]}
DETR = {"use_timm_backbone": False, "backbone_config": RESNET, "d_model": 32, "encoder_layers": 1,
        "decoder_layers": 2, "encoder_attention_heads": 2, "decoder_attention_heads": 2, "encoder_ffn_dim": 64,
        "decoder_ffn_dim": 64, "num_queries": 10}
RT_RESNET = {"model_type": "rt_detr_resnet", "embedding_size": 8, "hidden_sizes": [8, 16, 16, 16],
             "depths": [1, 1, 1, 1], "layer_type": "basic", "out_features": ["stage2", "stage3", "stage4"]}
HGNET = {"model_type": "hgnet_v2", "embedding_size": 8, "depths": [1, 1, 1, 1], "hidden_sizes": [8, 16, 16, 16],
         "stem_channels": [3, 8, 8], "stage_in_channels": [8, 8, 16, 16], "stage_mid_channels": [8, 8, 8, 8],
         "stage_out_channels": [8, 16, 16, 16], "stage_num_blocks": [1, 1, 1, 1],
         "stage_numb_of_layers": [1, 1, 1, 1], "out_features": ["stage2", "stage3", "stage4"]}
RT_DETR = {"encoder_hidden_dim": 32, "encoder_in_channels": [16, 16, 16], "encoder_ffn_dim": 64,
           "encoder_attention_heads": 2, "d_model": 32, "num_queries": 10, "decoder_in_channels": [32, 32, 32],
           "decoder_ffn_dim": 64, "decoder_layers": 2, "decoder_attention_heads": 2, "num_denoising": 0}
LW_DECODER = {"d_model": 32, "decoder_ffn_dim": 64, "decoder_layers": 2, "decoder_self_attention_heads": 2,
              "decoder_cross_attention_heads": 2, "num_queries": 10, "group_detr": 1, "c2f_num_blocks": 1}
VIT = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "image_size": 64, "patch_size": 16,
       "num_windows": 1}
ASPECT = {"shortest_edge": 48, "longest_edge": 80}  # keeps the aspect ratio: inputs of several shapes
SQUARE = {"height": 64, "width": 64}


@dataclasses.dataclass(frozen=True)
class Arch:
    model_type: str
    config: dict[str, Any]
    processor: str  # PIL class that preprocesses (and post-processes, unless `transplant` is set)
    size: dict[str, int]
    transplant: str | None = None  # torchvision-only processor whose post-processing is compiled from source
    noise: float = NOISE

    def __str__(self) -> str:
        return self.model_type + ("-postprocessing-from-source" if self.transplant else "")


ARCHS = [
    Arch("detr", DETR, "DetrImageProcessorPil", ASPECT),
    Arch("table-transformer", DETR, "DetrImageProcessorPil", ASPECT),
    Arch("yolos", {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
                   "image_size": [64, 64], "patch_size": 16, "num_detection_tokens": 10},
         "YolosImageProcessorPil", ASPECT),
    Arch("conditional_detr", DETR, "ConditionalDetrImageProcessorPil", ASPECT),
    Arch("dab-detr", {**{k: v for k, v in DETR.items() if k != "d_model"}, "hidden_size": 32},
         "ConditionalDetrImageProcessorPil", ASPECT),
    Arch("deformable_detr", {**DETR, "backbone_config": {**RESNET, "out_features": ["stage2", "stage3", "stage4"]},
                             "num_feature_levels": 3},  # a fourth, smaller level would be 1x1 for the tall image
         "DeformableDetrImageProcessorPil", ASPECT),
    Arch("lw_detr", {**LW_DECODER, "projector_scale_factors": [1.0],
                     "backbone_config": {**VIT, "model_type": "lw_detr_vit", "pretrain_image_size": 64,
                                         "out_indices": [1, 2], "window_block_indices": []}},
         "DeformableDetrImageProcessorPil", SQUARE),  # boxes up to 80 times the image
    Arch("rt_detr", {**RT_DETR, "backbone_config": RT_RESNET}, "RTDetrImageProcessorPil", SQUARE),
    Arch("rt_detr_v2", {**RT_DETR, "backbone_config": RT_RESNET}, "RTDetrImageProcessorPil", SQUARE),
    Arch("d_fine", {**RT_DETR, "backbone_config": HGNET, "hidden_expansion": 0.5, "lqe_hidden_dim": 8,
                    "head_dim": 16}, "RTDetrImageProcessorPil", SQUARE),
    Arch("deimv2", {**RT_DETR, "backbone_config": HGNET, "hidden_expansion": 0.5, "lqe_hidden_dim": 8,
                    "head_dim": 16}, "RTDetrImageProcessorPil", SQUARE),
    Arch("rf_detr", {**LW_DECODER, "intermediate_size": 64,
                     "backbone_config": {**VIT, "model_type": "rf_detr_dinov2", "out_features": ["stage1", "stage2"],
                                         "num_register_tokens": 0}},
         "RTDetrImageProcessorPil", SQUARE, transplant="RfDetrImageProcessor"),
    Arch("pp_doclayout_v2", {**RT_DETR, "backbone_config": HGNET, "class_thresholds": [0.1, 0.2, 0.3],
                             "class_order": [0, 1, 2],
                             "reading_order_config": {"hidden_size": 32, "num_attention_heads": 2,
                                                      "intermediate_size": 64, "num_hidden_layers": 1,
                                                      "coordinate_size": 11, "shape_size": 10, "num_classes": 3,
                                                      "global_pointer_head_size": 16,
                                                      "relation_bias_embed_dim": 4}},
         "RTDetrImageProcessorPil", SQUARE, transplant="PPDocLayoutV2ImageProcessor", noise=0.2),
    Arch("pp_doclayout_v3", {**RT_DETR, "backbone_config": {**HGNET, "out_features": ["stage1", "stage2", "stage3",
                                                                                      "stage4"]},
                             "x4_feat_dim": 8, "mask_feature_channels": [8, 8], "num_prototypes": 4,
                             "global_pointer_head_size": 16},
         "RTDetrImageProcessorPil", SQUARE, transplant="PPDocLayoutV3ImageProcessor", noise=0.5),
]
BY_TYPE = {arch.model_type: arch for arch in ARCHS}
# Architectures of the mapping that answer_object_detection refuses, and why (its UNSUPPORTED says more).
NOT_COVERED = ["pp_doclayout_v4", "pp_ocrv5_mobile_det", "pp_ocrv5_server_det", "pp_ocrv6_medium_det",
               "pp_ocrv6_small_det"]


# --- checkpoints and the pipeline ----------------------------------------------------------------------------

@dataclasses.dataclass
class Built:
    pipe: Any
    params: dict[str, Any]
    raw: dict[str, np.ndarray]  # logits, pred_boxes (, order_logits) of the three images, one row each
    sizes: np.ndarray


@pytest.fixture(scope="module")
def images() -> list[Image.Image]:
    rng = np.random.default_rng(0)
    return [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for h, w in IMAGE_SIZES]


@pytest.fixture(scope="module")
def built(module_tmp, images) -> Callable[[str], Built]:
    """model_type -> its tiny checkpoint, saved and loaded by the pipeline, with raw outputs (built once)."""
    cache: dict[str, Built] = {}

    def get(model_type: str) -> Built:
        if model_type not in cache:
            cache[model_type] = _build(BY_TYPE[model_type], module_tmp.mktemp(model_type.replace("-", "_")), images)
        return cache[model_type]
    return get


def _build(arch: Arch, folder: pathlib.Path, images: list[Image.Image]) -> Built:
    config = transformers.AutoConfig.for_model(arch.model_type, num_labels=LABELS, **arch.config)
    torch.manual_seed(0)
    model = getattr(transformers, MODEL_FOR_OBJECT_DETECTION_MAPPING_NAMES[arch.model_type])(config).eval()
    _spread(model, arch.noise)
    model.save_pretrained(folder)
    preprocessing = getattr(transformers, arch.processor)
    if arch.transplant is None:
        preprocessing(size=arch.size).save_pretrained(folder)
        pipe = transformers.pipeline("object-detection", model=str(folder))
        assert type(pipe.image_processor).__name__ == arch.processor  # the PIL backend, torchvision being absent
    else:
        (folder / "preprocessor_config.json").write_text(json.dumps({"image_processor_type": arch.transplant}))
        stand_in = type(arch.transplant + "StandIn", (_transplanted(arch.transplant), preprocessing), {})
        pipe = transformers.pipeline("object-detection", model=str(folder), image_processor=stand_in(size=arch.size))
    params = od.load_params(folder)
    rows: dict[str, list[np.ndarray]] = {}
    for image in images:
        inputs = pipe.image_processor(images=[image], return_tensors="pt")
        with torch.no_grad():
            outputs = pipe.model(**inputs)
        for name in params["model_outputs"]:
            rows.setdefault(name, []).append(outputs[name].numpy())
    raw = {name: np.concatenate(values) for name, values in rows.items()}
    assert all(np.isfinite(v).all() for v in raw.values())
    sizes = np.array([[image.height, image.width] for image in images], dtype=np.int64)
    return Built(pipe, params, raw, sizes)


def _spread(model: torch.nn.Module, noise: float) -> None:
    """Seeded noise on every weight outside the norm layers: queries then differ in boxes and scores."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" not in name and "bn" not in name.lower():
                parameter.add_(torch.randn(parameter.shape, generator=generator) * noise)


def _transplanted(class_name: str) -> type:
    """The post-processing methods of a torchvision-only image processor, compiled from transformers' source.

    Its module imports torchvision at the top, so the class cannot be imported here; these methods use torch only.
    """
    paths = {"RfDetrImageProcessor": "rf_detr/image_processing_rf_detr.py",
             "PPDocLayoutV2ImageProcessor": "pp_doclayout_v2/image_processing_pp_doclayout_v2.py",
             "PPDocLayoutV3ImageProcessor": "pp_doclayout_v3/image_processing_pp_doclayout_v3.py"}
    tree = ast.parse((SITE / "models" / paths[class_name]).read_text())
    source = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == class_name)
    methods = []
    for node in source.body:
        if isinstance(node, ast.FunctionDef) and node.name in ("post_process_object_detection", "_get_order_seqs"):
            node.decorator_list = []
            node.returns = None
            for arg in node.args.args:
                arg.annotation = None
            methods.append(textwrap.indent(ast.unparse(node), "    "))
    assert any("def post_process_object_detection" in m for m in methods), class_name
    namespace: dict[str, Any] = {"torch": torch, "np": np, "center_to_corners_format": center_to_corners_format}
    exec(compile("class Transplanted:\n" + "\n".join(methods), f"<{class_name} from transformers>", "exec"),
         namespace)
    cls: type = namespace["Transplanted"]
    if class_name == "PPDocLayoutV3ImageProcessor":  # polygons need OpenCV; the pipeline drops them anyway
        setattr(cls, "_extract_polygon_points_by_masks", lambda self, boxes, masks, ratio: [])
    return cls


# --- comparison ------------------------------------------------------------------------------------------------

def _answer(b: Built, threshold: float, params: dict[str, Any] | None = None) -> list[list[dict]]:
    return od.answer(b.raw["logits"], b.raw["pred_boxes"], b.sizes, params or b.params, threshold,
                     order_logits=b.raw.get("order_logits"))


def _ties(want: list[dict]) -> list[tuple[int, int]]:
    """Runs [start, end) of consecutive entries whose order torch leaves open (tied scores or one shared box)."""
    runs, start = [], 0
    for i in range(1, len(want) + 1):
        if i == len(want) or not (abs(want[i]["score"] - want[i - 1]["score"]) < TIE
                                  or want[i]["box"] == want[i - 1]["box"]):
            runs.append((start, i))
            start = i
    return runs


def _mismatches(want: list[list[dict]], got: list[list[dict]]) -> list[str]:
    problems = []
    if len(want) != len(got):
        return [f"{len(got)} images answered, the pipeline answered {len(want)}"]
    for image, (w, g) in enumerate(zip(want, got)):
        if len(w) != len(g):
            problems.append(f"image {image}: {len(g)} detections, the pipeline has {len(w)}")
            continue
        for start, end in _ties(w):
            key = lambda d: (d["label"], tuple(d["box"].values()), d["score"])  # noqa: E731
            for a, b in zip(sorted(w[start:end], key=key), sorted(g[start:end], key=key)):
                if a["label"] != b["label"] or a["box"] != b["box"] or abs(a["score"] - b["score"]) > SCORE_TOL:
                    problems.append(f"image {image} #{start}: got {b}, the pipeline has {a}")
    return problems


def _threshold_between(results: list[list[dict]], rank: int = 5) -> float:
    """A threshold about `rank` detections down, midway between two scores at least 1e-4 apart."""
    scores = sorted({d["score"] for row in results for d in row}, reverse=True)
    for i in range(min(rank, len(scores) - 1), len(scores) - 1):
        if scores[i] - scores[i + 1] >= 1e-4:
            return (scores[i] + scores[i + 1]) / 2
    raise AssertionError(f"no two scores at least 1e-4 apart among {scores}")


@pytest.mark.parametrize("arch", ARCHS, ids=str)
def test_answers_match_pipeline(built, images, arch):
    b = built(arch.model_type)
    assert b.params["rule"] == od.rule_of(arch.model_type)
    everything = b.pipe(images, threshold=0.0)
    # Queries differ (else a box gathered from the wrong query could pass unseen): several boxes per image.
    distinct = [len({tuple(d["box"].values()) for d in row}) for row in everything]
    assert min(distinct) >= 3 and sum(distinct) >= 15, distinct
    assert _mismatches(everything, _answer(b, 0.0)) == []
    threshold = _threshold_between(everything)
    some = b.pipe(images, threshold=threshold)
    assert 0 < sum(map(len, some)) < sum(map(len, everything))
    assert _mismatches(some, _answer(b, threshold)) == []


@pytest.mark.parametrize("defect", ["softmax for sigmoid", "sigmoid for softmax", "top_k 100 for RT-DETR",
                                    "no reading order for PP-DocLayoutV2"])
def test_comparison_catches_a_swapped_rule(built, images, defect):
    model_type, change = {
        "softmax for sigmoid": ("deformable_detr", {"rule": od.SOFTMAX_NO_OBJECT}),
        "sigmoid for softmax": ("detr", {"rule": od.SIGMOID_TOP_K, "top_k": 100,  # and a name for "no object"
                                         "id2label": {**built("detr").params["id2label"], str(LABELS): "none"}}),
        "top_k 100 for RT-DETR": ("rt_detr", {"top_k": 100}),
        "no reading order for PP-DocLayoutV2": ("pp_doclayout_v2", {"rule": od.SIGMOID_TOP_K}),
    }[defect]
    b = built(model_type)
    want = b.pipe(images, threshold=0.0)
    assert _mismatches(want, _answer(b, 0.0, {**b.params, **change})) != []


# --- rules, edges and refusals without a model ---------------------------------------------------------------

def test_every_architecture_of_the_mapping_has_a_rule_or_a_reason():
    for model_type in MODEL_FOR_OBJECT_DETECTION_MAPPING_NAMES:
        assert (model_type in od.DEFAULT_PROCESSOR) != (model_type in od.UNSUPPORTED), model_type
    assert set(od.DEFAULT_PROCESSOR) | set(NOT_COVERED) == set(MODEL_FOR_OBJECT_DETECTION_MAPPING_NAMES)
    assert set(MODEL_FOR_ZERO_SHOT_OBJECT_DETECTION_MAPPING_NAMES) <= set(od.UNSUPPORTED)
    assert set(BY_TYPE) == set(od.DEFAULT_PROCESSOR)  # every supported architecture is compared above


def test_default_processors_agree_with_transformers_auto_mapping():
    for model_type, processor in od.DEFAULT_PROCESSOR.items():
        backends = IMAGE_PROCESSOR_MAPPING_NAMES.get(model_type)
        if backends:  # dab-detr, d_fine, rt_detr_v2 have none: their checkpoints name the processor
            assert backends["torchvision"] == processor, model_type


@pytest.mark.parametrize("model_type", NOT_COVERED + ["owlvit", "bert"])
def test_load_params_refuses_with_a_reason(tmp_path, model_type):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type}))
    with pytest.raises(ValueError, match=model_type) as refused:
        od.load_params(tmp_path)
    assert ". " in str(refused.value)  # why, then what to do


def test_load_params_reads_the_processor_named(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "detr", "id2label": {"0": "cat", "1": "dog"}}))
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({"feature_extractor_type": "DetrFeatureExtractor"}))
    assert od.load_params(tmp_path)["rule"] == od.SOFTMAX_NO_OBJECT
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({"image_processor_type": "RTDetrImageProcessorFast"}))
    params = od.load_params(tmp_path)
    assert (params["rule"], params["top_k"], params["id2label"]) == (od.SIGMOID_TOP_K, None, {"0": "cat", "1": "dog"})
    assert json.loads(json.dumps(params)) == params
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({"image_processor_type": "OwlViTImageProcessor"}))
    with pytest.raises(ValueError, match="OwlViTImageProcessor"):
        od.load_params(tmp_path)


def _reference(processor: Any, logits: np.ndarray, boxes: np.ndarray, threshold: float, size: tuple[int, int],
               order_logits: np.ndarray | None = None) -> list[dict]:
    """ObjectDetectionPipeline.postprocess itself, on hand-made outputs (no model)."""
    outputs = {"logits": torch.from_numpy(logits), "pred_boxes": torch.from_numpy(boxes),
               "target_size": torch.IntTensor([size])}
    if order_logits is not None:
        outputs["order_logits"] = torch.from_numpy(order_logits)
    fake = types.SimpleNamespace(tokenizer=None, image_processor=processor,
                                 model=types.SimpleNamespace(config=types.SimpleNamespace(
                                     id2label={i: f"L{i}" for i in range(8)})),
                                 _get_bounding_box=lambda box: ObjectDetectionPipeline._get_bounding_box(None, box))
    return ObjectDetectionPipeline.postprocess(fake, transformers.utils.ModelOutput(outputs), threshold)


# One score exactly at a threshold: softmax of four equal logits (0.25, with the labels tied: the first wins in both),
# sigmoid(0) = 0.5. Every other score is distinct.
EDGE_SOFTMAX = np.array([[[0, 0, 0, 0], [2, -1, 0.5, 0.3], [-1.5, 0.4, -0.8, 1], [0.9, -2.5, 0.7, -0.2]]],
                        dtype=np.float32)
EDGE_SIGMOID = np.array([[[0, -2, 1.1], [2, -0.3, -1.2], [-1.5, 0.4, -0.8], [0.9, -2.5, 0.7]]], dtype=np.float32)
EDGE_BOXES = np.array([[[0.02, 0.5, 0.2, 0.3], [0.5, 0.5, 1.3, 0.4], [0.731, 0.377, 0.111, 0.513],
                        [0.99, 0.01, 0.5, 0.5]]], dtype=np.float32)  # past the left, right, top edges


@pytest.mark.parametrize("processor", ["DetrImageProcessorPil", "DeformableDetrImageProcessorPil",
                                       "RTDetrImageProcessorPil", "PPDocLayoutV2ImageProcessor"])
def test_edges_match_transformers(processor):
    """Scores exactly at the threshold (sigmoid(0) = 0.5, softmax of equal logits = 0.25: kept by ``>=`` only),
    boxes past the image edges (negative: truncated toward zero, not floored)."""
    if processor.startswith("PPDocLayout"):
        reference = _transplanted(processor)()
        order = np.array([[[0, 2, -1, 0], [-2, 0, 1, 3], [1, -1, 0, 0.5], [0, -3, -0.5, 0]]], dtype=np.float32)
    else:
        reference, order = getattr(transformers, processor)(), None
    logits = EDGE_SOFTMAX if processor.startswith("Detr") else EDGE_SIGMOID
    rule, top_k = od._PROCESSOR_RULES[processor.removesuffix("Pil")]
    params = {"rule": rule, "top_k": top_k, "id2label": {str(i): f"L{i}" for i in range(8)}}
    for threshold in (0.25, 0.5):
        want = _reference(reference, logits, EDGE_BOXES, threshold, (37, 53), order)
        got = od.answer(logits, EDGE_BOXES, np.array([[37, 53]]), params, threshold, order_logits=order)[0]
        assert [(d["label"], d["box"]) for d in got] == [(d["label"], d["box"]) for d in want], threshold
        assert np.allclose([d["score"] for d in got], [d["score"] for d in want], atol=SCORE_TOL, rtol=0)
    assert any(v < 0 for d in got for v in d["box"].values())


def test_answer_imports_neither_torch_nor_transformers():
    tree = ast.parse(inspect.getsource(od))
    names = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
             for alias in node.names}
    names |= {node.module.split(".")[0] for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) and node.module}
    assert names <= {"__future__", "json", "pathlib", "typing", "numpy"}, names


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="torch's float->int32 conversion out of range is x86-specific (ARM saturates)")
def test_box_ints_as_torch_converts_them():
    """``box.int()``: truncation toward zero; past int32's range or NaN, int32's minimum (LW-DETR and RF-DETR
    widths are exp of a prediction and can get there)."""
    values = [12.9, -0.7, -3.5, 0.0, 2147483520.0, -2147483648.0, 3e9, -3e9, float("inf"), float("nan")]
    want = torch.tensor(values, dtype=torch.float32).int().tolist()
    assert [od._as_int32(float(np.float32(v))) for v in values] == want

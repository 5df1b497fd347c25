"""Object-detection answers from raw ``logits`` and ``pred_boxes``: the post-processing of Hugging Face's
``pipeline("object-detection")``, in numpy and the standard library only.

Followed: transformers 5.23.0, ``ObjectDetectionPipeline.postprocess`` and ``_get_bounding_box``
(``transformers/pipelines/object_detection.py``), and the ``post_process_object_detection`` of the image
processor the pipeline loads for each architecture of ``MODEL_FOR_OBJECT_DETECTION_MAPPING_NAMES``
(``transformers/models/auto/modeling_auto.py``). Nothing of transformers is imported, so it runs inside a Triton
Python-backend model.

The pipeline hands one image at a time to ``image_processor.post_process_object_detection(outputs, threshold,
target_size)``, with ``target_size`` the original (height, width), then names each label with
``config.id2label`` and turns each box into ints with ``box.int()``. Which post-processing runs is decided by the
image processor class (``image_processor_type`` of preprocessor_config.json), not by the model type; the
processors fall into three rules:

* ``"softmax_no_object"`` -- ``DetrImageProcessor``, ``YolosImageProcessor`` (DETR, Table Transformer, YOLOS):
  softmax over the classes, the last class ("no object") dropped, the best class per query; kept where the score
  is ``> threshold``; detections stay in query order (not sorted by score).
* ``"sigmoid_top_k"`` -- ``ConditionalDetrImageProcessor``, ``DeformableDetrImageProcessor`` (top_k 100: Conditional
  DETR, DAB-DETR, Deformable DETR, LW-DETR), ``RTDetrImageProcessor``, ``RfDetrImageProcessor`` (top_k = number of
  queries: RT-DETR, RT-DETRv2, D-FINE, DEIMv2, RF-DETR): sigmoid of every query x class logit, the
  ``min(top_k, queries * classes)`` best of them, best first, each query's box gathered by its index (one query can
  appear under several labels); kept where the score is ``> threshold``.
* ``"sigmoid_top_k_reading_order"`` -- ``PPDocLayoutV2ImageProcessor``, ``PPDocLayoutV3ImageProcessor``: as
  ``"sigmoid_top_k"`` with top_k = number of queries, but kept where the score is ``>= threshold`` and then ordered
  by reading order, the rank of each query's vote computed from the model's third output ``order_logits``
  [rows, queries, queries] (``_get_order_seqs``).

Boxes are predicted as (cx, cy, w, h) relative to the model's input; every rule turns them into corners and
multiplies by the original width and height directly. No processor corrects for padding. The pipeline preprocesses
one image at a time, so DETR-style padding to the largest image of a batch never happens there; a processor
configured with a fixed ``pad_size`` does pad, and then the pipeline (and this) scales boxes relative to the padded
input by the unpadded image's size. An ensemble that pads a batch of different sizes to one shape feeds the model
other inputs than the pipeline does. Boxes are not clipped to the image (they can be negative or past its width).

Where this differs from the pipeline, and why:

* Scores are computed in float64 and rounded to float32 (the pipeline computes in float32 with torch): they agree
  to about 1e-7, so only candidates whose scores tie at that level can come out in another order.
* Ties: ``torch.topk`` leaves the order of equal scores unspecified; here the lower query (then the lower class)
  comes first. For the reading-order rule the pipeline sorts ranks with ``torch.sort``, which is not stable on CPU,
  so the several labels of one query (same rank) come in an implementation-defined order; here they keep the
  descending-score order of the top-k.
* ``box.int()`` truncates toward zero (-0.7 gives 0, 12.9 gives 12); so does this. The corners are computed with the
  pipeline's float32 operations in the same order (``cx - 0.5 * w``, then times the size), so the ints agree
  exactly on the same model outputs. A coordinate past int32's range (or NaN) gives int32's minimum, what torch
  gives on x86.

Not covered (``UNSUPPORTED``; ``load_params`` raises ``ValueError``): PP-DocLayoutV4 (quadrilateral boxes and a
graph-decoded reading order), the PP-OCR text detectors (a probability map, not boxes) and the zero-shot detectors
(OWL-ViT and kin answer ``pipeline("zero-shot-object-detection")``). The pipeline also accepts LayoutLM-style
token-classification models with a tokenizer (words and boxes from OCR); those are not object-detection
architectures here either.
"""
from __future__ import annotations

import json
import pathlib
from typing import Any

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float32]
Ints = npt.NDArray[np.intp]
Detection = dict[str, Any]

_INT32_MIN = -(2 ** 31)

SOFTMAX_NO_OBJECT = "softmax_no_object"
SIGMOID_TOP_K = "sigmoid_top_k"
SIGMOID_TOP_K_READING_ORDER = "sigmoid_top_k_reading_order"
RULES = (SOFTMAX_NO_OBJECT, SIGMOID_TOP_K, SIGMOID_TOP_K_READING_ORDER)

# image processor class (without a "Pil"/"Fast" suffix) -> (rule, top_k); top_k None: the number of queries.
# Conditional/Deformable DETR: post_process_object_detection(top_k=100); RT-DETR: num_top_queries =
# logits.shape[1]; RF-DETR: top_k=None -> logits.shape[1]; the pipeline passes none of these.
_PROCESSOR_RULES: dict[str, tuple[str, int | None]] = {
    "DetrImageProcessor": (SOFTMAX_NO_OBJECT, None),
    "YolosImageProcessor": (SOFTMAX_NO_OBJECT, None),
    "ConditionalDetrImageProcessor": (SIGMOID_TOP_K, 100),
    "DeformableDetrImageProcessor": (SIGMOID_TOP_K, 100),
    "RTDetrImageProcessor": (SIGMOID_TOP_K, None),
    "RfDetrImageProcessor": (SIGMOID_TOP_K, None),
    "PPDocLayoutV2ImageProcessor": (SIGMOID_TOP_K_READING_ORDER, None),
    "PPDocLayoutV3ImageProcessor": (SIGMOID_TOP_K_READING_ORDER, None),
}

# model_type -> the image processor its checkpoints name (used where preprocessor_config.json names none). From
# transformers' image-processor auto mapping where it has the model type; DAB-DETR, D-FINE and RT-DETRv2 are
# missing there, so the pipeline depends on preprocessor_config.json: the processors transformers' integration
# tests load for them are ConditionalDetrImageProcessor (DAB-DETR) and RTDetrImageProcessor (D-FINE, RT-DETRv2).
DEFAULT_PROCESSOR: dict[str, str] = {
    "conditional_detr": "ConditionalDetrImageProcessor",
    "d_fine": "RTDetrImageProcessor",
    "dab-detr": "ConditionalDetrImageProcessor",
    "deformable_detr": "DeformableDetrImageProcessor",
    "deimv2": "RTDetrImageProcessor",
    "detr": "DetrImageProcessor",
    "lw_detr": "DeformableDetrImageProcessor",
    "pp_doclayout_v2": "PPDocLayoutV2ImageProcessor",
    "pp_doclayout_v3": "PPDocLayoutV3ImageProcessor",
    "rf_detr": "RfDetrImageProcessor",
    "rt_detr": "RTDetrImageProcessor",
    "rt_detr_v2": "RTDetrImageProcessor",
    "table-transformer": "DetrImageProcessor",
    "yolos": "YolosImageProcessor",
}

_PP_OCR = ("it is a text detector: the model outputs a probability map (last_hidden_state [batch, 1, H, W]), not "
           "logits and pred_boxes, and PPOCRV5ServerDetImageProcessor.post_process_object_detection binarises it at "
           "the threshold and traces text contours with OpenCV (DB post-processing). Serve it with a Python backend "
           "that runs that post-processing (torch and opencv-python) instead of this numpy step")
_ZERO_SHOT = ("it is a zero-shot detector (not in MODEL_FOR_OBJECT_DETECTION_MAPPING_NAMES): it needs text queries "
              "and answers through pipeline(\"zero-shot-object-detection\"). Build it for that task instead")
UNSUPPORTED: dict[str, str] = {
    "pp_doclayout_v4": (
        "its pred_boxes are quadrilaterals (10 numbers per query: a centre and four corner offsets) and its reading "
        "order is decoded from two more outputs (relative_order_logits, successor_order_logits) by a cycle-breaking "
        "graph search over strongly connected components (scipy) in "
        "PPDocLayoutV4ImageProcessor.post_process_object_detection. Serve it with a Python backend that runs that "
        "function (torch, torchvision, scipy) instead of this numpy step"),
    "pp_ocrv5_mobile_det": _PP_OCR,
    "pp_ocrv5_server_det": _PP_OCR,
    "pp_ocrv6_medium_det": _PP_OCR,
    "pp_ocrv6_small_det": _PP_OCR,
    "grounding-dino": _ZERO_SHOT,
    "mm-grounding-dino": _ZERO_SHOT,
    "omdet-turbo": _ZERO_SHOT,
    "owlv2": _ZERO_SHOT,
    "owlvit": _ZERO_SHOT,
}


# --- build time: the checkpoint's files -> params -----------------------------------------------------------

def rule_of(model_type: str) -> str:
    """The rule the pipeline follows for ``model_type`` with the image processor its checkpoints name."""
    return _rule_and_top_k(model_type, _default_processor(model_type))[0]


def load_params(folder: str | pathlib.Path) -> dict[str, Any]:
    """What ``answer`` needs, from a checkpoint folder's config.json and preprocessor_config.json (JSON-ready).

    Keys: ``model_type``, ``image_processor`` (class name, suffix-free), ``rule``, ``top_k`` (int, or None for the
    number of queries), ``id2label`` ({"0": "cat", ...}), ``model_outputs`` (the model outputs ``answer`` takes).
    Raises ValueError for an architecture or image processor it does not cover.
    """
    root = pathlib.Path(folder)
    config = _read_json(root / "config.json")
    model_type = str(config.get("model_type", ""))
    processor = _processor_named(root / "preprocessor_config.json") or _default_processor(model_type)
    rule, top_k = _rule_and_top_k(model_type, processor)
    id2label = config.get("id2label") or {}
    outputs = ["logits", "pred_boxes"] + (["order_logits"] if rule == SIGMOID_TOP_K_READING_ORDER else [])
    return {"model_type": model_type, "image_processor": processor, "rule": rule, "top_k": top_k,
            "id2label": {str(k): str(v) for k, v in id2label.items()}, "model_outputs": outputs}


def _read_json(path: pathlib.Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def _processor_named(path: pathlib.Path) -> str | None:
    """The image processor class preprocessor_config.json names, the way AutoImageProcessor reads it."""
    data = _read_json(path)
    name = data.get("image_processor_type")
    if not name and data.get("feature_extractor_type"):
        # Old checkpoints (facebook/detr-resnet-50) name the feature extractor; AutoImageProcessor swaps the word.
        name = str(data["feature_extractor_type"]).replace("FeatureExtractor", "ImageProcessor")
    if not name:
        return None
    # The torchvision ("Fast", formerly) and PIL ("Pil") backends of a processor share its post-processing.
    return str(name).removesuffix("Fast").removesuffix("Pil")


def _default_processor(model_type: str) -> str:
    _check_supported(model_type)
    return DEFAULT_PROCESSOR[model_type]


def _check_supported(model_type: str) -> None:
    if model_type in UNSUPPORTED:
        raise ValueError(f"model_type {model_type!r} cannot be answered by answer_object_detection: "
                         f"{UNSUPPORTED[model_type]}.")
    if model_type not in DEFAULT_PROCESSOR:
        raise ValueError(
            f"model_type {model_type!r} is not an object-detection architecture that answer_object_detection knows "
            f"(those of transformers 5.23.0's MODEL_FOR_OBJECT_DETECTION_MAPPING_NAMES: "
            f"{', '.join(sorted(DEFAULT_PROCESSOR))}). Read its image processor's post_process_object_detection and "
            f"add it to DEFAULT_PROCESSOR (and a rule to _PROCESSOR_RULES if none fits), or serve it with "
            f"transformers.")


def _rule_and_top_k(model_type: str, processor: str) -> tuple[str, int | None]:
    _check_supported(model_type)
    if processor not in _PROCESSOR_RULES:
        raise ValueError(
            f"model_type {model_type!r} names the image processor {processor!r}, whose post_process_object_detection "
            f"answer_object_detection does not know (it knows {', '.join(sorted(_PROCESSOR_RULES))}). Read that "
            f"function and add the processor to _PROCESSOR_RULES, or fix image_processor_type in "
            f"preprocessor_config.json.")
    return _PROCESSOR_RULES[processor]


# --- run time: model outputs -> the pipeline's answers ------------------------------------------------------

def answer(logits: npt.NDArray[Any], pred_boxes: npt.NDArray[Any], original_sizes: npt.NDArray[Any],
           params: dict[str, Any], threshold: float = 0.5,
           order_logits: npt.NDArray[Any] | None = None) -> list[list[Detection]]:
    """Per image, the list ``pipeline("object-detection", threshold=threshold)`` returns for it.

    logits [rows, queries, classes], pred_boxes [rows, queries, 4] (cx, cy, w, h relative to the model's input),
    original_sizes [rows, 2] (height, width of each image before preprocessing), params from ``load_params``;
    order_logits [rows, queries, queries] for the reading-order rule. 0.5 is the pipeline's default threshold.
    Each detection: {"score": float, "label": str, "box": {"xmin", "ymin", "xmax", "ymax"} (ints)}.
    """
    rule = str(params["rule"])
    if rule not in RULES:
        raise ValueError(f"rule {rule!r} is not one of {RULES}")
    scores_in = np.asarray(logits)
    boxes_in = np.asarray(pred_boxes)
    sizes = np.asarray(original_sizes)
    _check_shapes(scores_in, boxes_in, sizes)
    if rule == SIGMOID_TOP_K_READING_ORDER and order_logits is None:
        raise ValueError("the reading-order rule (PP-DocLayoutV2/V3) needs the model's order_logits")
    id2label = {int(k): str(v) for k, v in params["id2label"].items()}
    top_k = params.get("top_k")
    corners = _corners_in_pixels(boxes_in, sizes)
    out = []
    for row in range(scores_in.shape[0]):
        if rule == SOFTMAX_NO_OBJECT:
            scores, labels, queries = _softmax_no_object(scores_in[row])
            picked = np.flatnonzero(scores > threshold)
        else:
            scores, labels, queries = _sigmoid_top_k(scores_in[row], top_k)
            if rule == SIGMOID_TOP_K:
                picked = np.flatnonzero(scores > threshold)
            else:
                assert order_logits is not None
                picked = _in_reading_order(scores, queries, np.asarray(order_logits)[row], threshold)
        out.append([_detection(scores[i], _name(id2label, int(labels[i])), corners[row, queries[i]]) for i in picked])
    return out


def _name(id2label: dict[int, str], label: int) -> str:
    if label not in id2label:  # the pipeline fails here too (KeyError on config.id2label)
        raise ValueError(f"label id {label} has no name in id2label ({len(id2label)} names): the logits have more "
                         f"classes than the config names, or the rule does not fit the model")
    return id2label[label]


def _check_shapes(logits: npt.NDArray[Any], boxes: npt.NDArray[Any], sizes: npt.NDArray[Any]) -> None:
    if logits.ndim != 3 or boxes.ndim != 3 or boxes.shape[2] != 4 or boxes.shape[:2] != logits.shape[:2]:
        raise ValueError(f"expected logits [rows, queries, classes] and pred_boxes [rows, queries, 4], got "
                         f"{list(logits.shape)} and {list(boxes.shape)}")
    if sizes.shape != (logits.shape[0], 2):
        raise ValueError(f"expected original_sizes [rows, 2] (height, width), got {list(sizes.shape)}")


def _corners_in_pixels(pred_boxes: npt.NDArray[Any], sizes: npt.NDArray[Any]) -> Floats:
    """(cx, cy, w, h) relative -> (xmin, ymin, xmax, ymax) in the original image's pixels, float32.

    The same float32 operations in the same order as ``center_to_corners_format`` and the processors' scaling, so
    that the truncation to ints lands on the pipeline's integers.
    """
    boxes = np.asarray(pred_boxes, dtype=np.float32)
    cx, cy, w, h = (boxes[..., i] for i in range(4))
    half = np.float32(0.5)
    corners = np.stack([cx - half * w, cy - half * h, cx + half * w, cy + half * h], axis=-1)
    height = np.asarray(sizes[:, 0], dtype=np.float32)
    width = np.asarray(sizes[:, 1], dtype=np.float32)
    scale = np.stack([width, height, width, height], axis=-1)[:, None, :]
    return np.asarray(corners * scale, dtype=np.float32)


def _sigmoid(x: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    # exp of a non-positive number only: no overflow for the large negative logits of masked entries.
    values = np.asarray(x, dtype=np.float64)
    e = np.exp(-np.abs(values))
    return np.asarray(np.where(values >= 0, 1.0 / (1.0 + e), e / (1.0 + e)), dtype=np.float64)


def _softmax_no_object(logits: npt.NDArray[Any]) -> tuple[Floats, Ints, Ints]:
    """DETR's rule for one image: (score, label, query) per query, in query order."""
    values = np.asarray(logits, dtype=np.float64)
    exp = np.exp(values - values.max(axis=-1, keepdims=True))
    prob = exp / exp.sum(axis=-1, keepdims=True)
    objects = prob[:, :-1]  # the last class is "no object"
    labels = np.argmax(objects, axis=-1)
    scores = np.take_along_axis(objects, labels[:, None], axis=-1)[:, 0].astype(np.float32)
    return scores, labels.astype(np.intp), np.arange(values.shape[0], dtype=np.intp)


def _sigmoid_top_k(logits: npt.NDArray[Any], top_k: Any) -> tuple[Floats, Ints, Ints]:
    """The focal-loss rule for one image: the k best (query, class) pairs, best first."""
    queries, classes = logits.shape
    k = min(queries if top_k is None else int(top_k), queries * classes)
    flat = _sigmoid(logits).reshape(-1).astype(np.float32)
    # A stable sort of the negated scores: the best first, equal scores by (query, class).
    best = np.argsort(-flat, kind="stable")[:k]
    return flat[best], (best % classes).astype(np.intp), (best // classes).astype(np.intp)


def _in_reading_order(scores: Floats, queries: Ints, order_logits: npt.NDArray[Any], threshold: float) -> Ints:
    """Positions of the kept top-k entries (``>=``, as PP-DocLayout does), sorted by their query's reading rank."""
    kept = np.flatnonzero(scores >= threshold)
    ranks = _reading_ranks(order_logits)[queries[kept]]
    return np.asarray(kept[np.argsort(ranks, kind="stable")], dtype=np.intp)


def _reading_ranks(order_logits: npt.NDArray[Any]) -> Ints:
    """PP-DocLayout's ``_get_order_seqs`` for one image: each query's rank by its vote.

    order_scores[i, j] is "i is read before j". A query's vote sums, over the queries before it in the model's
    order, their scores of preceding it, and over those after it, one minus its score of preceding them; the rank
    is the position of that vote in ascending order.
    """
    scores = _sigmoid(order_logits)
    votes = np.triu(scores, 1).sum(axis=0) + np.tril(1.0 - scores.T, -1).sum(axis=0)
    pointers = np.argsort(votes, kind="stable")
    ranks = np.empty(len(votes), dtype=np.intp)
    ranks[pointers] = np.arange(len(votes), dtype=np.intp)
    return ranks


def _detection(score: np.float32, label: str, corners: Floats) -> Detection:
    xmin, ymin, xmax, ymax = (_as_int32(float(v)) for v in corners)
    return {"score": float(score), "label": label, "box": {"xmin": xmin, "ymin": ymin, "xmax": xmax, "ymax": ymax}}


def _as_int32(value: float) -> int:
    """``box.int()`` on one coordinate: truncation toward zero to int32.

    Out of range (a box of LW-DETR or RF-DETR, whose widths are ``exp`` of a prediction, can be huge) or NaN, torch
    on x86 gives int32's minimum (C++ leaves the conversion undefined; ARM would saturate instead).
    """
    if not _INT32_MIN <= value < -_INT32_MIN:  # also false for NaN
        return _INT32_MIN
    return int(value)  # int() truncates toward zero

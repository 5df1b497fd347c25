"""How benchmarks/hf_image_coverage.py judges a served image answer: against transformers' pipeline of the task
on the same encoded file, the checkpoint in eager PyTorch (transformers 5.23.0, pipelines/image_classification.py,
object_detection.py, image_feature_extraction.py).

Each ``check_*`` takes the answer document `tritonsm invoke --output FILE.json` writes (``outputs``: name, data),
the checkpoint folder and the image file, and returns (ok, what): what the answer was and how it agreed, or why
not. Imports torch and transformers (benchmarks only).
"""
from __future__ import annotations

import json
import math
import pathlib
from typing import Any, Optional, Sequence

# Labels and scores are judged as every coverage benchmark judges them (coverage_runs.label_answer, shared with
# benchmarks/hf_audio_coverage.py): scores within SCORE_ATOL, FLAT scores a weak check.
from benchmarks.tooling.coverage_runs import SCORE_ATOL, label_answer

# Detections: a corner may move by a pixel (the pipeline truncates float32 corners to ints), else the boxes
# must overlap this much.
BOX_PIXELS, MIN_IOU = 1, 0.99
WEAK_DETECTION_NOTE = "a weak check"  # ends the served answer where the detections say little (below)
# A score this close to the threshold could fall on either side of it in another runtime.
NEAR_THRESHOLD = 1e-4
# Embeddings: the reference's own measure (model_build/backends/ensemble/task_reference.py EMBEDDING_COSINE).
MIN_COSINE = 0.9999
# An embedding that barely moves when the image is mirrored says little about the pixels served.
SAME_EMBEDDING = 0.99999
SAME_EMBEDDING_NOTE = "the embedding barely depends on the image: a weak check"
# The most detections a threshold keeps: enough to compare, few enough that their scores stand apart.
MOST_DETECTIONS = 5


def outputs(document: dict[str, Any]) -> dict[str, Any]:
    return {o["name"]: o["data"] for o in document.get("outputs", [])}


def _image(path: pathlib.Path) -> Any:
    from PIL import Image

    return Image.open(path)


# --- image classification ------------------------------------------------------------------------------------

def check_classification(document: dict[str, Any], folder: pathlib.Path, image: pathlib.Path,
                         top_k: int) -> tuple[bool, str]:
    """The served labels and scores for the one image, against the checkpoint's labels and
    pipeline('image-classification') on the same file: the same labels, scores within SCORE_ATOL."""
    config = json.loads((folder / "config.json").read_text())
    known = set((config.get("id2label") or {}).values())

    def reference() -> dict[str, float]:
        import transformers

        pipe = transformers.pipeline("image-classification", model=str(folder), device="cpu")
        return {w["label"]: w["score"] for w in pipe(_image(image), top_k=len(known))}

    return label_answer(document, known, top_k, reference)


# --- object detection ----------------------------------------------------------------------------------------

def detections(folder: pathlib.Path, image: pathlib.Path, threshold: float) -> list[dict[str, Any]]:
    """pipeline('object-detection') of the checkpoint on the file, at ``threshold``."""
    import transformers

    pipe = transformers.pipeline("object-detection", model=str(folder), device="cpu")
    return list(pipe(_image(image), threshold=threshold))


def threshold_between(scores: Sequence[float]) -> float:
    """A threshold in the widest gap between the best MOST_DETECTIONS + 1 scores, so that 1 to MOST_DETECTIONS
    detections are kept with their scores as far from it as these scores allow (0.5, the pipeline's default,
    where there are none). Rounded to 6 digits, inside the gap."""
    ordered = sorted(scores, reverse=True)[:MOST_DETECTIONS + 1]
    if not ordered:
        return 0.5
    if len(ordered) == 1:
        return round(ordered[0] / 2, 6)
    gap, kept = max((ordered[i] - ordered[i + 1], i) for i in range(len(ordered) - 1))
    return round(ordered[kept + 1] + gap / 2, 6)


def iou(a: dict[str, int], b: dict[str, int]) -> float:
    """Intersection over union of two corner boxes (1.0 for two identical empty boxes)."""
    width = min(a["xmax"], b["xmax"]) - max(a["xmin"], b["xmin"])
    height = min(a["ymax"], b["ymax"]) - max(a["ymin"], b["ymin"])
    inter = max(width, 0) * max(height, 0)
    union = _area(a) + _area(b) - inter
    return inter / union if union > 0 else float(a == b)


def _area(box: dict[str, int]) -> int:
    return max(box["xmax"] - box["xmin"], 0) * max(box["ymax"] - box["ymin"], 0)


def _near(a: dict[str, int], b: dict[str, int]) -> bool:
    return max(abs(int(a[k]) - int(b[k])) for k in ("xmin", "ymin", "xmax", "ymax")) <= BOX_PIXELS


def match_detections(got: Sequence[dict[str, Any]], want: Sequence[dict[str, Any]]
                     ) -> tuple[Optional[str], float, float]:
    """(the first difference, or None; the worst score difference; the least IoU of the matched pairs). Each of
    the pipeline's detections, best score first, is matched with the served one of its label that overlaps it
    most; the order of the served list is not judged (tied scores may come either way)."""
    if len(got) != len(want):
        return f"{len(got)} detections, the pipeline {len(want)}", math.inf, 0.0
    free = list(got)
    worst_score, least_iou = 0.0, 1.0
    for wanted in sorted(want, key=lambda d: -float(d["score"])):
        same = [g for g in free if g["label"] == wanted["label"]]
        if not same:
            return f"no served {wanted['label']!r} for the pipeline's at {wanted['box']}", worst_score, least_iou
        best = max(same, key=lambda g: (iou(g["box"], wanted["box"]), -abs(float(g["score"]) - float(wanted["score"]))))
        overlap, score = iou(best["box"], wanted["box"]), abs(float(best["score"]) - float(wanted["score"]))
        if overlap < MIN_IOU and not _near(best["box"], wanted["box"]):
            return (f"{wanted['label']!r} served at {best['box']}, the pipeline's at {wanted['box']} (IoU "
                    f"{overlap:.3f})"), worst_score, least_iou
        if score > SCORE_ATOL:
            return (f"{wanted['label']!r} at {wanted['box']} scores {float(best['score']):.4f}, the pipeline "
                    f"{float(wanted['score']):.4f}"), score, least_iou
        free.remove(best)
        worst_score, least_iou = max(worst_score, score), min(least_iou, overlap)
    return None, worst_score, least_iou


def check_detection(document: dict[str, Any], folder: pathlib.Path, image: pathlib.Path,
                    threshold: float, margin: Optional[float] = None) -> tuple[bool, str]:
    """The served detections for the one image against pipeline('object-detection', threshold=threshold) on the
    same file: as many, each matched to one of the same label (boxes within BOX_PIXELS or IoU >= MIN_IOU,
    scores within SCORE_ATOL). A weak check where the pipeline detects nothing, or where a score is within
    NEAR_THRESHOLD of the threshold (``margin``: the least distance)."""
    found = outputs(document).get("detections")
    if not isinstance(found, list) or len(found) != 1:
        return False, f"the answer has outputs {', '.join(outputs(document)) or 'none'}, not one detections row"
    try:
        got = json.loads(found[0])
    except (TypeError, ValueError) as exc:
        return False, f"the detections are not JSON: {exc}"
    want = detections(folder, image, threshold)
    problem, score, overlap = match_detections(got, want)
    if problem:
        return False, f"at threshold {threshold:g}: {problem}"
    best = sorted(want, key=lambda d: -float(d["score"]))
    labels = ", ".join(f"{d['label']} {float(d['score']):.4f}" for d in best[:3]) + (", ..." if len(best) > 3 else "")
    said = (f"{len(got)} detections at threshold {threshold:g} as the pipeline ({labels}; score difference "
            f"{score:.1g}, least IoU {overlap:.3f})") if want else \
        f"no detection at threshold {threshold:g}, as the pipeline"
    weak = "the pipeline detects nothing" if not want else (
        f"a score within {margin:.1g} of the threshold" if margin is not None and margin < NEAR_THRESHOLD else "")
    return True, said + (f"; {weak}: {WEAK_DETECTION_NOTE}" if weak else "")


# --- image embedding -----------------------------------------------------------------------------------------

def pooled(folder: pathlib.Path, picture: Any) -> list[float]:
    """pipeline('image-feature-extraction', pool=True) of the checkpoint on an image: its pooler_output, flat
    (ResNet's is [1, C, 1, 1])."""
    import numpy as np
    import transformers

    pipe = transformers.pipeline("image-feature-extraction", model=str(folder), device="cpu")
    return [float(v) for v in np.asarray(pipe(picture, pool=True), dtype=np.float64).ravel()]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(float(x) * float(y) for x, y in zip(a, b))
    norms = math.sqrt(sum(float(x) ** 2 for x in a)) * math.sqrt(sum(float(y) ** 2 for y in b))
    return dot / norms if norms else 0.0


def check_embedding(document: dict[str, Any], folder: pathlib.Path, image: pathlib.Path) -> tuple[bool, str]:
    """The served embedding for the one image against pipeline('image-feature-extraction', pool=True) on the
    same file: the same length, finite, cosine >= MIN_COSINE."""
    from PIL import ImageOps

    found = outputs(document).get("image_embedding")
    if not isinstance(found, list) or not found:
        return False, f"the answer has outputs {', '.join(outputs(document)) or 'none'}, not image_embedding"
    got = [float(v) for v in found]
    picture = _image(image)
    want = pooled(folder, picture)
    if len(got) != len(want) or not all(math.isfinite(v) for v in got):
        finite = all(math.isfinite(v) for v in got)
        return False, f"served {len(got)} values (finite: {finite}), the pipeline {len(want)}"
    if not any(got) and not any(want):  # a degenerate tiny checkpoint (MobileViT's): zeros whatever the pixels
        return True, f"all {len(got)} values zero, as the pipeline's; {SAME_EMBEDDING_NOTE}"
    similar = cosine(got, want)
    if similar < MIN_COSINE:
        return False, f"cosine {similar:.6f} with the pipeline's embedding (at least {MIN_COSINE} wanted)"
    mirrored = cosine(want, pooled(folder, ImageOps.mirror(picture.convert("RGB"))))
    return True, f"{len(got)} values, cosine {similar:.7f} with the pipeline's" + (
        f"; {SAME_EMBEDDING_NOTE} (cosine {mirrored:.6f} with the mirrored image's)" if mirrored > SAME_EMBEDDING
        else "")

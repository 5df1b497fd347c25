"""Mixture-of-experts layers in a form the ONNX exporters take.

transformers (5.x) runs the experts of its MoE models with ``grouped_mm`` by default. Off CUDA that is
its own custom operator, ``transformers::grouped_mm_fallback``, which neither torch.onnx exporter can
convert. Its ``batched_mm`` implementation computes the same sum of routed experts from a gather of each
token's expert weights and ``torch.bmm``: standard operators both exporters convert. transformers' own ONNX
exporter switches to it for the same reason (transformers/exporters/exporter_onnx.py, v5.23,
``use_experts_implementation``). The serving-runtime verification then judges the graph as any other.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

EXPORT_IMPLEMENTATION = "batched_mm"
NOTE = (f"its mixture-of-experts layers were exported with transformers' {EXPORT_IMPLEMENTATION} experts "
        "implementation (the default grouped_mm is a custom operator no ONNX exporter converts)")


def switchable(module: Any) -> list[Any]:
    """The outermost transformers models inside ``module`` whose experts implementation can be set (each sets
    its own sub-models)."""
    found: list[Any] = []
    inside: set[int] = set()
    for sub in module.modules():
        if id(sub) in inside:
            continue
        can_set = getattr(sub, "_can_set_experts_implementation", None)
        if callable(can_set) and hasattr(sub, "set_experts_implementation") and can_set():
            found.append(sub)
            inside.update(id(m) for m in sub.modules())
    return found


@contextlib.contextmanager
def exportable_experts(module: Any) -> Iterator[str]:
    """Inside the block the experts run with ``batched_mm``; yields NOTE where anything changed, else "".
    Each model's own implementation comes back afterwards, also when the export fails."""
    changed = []
    try:
        for model in switchable(module):
            original = model.get_experts_implementation()
            if original.get("") == EXPORT_IMPLEMENTATION:
                continue
            model.set_experts_implementation(EXPORT_IMPLEMENTATION)
            changed.append((model, original))
        yield NOTE if changed else ""
    finally:
        for model, original in reversed(changed):
            model.set_experts_implementation(original)

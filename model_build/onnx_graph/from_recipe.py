"""A recipe's torch module exported to ONNX: the first step of the onnxruntime and the tensorrt backends.

The graph lands in ``<scratch>/export/exported.onnx`` with its weights in a file beside it
(model_build/onnx_graph/weights.py); each backend then makes its own model file from it.
"""
from __future__ import annotations

import pathlib

from deployment_spec.sections.model import ModelSpec
from model_build.build_context import BuildContext
from model_build.onnx_graph import export as onnx_export
from model_build.progress import Step
from model_build.recipes.contract import ExportableModel


def export_recipe(ctx: BuildContext, model: ModelSpec, scratch: pathlib.Path, *, batch_axis_only: bool,
                  optimize: bool) -> tuple[ExportableModel, pathlib.Path, str]:
    """(the recipe's model, the exported graph, why the fallback exporter made it or ""). ``batch_axis_only``:
    only the batch axis varies (a TensorRT plan's profile fixes the rest); ``optimize``: the exporter's own
    graph optimizations."""
    from model_build.recipes import load_exportable

    step = Step(ctx, model.name, "load recipe")
    made = load_exportable(model, ctx.spec.root, batch_axis_only=batch_axis_only)
    step.done()
    if made.note:
        ctx.log(f"  {model.name}: {made.note}")
    exported = scratch / "export" / "exported.onnx"
    exported.parent.mkdir()
    step = Step(ctx, model.name, f"export ONNX (opset {onnx_export.OPSET})")
    fallback = onnx_export.export_graph(model.name, made, exported, optimize=optimize)
    step.done()
    if fallback:
        ctx.log(f"  {model.name}: {fallback}")
    return made, exported, fallback


def opset(path: pathlib.Path) -> str:
    """The default-domain opset the graph imports: the manifest records it beside the tool versions."""
    from model_build.onnx_graph import weights as onnx_weights

    graph = onnx_weights.load_graph(path)
    return str(next((o.version for o in graph.opset_import if o.domain in ("", "ai.onnx")), "?"))

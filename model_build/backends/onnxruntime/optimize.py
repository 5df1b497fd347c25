"""ONNX Runtime optimizations applied at build time: graph rewrites, transformer fusions, int8.

Pure functions over ONNX files; onnx, onnxruntime and onnxscript load only when called.

What fuses, with torch 2.13 / transformers 5.23 / onnxruntime 1.31 / onnxscript 0.7 (checked on
BERT-base and tiny-bert; tests/bench/test_ort_optimize.py):

* ``onnxruntime.transformers.optimizer`` fuses BERT attention (``Attention`` per layer and
  ``EmbedLayerNormalization``) only in graphs from the TorchScript exporter
  (``torch.onnx.export(..., dynamo=False)``, opsets 14, 17, 18 tried) of a model created with
  ``attn_implementation="eager"``. With ``"sdpa"`` (transformers 5's default) or with the
  torch.export-based exporter (``dynamo=True``, torch's default since 2.9, opset 18 or 20,
  ``optimize=`` on or off) it fuses only SkipLayerNormalization and BiasGelu.
* onnxscript's ``rewriter.ort_fusions`` matches the attention of dynamo graphs (eager or sdpa
  alike) and emits the same ``com.microsoft`` ops; it does not match TorchScript graphs.
  So: ONNX Runtime's fuser first; if it found no attention, onnxscript, then ONNX Runtime's fuser
  again for what is left. The report names the path taken. A TorchScript + sdpa graph gets no
  attention fusion from either.
* int8: the quantizer turns the TorchScript path's ``Attention`` into ``QAttention``. The
  onnxscript ``Attention`` takes its mask as an additive bias input, which the quantizer does not
  handle: it stays fp32, QKV projection included; the other MatMuls become int8.

Only hardware-independent ONNX Runtime rewrites are saved into the file (level ``basic``:
constant folding, redundant nodes); the server applies the rest when it loads the model
(Triton's ``optimization.graph.level``), on the hardware it actually runs on.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import tempfile
from typing import Any, Callable, Mapping, Optional

# The contrib ops the fusions produce; counted in the report.
FUSED_OPS = ("Attention", "MultiHeadAttention", "EmbedLayerNormalization", "SkipLayerNormalization",
             "BiasGelu", "FastGelu", "Gelu", "LayerNormalization", "FusedMatMul")
# onnxruntime.transformers model types whose attention patterns it knows.
TRANSFORMER_TYPES = ("bert", "bart", "gpt2", "t5", "vit", "clip", "unet", "phi")
SAVED_LEVELS = ("disabled", "basic", "extended")


class OrtOptimizeError(RuntimeError):
    """An optimization or quantization step failed; the message names the step and the file."""


@dataclasses.dataclass(frozen=True)
class OptimizeReport:
    """What one optimization did; ``as_dict()`` goes into the build record."""

    fuser: str                      # "onnxruntime.transformers", "onnxscript+onnxruntime.transformers", "none"
    fused_ops: Mapping[str, int]    # contrib op -> count in the output graph
    nodes_before: int
    nodes_after: int
    bytes_before: int
    bytes_after: int
    saved_level: str

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class QuantizeReport:
    weight_type: str
    quantized_ops: Mapping[str, int]  # e.g. MatMulInteger, DynamicQuantizeLinear, QAttention
    bytes_before: int
    bytes_after: int

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def transformer_hints(module: Any) -> dict[str, Any]:
    """``model_type``, ``num_heads``, ``hidden_size`` for a (wrapped) transformers module, else model_type None.

    Looks for a ``config`` with ``num_attention_heads`` on the module or one level down (the
    recipes wrap the transformers model in a small module whose ``model`` attribute holds it).
    """
    for candidate in (module, getattr(module, "model", None)):
        config = getattr(candidate, "config", None)
        heads = getattr(config, "num_attention_heads", None)
        hidden = getattr(config, "hidden_size", None)
        # One attention geometry for the whole model, as the fuser takes it: configs with one per stage
        # (SegFormer's and Swin's lists) or without hidden_size get the graph optimizations only.
        if isinstance(heads, int) and heads > 0 and isinstance(hidden, int):
            family = getattr(config, "model_type", "")
            # RoBERTa, DistilBERT, ALBERT... share BERT's encoder layout for the fuser.
            model_type = family if family in TRANSFORMER_TYPES else "bert"
            return {"model_type": model_type, "num_heads": heads, "hidden_size": hidden}
    return {"model_type": None, "num_heads": 0, "hidden_size": 0}


def optimize_for_ort(onnx_in: str | os.PathLike, onnx_out: str | os.PathLike, *, model_type: Optional[str],
                     num_heads: int = 0, hidden_size: int = 0, saved_level: str = "basic",
                     use_gpu: bool = False, finish: Optional[Callable[[pathlib.Path], None]] = None) -> OptimizeReport:
    """Writes an optimized copy of ``onnx_in`` to ``onnx_out`` (the same path is fine).

    Args:
        model_type: an onnxruntime.transformers model type ("bert" for BERT and RoBERTa) to apply
            transformer fusions, or None for graph optimizations only (vision models).
        num_heads, hidden_size: the attention geometry; 0 lets the fuser read it from the graph.
        saved_level: ONNX Runtime rewrites baked into the file: "basic" (portable, the default),
            "extended" (adds CPU-tuned fusions; only if the server runs on the CPU), "disabled".
        use_gpu: tell the transformer fuser the model will run on a GPU (Triton on ml.g*).
        finish: called on the optimized graph (its weights still in files beside it) before it is written
            to ``onnx_out``, e.g. reproducible.strip_onnx. Defaults to nothing.
    """
    if saved_level not in SAVED_LEVELS:
        raise ValueError(f"saved_level={saved_level!r}; use one of {', '.join(SAVED_LEVELS)}")
    if model_type is not None and model_type not in TRANSFORMER_TYPES:
        raise ValueError(f"model_type={model_type!r}; use None or one of {', '.join(TRANSFORMER_TYPES)}")
    src, dst = pathlib.Path(onnx_in), pathlib.Path(onnx_out)
    import onnx

    from model_build.onnx_graph import weights as onnx_weights

    # Every step rewrites a graph whose weights stay in files beside it (onnx_weights); only the result
    # is written inline: the same bytes as rewriting the model in memory, a fraction of the memory.
    with tempfile.TemporaryDirectory(prefix="ort-optimize-") as scratch:
        graph = pathlib.Path(scratch) / "exported.onnx"
        nodes_before, bytes_before, fuser = onnx_weights.stage(src, graph), _size(src), "none"
        if model_type is not None:
            graph, fuser = _fuse_transformer(graph, model_type, num_heads, hidden_size, use_gpu)
        graph = _save_ort_level(graph, saved_level, use_gpu)
        _prune_opset_imports(graph)
        if finish is not None:
            finish(graph)
        after = onnx.load(str(graph), load_external_data=False)
        onnx_weights.inline(graph, dst)
    return OptimizeReport(fuser=fuser, fused_ops=count_ops(after, FUSED_OPS), nodes_before=nodes_before,
                          nodes_after=len(after.graph.node), bytes_before=bytes_before, bytes_after=_size(dst),
                          saved_level=saved_level)


def quantize_int8_dynamic(onnx_in: str | os.PathLike, onnx_out: str | os.PathLike, *,
                          per_channel: bool = True) -> QuantizeReport:
    """int8 weights, activations quantized at run time (no calibration data needed).

    Weights are signed int8 with ``reduce_range`` (7-bit): on x86 CPUs without VNNI, ONNX Runtime
    multiplies u8 x s8 with an instruction that can saturate at full 8-bit range. ``per_channel``
    (one scale per output column instead of one per matrix) is the default because one scale per
    matrix failed on a real trained model: all-MiniLM-L6-v2's sentence embeddings kept a lowest
    cosine of 0.85 with fp32 per matrix against 0.99 per column (benchmarks/int8_agreement.py).
    """
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    src, dst = pathlib.Path(onnx_in), pathlib.Path(onnx_out)
    bytes_before = _size(src)
    with tempfile.TemporaryDirectory(prefix="ort-int8-") as scratch, _quiet_root_logger():
        # Shape inference of fused graphs leaves contrib-op outputs untyped, and stale value_info
        # from the exporter can contradict it; dropping value_info lets the quantizer re-infer,
        # and DefaultTensorType covers what stays untyped (all float32 here).
        model = onnx.load(str(src))
        del model.graph.value_info[:]
        staged = pathlib.Path(scratch) / "staged.onnx"
        out = pathlib.Path(scratch) / "int8.onnx"
        onnx.save(model, str(staged))
        try:
            quantize_dynamic(str(staged), str(out), weight_type=QuantType.QInt8, per_channel=per_channel,
                             reduce_range=True, extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        except Exception as exc:  # the quantizer raises bare RuntimeError/KeyError/InferenceError
            raise OrtOptimizeError(f"int8 dynamic quantization of {src} failed: {type(exc).__name__}: {exc}") from None
        _replace(out, dst)
    quantized = onnx.load(str(dst))
    scales = "per channel" if per_channel else "per tensor"
    return QuantizeReport(weight_type=f"int8 (reduce_range, {scales})", bytes_before=bytes_before,
                          bytes_after=_size(dst),
                          quantized_ops=count_ops(quantized, ("MatMulInteger", "DynamicQuantizeMatMul",
                                                              "DynamicQuantizeLinear", "QAttention",
                                                              "ConvInteger", "QGemm")))


@contextlib.contextmanager
def _quiet_root_logger():
    """The quantizer advises pre-processing on the root logger at WARNING on every call."""
    import logging

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


def agreement(reference_onnx: str | os.PathLike, candidate_onnx: str | os.PathLike,
              feeds: Mapping[str, Any]) -> dict[str, float]:
    """How closely ``candidate`` (e.g. int8) follows ``reference`` (fp32) on ``feeds`` (numpy inputs).

    int8 outputs are not held to the fp32 parity tolerance; this is what the build records instead:
    top-1 agreement of the first output's last axis, its max abs error, the lowest per-row cosine.
    """
    import numpy as np
    import onnxruntime

    outs = []
    for path in (reference_onnx, candidate_onnx):
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        first = session.run(None, dict(feeds))[0]
        outs.append(first.reshape(first.shape[0], -1).astype(np.float64))
    ref, got = outs
    cosine = (ref * got).sum(1) / (np.linalg.norm(ref, axis=1) * np.linalg.norm(got, axis=1) + 1e-12)
    return {"rows": int(ref.shape[0]), "top1_agreement": float((ref.argmax(1) == got.argmax(1)).mean()),
            "max_abs_error": float(np.abs(ref - got).max()), "min_cosine_similarity": float(cosine.min())}


def count_ops(model: Any, names: tuple[str, ...]) -> dict[str, int]:
    counts = {n: 0 for n in names}
    for node in model.graph.node:
        if node.op_type in counts:
            counts[node.op_type] += 1
    return {k: v for k, v in counts.items() if v}


def _fuse_transformer(src: pathlib.Path, model_type: str, num_heads: int, hidden_size: int,
                      use_gpu: bool) -> tuple[pathlib.Path, str]:
    """The fused graph (its weights beside it, like ``src``'s) and the fuser path taken."""
    fused, counts = _ort_transformer_fusion(src, model_type, num_heads, hidden_size, use_gpu)
    if counts.get("Attention", 0) or counts.get("MultiHeadAttention", 0):
        return fused, "onnxruntime.transformers"
    # Attention not matched: a torch.export (dynamo) graph; onnxscript knows its patterns.
    staged = src.with_name("onnxscript.onnx")
    try:
        _onnxscript_fusion(src, staged)
    except Exception as exc:  # a rewriter that meets a graph it does not know raises anything
        raise OrtOptimizeError(f"onnxscript fusion failed: {type(exc).__name__}: {exc}") from None
    fused, _ = _ort_transformer_fusion(staged, model_type, num_heads, hidden_size, use_gpu)
    return fused, "onnxscript+onnxruntime.transformers"


def _ort_transformer_fusion(src: pathlib.Path, model_type: str, num_heads: int, hidden_size: int,
                            use_gpu: bool) -> tuple[pathlib.Path, dict[str, int]]:
    """onnxruntime.transformers' fusions on ``src``'s graph; the result is saved beside it, where its weights are."""
    import logging

    from onnxruntime.transformers import optimizer

    from model_build.onnx_graph import weights as onnx_weights

    # The fuser logs every pattern it tried; only failures matter in a build log.
    logging.getLogger("onnxruntime.transformers").setLevel(logging.ERROR)
    fused = src.with_name(f"{src.stem}.fused.onnx")
    try:
        with onnx_weights.graph_of(src) as graph:
            # opt_level 0: python fusions only; ONNX Runtime's own rewrites come after, at the chosen level.
            model = optimizer.optimize_model(graph, model_type=model_type, num_heads=num_heads,
                                             hidden_size=hidden_size, opt_level=0, use_gpu=use_gpu)
            model.save_model_to_file(str(fused))  # new tensors inline, the others still refer to their files
    except Exception as exc:
        # No path in the message: src is a temporary copy, and the message goes into the manifest.
        raise OrtOptimizeError(f"onnxruntime.transformers fusion failed: {type(exc).__name__}: {exc}") from None
    return fused, {k: v for k, v in model.get_fused_operator_statistics().items() if v}


def _onnxscript_fusion(src: pathlib.Path, dst: pathlib.Path) -> None:
    """Both graphs with their weights beside them: onnx_ir reads a weight only where a rewrite needs it."""
    import onnx_ir as ir
    from onnxscript.rewriter.ort_fusions import optimize_for_ort as onnxscript_optimize

    from model_build.onnx_graph import weights as onnx_weights

    try:
        model, _ = onnxscript_optimize(ir.load(str(src)))
        ir.save(model, str(dst), external_data=onnx_weights.data_file(dst).name)
    except Exception as exc:
        raise OrtOptimizeError(f"onnxscript transformer fusion of {src} failed: {type(exc).__name__}: {exc}") from None


def _save_ort_level(src: pathlib.Path, level: str, use_gpu: bool) -> pathlib.Path:
    """ONNX Runtime's graph optimizer at ``level`` on ``src``; its result is saved beside ``src``, where ONNX Runtime
    keeps the initializers it did not change as references to ``src``'s weight files."""
    if level == "disabled":
        return src
    import onnxruntime

    levels = {"basic": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC,
              "extended": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED}
    out = src.with_name(f"{src.stem}.{level}.onnx")
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = levels[level]
    options.optimized_model_filepath = str(out)
    options.log_severity_level = 3
    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if use_gpu else ["CPUExecutionProvider"]
    available = onnxruntime.get_available_providers()
    try:
        onnxruntime.InferenceSession(str(src), options, providers=[p for p in providers if p in available])
    except Exception as exc:
        raise OrtOptimizeError(f"ONNX Runtime could not load {src} for {level} graph optimization: {exc}") from None
    return out


def _prune_opset_imports(path: pathlib.Path) -> None:
    """Drops the opset imports no node uses.

    ONNX Runtime writes every domain it knows (ai.onnx.ml 5, ai.onnx.training, com.microsoft.nchwc,
    ...) into a model it saves; an older ONNX Runtime in the Triton image may refuse an opset
    version it does not know even though no node needs it.
    """
    import onnx

    model = onnx.load(str(path), load_external_data=False)  # external weights stay where they are
    used = {node.domain or "" for node in model.graph.node} | {""}
    for function in model.functions:
        used |= {node.domain or "" for node in function.node} | {function.domain}
    keep = [o for o in model.opset_import if (o.domain or "") in used]
    if len(keep) != len(model.opset_import):
        del model.opset_import[:]
        model.opset_import.extend(keep)
        onnx.save(model, str(path))


def _replace(src: pathlib.Path, dst: pathlib.Path) -> None:
    """Moves a finished file (and its external data, if any) onto ``dst``."""
    import shutil

    dst.parent.mkdir(parents=True, exist_ok=True)
    data = src.with_name(src.name + ".data")
    if data.exists():
        shutil.move(data, dst.with_name(dst.name + ".data"))
    shutil.move(src, dst)  # the scratch directory may be on another filesystem


def _size(path: pathlib.Path) -> int:
    data = path.with_name(path.name + ".data")
    return path.stat().st_size + (data.stat().st_size if data.exists() else 0)

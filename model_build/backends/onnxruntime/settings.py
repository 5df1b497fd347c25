"""What the onnxruntime backend's build reads of a model's spec, worked out once.

The spec's ``onnxruntime`` section is optional; its defaults (optimize at build, graph level
``all``) and the int8 gate's are resolved here, so the export, the candidates and the
verification below read one value each.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from deployment_spec.sections.model import Int8Gate, ModelSpec, Precision, Tolerance


@dataclasses.dataclass(frozen=True)
class OnnxRuntimeBuild:
    name: str
    optimize_at_build: bool        # the exporter's optimizations and the optimized candidates
    fuse_transformers: bool        # a transformer-fused candidate is tried
    graph_level: str               # the serving runtime's graph optimization level, as Triton will set it
    tolerance: Tolerance
    int8: Optional[Int8Gate]       # the gate int8 must pass to ship; None: fp32 ships

    @classmethod
    def of(cls, model: ModelSpec) -> "OnnxRuntimeBuild":
        settings = model.onnxruntime
        optimize = settings.optimize_at_build if settings else True
        # The TensorRT execution provider lacks the contrib ops the fusions emit, so it gets the plain graph.
        fuse = optimize and not (settings and settings.tensorrt_accelerator)
        level = settings.graph_optimization_level.value if settings else "all"
        gate = (model.int8 or Int8Gate()) if model.precision is Precision.INT8 else None
        return cls(model.name, optimize, bool(fuse), level, model.tolerance, gate)

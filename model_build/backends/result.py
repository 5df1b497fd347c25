"""What a backend hands back to the dispatcher: one frozen, typed result, the same for every backend.

The dispatcher (model_build/dispatch.py) turns it into the model directory (``config.pbtxt`` from
``inputs``/``outputs``/``parameters``/``ensemble_steps``, ``files`` in the version folder,
``model_files`` beside ``config.pbtxt``) and the manifest's entry (``verification``, ``parity``,
``environment``, ``versions``, ``gpu``).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional

from deployment_spec.builds.manifest import ExecutionEnvironment, TensorSpec, Verification


@dataclasses.dataclass(frozen=True)
class BuildGpu:
    """The GPU a plan was built on: a TensorRT plan runs only on GPUs of that compute capability."""

    name: str
    compute_capability: str


@dataclasses.dataclass(frozen=True)
class BackendResult:
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    files: Mapping[str, Any]           # into <model>/1/: a file to copy, bytes, or a folder {path: value} (layout.py)
    verification: Verification                             # what ran in the serving runtime, or why nothing did
    parameters: Mapping[str, str] = dataclasses.field(default_factory=dict)        # config.pbtxt parameters
    model_files: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # beside config.pbtxt, the same kinds
    ensemble_steps: tuple[Mapping[str, Any], ...] = ()     # an ensemble's ensemble_scheduling steps
    parity: Optional[Mapping[str, float]] = None           # against the reference: max errors, atol, rtol
    environment: Optional[ExecutionEnvironment] = None     # a Python-backend model's execution environment
    versions: Mapping[str, str] = dataclasses.field(default_factory=dict)  # tools this backend used
    gpu: Optional[BuildGpu] = None                         # the GPU a plan was built for

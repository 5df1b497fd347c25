"""The requests every GPU check sends, and where a model's file sits in an unpacked archive.

Inputs are the smoke test's (`tritonsm.checks.smoke_requests.SmokeCase`: ones for integer inputs, which are valid
token ids and masks, the sample text for BYTES, 0.5 for floats) at batch 1, plus, for a batching model,
a batch of up to 4 whose float inputs are seeded random: the same request on both devices.
"""
from __future__ import annotations

import pathlib
from typing import Optional

import numpy as np

from tritonsm.checks.smoke_requests import SmokeCase
from deployment_spec.builds.manifest import ModelEntry
from deployment_spec.sections.model import ModelSpec
from local_endpoint.client.payload import NamedTensor

LARGER_BATCH = 4
DEFAULT_TOLERANCE = 1e-3


def case_for(entry: ModelEntry, spec: Optional[ModelSpec]) -> SmokeCase:
    tolerance = spec.tolerance if spec else None
    return SmokeCase(entry.name, None, entry.inputs, entry.outputs, entry.max_batch_size > 0,
                     spec.sequence_length if spec else None,
                     tolerance.atol if tolerance else DEFAULT_TOLERANCE, tolerance.rtol if tolerance else DEFAULT_TOLERANCE)


def batches(case: SmokeCase, max_batch_size: int) -> list[list[NamedTensor]]:
    first = case.tensors()
    size = min(max_batch_size, LARGER_BATCH)
    if not case.batched or size < 2:
        return [first]
    generator = np.random.default_rng(0)
    larger = []
    for tensor in first:
        array = np.repeat(tensor.array, size, axis=0)
        if array.dtype.kind == "f":
            array = generator.standard_normal(array.shape).astype(array.dtype)
        larger.append(NamedTensor(tensor.name, tensor.datatype, array))
    return [first, larger]


def model_file(root: pathlib.Path, model: str, file_name: str) -> Optional[pathlib.Path]:
    """`<model>/<version>/<file_name>` (or the bare layout's `<version>/<file_name>`), newest version first."""
    folder = root / model if (root / model).is_dir() else root
    versions = sorted((p for p in folder.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name))
    for version in reversed(versions):
        if (version / file_name).exists():
            return version / file_name
    return None


def model_folder(root: pathlib.Path, model: str) -> pathlib.Path:
    return root / model if (root / model).is_dir() else root

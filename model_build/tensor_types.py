"""Tensor type names across torch, numpy and Triton: one table, read by every backend and the samples.

Triton's names are the ``DataType`` enum of its ModelConfig (``model_config.proto``, e.g.
``TYPE_FP32``); torch and numpy share their dtype names for these types.
"""
from __future__ import annotations

import re

TORCH_TO_TRITON = {"float32": "TYPE_FP32", "float16": "TYPE_FP16", "bfloat16": "TYPE_BF16", "float64": "TYPE_FP64",
                   "int64": "TYPE_INT64", "int32": "TYPE_INT32", "int16": "TYPE_INT16", "int8": "TYPE_INT8",
                   "uint8": "TYPE_UINT8", "bool": "TYPE_BOOL"}
TRITON_TO_NUMPY = {triton: name for name, triton in TORCH_TO_TRITON.items()}


def unindexed(tensor: str) -> str:
    """A tensor's name without the ``__<index>`` the pytorch backend's names carry (input_ids__0: input_ids)."""
    return re.sub(r"__\d+$", "", tensor)

"""What each target Triton release accepts (FACTS §4.2, §5, §6).

Triton rejects config fields newer than its own proto, ONNX Runtime fails the load on an
unknown accelerator key, and trtexec exits on a removed flag; so every such field, key and
flag is gated here by the spec's ``triton_version`` (the ``sagemaker-tritonserver`` tag).
"""
from __future__ import annotations

# ModelConfig fields (dotted path inside the message) and the first release whose proto has them.
CONFIG_FIELD_SINCE = {
    "runtime": "24.01",
    "input.is_non_linear_format_io": "24.09",
    "output.is_non_linear_format_io": "24.09",
    "model_metrics": "25.04",
    "ensemble_scheduling.max_inflight_requests": "26.05",
}

# ONNX Runtime backend: `trt_*` accelerator keys exist from r24.05 (FACTS §5; r24.01/r24.03 unconfirmed).
ORT_TRT_EXTRA_KEYS_SINCE = "24.05"

# TensorRT in nvcr.io/nvidia/tensorrt:<tag>-py3 as far as known (FACTS §6.3, UNCONFIRMED for the main
# images): used to choose flags when the image cannot be probed; a GPU build always probes the image.
EXPECTED_TENSORRT = {
    "23.12": "8.6.1", "24.01": "8.6.1", "24.03": "8.6.3", "24.05": "10.0.1", "24.09": "10.4.0",
    "25.04": "10.9.0", "25.09": "10.13.0",
}


def at_least(release: str, since: str) -> bool:
    """YY.MM tags compare as (year, month)."""
    return _key(release) >= _key(since)


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def trt_at_least(trt_version: str, since: str) -> bool:
    return _key(trt_version)[:3] >= _key(since)[:3]

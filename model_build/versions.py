"""What each target Triton release accepts (Triton's protobuf/model_config.proto and the onnxruntime_backend README.md per release branch; TensorRT's trtexec documentation).

Triton rejects config fields newer than its own proto and ONNX Runtime fails the load on an
unknown accelerator key, so such fields and keys are gated by the spec's ``triton_version`` (the
``sagemaker-tritonserver`` tag). trtexec flags are gated by the probed TensorRT version
(tensorrt/trtexec.py), since the TensorRT inside each image is not documented reliably.
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

# ONNX Runtime backend: `trt_*` accelerator keys exist from r24.05 (onnxruntime_backend README.md, per release branch; r24.01/r24.03 unconfirmed).
ORT_TRT_EXTRA_KEYS_SINCE = "24.05"


def at_least(release: str, since: str) -> bool:
    """YY.MM tags compare as (year, month)."""
    return _key(release) >= _key(since)


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def trt_at_least(trt_version: str, since: str) -> bool:
    return _key(trt_version)[:3] >= _key(since)[:3]

"""TensorRT plan build on a real GPU (needs nvidia-smi and a Docker engine, or a local trtexec)."""
from __future__ import annotations

import pathlib

import pytest

from deployment_spec import load_spec
from deployment_spec.builds.manifest import load_manifest

TINY_SPEC = pathlib.Path(__file__).resolve().parents[1] / "model_build" / "specs" / "tiny.yaml"


def _toolchain_reason() -> str:
    from model_build.backends.tensorrt import gpu
    tools = gpu.detect()
    return "" if tools.usable else tools.reason


@pytest.mark.gpu
def test_tensorrt_plan_builds_and_records_version_and_compute_capability(tmp_path):
    reason = _toolchain_reason()
    if reason:
        pytest.skip(f"TensorRT build needs an NVIDIA GPU and a Docker engine: {reason}")
    from model_build import build

    report = build.run(load_spec(TINY_SPEC), tmp_path / "assets", tmp_path / "work", requested=["plan"])
    assert report.exit_code() == 0, report.failed or report.unavailable
    entry = load_manifest(tmp_path / "assets" / "manifest.json").models["plan"]
    assert entry.builder.gpu_compute_capability
    # The plan was built by the TensorRT of the image the spec names, and says so itself (TRT 10+).
    versions = entry.builder.versions
    assert versions["tensorrt_image"].startswith("nvcr.io/nvidia/tensorrt:")
    assert versions["tensorrt_plan"].split(".")[:2] == versions["tensorrt"].split(".")[:2]
    assert [t.data_type for t in entry.inputs] == ["TYPE_INT32", "TYPE_INT32"]

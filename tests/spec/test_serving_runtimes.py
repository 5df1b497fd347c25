"""The runtime table: one row per accepted release, locks that install exactly its runtimes, the host AMI."""
import dataclasses
import re

import pytest

from deployment_spec.facts import images, serving_runtimes
from deployment_spec.facts.serving_runtimes import RUNTIMES, inference_ami, runtime
from model_build.verification import side_env

FIELDS = {f.name for f in dataclasses.fields(serving_runtimes.ServingRuntime)}


def test_every_release_the_spec_accepts_has_exactly_one_row():
    # The spec accepts the SDK's releases; the build, the stand-in and synth all look them up here.
    assert sorted(RUNTIMES) == images.versions()


@pytest.mark.parametrize("version", sorted(RUNTIMES))
def test_each_onnxruntime_wheel_has_a_hashed_lock_pinning_that_release(version):
    row = runtime(version)
    lock = side_env.lock_path("onnxruntime", row.onnxruntime_wheel).read_text()
    pins = dict(re.findall(r"^([a-z0-9-]+)==(\S+)", lock, re.M))
    # The side environment installs exactly the image's ONNX Runtime, next to the build's own numpy.
    assert pins["onnxruntime"] == row.onnxruntime_wheel and pins["numpy"] == side_env.NUMPY_PIN
    # Every requirement line carries at least one sha256 (pip --require-hashes refuses the file otherwise).
    requirements = [line for line in lock.splitlines() if line and not line.startswith("#")]
    assert requirements and all("--hash=sha256:" in line for line in requirements)


def test_only_a_release_never_published_on_pypi_is_verified_with_another_wheel():
    # Triton 24.03 ships ONNX Runtime 1.17.2, which PyPI never had; its patch release 1.17.3 stands in.
    assert {v: (r.onnxruntime, r.onnxruntime_wheel) for v, r in RUNTIMES.items()
            if r.onnxruntime != r.onnxruntime_wheel} == {"24.03": ("1.17.2", "1.17.3")}


def test_facts_that_the_sources_confirm():
    # build.py TRITON_VERSION_MAP / DEFAULT_TRITON_VERSION_MAP and the release notes of each branch.
    assert {v: (r.triton_server, r.onnxruntime) for v, r in RUNTIMES.items()} == {
        "23.12": ("2.41.0", "1.16.3"), "24.01": ("2.42.0", "1.16.3"), "24.03": ("2.44.0", "1.17.2"),
        "24.05": ("2.46.0", "1.18.0"), "24.09": ("2.50.0", "1.19.2"), "25.04": ("2.57.0", "1.21.0"),
        "25.09": ("2.61.0", "1.23.0"), "26.05": ("2.69.0", "1.24.4")}
    # Ubuntu 22.04 images run Python 3.10; the 24.04 ones from 25.04 on run 3.12.
    assert {v: r.python for v, r in RUNTIMES.items()} == {v: "3.10" if v < "25" else "3.12" for v in RUNTIMES}
    assert runtime("25.04").cuda == "12.9.0" and runtime("25.04").min_driver == 575
    assert runtime("26.05").upstream == "26.04"


def test_unconfirmed_marks_name_real_fields_and_every_row_cites_its_branch():
    for version, row in RUNTIMES.items():
        assert set(row.unconfirmed) <= FIELDS
        assert f"/blob/r{version}/build.py" in row.sources[0]


@pytest.mark.parametrize("version, ami", [
    ("23.12", "al2-ami-sagemaker-inference-gpu-3-1"),     # needs 545: the 550 driver runs it natively
    ("24.09", "al2023-ami-sagemaker-inference-gpu-4-1"),  # needs 560: above the 550 driver
    ("25.04", "al2023-ami-sagemaker-inference-gpu-4-1"),  # needs 575: 550 would need forward compatibility
    ("25.09", "al2023-ami-sagemaker-inference-gpu-4-1"),  # CUDA 13.0: driver 580
])
def test_the_host_ami_is_the_oldest_driver_that_meets_the_release_minimum(version, ami):
    assert inference_ami(runtime(version)).name == ami
    assert inference_ami(runtime(version)).driver >= runtime(version).min_driver

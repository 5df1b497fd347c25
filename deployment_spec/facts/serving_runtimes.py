"""What runs a model on the endpoint: the runtimes inside each ``sagemaker-tritonserver`` release.

The single place these facts live. The build verifies each artifact with the runtime releases
listed here (model_build/verification), the local endpoint runs its CPU stand-ins with the same
ONNX Runtime, and the CDK app picks the host AMI from the CUDA and driver requirements.
Standard library only.

Sources, per release YY.MM (each row's ``sources`` names the files it was read from):

* Triton server version and ONNX Runtime: ``build.py`` ``TRITON_VERSION_MAP`` on branch
  ``rYY.MM`` of https://github.com/triton-inference-server/server (the ONNX Runtime the
  onnxruntime backend is built with), and ``docs/introduction/compatibility.md`` there.
* PyTorch (libtorch of the pytorch backend): the backend copies libtorch from
  ``nvcr.io/nvidia/pytorch:YY.MM-py3`` (``build.py``); its version is in NVIDIA's PyTorch
  release notes, https://docs.nvidia.com/deeplearning/frameworks/pytorch-release-notes/rel-YY-MM.html.
* DALI (the dali backend): ``DALI_VERSION`` on branch ``rYY.MM`` of
  https://github.com/triton-inference-server/dali_backend (``DALI_RELEASES`` below).
* TensorRT, CUDA, minimum driver, Ubuntu and Python: the Triton release notes,
  https://docs.nvidia.com/deeplearning/triton-inference-server/release-notes/rel-YY-MM.html,
  and NVIDIA's frameworks support matrix,
  https://docs.nvidia.com/deeplearning/frameworks/support-matrix/index.html.
"""
from __future__ import annotations

import dataclasses

TRITON_REPO = "https://github.com/triton-inference-server/server"
RELEASE_NOTES = "https://docs.nvidia.com/deeplearning/triton-inference-server/release-notes/rel-{}.html"
PYTORCH_NOTES = "https://docs.nvidia.com/deeplearning/frameworks/pytorch-release-notes/rel-{}.html"


@dataclasses.dataclass(frozen=True)
class ServingRuntime:
    """The runtimes of one ``sagemaker-tritonserver:<YY.MM>-py3`` image (the NGC Triton release YY.MM).

    Attributes:
        triton_version: The image tag's release, e.g. ``"25.04"``.
        triton_server: The server version it reports, e.g. ``"2.57.0"``.
        onnxruntime: ONNX Runtime of the onnxruntime backend.
        onnxruntime_wheel: The PyPI ``onnxruntime`` release that verifies ONNX artifacts at build time:
            the same release, or its nearest patch release where that one was never published.
        pytorch: libtorch of the pytorch backend, as NVIDIA versions it (``2.7.0a0+79aa17489c``).
        torch_release: The PyPI ``torch`` release that libtorch is a pre-release of (``2.7.0``), for the
            opt-in TorchScript check.
        tensorrt: TensorRT of the tensorrt backend (plans must be built with the same release; the
            build probes the real one in ``nvcr.io/nvidia/tensorrt:<YY.MM>-py3``).
        python: The image's Python (major.minor): the Python backend's stub runs ``model.py`` with it.
        ubuntu: The image's Ubuntu release.
        cuda: The CUDA toolkit of the image.
        min_driver: The NVIDIA driver branch the release needs without CUDA forward compatibility.
        upstream: The NGC release of the base image and of the PyTorch container libtorch comes from
            (``build.py`` ``upstream_container_version``; differs from the tag for 26.05).
        min_compute_capability: The oldest GPU architecture the release supports.
        unconfirmed: Fields no primary source confirmed (the value is the best secondary one).
        sources: Where the facts were read.
    """

    triton_version: str
    triton_server: str
    onnxruntime: str
    onnxruntime_wheel: str
    pytorch: str
    torch_release: str
    tensorrt: str
    python: str
    ubuntu: str
    cuda: str
    min_driver: int
    upstream: str
    min_compute_capability: str
    unconfirmed: tuple[str, ...]
    sources: tuple[str, ...]

    @property
    def cuda_major(self) -> int:
        return int(self.cuda.split(".")[0])


def _sources(version: str, upstream: str) -> tuple[str, ...]:
    return (f"{TRITON_REPO}/blob/r{version}/build.py (TRITON_VERSION_MAP / DEFAULT_TRITON_VERSION_MAP)",
            f"{TRITON_REPO}/blob/r{version}/qa/L0_backend_python/env/test.sh (the image's Python)",
            RELEASE_NOTES.format(version.replace(".", "-")),
            PYTORCH_NOTES.format(upstream.replace(".", "-")))


def _row(version: str, server: str, ort: str, pytorch: str, torch_release: str, trt: str, python: str,
         ubuntu: str, cuda: str, driver: int, min_cc: str, unconfirmed: tuple[str, ...],
         upstream: str = "", ort_wheel: str = "") -> ServingRuntime:
    upstream = upstream or version
    return ServingRuntime(version, server, ort, ort_wheel or ort, pytorch, torch_release, trt, python, ubuntu, cuda, driver, upstream,
                          min_cc, unconfirmed, _sources(version, upstream))


# Triton server, ONNX Runtime, Ubuntu/Python and the upstream release: build.py and qa/ on each
# release branch. CUDA, minimum driver and compute capability: the release notes where they state
# them. "unconfirmed" lists what only secondary sources (or NVIDIA's same-month framework notes) give.
RUNTIMES: dict[str, ServingRuntime] = {r.triton_version: r for r in (
    _row("23.12", "2.41.0", "1.16.3", "2.2.0a0+81ea7a4", "2.2.0", "8.6.1.6", "3.10", "22.04", "12.3.2", 545, "6.0",
         ("pytorch", "tensorrt")),
    _row("24.01", "2.42.0", "1.16.3", "2.2.0a0+81ea7a4", "2.2.0", "8.6.1.6", "3.10", "22.04", "12.3.2", 545, "6.0",
         ("pytorch", "tensorrt")),
    # PyPI has onnxruntime 1.17.0, 1.17.1 and 1.17.3, never 1.17.2: its patch release verifies instead.
    _row("24.03", "2.44.0", "1.17.2", "2.3.0a0+40ec155e58", "2.3.0", "8.6.3", "3.10", "22.04", "12.4.0", 545, "6.0",
         ("tensorrt", "cuda"), ort_wheel="1.17.3"),
    _row("24.05", "2.46.0", "1.18.0", "2.4.0a0+07cecf4168", "2.4.0", "10.0.1.6", "3.10", "22.04", "12.4.1", 545,
         "6.0", ("tensorrt",)),
    _row("24.09", "2.50.0", "1.19.2", "2.5.0a0+b465a5843b", "2.5.0", "10.4.0.26", "3.10", "22.04", "12.6.1", 560,
         "6.0", ("pytorch", "tensorrt", "cuda", "min_driver")),
    _row("25.04", "2.57.0", "1.21.0", "2.7.0a0+79aa17489c", "2.7.0", "10.9.0.34", "3.12", "24.04", "12.9.0", 575,
         "7.5", ("tensorrt",)),
    # CUDA 13.0 needs driver 580 (the 13.x branch); the sibling 25.08/25.10 notes repeat "575" from 12.9.
    _row("25.09", "2.61.0", "1.23.0", "2.9.0a0+50eac811a6", "2.9.0", "10.13.3.9", "3.12", "24.04", "13.0.1", 580,
         "7.5", ("pytorch", "tensorrt", "cuda", "min_driver")),
    # Built on the 26.04 NGC stack (build.py upstream_container_version "26.04"); its notes name no driver.
    _row("26.05", "2.69.0", "1.24.4", "unknown (NGC 26.04 PyTorch)", "", "unknown", "3.12", "24.04", "13.2.1", 580,
         "7.5", ("pytorch", "torch_release", "tensorrt", "min_driver"), upstream="26.04"),
)}


# The newest release whose runtimes verify every example model (docs/concepts/serving-runtimes.md).
DEFAULT_TRITON_VERSION = "25.09"


def runtime(triton_version: str) -> ServingRuntime:
    """The runtimes of a release the spec accepts; KeyError for others (the spec loader refuses them first)."""
    return RUNTIMES[triton_version]


@dataclasses.dataclass(frozen=True)
class InferenceAmi:
    """A SageMaker host image for GPU endpoints (``ProductionVariant.InferenceAmiVersion``).

    Source: botocore ``data/sagemaker/2017-07-24/service-2.json``, ``ProductionVariant.InferenceAmiVersion``
    ("NVIDIA driver version: 580; CUDA version: 13.0; NVIDIA Container Toolkit with disabled
    CUDA-compat mounting"); https://docs.aws.amazon.com/sagemaker/latest/dg/inference-gpu-drivers.html.
    Without one, ml.g4dn, ml.g5, ml.p3 and ml.p4d hosts run driver 470 (CUDA 11.4), too old for
    every release above.
    """

    name: str
    driver: int
    cuda: str


AMIS = (
    InferenceAmi("al2-ami-sagemaker-inference-gpu-2", 535, "12.2"),
    InferenceAmi("al2-ami-sagemaker-inference-gpu-3-1", 550, "12.4"),
    InferenceAmi("al2023-ami-sagemaker-inference-gpu-4-1", 580, "13.0"),
)


def inference_ami(serving: ServingRuntime) -> InferenceAmi:
    """The host AMI whose driver meets the release's minimum natively (the oldest such driver).

    A newer driver runs containers built for older CUDA releases; an older one only through CUDA
    forward compatibility, which the release notes offer on some data-center branches only.
    """
    native = [ami for ami in AMIS if ami.driver >= serving.min_driver]
    return min(native, key=lambda ami: ami.driver) if native else max(AMIS, key=lambda ami: ami.driver)


DALI_BACKEND_REPO = "https://github.com/triton-inference-server/dali_backend"
# PyPI's nvidia-dali-cuda120/-cuda130 1.36.0 ... 1.52.0 are ~1.6 kB sdists built by NVIDIA's wheel-stub, which
# fetches the real wheel from NVIDIA's own package index at install time; only the package registry is
# reachable from the build machines, so those releases cannot be installed there (checked with pip 23.2).
NO_WHEEL = ("PyPI holds only a wheel-stub sdist of it, which downloads the wheel from NVIDIA's own index at "
            "install time")


@dataclasses.dataclass(frozen=True)
class DaliRelease:
    """The DALI inside one ``sagemaker-tritonserver`` release: what reads its ``model.dali`` files.

    The server's build.py builds the dali backend from the dali_backend branch ``rYY.MM`` without
    a version override (``dali_cmake_args``), so that branch's ``DALI_VERSION`` file is the
    release and its CMakeLists.txt picks the wheel ``nvidia-dali-cuda<CUDA major>0``.

    Attributes:
        triton_version: The image's release, e.g. ``"26.05"``.
        version: The DALI release (``DALI_VERSION`` reads ``1.31`` on r23.12..r24.03: pip's ``==1.31``
            is 1.31.0).
        package: The PyPI package of that build (``nvidia-dali-cuda120`` for CUDA 12 images).
        wheel_missing: Why the build cannot install that release here; empty when it can.
        sources: Where the facts were read.
    """

    triton_version: str
    version: str
    package: str
    wheel_missing: str
    sources: tuple[str, ...]

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


def _dali(version: str, dali: str, wheel_missing: str = "") -> DaliRelease:
    cuda = RUNTIMES[version].cuda_major
    return DaliRelease(version, dali, f"nvidia-dali-cuda{cuda}0", wheel_missing,
                       (f"{DALI_BACKEND_REPO}/blob/r{version}/DALI_VERSION",
                        f"{DALI_BACKEND_REPO}/blob/r{version}/CMakeLists.txt (DALI_DOWNLOAD_PKG_NAME)",
                        f"{TRITON_REPO}/blob/r{version}/build.py (dali_cmake_args: no DALI version override)"))


DALI_RELEASES: dict[str, DaliRelease] = {r.triton_version: r for r in (
    _dali("23.12", "1.31.0"),
    _dali("24.01", "1.31.0"),
    _dali("24.03", "1.31.0"),
    _dali("24.05", "1.36.0", NO_WHEEL),
    _dali("24.09", "1.39.0", NO_WHEEL),
    _dali("25.04", "1.47.0", NO_WHEEL),
    _dali("25.09", "1.51.2", NO_WHEEL),
    _dali("26.05", "2.1.0"),
)}


def buildable_dali() -> list[DaliRelease]:
    """The releases whose DALI the build can install, oldest first."""
    return [r for _, r in sorted(DALI_RELEASES.items()) if not r.wheel_missing]

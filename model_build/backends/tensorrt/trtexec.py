"""The exact trtexec and docker command lines for one plan, valid for the TensorRT release used.

Pure functions (no subprocess), so the command for each reference scenario is unit-tested.
Flags per release (TensorRT's trtexec documentation and the nvcr.io/nvidia/tensorrt release notes): ``--memPoolSize=workspace:<N>M`` (``--workspace`` is gone in
TRT 10, ``--explicitBatch`` is a no-op), ``--fp16`` removed in TRT 11 (strongly typed only),
``--hardwareCompatibilityLevel`` ampere+ from 8.6 and sameComputeCapability from 10.9.
"""
from __future__ import annotations

from typing import Optional, Sequence

from deployment_spec.builds.manifest import TensorSpec
from deployment_spec.sections.model import HardwareCompatibility, ModelSpec, Precision, TensorRTSettings
from model_build.errors import BuildError
from model_build.versions import trt_at_least

TRTEXEC = "/usr/src/tensorrt/bin/trtexec"
WORKSPACE, CACHE = "/workspace", "/cache"
HW_LEVEL = {HardwareCompatibility.AMPERE_PLUS: ("ampere+", "8.6"),
            HardwareCompatibility.SAME_COMPUTE_CAPABILITY: ("sameComputeCapability", "10.9")}


def image(triton_version: str) -> str:
    """The TensorRT build image whose YY.MM matches the serving Triton image: same TensorRT, loadable plan."""
    return f"nvcr.io/nvidia/tensorrt:{triton_version}-py3"


def batch_sizes(model: ModelSpec) -> tuple[int, int, int]:
    """min/opt/max batch: opt is tensorrt.opt_batch_size, else the largest preferred batch size, else max."""
    settings = model.tensorrt or TensorRTSettings()
    preferred = model.dynamic_batching.preferred_batch_sizes if model.dynamic_batching else ()
    opt = settings.opt_batch_size or (max(preferred) if preferred else model.max_batch_size)
    return 1, opt, model.max_batch_size


def shape_flags(model: ModelSpec, inputs: Sequence[TensorSpec]) -> list[str]:
    out = []
    for flag, batch in zip(("--minShapes", "--optShapes", "--maxShapes"), batch_sizes(model)):
        parts = []
        for t in inputs:
            dims = []
            for d in t.dims:
                if d >= 0:
                    dims.append(d)
                elif model.sequence_length:
                    dims.append(model.sequence_length)
                else:
                    raise BuildError(f"model {model.name}: input {t.name} has a variable dimension {list(t.dims)}; "
                                     "set sequence_length so the TensorRT profile has a fixed size")
            name = f"'{t.name}'" if any(c in t.name for c in ":,x") else t.name
            parts.append(f"{name}:" + "x".join(str(d) for d in [batch] + dims))
        out.append(f"{flag}={','.join(parts)}")
    return out


def timing_cache_name(trt_version: str, compute_capability: str) -> str:
    """Timing caches are only valid for one GPU architecture and TensorRT release."""
    return f"timing-trt{trt_version}-sm{compute_capability.replace('.', '')}.cache"


def trtexec_args(model: ModelSpec, inputs: Sequence[TensorSpec], trt_version: str, compute_capability: str,
                 *, onnx: str = f"{WORKSPACE}/model.onnx", plan: str = f"{WORKSPACE}/model.plan",
                 cache_dir: str = CACHE, trtexec: str = TRTEXEC) -> list[str]:
    settings = model.tensorrt or TensorRTSettings()
    args = [trtexec, f"--onnx={onnx}", f"--saveEngine={plan}", *shape_flags(model, inputs),
            f"--memPoolSize=workspace:{settings.workspace_mib}M",
            f"--builderOptimizationLevel={settings.builder_optimization_level}"]
    if settings.timing_cache:
        args.append(f"--timingCacheFile={cache_dir}/{timing_cache_name(trt_version, compute_capability)}")
    args += _precision_flags(model, trt_version)
    if settings.hardware_compatibility is not HardwareCompatibility.NONE:
        level, since = HW_LEVEL[settings.hardware_compatibility]
        if not trt_at_least(trt_version, since):
            raise BuildError(f"models.{model.name}.tensorrt.hardware_compatibility: "
                             f"{settings.hardware_compatibility.value} needs TensorRT {since} or newer, the build "
                             f"image has {trt_version}; use none or a newer triton_version")
        args.append(f"--hardwareCompatibilityLevel={level}")
    if settings.version_compatible:
        args.append("--versionCompatible")
    args.append("--skipInference")
    return args


def _precision_flags(model: ModelSpec, trt_version: str) -> list[str]:
    if model.precision is Precision.FP32:
        return []
    if model.precision is Precision.INT8:
        raise BuildError(f"models.{model.name}.precision: int8 needs a calibration cache or a Q/DQ ONNX graph, "
                         "which this builder does not make; use fp16 or fp32")
    if trt_at_least(trt_version, "11.0"):
        raise BuildError(f"models.{model.name}.precision: fp16 needs trtexec --fp16, which TensorRT {trt_version} "
                         "removed (strongly typed networks only); use fp32, or a triton_version whose TensorRT "
                         "is 10.x")
    return ["--fp16"]


def plan_version_args(plan: str = f"{WORKSPACE}/model.plan", trtexec: str = TRTEXEC) -> list[str]:
    """Asks trtexec which TensorRT built a plan (TensorRT 10+), kept in the manifest."""
    return [trtexec, f"--loadEngine={plan}", "--getPlanVersionOnly"]


def docker_run(image_name: str, workdir: str, cache_dir: str, command: Sequence[str],
               user: Optional[str] = None) -> list[str]:
    out = ["docker", "run", "--rm", "--gpus", "all"]
    if user:
        out += ["--user", user]  # files written into the mounted folders stay the caller's
    return out + ["-v", f"{workdir}:{WORKSPACE}", "-v", f"{cache_dir}:{CACHE}", image_name, *command]


PROBE_TRT = ["python3", "-c", "import tensorrt; print(tensorrt.__version__)"]

"""Opt-in CPU stand-ins for the backends the local Triton server lacks (`--cpu-stand-in`).

The nvidia-pytriton server ships only the Python backend. To exercise an
onnxruntime or pytorch model's payloads locally anyway, its unpacked model
directory is turned into a Python-backend model that runs the model's own
file (model.onnx with ONNX Runtime's CPUExecutionProvider, model.pt with
torch.jit.load) under the same name, inputs, outputs, max_batch_size and
dynamic batching. It is never the real backend: every replaced model is
announced as a stand-in, and its config says so in a parameter. A TensorRT
plan cannot be stood in: the engine runs only on the GPU it was built for.

ONNX models run in the ONNX Runtime release of the endpoint's image (the
`onnxruntime` of its `triton_version` in deployment_spec.facts.serving_runtimes),
from the same hashed side environment the build verifies them in, not in the
newer ONNX Runtime of this machine: a graph that the image's release runs
wrongly answers wrongly here too.

DALI models run their own model.dali in the DALI release of the endpoint's image
(`serving_runtimes.DALI_RELEASES`), from the side environment the build serialized
it with, with the file's GPU operators moved to the CPU (model_build.dali_pipeline.placement,
the move the build checked). Not representative: libjpeg-turbo decodes instead of
nvJPEG (pixels may differ by a level or two), the CPU resize, CPU threads, and latency.
"""

from __future__ import annotations

import dataclasses
import pathlib
import shutil
import sys

from typing import Callable

from deployment_spec.facts import serving_runtimes
from local_endpoint.errors import LocalEndpointError, TarballError
from local_endpoint.server.backends import ModelBackend
from local_endpoint.server.stand_in_kinds import NO_STAND_IN, STAND_INS, StandInKind  # noqa: F401  (re-exported)

MODEL_CODE = pathlib.Path(__file__).resolve().parent / "stand_in_models" / "cpu_stand_in_model.py"
# Config parameters the stand-in model reads; their names make the config self-describing.
BACKEND_PARAMETER = "tritonsm_cpu_stand_in"
FILE_PARAMETER = "tritonsm_stand_in_file"
ORT_SITE_PARAMETER = "tritonsm_onnxruntime_site"
ORT_VERSION_PARAMETER = "tritonsm_onnxruntime_version"
DALI_SITE_PARAMETER = "tritonsm_dali_site"
DALI_VERSION_PARAMETER = "tritonsm_dali_version"
DALI_CPU_FILE = "model.cpu.dali"      # model.dali with its operators moved to the CPU, written beside it
DALI_RUNNER = "dali_worker.py"        # model_build/dali_pipeline/worker.py: the code the build's check ran


@dataclasses.dataclass(frozen=True)
class StandInRuntime:
    """The serving runtimes stand-ins run: each release and the folder it is installed in (None: not needed)."""

    triton_version: str
    onnxruntime: str | None
    site_dir: pathlib.Path | None
    dali: str | None = None
    dali_site: pathlib.Path | None = None


def prepare_runtime(triton_version: str, models: list[ModelBackend],
                    log: Callable[[str], None] = lambda line: print(line.strip(), file=sys.stderr)
                    ) -> StandInRuntime | None:
    """Install (once, cached) the image's ONNX Runtime and DALI where an onnxruntime or dali model is stood in."""
    kinds = {m.backend for m in stand_in_models(models)} & {"onnxruntime", "dali"}
    if not kinds:
        return None
    if triton_version not in serving_runtimes.RUNTIMES:
        raise LocalEndpointError(
            f"--triton-version {triton_version!r} is not a supported release; allowed: "
            f"{', '.join(sorted(serving_runtimes.RUNTIMES))} (the spec's triton_version)")
    # Lazy: model_build is only needed when an ONNX or DALI model is stood in.
    from model_build.verification import side_env

    ort = ort_site = dali = dali_site = None
    if "onnxruntime" in kinds:
        ort = serving_runtimes.runtime(triton_version).onnxruntime_wheel
        ort_site = _side_env(side_env, "onnxruntime", ort, f"ONNX models in Triton {triton_version}'s ONNX Runtime", log)
    if "dali" in kinds:
        release = serving_runtimes.DALI_RELEASES[triton_version]
        if release.wheel_missing:
            raise LocalEndpointError(
                f"--cpu-stand-in runs DALI models in Triton {triton_version}'s DALI {release.version}: "
                f"{release.wheel_missing}; serve a build for a triton_version whose DALI installs "
                f"({', '.join(r.triton_version for r in serving_runtimes.buildable_dali())})")
        dali = release.version
        dali_site = _side_env(side_env, release.package, dali, f"DALI models in Triton {triton_version}'s DALI", log)
    return StandInRuntime(triton_version, ort, ort_site, dali, dali_site)


def _side_env(side_env, package: str, version: str, what: str, log: Callable[[str], None]) -> pathlib.Path:
    try:
        return side_env.ensure(package, version, log=log).site_dir
    except side_env.ServingEnvError as error:
        raise LocalEndpointError(f"--cpu-stand-in runs {what}: {error}") from None


def stand_in_note(model: str, backend: str, runtime: StandInRuntime | None = None) -> str:
    """The start-up line that labels one replaced model."""
    kind = STAND_INS[backend]
    what = kind.runtime
    if backend == "onnxruntime" and runtime is not None:
        what = f"ONNX Runtime {runtime.onnxruntime} (Triton {runtime.triton_version}'s release)"
    if backend == "dali" and runtime is not None:
        what = (f"DALI {runtime.dali}'s CPU operators (Triton {runtime.triton_version}'s release; the file's GPU "
                "operators moved to the CPU: libjpeg-turbo decodes instead of nvJPEG, pixels may differ by a "
                "level or two)")
    return (
        f"model {model!r} ({backend}) runs as a CPU stand-in: a Python-backend model running {what} "
        f"on its {kind.model_file}; latency and the backend's tuning parameters are not representative"
    )


def gpu_group_note(model: str) -> str:
    """The start-up line for a natively served model whose GPU instance groups run on the CPU here."""
    return (f"model {model!r}: its KIND_GPU instance groups run as KIND_CPU on this GPU-less machine "
            "(same counts); latency is not representative")


def move_gpu_groups_to_cpu(repository: pathlib.Path, models: list[ModelBackend]) -> None:
    """Rewrite KIND_GPU instance groups of the given unpacked models to KIND_CPU, in place."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    for model in models:
        config_path = (repository / model.model if model.model else repository) / "config.pbtxt"
        config = text_format.Parse(config_path.read_text(), model_config_pb2.ModelConfig())
        _groups_to_cpu(config)
        config_path.write_text(text_format.MessageToString(config))


def _groups_to_cpu(config) -> None:
    from tritonclient.grpc import model_config_pb2

    for group in config.instance_group:
        if group.kind == model_config_pb2.ModelInstanceGroup.KIND_GPU:
            # This server has no GPU; the group's count is kept.
            group.kind = model_config_pb2.ModelInstanceGroup.KIND_CPU
            group.ClearField("gpus")


def stand_in_models(models: list[ModelBackend]) -> list[ModelBackend]:
    """The models `--cpu-stand-in` replaces."""
    return [m for m in models if m.backend in STAND_INS]


def replace_with_stand_ins(repository: pathlib.Path, models: list[ModelBackend], tarball: pathlib.Path,
                           runtime: StandInRuntime | None = None) -> None:
    """Rewrite each unpacked model of a stand-in backend in `repository` (a top-level model is the repository)."""
    for model in stand_in_models(models):
        model_dir = repository / model.model if model.model else repository
        prefix = f"{model.model}/" if model.model else ""
        replace_model_directory(model_dir, model.backend, f"{prefix}config.pbtxt in {tarball}", runtime)


def replace_model_directory(model_dir: pathlib.Path, backend: str, where: str,
                            runtime: StandInRuntime | None = None) -> None:
    """Turn one model directory into its Python-backend stand-in, in place; `where` names it in errors."""
    # Lazy: the protobuf module pulls in grpc, which only serving needs.
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    config_path = model_dir / "config.pbtxt"
    config = text_format.Parse(config_path.read_text(), model_config_pb2.ModelConfig())
    if not config.input or not config.output:
        raise TarballError(
            f"{where} lists no {'input' if not config.input else 'output'} tensors; the {backend} "
            "backend fills them in from the model file, the CPU stand-in cannot: list every input and output "
            "in config.pbtxt (tritonsm build writes them)"
        )
    model_file = config.default_model_filename or STAND_INS[backend].model_file
    versions = [d for d in sorted(model_dir.iterdir()) if d.is_dir() and d.name.isdigit() and (d / model_file).exists()]
    if not versions:
        raise TarballError(
            f"{where}: the model has no version directory holding {model_file} (e.g. 1/{model_file}); "
            f"the CPU stand-in runs the model's own {model_file}: rebuild the model (tritonsm build)"
        )
    for version in versions:
        shutil.copyfile(MODEL_CODE, version / "model.py")
        if backend == "dali":
            _dali_files(version / model_file, version)
    config.ClearField("platform")
    config.backend = "python"
    config.ClearField("default_model_filename")  # for the Python backend it would name the .py file
    _groups_to_cpu(config)
    config.parameters[BACKEND_PARAMETER].string_value = backend
    config.parameters[FILE_PARAMETER].string_value = DALI_CPU_FILE if backend == "dali" else model_file
    if backend == "onnxruntime" and runtime is not None:
        config.parameters[ORT_SITE_PARAMETER].string_value = str(runtime.site_dir)
        config.parameters[ORT_VERSION_PARAMETER].string_value = runtime.onnxruntime
    if backend == "dali" and runtime is not None:
        config.parameters[DALI_SITE_PARAMETER].string_value = str(runtime.dali_site)
        config.parameters[DALI_VERSION_PARAMETER].string_value = runtime.dali
    config_path.write_text(text_format.MessageToString(config))


def _dali_files(model_file: pathlib.Path, version: pathlib.Path) -> None:
    """model.cpu.dali (the shipped file's operators on the CPU) and the runner the build's check used."""
    from model_build.dali_pipeline import placement, worker

    (version / DALI_CPU_FILE).write_bytes(placement.to_cpu(model_file.read_bytes()))
    shutil.copyfile(worker.__file__, version / DALI_RUNNER)

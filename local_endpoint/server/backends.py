"""Which Triton backend each model needs, and whether the local server has it.

The Triton server of the nvidia-pytriton wheel ships only the Python backend
(plus the built-in ensemble scheduler): onnxruntime, tensorrt and pytorch
models cannot load there. Naming them before the server starts beats a
"failed to load" buried in the server log; `--cpu-stand-in` (cpu_stand_in)
covers onnxruntime and pytorch models with labelled Python-backend stand-ins.
"""

from __future__ import annotations

import dataclasses
import pathlib
import shutil
import tarfile

from local_endpoint.errors import TarballError, UnsupportedBackendError
from local_endpoint.server.stand_in_kinds import NO_STAND_IN, STAND_INS

# Platform names Triton maps to a backend (CORE src/constants.h).
PLATFORM_BACKENDS = {
    "tensorrt_plan": "tensorrt",
    "onnxruntime_onnx": "onnxruntime",
    "pytorch_libtorch": "pytorch",
    "tensorflow_graphdef": "tensorflow",
    "tensorflow_savedmodel": "tensorflow",
    "ensemble": "ensemble",
}

# Without backend or platform, Triton's auto-complete picks the backend from
# the model file name inside a version directory.
MODEL_FILE_BACKENDS = {
    "model.plan": "tensorrt",
    "model.onnx": "onnxruntime",
    "model.pt": "pytorch",
    "model.savedmodel": "tensorflow",
    "model.graphdef": "tensorflow",
    "model.py": "python",
}

# The key of a bare-layout archive (config.pbtxt at the top) in a listing.
TOP_LEVEL = ""


@dataclasses.dataclass(frozen=True)
class ModelBackend:
    """One model of a repository and the backend it needs."""

    model: str
    backend: str
    steps: tuple[str, ...]  # the models an ensemble calls; empty otherwise


@dataclasses.dataclass(frozen=True)
class ModelFiles:
    """What a repository holds for one model: its config text and file names."""

    config_text: str | None
    files: tuple[str, ...]  # paths relative to the model directory


def list_archive_models(tarball: pathlib.Path) -> dict[str, ModelFiles]:
    """Models of a .tar.gz without extracting it, keyed by top-level directory.

    A bare layout (config.pbtxt at the top) is keyed by TOP_LEVEL.
    """
    try:
        with tarfile.open(tarball, "r:gz") as archive:
            members = {_relative(m.name): m for m in archive.getmembers()}
            members.pop("", None)
            bare = "config.pbtxt" in members
            configs: dict[str, str] = {}
            files: dict[str, list[str]] = {}
            for path, member in sorted(members.items()):
                model, _, relative = (TOP_LEVEL, "", path) if bare else path.partition("/")
                if not relative:
                    if member.isdir():
                        files.setdefault(model, [])
                    continue  # a plain file beside the model directories
                files.setdefault(model, []).append(relative)
                if relative == "config.pbtxt" and member.isfile():
                    configs[model] = archive.extractfile(member).read().decode(errors="replace")
    except (tarfile.TarError, OSError, EOFError) as error:
        raise TarballError(
            f"model archive {tarball} cannot be read as a gzipped tar file ({error}); "
            "rebuild it (tritonsm build)"
        ) from None
    return {name: ModelFiles(configs.get(name), tuple(paths)) for name, paths in sorted(files.items())}


def _relative(member_name: str) -> str:
    parts = [p for p in pathlib.PurePosixPath(member_name).parts if p != "."]
    return "/".join(parts)


def read_model_backend(name: str, files: ModelFiles, tarball: pathlib.Path) -> ModelBackend:
    """Parse one model's config.pbtxt with Triton's own schema."""
    # Lazy: the protobuf module pulls in grpc, which only serving needs.
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    where = f"{name}/config.pbtxt" if name else "config.pbtxt"
    if files.config_text is None:
        raise TarballError(
            f"model {name or 'at the top level'} in {tarball} has no config.pbtxt; "
            f"every model needs '{where}'"
        )
    try:
        config = text_format.Parse(files.config_text, model_config_pb2.ModelConfig())
    except text_format.ParseError as error:
        raise TarballError(
            f"{where} in {tarball} is not a valid Triton model configuration: {error}; "
            "fix or regenerate it (tritonsm build)"
        ) from None
    backend = config.backend or PLATFORM_BACKENDS.get(config.platform, "") or _backend_from_files(files)
    steps = tuple(step.model_name for step in config.ensemble_scheduling.step)
    return ModelBackend(model=name, backend=backend or "unknown", steps=steps)


def models_to_load(
    listing: dict[str, ModelFiles], tarball: pathlib.Path, root_model: str
) -> list[ModelBackend]:
    """`root_model` and, for an ensemble, every model its steps call."""
    found: dict[str, ModelBackend] = {}
    pending = [root_model]
    while pending:
        name = pending.pop()
        if name in found or name not in listing:
            continue  # a missing step is Triton's to report, with its own message
        found[name] = read_model_backend(name, listing[name], tarball)
        pending.extend(found[name].steps)
    return [found[name] for name in sorted(found)]


def mme_root_model(listing: dict[str, ModelFiles]) -> str:
    """The model Triton's MME loader picks: bare config, else the ensemble, else the last dir.

    The SageMaker front end takes the directory whose config.pbtxt contains
    `platform: "ensemble"` and otherwise the one directory it found
    (src/sagemaker_server.cc, SageMakerMMELoadModel).
    """
    if TOP_LEVEL in listing:
        return TOP_LEVEL
    for name, files in listing.items():
        text = (files.config_text or "").replace(" ", "").replace("\t", "")
        if 'platform:"ensemble"' in text:
            return name
    return sorted(listing)[-1] if listing else TOP_LEVEL


def check_backends(
    models: list[ModelBackend], tarball: pathlib.Path, available: tuple[str, ...], cpu_stand_in: bool = False
) -> list[tuple[pathlib.Path, ModelBackend]]:
    """The models whose backend the local server lacks (and `--cpu-stand-in`, if given, does not cover)."""

    return [(tarball, m) for m in models
            if m.backend not in available and not (cpu_stand_in and m.backend in STAND_INS)]


def machine_has_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None


def gpu_group_models(models: list[ModelBackend], listing: dict[str, ModelFiles]) -> list[ModelBackend]:
    """Models this server runs natively (python) whose config asks for KIND_GPU instances."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    out = []
    for m in models:
        text = listing.get(m.model, ModelFiles(None, ())).config_text
        if m.backend != "python" or not text:
            continue
        try:
            config = text_format.Parse(text, model_config_pb2.ModelConfig())
        except text_format.ParseError:
            continue  # Triton reports a malformed config itself, with its own message
        if any(g.kind == model_config_pb2.ModelInstanceGroup.KIND_GPU for g in config.instance_group):
            out.append(m)
    return out


def raise_if_gpu_groups(found: list[tuple[pathlib.Path, ModelBackend]], cpu_stand_in: bool) -> None:
    """Without a GPU, KIND_GPU instances cannot load; say so before start rather than in the server log."""
    if not found or cpu_stand_in or machine_has_gpu():
        return
    lines = [f"model {m.model or '(top level)'!r} in {tarball} asks for KIND_GPU instances (instance_group)"
             for tarball, m in found]
    raise UnsupportedBackendError(
        "cannot serve locally, this machine has no GPU:\n  " + "\n  ".join(lines)
        + "\nrerun with --cpu-stand-in to run those instances on the CPU (labelled; latency is not "
        "representative), or test on a deployed endpoint")


def raise_if_unsupported(
    missing: list[tuple[pathlib.Path, ModelBackend]], available: tuple[str, ...], cpu_stand_in: bool = False
) -> None:
    """Name every model that cannot load here, why, and what to do instead."""
    if not missing:
        return

    lines = []
    for tarball, m in missing:
        reason = f": {NO_STAND_IN[m.backend]}" if m.backend in NO_STAND_IN else ""
        lines.append(f"model {m.model or '(top level)'!r} in {tarball} needs the {m.backend!r} backend{reason}")
    standable = sorted({m.backend for _, m in missing if m.backend in STAND_INS})
    hint = ""
    if standable and not cpu_stand_in:
        hint = (f", or exercise their payloads locally with --cpu-stand-in ({' and '.join(standable)} models "
                "then run as labelled Python-backend stand-ins on the CPU; latency is not representative)")
    raise UnsupportedBackendError(
        "cannot serve locally, the Triton server of the nvidia-pytriton wheel lacks a backend:\n  "
        + "\n  ".join(lines)
        + f"\nit has only: {', '.join(available)}; test these models on a deployed "
        f"endpoint (tritonsm invoke --endpoint ENDPOINT --deployed){hint}"
    )


def _backend_from_files(files: ModelFiles) -> str:
    for path in files.files:
        parts = path.split("/")
        if len(parts) >= 2 and parts[0].isdigit() and parts[1] in MODEL_FILE_BACKENDS:
            return MODEL_FILE_BACKENDS[parts[1]]
    return ""

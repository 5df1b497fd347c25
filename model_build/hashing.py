"""Build hashes: a sha256 over everything that decides a model directory's bytes.

The inputs are the model's sources (its spec entry and the files it reads: ONNX, TorchScript, Python dir,
weights dir, a user recipe's module; ``deployment_spec.builds.model_sources``, which synth and `tritonsm serve` compare
with the manifest's record), the target Triton release, model_build's own code and the tool versions. An
unchanged hash means the cached model directory is reused. File hashes are memoised by (size, mtime) so a second
build does not re-read gigabytes of weights.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import pathlib
from typing import Any, Iterable

from deployment_spec.builds.model_sources import FileHasher, digest_of

__all__ = ["FileHasher", "code_version", "combine", "tool_versions"]  # FileHasher: the build's memo, kept on disk

TOOLS = ("torch", "onnx", "onnxruntime", "onnxscript", "transformers", "tokenizers", "tritonclient", "protobuf",
         "numpy")
_CODE_ROOT = pathlib.Path(__file__).resolve().parent


def tool_versions() -> dict[str, str]:
    out = {}
    for tool in TOOLS:
        try:
            out[tool] = importlib.metadata.version(tool)
        except importlib.metadata.PackageNotFoundError:
            out[tool] = "absent"
    return out


def code_version() -> str:
    """sha256 over model_build's source: any change to recipes, export or config code rebuilds."""
    digest = hashlib.sha256()
    for path in sorted(_CODE_ROOT.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(path.relative_to(_CODE_ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def combine(parts: Iterable[tuple[str, Any]]) -> str:
    return digest_of(list(parts))

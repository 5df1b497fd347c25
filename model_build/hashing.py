"""Build hashes: a sha256 over everything that decides a model directory's bytes.

The inputs are the spec entry, the target Triton release, the source files (ONNX, TorchScript,
Python dir, weights dir, a user recipe's module), model_build's own code and the tool versions.
An unchanged hash means the cached model directory is reused. File hashes are memoised by
(size, mtime) so a second build does not re-read gigabytes of weights.
"""
from __future__ import annotations

import dataclasses
import enum
import hashlib
import importlib.metadata
import json
import pathlib
from typing import Any, Iterable

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


def plain(value: Any) -> Any:
    """Spec dataclasses as JSON-able data, enums as their values."""
    if dataclasses.is_dataclass(value):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def digest_of(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


class FileHasher:
    """sha256 of files and directory trees, memoised on disk by path, size and mtime."""

    def __init__(self, cache_file: pathlib.Path) -> None:
        self._file = cache_file
        try:
            self._memo = json.loads(cache_file.read_text())
        except (OSError, ValueError):
            self._memo = {}
        self._dirty = False

    def file(self, path: pathlib.Path) -> str:
        st = path.stat()
        key = str(path.resolve())
        stamp = [st.st_size, st.st_mtime_ns]
        hit = self._memo.get(key)
        if hit and hit[:2] == stamp:
            return hit[2]
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        self._memo[key] = stamp + [digest.hexdigest()]
        self._dirty = True
        return digest.hexdigest()

    def tree(self, path: pathlib.Path) -> str:
        if path.is_file():
            return self.file(path)
        parts = [(p.relative_to(path).as_posix(), self.file(p)) for p in sorted(path.rglob("*")) if p.is_file()]
        return digest_of(parts)

    def module(self, module: str) -> str:
        """The sources a user recipe's module runs (itself and the modules beside it that it imports,
        recipe_sources), found without importing (executing) them."""
        from model_build import recipe_sources

        found = recipe_sources.files(module)
        if found is None:
            return "unresolved"
        root, paths = found  # names relative to it: a clone elsewhere hashes the same
        return digest_of([(path.relative_to(root).as_posix(), self.file(path)) for path in paths])

    def save(self) -> None:
        if self._dirty:
            from model_build.archive import write_text_atomic
            write_text_atomic(self._file, json.dumps(self._memo, sort_keys=True))
            self._dirty = False


def combine(parts: Iterable[tuple[str, Any]]) -> str:
    return digest_of(list(parts))

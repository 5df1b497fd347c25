"""What a model is built from, hashed: its settings under ``models:``, each file or folder the build reads, a user
recipe's module with the modules beside it that it imports.

The build's cache key covers these (``model_build.build`` adds the Triton release, its own code and the tool
versions), and the manifest records them per model (``ModelEntry.sources``), so that synth and `tritonsm serve`
can tell a build made from other sources than the spec names now (``deployment_spec.builds.spec_match``). One computation
for both, the standard library only: the synth path hashes without torch or model_build.

Each source also gets a stamp (its files' names, sizes and modification times): an unchanged stamp means
unchanged content, the assumption the build's own memo of file hashes makes, so a check re-reads a source's
bytes only where its stamp moved (a checkout or a copy on another machine, a touch, an edit).
"""
from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import os
import pathlib
from typing import Any, Callable, Optional, Sequence

from deployment_spec.builds import recipe_sources
from deployment_spec.sections.model import ModelSpec

SETTINGS = "settings"   # the record's key for the model's entry under models:
RECIPE = "recipe"       # ... for a user recipe's module (`recipe: module:function`)
MISSING = "missing"     # a file or folder that does not exist
UNRESOLVED = "unresolved"  # a recipe module not found


def plain(value: Any) -> Any:
    """Spec dataclasses as JSON-able data, enums as their values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
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
    """sha256 of files and directory trees, memoised by path, size and mtime (on disk in ``cache_file``, where
    given: a second build does not re-read gigabytes of weights)."""

    def __init__(self, cache_file: Optional[pathlib.Path] = None) -> None:
        self._file = cache_file
        self._memo: dict[str, list[Any]] = {}
        if cache_file is not None:
            try:
                self._memo = json.loads(cache_file.read_text())
            except (OSError, ValueError):
                pass
        self._dirty = False

    def file(self, path: pathlib.Path) -> str:
        st = path.stat()
        key = str(path.resolve())
        stamp = [st.st_size, st.st_mtime_ns]
        hit = self._memo.get(key)
        if hit and hit[:2] == stamp:
            return str(hit[2])
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

    def module(self, module: str, search: Sequence[pathlib.Path] = ()) -> str:
        """The sources a user recipe's module runs (itself and the modules beside it that it imports,
        recipe_sources), found without importing (executing) them."""
        found = recipe_sources.files(module, search)
        if found is None:
            return UNRESOLVED
        root, paths = found  # names relative to it: a clone elsewhere hashes the same
        return digest_of([(path.relative_to(root).as_posix(), self.file(path)) for path in paths])

    def save(self, write: Callable[[pathlib.Path, str], None]) -> None:
        """Writes the memo with ``write`` (the build's atomic writer) where it changed."""
        if self._dirty and self._file is not None:
            write(self._file, json.dumps(self._memo, sort_keys=True))
            self._dirty = False


@dataclasses.dataclass(frozen=True)
class Sources:
    """One model's sources as hashed now: ``hashes`` by key (``settings``, a field under ``models.<name>`` such as
    ``source.python_dir`` or ``weights``, ``recipe``), and the stamps of the keys that are files."""

    hashes: dict[str, str]
    stamps: dict[str, str]


def search_path(spec_root: pathlib.Path) -> tuple[pathlib.Path, ...]:
    """Where a recipe module is looked for before sys.path: the spec's folder, then the working directory (the
    order ``model_build.build`` puts them on sys.path, so that the build imports what was hashed)."""
    return (spec_root, pathlib.Path(os.getcwd()))


def settings(model: ModelSpec) -> dict[str, Any]:
    """The model's entry as the build reads it; ``copies`` left out (renamed at packing time, same directory)."""
    entry: dict[str, Any] = plain(model)
    entry.pop("copies")
    return entry


def sources(spec_root: pathlib.Path, model: ModelSpec, hasher: FileHasher) -> Sources:
    """``model``'s sources now (paths relative to ``spec_root``, the spec's folder)."""
    hashes, stamps = {SETTINGS: digest_of(settings(model))}, {}
    for key, files in _files(spec_root, model).items():
        hashes[key] = _hash(key, files, spec_root, model, hasher)
        stamps[key] = _stamp(files)
    return Sources(hashes, stamps)


def changed(spec_root: pathlib.Path, model: ModelSpec, recorded: Sources) -> list[str]:
    """The keys whose hash now differs from ``recorded`` (a build's), or that only one of the two has; a source
    whose stamp is the recorded one is not read again."""
    hasher = FileHasher()
    now_files = _files(spec_root, model)
    out = []
    if recorded.hashes.get(SETTINGS) != digest_of(settings(model)):
        out.append(SETTINGS)
    for key in sorted(set(now_files) | set(recorded.hashes) - {SETTINGS}):
        if key not in now_files or key not in recorded.hashes:
            out.append(key)
        elif recorded.stamps.get(key) != _stamp(now_files[key]) and \
                recorded.hashes[key] != _hash(key, now_files[key], spec_root, model, hasher):
            out.append(key)
    return out


def _files(spec_root: pathlib.Path, model: ModelSpec) -> dict[str, Optional[list[tuple[str, pathlib.Path]]]]:
    """Each source's files, named relative to it (None: it does not exist, or a recipe module is not found)."""
    out: dict[str, Optional[list[tuple[str, pathlib.Path]]]] = {}
    recipe = model.source.recipe if model.source else None
    if recipe and ":" in recipe:
        found = recipe_sources.files(recipe.split(":", 1)[0], search_path(spec_root))
        out[RECIPE] = None if found is None else [(p.relative_to(found[0]).as_posix(), p) for p in found[1]]
    for field, value in model.local_files():
        path = (spec_root / value).resolve()
        if path.is_file():
            out[field] = [(path.name, path)]
        elif path.exists():
            out[field] = [(p.relative_to(path).as_posix(), p) for p in sorted(path.rglob("*")) if p.is_file()]
        else:
            out[field] = None
    return out


def _hash(key: str, files: Optional[list[tuple[str, pathlib.Path]]], spec_root: pathlib.Path, model: ModelSpec,
          hasher: FileHasher) -> str:
    if key == RECIPE:
        assert model.source is not None and model.source.recipe is not None  # _files named it
        return hasher.module(model.source.recipe.split(":", 1)[0], search_path(spec_root))
    if files is None:
        return MISSING
    path = (spec_root / dict(model.local_files())[key]).resolve()
    return hasher.tree(path)


def _stamp(files: Optional[list[tuple[str, pathlib.Path]]]) -> str:
    if files is None:
        return MISSING
    stats = [(name, path.stat()) for name, path in files]
    return digest_of([(name, st.st_size, st.st_mtime_ns) for name, st in stats])

"""Builds (or reuses) the execution-environment archive for a set of pinned requirements.

Cached under the build cache by the hash of its inputs (the requirement lines, the target and
this format's version), so the models of a spec that ask for the same requirements share one
archive and an unchanged rebuild does no work. The archive is written from the resolved wheels
in sorted order with fixed metadata: the same inputs give the same bytes.
"""
from __future__ import annotations

import dataclasses
import json
import pathlib
import tempfile
from typing import Callable

from deployment_spec.sections import requirements
from model_build import archive
from model_build.errors import BuildError
from deployment_spec.builds.model_sources import digest_of
from model_build.python_env import layout, resolve, wheels
from model_build.python_env.target import EnvTarget

FORMAT = 1
RECORD = "tritonsm-env.json"  # inside the archive: what it was built from, for people and for `serve`


@dataclasses.dataclass(frozen=True)
class BuiltEnv:
    archive: pathlib.Path
    file_name: str                 # its name in the model directory
    target: EnvTarget
    packages: tuple[dict, ...]     # name, version, filename, sha256 of every wheel inside
    archive_bytes: int
    unpacked_bytes: int
    reused: bool


def build(lines: list[str], target: EnvTarget, cache: pathlib.Path, log: Callable[[str], None],
          where: str) -> BuiltEnv:
    key = digest_of({"requirements": sorted(lines), "target": target.key(), "format": FORMAT})
    folder = cache / "python-envs" / key[:24]
    file_name = f"python-env-{key[:12]}.tar.gz"
    record = folder / "built.json"
    if record.is_file() and (folder / file_name).is_file():
        return _loaded(json.loads(record.read_text()), folder, file_name, target)
    cache.mkdir(parents=True, exist_ok=True)
    log(f"  {where}: resolving {len(lines)} pinned requirements for {target.label}")
    locked = resolve.resolve(lines, target, where)
    _require_numpy(locked, where)
    paths = wheels.download(locked, target, cache / "python-envs" / "wheels", log, where)
    packages = tuple({"name": x.name, "version": x.version, "filename": x.filename, "sha256": x.sha256}
                     for x in locked)
    with tempfile.TemporaryDirectory(prefix="tritonsm-env-", dir=cache) as tmp:
        root = pathlib.Path(tmp) / "env"
        layout.write_skeleton(root, target)
        site = layout.site_packages(root, target)
        unpacked = 0
        for index, path in enumerate(paths, start=1):
            unpacked += wheels.install(path, root, site)
            log(f"  unpacked {index}/{len(paths)} {path.name} ({unpacked / 1e6:.0f} MB so far)")
        (root / RECORD).write_text(json.dumps({"target": target.key(), "requirements": sorted(lines),
                                               "packages": packages}, indent=2, sort_keys=True) + "\n")
        log(f"  packing the environment ({unpacked / 1e6:.0f} MB unpacked)")
        archive.write_tree(folder / file_name, root, first=(RECORD,))
    facts = {"packages": packages, "archive_bytes": (folder / file_name).stat().st_size, "unpacked_bytes": unpacked}
    archive.write_text_atomic(record, json.dumps(facts, indent=2, sort_keys=True) + "\n")
    return _loaded(facts, folder, file_name, target, reused=False)


def _loaded(facts: dict, folder: pathlib.Path, file_name: str, target: EnvTarget, reused: bool = True) -> BuiltEnv:
    return BuiltEnv(folder / file_name, file_name, target, tuple(facts["packages"]), facts["archive_bytes"],
                    facts["unpacked_bytes"], reused)


def _require_numpy(locked: list[resolve.Locked], where: str) -> None:
    """The stub imports triton_python_backend_utils, which imports numpy, inside the environment."""
    if not any(requirements.normalize(x.name) == "numpy" for x in locked):
        raise BuildError(f"{where}: the environment would have no numpy, which the Python backend's "
                         "triton_python_backend_utils imports inside it; add a pinned numpy (e.g. numpy==1.26.4)")

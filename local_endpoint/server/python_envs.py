"""Execution environments of the served models, rebuilt for the Python of the local server.

A model tarball built for the endpoint carries an environment for the image's Python (e.g. 3.12),
which the local Triton's stub (this interpreter's Python) cannot use: Triton requires the
environment's Python to match its stub (python_backend README, "Important Notes"). Before serving,
each environment the build made (it carries ``tritonsm-env.json`` as its first member) is rebuilt
from the same pinned requirements for this machine's Python, cached like the build's, and put in
place of the original in the unpacked model directory. Archives without that record (a conda-pack
the user brought) are served as they are.
"""
from __future__ import annotations

import dataclasses
import json
import pathlib
import re
import shutil
import sys
import tarfile
from typing import Callable

from deployment_spec.sections.requirements import NO_DEPS
from local_endpoint.errors import TarballError
from model_build.errors import BuildError
from model_build.python_env import environment, target
from model_build.verification.side_env import cache_root

_ENV_FILE = re.compile(r"(?:.*/)?python-env-[0-9a-f]{12}\.tar\.gz")


@dataclasses.dataclass(frozen=True)
class EnvSwap:
    member: str              # the environment archive's path inside the model tarball
    local: pathlib.Path      # the same requirements, built for this machine's Python
    note: str


def plan(tarball: pathlib.Path, log: Callable[[str], None]) -> list[EnvSwap]:
    """The environments of ``tarball`` that need a local build, built (or taken from the cache) now."""
    here = target.for_this_machine()
    swaps = []
    for member, record in records(tarball):
        if record["target"]["python"] == here.python:
            continue
        where = f"{tarball.name}: {member}"
        try:
            built = environment.build(record["requirements"], here, cache_root(), log, where)
        except BuildError as error:
            raise TarballError(f"{error}; the local endpoint rebuilds the environment for its own Python "
                               f"{here.python}") from None
        pins = sum(line != NO_DEPS for line in record["requirements"])  # --no-deps is a flag, not a pin
        swaps.append(EnvSwap(member, built.archive, (
            f"{member}: execution environment rebuilt for the local server (CPython {here.python}) from the "
            f"same {pins} pinned requirements; the endpoint gets the one built for "
            f"CPython {record['target']['python']}")))
    return swaps


def say(line: str) -> None:
    """Progress of a rebuild, on stderr beside the server's own start-up lines."""
    print(line, file=sys.stderr, flush=True)


def apply(swaps: list[EnvSwap], root: pathlib.Path) -> None:
    """Puts the local environments in place in an unpacked tarball (same file names)."""
    for swap in swaps:
        shutil.copyfile(swap.local, root / swap.member)


def records(tarball: pathlib.Path):
    """(member, record) of every environment the build made in `tarball`."""
    try:
        with tarfile.open(tarball, "r:gz") as outer:
            for member in outer:
                if member.isfile() and _ENV_FILE.fullmatch(member.name):
                    record = _first_record(outer.extractfile(member))
                    if record is not None:
                        yield member.name, record
    except (tarfile.TarError, OSError, EOFError) as error:
        raise TarballError(f"model archive {tarball} cannot be read as a gzipped tar file ({error}); "
                           "rebuild it (tritonsm build)") from None


def _first_record(fileobj) -> dict | None:
    with tarfile.open(fileobj=fileobj, mode="r|gz") as inner:
        for member in inner:
            if member.name == environment.RECORD and member.isfile():
                return json.loads(inner.extractfile(member).read())
            return None
    return None

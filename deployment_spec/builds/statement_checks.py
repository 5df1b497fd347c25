"""A tarball and a manifest held to the verified build statement (deployment_spec.builds.statement).

One set of checks and messages for every reader: ``tritonsm serve`` and ``tritonsm verify --signatures`` (after
each model directory's own signature, tritonsm/checks/signatures.py), synth (stacks/model_signatures.py) and the
construct library (triton_constructs/build_signing.py). Each tampering gets its own message: a tarball the
statement does not name (an older build's, or one repacked and renamed), a model directory added or removed, one
swapped for another build's (signed by the same key: only the statement tells them apart), a whole tarball of
another build under this build's name, other bytes; then each field of the manifest that differs from the
statement. The most specific comes first: a swapped model is named as such even when the manifest's sha256 and
size were edited to match it.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any, Mapping

from deployment_spec.builds.statement import BuildStatement, predicate
from deployment_spec.builds.manifest import Manifest
from deployment_spec.parsing.errors import Problem

SIGNATURE_FILE = "model.sig"  # model_build.signing.SIGNATURE_FILE: each model directory's signature
_THIS_ONE = ("deploy the tarball tritonsm build wrote for this build (rebuild with tritonsm build --signing-key KEY "
             "if it is gone)")
_FILE_FIX = ("use one build's manifest.json, tarballs and statement together (tritonsm build --signing-key KEY "
             "writes them): the manifest names a tarball of another build (an older one, or one repacked after the "
             "build), or the statement is another build's")
_EDIT_FIX = ("restore the manifest.json tritonsm build wrote, or rebuild (tritonsm build --signing-key KEY): it was "
             "edited after the build")


@dataclasses.dataclass(frozen=True)
class Found:
    """What one read of a tarball found: its model directories, each ``model.sig``'s sha256, and the whole file's
    sha256 and size."""

    file: str
    models: tuple[str, ...]
    signatures: Mapping[str, str]
    sha256: str
    size: int


def tarball_problems(statement: BuildStatement, found: Found) -> list[Problem]:
    """What differs between the tarball and the statement, the most specific kind only; empty when it is bound."""
    bound = statement.tarball(found.file)
    name = found.file
    if bound is None:
        return [Problem(name, "a tarball the signed build statement does not name", "this build's tarballs "
                        f"({', '.join(statement.tarball_names())})", _FILE_FIX)]
    listed = f"the models the signed build statement names for it ({', '.join(bound.models)})"
    extra = [m for m in sorted(found.models) if m not in bound.models]
    if extra:
        return [Problem(name, f"model {', '.join(map(repr, extra))} beside this build's", listed,
                        f"{_THIS_ONE}: a model directory was added to this copy after the build")]
    missing = [m for m in bound.models if m not in found.models]
    if missing:
        return [Problem(name, f"no model {', '.join(map(repr, missing))}", listed,
                        f"{_THIS_ONE}: a model directory was removed from this copy after the build")]
    unsigned = [m for m in bound.models if m not in found.signatures]
    if unsigned:
        return [Problem(f"{name}: model {m!r}", f"no signature ({m}/{SIGNATURE_FILE})", "the signature the signed "
                        f"build statement names, sha256 {bound.signatures.get(m)}", f"{_THIS_ONE}: its signature was "
                        "removed") for m in unsigned]
    other = [m for m in bound.models if found.signatures[m] != bound.signatures.get(m)]
    if other and len(other) == len(bound.models) and len(other) > 1:
        return [Problem(name, f"another build's tarball under this build's name (no model's signature is the one "
                        f"this build signed: {', '.join(other)})", f"the tarball the signed build statement names, "
                        f"sha256 {bound.sha256}", f"{_THIS_ONE}: this copy was rolled back to, or replaced by, "
                        "another build's")]
    if other:
        return [Problem(f"{name}: model {m!r}", f"a signature ({m}/{SIGNATURE_FILE}) with sha256 "
                        f"{found.signatures[m]}, another build's", f"the signature the signed build statement "
                        f"names, sha256 {bound.signatures.get(m)}", f"{_THIS_ONE}: the model directory was swapped for "
                        "another build's, signed with the same key") for m in other]
    if (found.sha256, found.size) != (bound.sha256, bound.size):
        return [Problem(name, f"sha256 {found.sha256}, {found.size} bytes", f"the signed build statement's sha256 "
                        f"{bound.sha256}, {bound.size} bytes", f"{_THIS_ONE}: this copy changed after the build")]
    return []


def manifest_problems(statement: BuildStatement, manifest: Manifest, label: str) -> list[Problem]:
    """Each field of the manifest the statement binds and the manifest gives otherwise (``label``: its path)."""
    out: list[Problem] = []
    _diff(predicate(manifest), statement.predicate, "", label, out)
    return out


def _diff(got: Any, want: Any, path: str, label: str, out: list[Problem]) -> None:
    if isinstance(got, dict) and isinstance(want, dict):
        for key in sorted(got.keys() | want.keys()):
            where = f"{path}.{key}" if path else key
            if key not in want:
                out.append(Problem(f"{label}: {where}", _shown(got[key]), "nothing: the signed build statement has "
                                   f"no {where}", _EDIT_FIX))
            elif key not in got:
                out.append(Problem(f"{label}: {where}", "nothing", f"the signed build statement's "
                                   f"{_shown(want[key]).replace('an entry', 'entry')}", _EDIT_FIX))
            else:
                _diff(got[key], want[key], where, label, out)
        return
    if _records(got) and _records(want) and len(got) == len(want):
        for i, (one, other) in enumerate(zip(got, want)):
            _diff(one, other, f"{path}[{i}]", label, out)
        return
    if got != want:
        out.append(Problem(f"{label}: {path}", _shown(got), f"the signed build statement's {_shown(want)}",
                           _FILE_FIX if path.endswith(".file") else _EDIT_FIX))


def _records(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value) and bool(value)


def _shown(value: Any) -> str:
    if isinstance(value, dict):  # a whole endpoint or model: its name says which
        return "an entry"
    return repr(value) if isinstance(value, str) else json.dumps(value, sort_keys=True)


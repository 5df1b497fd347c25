"""Model tarballs checked against the spec's signing key before they serve: by `tritonsm serve` before it starts
Triton, and by `tritonsm verify --signatures` (the delivery pipeline's verify step) before a stage deploys.

With ``signing.public_key`` the build's signed statement (deployment_spec.builds.statement, beside the manifest) is
verified first; then every model directory must carry a valid signature by that key (model_build.signing), and
each tarball must be the one the statement binds (its models, each signature's digest, its sha256 and size:
deployment_spec.builds.statement_checks); last, the manifest must say what the statement says. Anything else stops the
command with its own message. Without a key nothing can be verified: `tritonsm verify --signatures` names each
tarball as unsigned, or as signed but unchecked; `tritonsm serve` serves as before.
"""
from __future__ import annotations

import hashlib
import pathlib
from typing import Iterable, Mapping, Optional

from deployment_spec.builds import statement as build_statement, statement_checks
from deployment_spec.builds.manifest import Manifest
from model_build import signing


def check(tarballs: Iterable[pathlib.Path], public_key: Optional[pathlib.Path], manifest: Manifest,
          manifest_path: pathlib.Path, recorded: Optional[Mapping[pathlib.Path, str]] = None) -> list[str]:
    """One line per tarball saying what was verified; SignatureError (or StatementError) on the first that fails.
    With a key, the signed statement beside the manifest binds every tarball and the manifest itself. Without one,
    with ``recorded`` (tarball -> the build manifest's sha256), each is held to its sha256, from the same single
    read."""
    statement = None
    if public_key is not None:
        statement = build_statement.read_statement(manifest.root / build_statement.STATEMENT_FILE, public_key)
    lines = []
    for tarball in tarballs:
        members = signing.tarball_members(tarball)
        if recorded is not None and statement is None and members.sha256 != recorded.get(tarball):
            raise signing.SignatureError(
                f"{tarball.name}: sha256 {members.sha256}; allowed: the manifest's {recorded.get(tarball)}; fix: "
                "rebuild (tritonsm build) and deploy the tarballs it wrote")
        if public_key is None:
            lines.append(f"not verified: {tarball.name} is " + (
                "signed, but the spec names no signing.public_key to check it with" if members.signatures else
                "unsigned (the spec has no signing.public_key; docs/howto/signing.md)"))
            continue
        verified = signing.verify_members(members, public_key)
        bound = ""
        if statement is not None:
            _raise_first(statement_checks.tarball_problems(statement, _found(members)))
            bound = f", bound by {statement.path.name}"
        lines.append(f"verified: {tarball.name} ({', '.join(verified.models)}) signed by {verified.signer}{bound}")
    if statement is not None:
        _raise_first(statement_checks.manifest_problems(statement, manifest, str(manifest_path)))
    return lines


def _found(members: signing.Members) -> statement_checks.Found:
    return statement_checks.Found(members.tarball, tuple(sorted(members.digests)),
                                  {m: hashlib.sha256(sig).hexdigest() for m, sig in members.signatures.items()},
                                  members.sha256, members.size)


def _raise_first(problems: list) -> None:
    """The first problem, as the commands stop on the first failure; the rest would follow from the same cause."""
    if problems:
        raise signing.SignatureError(str(problems[0]))


def check_before_serving(tarballs: Iterable[pathlib.Path], public_key: Optional[pathlib.Path], manifest: Manifest,
                         manifest_path: pathlib.Path) -> None:
    """Verifies where the spec has a key; without one there is nothing to verify with and serving goes on as before
    (synth warns about unsigned builds; ``tritonsm verify --signatures`` names each)."""
    if public_key is None:
        return
    # Before the server's own lines on stdout: stderr carries errors only, which scripts read.
    for line in check(tarballs, public_key, manifest, manifest_path):
        print(f"tritonsm: {line}", flush=True)

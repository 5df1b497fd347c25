"""A signed build at synth: the build statement verified with the team's public key, and each tarball held to it.

``tritonsm build --signing-key`` writes ``build-statement.dsse.json`` beside the manifest
(deployment_spec.builds.statement). Given the public key, synth verifies it (standard library only), then reads each
tarball it deploys, not trusting the manifest: its sha256 and size, its model directories and each ``model.sig``'s
digest must be the statement's (deployment_spec.builds.statement_checks), and so must every field of the manifest the
statement binds. The copy function is then handed the digest the statement binds (``ArtifactFile.digest_from``).

Used by the repository's app (stacks/model_signatures.py) and by the construct library's
``ModelArchive.from_file(public_key=...)`` and ``ModelRepositories.from_manifest(public_key=...)``.
"""
from __future__ import annotations

import pathlib
from typing import Optional, Sequence

from deployment_spec.builds.statement import STATEMENT_FILE, BuildStatement, StatementError, read_statement
from deployment_spec.builds.manifest import Artifact, Manifest
from deployment_spec.parsing.errors import Problem, UserError
from deployment_spec.builds.statement_checks import Found, manifest_problems, tarball_problems
from triton_constructs.archive_listing import ArchiveListing, read_listing

DIGEST_FROM_STATEMENT = "the signed build statement"


def statement(path: pathlib.Path, public_key: pathlib.Path) -> BuildStatement | Problem:
    """The verified statement, or the problem that refuses it (the key file's own included)."""
    try:
        return read_statement(path, public_key)
    except StatementError as error:
        return error.problem
    except UserError:  # the public key file itself: missing, unreadable, no PEM block
        return Problem("public_key", f"{str(public_key)!r}, which is not a readable PEM public key file",
                       "the team's public key (signing.public_key), e.g. keys/model-signing.pub",
                       "name the public key file (never the private key)")


_READ: dict[tuple[str, int, int, int], ArchiveListing | Problem] = {}


def listing(path: pathlib.Path) -> ArchiveListing | Problem:
    """The tarball read once per synth: stages deploy the same file, and it may be gigabytes. Kept by path, size,
    modification time and inode: a file replaced or rewritten during synth is read again."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, stat.st_ino)
    if key not in _READ:
        _READ[key] = read_listing(path)
    return _READ[key]


def found(path: pathlib.Path, read: ArchiveListing) -> Found:
    return Found(path.name, read.models, dict(read.signatures), read.sha256, read.size)


def built_problems(manifest: Manifest, manifest_path: pathlib.Path, artifacts: Sequence[Artifact],
                   public_key: pathlib.Path) -> tuple[Optional[str], list[Problem]]:
    """(the signer, what refuses the build): the statement beside the manifest, each artifact's file read against
    it (a missing file is left to ``artifact_file_problems``), then the manifest against it."""
    verified = statement(manifest.root / STATEMENT_FILE, public_key)
    if isinstance(verified, Problem):
        return None, [verified]
    problems: list[Problem] = []
    for artifact in artifacts:
        path = manifest.artifact_path(artifact)
        if not path.is_file():
            continue
        read = listing(path)
        problems += [read] if isinstance(read, Problem) else tarball_problems(verified, found(path, read))
    # A tarball's own problem explains the manifest's fields that differ with it (a rolled-back tarball's file,
    # sha256, size, signatures): those are told only when every tarball is the statement's.
    return verified.signer, problems or manifest_problems(verified, manifest, str(manifest_path))


def archive_problems(path: pathlib.Path, read: ArchiveListing, public_key: pathlib.Path,
                     statement_path: Optional[pathlib.Path] = None) -> tuple[Optional[str], list[Problem]]:
    """(the signer, what refuses the archive): one archive you bring, against its build's statement
    (``statement_path``, by default the one beside it)."""
    verified = statement(statement_path or path.parent / STATEMENT_FILE, public_key)
    if isinstance(verified, Problem):
        return None, [verified]
    return verified.signer, tarball_problems(verified, found(path, read))

"""What a local model archive holds, read at synth in one pass: its sha256, its size and its Triton models.

SageMaker unpacks a single-model endpoint's archive into ``/opt/ml/model`` and a multi-model endpoint's
archive into a directory of its own, and Triton is started with that directory as its model repository
(``--model-repository``): each model must be a directory at the archive's root holding ``config.pbtxt``
(https://docs.aws.amazon.com/sagemaker/latest/dg/triton.html, "model repository"; Triton's
docs/user_guide/model_repository.md). An archive that wraps the repository in one more directory
(``model_repository/resnet/config.pbtxt``) starts a server with no models, which SageMaker reports only
when the endpoint fails its health check many minutes into a deploy.
"""
from __future__ import annotations

import dataclasses
import hashlib
import pathlib
import re
import tarfile
from typing import BinaryIO, Mapping

from deployment_spec.parsing.errors import Problem, describe

_GZIP_MAGIC = b"\x1f\x8b"
_CONFIG = "config.pbtxt"
_SIGNATURE = "model.sig"  # model_build.signing.SIGNATURE_FILE
_ENSEMBLE = re.compile(r'^\s*platform\s*:\s*"ensemble"', re.MULTILINE)
_CONFIG_READ_LIMIT = 1 << 20  # a config.pbtxt is text of a few kB; a larger one is not read for its platform
_READ_CHUNK = 1 << 20


@dataclasses.dataclass(frozen=True)
class ArchiveListing:
    """One local ``.tar.gz`` as read at synth.

    Attributes:
        sha256: Of the whole file.
        size: In bytes.
        models: The directories at the root holding ``config.pbtxt``, ensembles first (the one served first).
        nested: Directories one level down holding ``config.pbtxt`` (a repository packed one level too deep).
        roots: Every top-level name, for messages.
        signatures: The sha256 of each top-level directory's ``model.sig`` (a signed build's), by directory:
            what the signed build statement binds (deployment_spec.builds.statement_checks).
    """

    sha256: str
    size: int
    models: tuple[str, ...]
    nested: tuple[str, ...] = ()
    roots: tuple[str, ...] = ()
    signatures: Mapping[str, str] = dataclasses.field(default_factory=dict)


class _Hashing:
    """A read-only file wrapper that hashes what is read, so listing and hashing take one pass."""

    def __init__(self, handle: BinaryIO) -> None:
        self.handle = handle
        self.digest = hashlib.sha256()
        self.size = 0

    def read(self, size: int = -1) -> bytes:
        data = self.handle.read(size)
        self.digest.update(data)
        self.size += len(data)
        return data

    def drain(self) -> None:
        for chunk in iter(lambda: self.read(_READ_CHUNK), b""):
            pass


def read_listing(path: pathlib.Path) -> ArchiveListing | Problem:
    """The archive's listing, or the problem that stops it from being a model repository."""
    with path.open("rb") as handle:
        if handle.read(2) != _GZIP_MAGIC:
            return _not_gzip(path)
        handle.seek(0)
        reader = _Hashing(handle)
        tops: dict[str, None] = {}
        configs: dict[str, bool] = {}  # model path (root-relative, without config.pbtxt) -> is an ensemble
        signatures: dict[str, str] = {}
        try:
            # Streaming mode ("r|gz"): the members are seen in order, each read once, nothing is extracted.
            with tarfile.open(fileobj=reader, mode="r|gz") as tar:  # type: ignore[call-overload]
                for member in tar:
                    parts = [p for p in member.name.split("/") if p not in ("", ".")]
                    if not parts:
                        continue
                    tops.setdefault(parts[0], None)
                    if member.isfile() and parts[-1] == _CONFIG and len(parts) in (2, 3):
                        configs["/".join(parts[:-1])] = _is_ensemble(tar, member)
                    if member.isfile() and len(parts) == 2 and parts[1] == _SIGNATURE:
                        signatures[parts[0]] = _member_sha256(tar, member)
        except (tarfile.TarError, EOFError, OSError) as caught:
            return Problem("path", f"{describe(str(path))}, which is not a readable tar archive ({caught})",
                           "a gzip-compressed tar archive of a Triton model repository", _PACK)
        reader.drain()
    models = sorted((name for name in configs if "/" not in name), key=lambda n: (not configs[n], n))
    nested = sorted(name for name in configs if "/" in name)
    return ArchiveListing(reader.digest.hexdigest(), reader.size, tuple(models), tuple(nested), tuple(tops),
                          signatures)


def _member_sha256(tar: tarfile.TarFile, member: tarfile.TarInfo) -> str:
    digest = hashlib.sha256()
    extracted = tar.extractfile(member)
    for chunk in iter(lambda: extracted.read(_READ_CHUNK) if extracted else b"", b""):
        digest.update(chunk)
    return digest.hexdigest()


def _is_ensemble(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bool:
    if member.size > _CONFIG_READ_LIMIT:
        return False
    extracted = tar.extractfile(member)
    text = extracted.read().decode("utf-8", "replace") if extracted else ""
    return bool(_ENSEMBLE.search(text))


_PACK = "pack the model directories at the archive's root: `tar -czf NAME.tar.gz -C REPOSITORY MODEL...`"


def _not_gzip(path: pathlib.Path) -> Problem:
    with path.open("rb") as handle:
        head = handle.read(512)
    found = "a plain (uncompressed) tar archive" if head[257:262] == b"ustar" else "not gzip-compressed"
    return Problem("path", f"{describe(str(path))}, which is {found}",
                   "a gzip-compressed tar archive (.tar.gz): SageMaker unpacks ModelDataUrl with gzip", _PACK)


def listing_problems(path: pathlib.Path, listing: ArchiveListing, declared: tuple[str, ...]) -> list[Problem]:
    """What the archive's root must hold: model directories, and the ones ``declared`` among them."""
    if not listing.models:
        if listing.nested:
            wrapper = listing.nested[0].split("/")[0]
            inner = " ".join(sorted({n.split("/")[1] for n in listing.nested}))
            return [Problem("path", f"{describe(str(path))}, whose models sit one directory down "
                            f"({', '.join(n + '/' + _CONFIG for n in listing.nested)})",
                            "model directories at the archive's root: Triton's model repository is the directory "
                            "SageMaker unpacks the archive into",
                            f"pack it from inside {wrapper}/: `tar -czf {path.name} -C {wrapper} {inner}`")]
        found = ", ".join(listing.roots) or "nothing"
        return [Problem("path", f"{describe(str(path))}, which holds no model directory (at its root: {found})",
                        f"one directory per model at the root, each with its {_CONFIG}", _PACK)]
    allowed = f"a model directory at the archive's root ({', '.join(listing.models)})"
    return [Problem(f"models[{i}]", describe(name), allowed,
                    "name one of them, or leave models out to serve the archive's own")
            for i, name in enumerate(declared) if name not in listing.models]


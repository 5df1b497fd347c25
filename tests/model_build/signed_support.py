"""A signed build of the tiny spec and its tampered copies, shared by the tests of everything that must refuse them:
the signature check (`tritonsm serve`, `tritonsm verify --signatures`) and the copy function (sha256)."""
from __future__ import annotations

import base64
import dataclasses
import io
import json
import pathlib
import tarfile
from typing import Callable, Optional

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from deployment_spec.manifest import load_manifest
from model_build import signing


def key_pair(folder: pathlib.Path, name: str) -> tuple[pathlib.Path, pathlib.Path]:
    private = ec.generate_private_key(ec.SECP256R1())
    key, public = folder / f"{name}.pem", folder / f"{name}.pub"
    key.write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    public.write_bytes(private.public_key().public_bytes(serialization.Encoding.PEM,
                                                         serialization.PublicFormat.SubjectPublicKeyInfo))
    return key, public


@dataclasses.dataclass(frozen=True)
class Signed:
    spec: object
    out: pathlib.Path
    work: pathlib.Path
    key: pathlib.Path
    public: pathlib.Path
    other_key: pathlib.Path
    other_public: pathlib.Path

    def tarball(self, endpoint: str = "single") -> pathlib.Path:
        return self.out / load_manifest(self.out / "manifest.json").endpoints[endpoint].artifacts[0].file


Change = Callable[[str, bytes], Optional[bytes]]


def rewrite(source: pathlib.Path, target: pathlib.Path, change: Change) -> pathlib.Path:
    """A copy of a tarball with ``change(name, data) -> data | None`` applied to each file (None drops it)."""
    with tarfile.open(source) as old, tarfile.open(target, "w:gz") as new:
        for member in old.getmembers():
            extracted = old.extractfile(member) if member.isfile() else None
            data = extracted.read() if extracted is not None else None
            if data is not None:
                data = change(member.name, data)
                if data is None:
                    continue
                member.size = len(data)
            new.addfile(member, io.BytesIO(data) if data is not None else None)
    return target


def one_byte_changed(name: str, data: bytes) -> bytes:
    return bytes([data[0] ^ 1]) + data[1:] if name == "classifier/1/model.onnx" else data


def swapped_config(signed: Signed) -> Change:
    """text/config.pbtxt replaced by classifier's, renamed: a config that parses, for another model."""
    with tarfile.open(signed.tarball()) as tar:
        member = tar.extractfile("classifier/config.pbtxt")
        assert member is not None
        other = member.read()
    return lambda name, data: other.replace(b'"classifier"', b'"text"') if name == "text/config.pbtxt" else data


def signed_files(signed: Signed, model: str) -> dict[str, str]:
    """What the build signed for ``model``: file name -> digest, read from its model.sig."""
    with tarfile.open(signed.tarball()) as tar:
        member = tar.extractfile(f"{model}/model.sig")
        assert member is not None
        statement = json.loads(base64.b64decode(json.loads(member.read())["dsseEnvelope"]["payload"]))
    return {r["name"]: r["digest"] for r in statement["predicate"]["resources"]}


def another_keys_signature(signed: Signed) -> tuple[Change, bytes]:
    """text/model.sig replaced by a signature of the same files with the other key; and that signature."""
    resigned = signing.sign_model(signing.SigningKey(signed.other_key), "text", signed_files(signed, "text"))
    return (lambda name, data: resigned if name == "text/model.sig" else data), resigned


def signature_removed(model: str) -> Change:
    return lambda name, data: None if name == f"{model}/model.sig" else data


def tampered_tarballs(signed: Signed, folder: pathlib.Path) -> dict[str, pathlib.Path]:
    """The four tamperings issue #48 names, each applied to the signed single-model tarball, by name."""
    folder.mkdir(exist_ok=True)
    changes = {"one byte changed in a model file": one_byte_changed, "a swapped config.pbtxt": swapped_config(signed),
               "a signature from another key": another_keys_signature(signed)[0],
               "a missing signature": signature_removed("classifier")}
    return {what: rewrite(signed.tarball(), folder / f"{i}-{signed.tarball().name}", change)
            for i, (what, change) in enumerate(changes.items())}

"""A signed build of the tiny spec and its tampered copies, shared by the tests of everything that must refuse them:
the signature check (`tritonsm serve`, `tritonsm verify --signatures`), the copy function (sha256), and the signed
build statement's checks (the same commands, synth, the construct library): whole build folders, each with one
thing tampered with (``tampered_builds``), and the message each is refused with (``expected_refusal``)."""
from __future__ import annotations

import base64
import dataclasses
import hashlib
import io
import json
import pathlib
import tarfile
from typing import Callable, Optional

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from deployment_spec.builds.statement import STATEMENT_FILE, envelope, pae
from deployment_spec.builds.manifest import load_manifest
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


def rewrite(source: pathlib.Path, target: pathlib.Path, change: Change,
            added: Optional[dict[str, bytes]] = None) -> pathlib.Path:
    """A copy of a tarball with ``change(name, data) -> data | None`` applied to each file (None drops it), and the
    files ``added`` (name -> bytes) appended."""
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
        for name, data in (added or {}).items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            new.addfile(info, io.BytesIO(data))
    return target


def without_model(source: pathlib.Path, target: pathlib.Path, model: str) -> pathlib.Path:
    """A copy of a tarball without the model directory ``model`` (its directory entry included)."""
    with tarfile.open(source) as old, tarfile.open(target, "w:gz") as new:
        for member in old.getmembers():
            if member.name.partition("/")[0] != model:
                new.addfile(member, old.extractfile(member) if member.isfile() else None)
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


# --- another build, signed with the same key: only the signed build statement tells it apart ------------------------

ANOTHER_BUILD = b"# another build\n"  # appended to config.pbtxt: a config that still parses, of another build


def _member(signed: Signed, name: str) -> bytes:
    with tarfile.open(signed.tarball()) as tar:
        member = tar.extractfile(name)
        assert member is not None
        return member.read()


def another_build(signed: Signed, models: tuple[str, ...]) -> Change:
    """``models`` as another build of them made them (another config.pbtxt), each signed again with the team's key:
    every model directory verifies on its own."""
    configs = {m: _member(signed, f"{m}/config.pbtxt") + ANOTHER_BUILD for m in models}
    sigs = {m: signing.sign_model(signing.SigningKey(signed.key), m, {
        **signed_files(signed, m), "config.pbtxt": hashlib.sha256(configs[m]).hexdigest()}) for m in models}

    def change(name: str, data: bytes) -> bytes:
        model, _, inside = name.partition("/")
        if model in configs and inside == "config.pbtxt":
            return configs[model]
        return sigs[model] if model in sigs and inside == signing.SIGNATURE_FILE else data
    return change


def added_model(signed: Signed, name: str = "extra", like: str = "classifier") -> dict[str, bytes]:
    """A model directory ``name``, a copy of ``like``'s renamed, signed with the team's key: files to add."""
    files = {}
    with tarfile.open(signed.tarball()) as tar:
        for member in tar.getmembers():
            model, _, inside = member.name.partition("/")
            if model == like and member.isfile() and inside != signing.SIGNATURE_FILE:
                extracted = tar.extractfile(member)
                assert extracted is not None
                data = extracted.read()
                files[inside] = data.replace(f'"{like}"'.encode(), f'"{name}"'.encode()) \
                    if inside == "config.pbtxt" else data
    signature = signing.sign_model(signing.SigningKey(signed.key), name,
                                   {inside: hashlib.sha256(data).hexdigest() for inside, data in files.items()})
    return {**{f"{name}/{inside}": data for inside, data in files.items()},
            f"{name}/{signing.SIGNATURE_FILE}": signature}


# --- a whole build folder (manifest, statement, tarballs) copied, then one thing in it tampered with ----------------

def copied_build(signed: Signed, folder: pathlib.Path) -> pathlib.Path:
    """The signed build's folder copied whole: manifest.json, its statement, every tarball and bill of materials."""
    import shutil
    shutil.copytree(signed.out, folder)
    return folder


def edited_manifest(folder: pathlib.Path, edit: Callable[[dict], None]) -> pathlib.Path:
    """``edit`` applied to the manifest's JSON in ``folder``; returns the manifest's path."""
    path = folder / "manifest.json"
    raw = json.loads(path.read_text())
    edit(raw)
    path.write_text(json.dumps(raw, indent=2, sort_keys=True) + "\n")
    return path


def edited_statement(folder: pathlib.Path, edit: Callable[[dict], None]) -> pathlib.Path:
    """``edit`` applied to the DSSE envelope's JSON in ``folder`` (the payload left to ``edit``)."""
    path = folder / STATEMENT_FILE
    raw = json.loads(path.read_text())
    edit(raw)
    path.write_text(json.dumps(raw, indent=2, sort_keys=True) + "\n")
    return path


def content_named(tarball: pathlib.Path, stem: str) -> pathlib.Path:
    """``tarball`` renamed as the build names tarballs, by its own content: <stem>-<sha256[:12]>.tar.gz."""
    named = tarball.with_name(f"{stem}-{hashlib.sha256(tarball.read_bytes()).hexdigest()[:12]}.tar.gz")
    tarball.rename(named)
    return named


def tampered_builds(signed: Signed, root: pathlib.Path) -> dict[str, pathlib.Path]:
    """Per tampering issue #58 names, the signed build's folder copied under ``root`` with that one thing changed."""
    from cryptography.hazmat.primitives import hashes

    from model_build.statement import signed_statement

    def sha(path: pathlib.Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest()

    name = signed.tarball().name
    built = load_manifest(signed.out / "manifest.json").endpoints["single"].artifacts[0]
    single = built.models
    out: dict[str, pathlib.Path] = {}

    def build(what: str) -> pathlib.Path:
        out[what] = copied_build(signed, root / what.replace(" ", "-"))
        return out[what]

    folder = build("swapped model")
    rewrite(signed.tarball(), folder / name, another_build(signed, ("classifier",)))
    folder = build("swapped model, manifest edited to match")
    tarball = rewrite(signed.tarball(), folder / name, another_build(signed, ("classifier",)))
    edited_manifest(folder, lambda raw: raw["endpoints"]["single"]["artifacts"][0].update(
        sha256=sha(tarball), size=tarball.stat().st_size))
    folder = build("extra model")
    rewrite(signed.tarball(), folder / name, lambda n, d: d, added_model(signed))
    folder = build("rolled back in place")
    rewrite(signed.tarball(), folder / name, another_build(signed, single))
    folder = build("rolled back")
    older = content_named(rewrite(signed.tarball(), folder / "older.tar.gz", another_build(signed, single)), "single")
    edited_manifest(folder, lambda raw: raw["endpoints"]["single"]["artifacts"][0].update(
        file=older.name, sha256=sha(older), size=older.stat().st_size,
        signatures={m: signature_sha256(older, m) for m in single}))
    folder = build("model removed")
    without_model(signed.tarball(), folder / name, "preprocess")
    folder = build("model signature removed")
    rewrite(signed.tarball(), folder / name, signature_removed("classifier"))
    folder = build("other bytes")  # the same files packed again: another gzip header, the same models and signatures
    rewrite(signed.tarball(), folder / name, lambda n, d: d)
    folder = build("manifest sha256")
    edited_manifest(folder, lambda raw: raw["endpoints"]["single"]["artifacts"][0].update(sha256="0" * 64))
    folder = build("manifest size")
    edited_manifest(folder, lambda raw: raw["endpoints"]["single"]["artifacts"][0].update(size=7))
    folder = build("manifest models")
    edited_manifest(folder, lambda raw: raw["endpoints"]["single"]["artifacts"][0].update(
        models=[*single, "extra"]))
    folder = build("statement removed")
    (folder / STATEMENT_FILE).unlink()
    folder = build("signature removed")
    edited_statement(folder, lambda raw: raw.update(signatures=[]))
    folder = build("statement replaced")
    # The statement edited to bind other bytes (as one would to pass a tampered tarball), its signature kept.
    edited_statement(folder, lambda raw: raw.update(payload=base64.b64encode(
        base64.b64decode(raw["payload"]).replace(built.sha256.encode(), b"1" * 64)).decode()))
    folder = build("signature replaced")
    other = signed_statement(signing.SigningKey(signed.other_key), load_manifest(signed.out / "manifest.json"))
    (folder / STATEMENT_FILE).write_bytes(other)  # the same statement, signed by another key
    folder = build("statement unreadable")
    (folder / STATEMENT_FILE).write_text("{not json")
    folder = build("statement of another type")  # signed by the team's key, but declared as another kind of payload
    body = base64.b64decode(json.loads((folder / STATEMENT_FILE).read_text())["payload"])
    key = signing.SigningKey(signed.key)
    signature = key.private().sign(pae("text/plain", body), ec.ECDSA(hashes.SHA256()))
    raw = json.loads(envelope(body, key.identity, signature))
    (folder / STATEMENT_FILE).write_text(json.dumps({**raw, "payloadType": "text/plain"}))
    return out


# --- the message each of those is refused with (tritonsm serve and verify --signatures, synth, the constructs) --------

THIS_ONE = ("deploy the tarball tritonsm build wrote for this build (rebuild with tritonsm build --signing-key KEY if "
            "it is gone)")
FILE_FIX = ("use one build's manifest.json, tarballs and statement together (tritonsm build --signing-key KEY writes "
            "them): the manifest names a tarball of another build (an older one, or one repacked after the build), or "
            "the statement is another build's")
EDIT_FIX = ("restore the manifest.json tritonsm build wrote, or rebuild (tritonsm build --signing-key KEY): it was "
            "edited after the build")
REBUILD = ("rebuild with the team's key (tritonsm build --signing-key KEY) and keep manifest.json, the tarballs and "
           "build-statement.dsse.json it writes together")


def _single(folder: pathlib.Path):
    return load_manifest(folder / "manifest.json").endpoints["single"].artifacts[0]


def signature_sha256(tarball: pathlib.Path, model: str) -> str:
    return hashlib.sha256(signing.tarball_members(tarball).signatures[model]).hexdigest()


def expected_refusal(signed: Signed, builds: dict[str, pathlib.Path], what: str) -> str:
    """The message the tampering ``what`` is refused with, by every check (synth lists it as its one problem)."""
    folder, name, bound = builds[what], signed.tarball().name, _single(signed.out)
    team, statement = signing.SigningKey(signed.key).identity, builds[what] / STATEMENT_FILE
    label = str(folder / "manifest.json")
    names = ", ".join(sorted(a.file for ep in load_manifest(signed.out / "manifest.json").endpoints.values()
                             for a in ep.artifacts))
    # Each message made only when asked for: a tampered folder lacks what another's message reads.
    return {
        "swapped model": lambda: (
            f"{name}: model 'classifier': got a signature (classifier/model.sig) with sha256 "
            f"{signature_sha256(folder / name, 'classifier')}, another build's; allowed: the signature the signed "
            f"build statement names, sha256 {bound.signatures['classifier']}; fix: {THIS_ONE}: the model directory "
            "was swapped for another build's, signed with the same key"),
        "extra model": lambda: (
            f"{name}: got model 'extra' beside this build's; allowed: the models the signed build statement names for "
            f"it ({', '.join(bound.models)}); fix: {THIS_ONE}: a model directory was added to this copy after the "
            "build"),
        "rolled back": lambda: (
            f"{_single(folder).file}: got a tarball the signed build statement does not name; allowed: this build's "
            f"tarballs ({names}); fix: {FILE_FIX}"),
        "rolled back in place": lambda: (
            f"{name}: got another build's tarball under this build's name (no model's signature is the one this build "
            f"signed: {', '.join(bound.models)}); allowed: the tarball the signed build statement names, sha256 "
            f"{bound.sha256}; fix: {THIS_ONE}: this copy was rolled back to, or replaced by, another build's"),
        "model removed": lambda: (
            f"{name}: got no model 'preprocess'; allowed: the models the signed build statement names for it "
            f"({', '.join(bound.models)}); fix: {THIS_ONE}: a model directory was removed from this copy after the "
            "build"),
        "model signature removed": lambda: (
            f"{name}: model 'classifier': got no signature (classifier/model.sig); allowed: the signature the signed "
            f"build statement names, sha256 {bound.signatures['classifier']}; fix: {THIS_ONE}: its signature was "
            "removed"),
        "other bytes": lambda: (
            f"{name}: got sha256 {hashlib.sha256((folder / name).read_bytes()).hexdigest()}, "
            f"{(folder / name).stat().st_size} bytes; allowed: the signed build statement's sha256 {bound.sha256}, "
            f"{bound.size} bytes; fix: {THIS_ONE}: this copy changed after the build"),
        "manifest sha256": lambda: (
            f"{label}: endpoints.single.artifacts[0].sha256: got '{'0' * 64}'; allowed: the signed build statement's "
            f"'{bound.sha256}'; fix: {EDIT_FIX}"),
        "manifest size": lambda: (
            f"{label}: endpoints.single.artifacts[0].size: got 7; allowed: the signed build statement's {bound.size}; "
            f"fix: {EDIT_FIX}"),
        "manifest models": lambda: (
            f"{label}: endpoints.single.artifacts[0].models: got {json.dumps([*bound.models, 'extra'])}; allowed: the "
            f"signed build statement's {json.dumps(list(bound.models))}; fix: {EDIT_FIX}"),
        "statement removed": lambda: (
            f"{statement}: got no build statement; allowed: the statement tritonsm build writes beside manifest.json "
            f"when it signs, signed by the key {team} (signing.public_key); fix: {REBUILD}"),
        "signature removed": lambda: (
            f"{statement}: got a statement without a signature; allowed: a signature by the key {team} "
            f"(signing.public_key); fix: {REBUILD}: the signature was removed, or tritonsm build did not write it"),
        "statement replaced": lambda: (
            f"{statement}: got a signature that does not verify with the key {team} (signing.public_key); allowed: the "
            f"statement exactly as the build signed it; fix: {REBUILD}, and find out who changed this copy: its "
            "statement or its signature was replaced after signing"),
        "signature replaced": lambda: (
            f"{statement}: got a signature by the key {signing.SigningKey(signed.other_key).identity}; allowed: a "
            f"signature by the key {team} (signing.public_key); fix: build with the team's key, or, if the team "
            "changed its key, commit the new public key as signing.public_key"),
        "statement unreadable": lambda: (
            f"{statement}: got no DSSE envelope (JSONDecodeError: Expecting property name enclosed in double quotes: "
            "line 1 column 2 (char 1)); allowed: the DSSE envelope tritonsm build writes (payload, payloadType, "
            f"signatures); fix: {REBUILD}"),
        "statement of another type": lambda: (
            f"{statement}: got a signed payload of type text/plain / urn:triton-sagemaker-cdk:build-statement:v1; "
            "allowed: application/vnd.in-toto+json / urn:triton-sagemaker-cdk:build-statement:v1, the build statement "
            f"this release writes; fix: {REBUILD}"),
    }[what]()


# Each tampering of tampered_builds but the one that differs from the build in the manifest only.
TARBALL_TAMPERINGS = ["swapped model", "extra model", "rolled back", "rolled back in place", "model removed",
                      "model signature removed", "other bytes"]
STATEMENT_TAMPERINGS = ["statement removed", "signature removed", "statement replaced", "signature replaced",
                        "statement unreadable", "statement of another type"]
TAMPERINGS = [*TARBALL_TAMPERINGS, "manifest sha256", "manifest size", "manifest models", *STATEMENT_TAMPERINGS]

"""Signed builds (OpenSSF Model Signing, model_build/signing.py): the tiny spec's cached models packed with a key,
verified by this product and by model-signing's own verifier, deterministic, and each kind of tampering refused with
its own message by the verification `tritonsm serve` and `tritonsm verify --signatures` (the pipeline's step) run."""
from __future__ import annotations

import base64
import dataclasses
import json
import pathlib
import subprocess
import sys
import tarfile

import pytest

from deployment_spec.builds.statement import STATEMENT_FILE
from deployment_spec.facts import images
from deployment_spec.builds.manifest import load_manifest
from deployment_spec.sections.signing import SigningSpec
from model_build import build, signing
from mb_support import TINY_SPEC
from signed_support import (Signed, another_keys_signature, one_byte_changed, rewrite, signature_removed,
                            swapped_config)

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _refusal(signed: Signed, tarball: pathlib.Path, public: pathlib.Path | None = None) -> str:
    with pytest.raises(signing.SignatureError) as caught:
        signing.verify_tarball(tarball, public or signed.public)
    return str(caught.value)


# --- signed builds ------------------------------------------------------------------------------------------------

def test_every_model_directory_is_signed_and_the_manifest_names_the_signer(signed):
    identity = signing.SigningKey(signed.key).identity
    manifest = load_manifest(signed.out / "manifest.json")
    for endpoint in manifest.endpoints.values():
        for artifact in endpoint.artifacts:
            assert artifact.signer == identity
            assert sorted(artifact.signatures) == sorted(artifact.models)
            verified = signing.verify_tarball(signed.out / artifact.file, signed.public)
            assert verified.models == tuple(sorted(artifact.models)) and verified.signer == identity
    with tarfile.open(signed.tarball()) as tar:
        assert {n for n in tar.getnames() if n.endswith(signing.SIGNATURE_FILE)} == {
            "classifier/model.sig", "preprocess/model.sig", "text/model.sig"}


def test_model_signing_s_own_verifier_accepts_an_unpacked_directory(signed, tmp_path):
    # What a security team runs with the upstream package alone: `model_signing verify key ...`.
    from model_signing import verifying
    with tarfile.open(signed.tarball()) as tar:
        tar.extractall(tmp_path, filter="data")
    for model in ("classifier", "preprocess", "text"):
        verifying.Config().use_elliptic_key_verifier(public_key=signed.public).verify(
            tmp_path / model, tmp_path / model / signing.SIGNATURE_FILE)
    # ... and refuses the same directory with one byte changed, so the check above could fail.
    config = tmp_path / "text" / "config.pbtxt"
    config.write_bytes(config.read_bytes() + b" ")
    with pytest.raises(ValueError, match="Signature mismatch"):
        verifying.Config().use_elliptic_key_verifier(public_key=signed.public).verify(
            tmp_path / "text", tmp_path / "text" / signing.SIGNATURE_FILE)


def test_two_signed_builds_give_the_same_bytes(signed, tmp_path):
    # Deterministic ECDSA (RFC 6979): the same key and models, the same tarballs, so the content name holds.
    build.run(signed.spec, tmp_path / "assets", signed.work, log=lambda line: None,
              signing_key=signing.SigningKey(signed.key))
    first, second = (load_manifest(out / "manifest.json") for out in (signed.out, tmp_path / "assets"))
    assert first.endpoints == second.endpoints
    assert signed.tarball().read_bytes() == (tmp_path / "assets" / signed.tarball().name).read_bytes()
    # ... and the same signed build statement (deployment_spec/builds/statement.py).
    assert (signed.out / STATEMENT_FILE).read_bytes() == (tmp_path / "assets" / STATEMENT_FILE).read_bytes()
    for ep in first.endpoints.values():
        for artifact in ep.artifacts:
            assert (signed.out / artifact.sbom).read_bytes() == (tmp_path / "assets" / artifact.sbom).read_bytes()


def test_each_tarball_has_a_bill_of_materials_of_what_it_holds(signed):
    # CycloneDX beside the tarball (model_build/sbom.py): every file as packed, signature included, with its sha256.
    artifact = load_manifest(signed.out / "manifest.json").endpoints["single"].artifacts[0]
    assert artifact.sbom == artifact.file.removesuffix(".tar.gz") + ".cdx.json"
    bom = json.loads((signed.out / artifact.sbom).read_text())
    assert bom["metadata"]["component"]["hashes"] == [{"alg": "SHA-256", "content": artifact.sha256}]
    members = signing.tarball_members(signed.tarball())
    digests, signatures = members.digests, members.signatures
    assert members.sha256 == artifact.sha256  # the whole file's, from the same read
    listed = {}
    for model in (c for c in bom["components"] if c["type"] == "machine-learning-model" and c["name"] in digests):
        listed[model["name"]] = {f["name"]: f["hashes"][0]["content"] for f in model.get("components", [])}
    import hashlib
    assert listed == {name: {**files, signing.SIGNATURE_FILE: hashlib.sha256(signatures[name]).hexdigest()}
                      for name, files in digests.items()}
    # What each model was built from (the tiny spec's recipes), the serving image, the build tools.
    names = {c["name"] for c in bom["components"]}
    assert {"recipe text-preprocess", "recipe tiny-bert"} <= names
    # The image by its full reference: the registry of the tiny spec's one region (us-east-1).
    registry = images.image_uri("25.04", "us-east-1").split("/")[0]
    assert {c.get("purl") for c in bom["components"]} >= {
        f"pkg:docker/sagemaker-tritonserver@25.04-py3?repository_url={registry}"}
    tools = {t["name"]: t["version"] for t in bom["metadata"]["tools"]["components"]}
    assert tools["onnxruntime"] == "1.31.1" and "model_build code (sha256)" in tools


def test_a_spec_with_a_public_key_refuses_a_build_without_the_key(signed, tmp_path):
    with pytest.raises(signing.SignatureError) as caught:
        build.run(signed.spec, tmp_path / "assets", signed.work, log=lambda line: None)
    assert str(caught.value) == (
        f"signing.public_key is set ({signed.public}), so every tarball must be signed, and no signing key was given; "
        "allowed: a build with the team's private key; fix: pass --signing-key KEY or set TRITONSM_SIGNING_KEY (to "
        "try a model without the key, build and serve a copy of the spec without signing.public_key)")
    assert not (tmp_path / "assets").exists()


def test_a_spec_naming_its_private_key_as_public_key_is_refused_by_validate(signed, tmp_path):
    from deployment_spec import load_spec
    from deployment_spec.parsing.errors import SpecError
    spec = tmp_path / "tiny.yaml"
    spec.write_text(TINY_SPEC.read_text().replace('triton_version: "25.04"\n',
                                                  f'triton_version: "25.04"\nsigning: {{public_key: {signed.key}}}\n'))
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    assert (f"signing.public_key: got '{signed.key}'; allowed: a PEM public key (a '-----BEGIN PUBLIC KEY-----' "
            "block, the output of `openssl ec -in KEY.pem -pubout`); fix: name the public key file, never the private "
            "key") in str(caught.value)


def test_a_signed_build_is_repacked_when_unsigned_and_back(signed, tmp_path):
    # A spec without a public key may build either way; the signer decides whether a tarball is reused.
    unsigned = build.run(dataclasses.replace(signed.spec, signing=SigningSpec()), tmp_path / "assets", signed.work,
                         log=lambda line: None)
    assert all(a.signer is None and not a.signatures
               for ep in load_manifest(tmp_path / "assets" / "manifest.json").endpoints.values() for a in ep.artifacts)
    (tmp_path / "assets" / STATEMENT_FILE).write_text("{}")  # as an earlier signed build left one
    build.run(dataclasses.replace(signed.spec, signing=SigningSpec()), tmp_path / "assets", signed.work,
              log=lambda line: None)
    assert not (tmp_path / "assets" / STATEMENT_FILE).exists()  # an unsigned build has none: it bound other tarballs
    resigned = build.run(dataclasses.replace(signed.spec, signing=SigningSpec()), tmp_path / "assets", signed.work,
                         log=lambda line: None, signing_key=signing.SigningKey(signed.key))
    assert unsigned.written and resigned.written  # the signer is part of what makes a tarball reusable
    assert (tmp_path / "assets" / signed.tarball().name).read_bytes() == signed.tarball().read_bytes()


def test_a_key_that_is_not_the_spec_s_is_refused_before_building(signed, tmp_path):
    with pytest.raises(signing.SignatureError) as caught:
        build.run(signed.spec, tmp_path / "assets", signed.work, log=lambda line: None,
                  signing_key=signing.SigningKey(signed.other_key))
    other = signing.SigningKey(signed.other_key).identity
    team = signing.public_key_identity(signed.public)
    assert str(caught.value) == (
        f"the signing key {str(signed.other_key)!r} is the key {other}; allowed: the private key of "
        f"signing.public_key ({signed.public}, {team}); fix: give the team's key, or commit its public key as "
        "signing.public_key")
    assert not (tmp_path / "assets").exists()


# --- tampering, each with its own message -----------------------------------------------------------------------

def test_one_byte_changed_in_a_model_file_is_refused(signed, tmp_path):
    tampered = rewrite(signed.tarball(), tmp_path / signed.tarball().name, one_byte_changed)
    assert _refusal(signed, tampered) == (
        f"{tampered.name}: model 'classifier' differs from what was signed (changed since signing: "
        "classifier/1/model.onnx); allowed: the files exactly as the build signed them; fix: rebuild the tarball "
        "(tritonsm build) and find out who changed this copy")


def test_a_swapped_config_is_refused(signed, tmp_path):
    tampered = rewrite(signed.tarball(), tmp_path / signed.tarball().name, swapped_config(signed))
    assert _refusal(signed, tampered) == (
        f"{tampered.name}: model 'text' differs from what was signed (changed since signing: text/config.pbtxt); "
        "allowed: the files exactly as the build signed them; fix: rebuild the tarball (tritonsm build) and find "
        "out who changed this copy")


def test_a_file_added_or_removed_is_refused(signed, tmp_path):
    tampered = rewrite(signed.tarball(), tmp_path / signed.tarball().name,
                        lambda name, data: None if name == "preprocess/1/model.py" else data)
    assert _refusal(signed, tampered) == (
        f"{tampered.name}: model 'preprocess' differs from what was signed (missing: preprocess/1/model.py); "
        "allowed: the files exactly as the build signed them; fix: rebuild the tarball (tritonsm build) and find "
        "out who changed this copy")


def test_a_signature_from_another_key_is_refused(signed, tmp_path):
    other = signing.SigningKey(signed.other_key)
    change, resigned = another_keys_signature(signed)
    tampered = rewrite(signed.tarball(), tmp_path / signed.tarball().name, change)
    team = signing.public_key_identity(signed.public)
    assert _refusal(signed, tampered) == (
        f"{tampered.name}: model 'text': its signature (text/model.sig) names the key {other.identity}; allowed: "
        f"the key {team} (signing.public_key); fix: build with the team's key, or, if the team changed its key, "
        "commit the new public key as signing.public_key")
    # The key's name in the bundle is only a hint: one rewritten to the team's still fails on the signature.
    forged = json.loads(resigned)
    forged["verificationMaterial"]["publicKey"]["hint"] = team.removeprefix("sha256:")
    forged_tarball = rewrite(signed.tarball(), tmp_path / "forged.tar.gz",
                              lambda name, data: json.dumps(forged).encode() if name == "text/model.sig" else data)
    message = _refusal(signed, forged_tarball)
    assert message.startswith(f"forged.tar.gz: model 'text': its signature (text/model.sig) does not verify with "
                              f"the key {team} (")
    assert message.endswith("the bundle was changed after signing; fix: rebuild the tarball (tritonsm build) and "
                            "use the one it wrote")


def test_a_missing_signature_is_refused(signed, tmp_path):
    tampered = rewrite(signed.tarball(), tmp_path / signed.tarball().name, signature_removed("classifier"))
    team = signing.public_key_identity(signed.public)
    assert _refusal(signed, tampered) == (
        f"{tampered.name}: model 'classifier' has no signature (classifier/model.sig); allowed: model directories "
        f"signed by the key {team} (signing.public_key); fix: rebuild with the team's signing key (tritonsm "
        "build --signing-key KEY, or TRITONSM_SIGNING_KEY): this tarball was built without it, or its signature was "
        "removed")


# --- the commands that verify -----------------------------------------------------------------------------------

def _spec_file(signed: Signed, folder: pathlib.Path) -> pathlib.Path:
    text = TINY_SPEC.read_text().replace('triton_version: "25.04"\n',
                                         f'triton_version: "25.04"\nsigning: {{public_key: {signed.public}}}\n')
    (folder / "tiny.yaml").write_text(text)
    return folder / "tiny.yaml"


def _copied_assets(signed: Signed, copy: pathlib.Path) -> pathlib.Path:
    """The signed build's manifest, statement and tarballs in another folder, to tamper with."""
    copy.mkdir()
    (copy / "manifest.json").write_text((signed.out / "manifest.json").read_text())
    (copy / STATEMENT_FILE).write_bytes((signed.out / STATEMENT_FILE).read_bytes())
    for ep in load_manifest(signed.out / "manifest.json").endpoints.values():
        for artifact in ep.artifacts:
            (copy / artifact.file).write_bytes((signed.out / artifact.file).read_bytes())
    return copy


def _tritonsm(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tritonsm", *args], capture_output=True, text=True, cwd=ROOT,
                          stdin=subprocess.DEVNULL, timeout=300)


def test_verify_signatures_passes_a_signed_stage_and_stops_at_a_tampered_tarball(signed, tmp_path):
    spec = _spec_file(signed, tmp_path)
    good = _tritonsm("verify", "--signatures", "--spec", str(spec), "--environment", "dev",
                     "--manifest", str(signed.out / "manifest.json"), "single")
    assert good.returncode == 0, good.stderr
    assert good.stdout.splitlines()[-1] == "verify --signatures: 1 tarball(s) of environment dev checked"
    # The same tarball with a byte changed, the manifest unchanged: the model's own signature names the file.
    copy = _copied_assets(signed, tmp_path / "assets")
    rewrite(signed.tarball(), copy / signed.tarball().name,
             lambda name, data: data + b"\n" if name == "text/config.pbtxt" else data)
    bad = _tritonsm("verify", "--signatures", "--spec", str(spec), "--environment", "dev",
                    "--manifest", str(copy / "manifest.json"), "single")
    assert bad.returncode != 0
    assert bad.stderr == (
        f"error: {signed.tarball().name}: model 'text' differs from what was signed (changed since signing: "
        "text/config.pbtxt); allowed: the files exactly as the build signed them; fix: rebuild the tarball (tritonsm "
        "build) and find out who changed this copy\n")


def test_serve_refuses_a_tampered_tarball_before_starting_triton(signed, tmp_path):
    spec = _spec_file(signed, tmp_path)
    copy = _copied_assets(signed, tmp_path / "assets")
    rewrite(signed.tarball(), copy / signed.tarball().name,
             lambda name, data: None if name == "text/model.sig" else data)
    served = _tritonsm("serve", "single", "--spec", str(spec), "--manifest", str(copy / "manifest.json"))
    assert served.returncode != 0
    team = signing.public_key_identity(signed.public)
    assert served.stderr.strip().splitlines()[-1] == (
        f"error: {signed.tarball().name}: model 'text' has no signature (text/model.sig); allowed: model directories "
        f"signed by the key {team} (signing.public_key); fix: rebuild with the team's signing key (tritonsm "
        "build --signing-key KEY, or TRITONSM_SIGNING_KEY): this tarball was built without it, or its signature was "
        "removed")
    assert "Triton" not in served.stdout  # refused before any server started


def test_the_key_identity_is_the_hint_model_signing_writes_whatever_the_pem_s_wrapping(signed, tmp_path):
    # Synth computes it with the standard library (deployment_spec.sections.signing); the bundle's hint comes from
    # model-signing's own signer: the two must agree, or every signed build would be refused at synth.
    with tarfile.open(signed.tarball()) as tar:
        hint = json.loads(tar.extractfile("text/model.sig").read())["verificationMaterial"]["publicKey"]["hint"]
    assert signing.public_key_identity(signed.public) == f"sha256:{hint}" == signing.SigningKey(signed.key).identity
    lines = signed.public.read_text().splitlines()
    rewrapped = tmp_path / "crlf.pub"
    rewrapped.write_text("\r\n".join([lines[0], "".join(lines[1:-1]), lines[-1]]) + "\r\n")
    assert signing.public_key_identity(rewrapped) == f"sha256:{hint}"


def test_signing_gives_the_same_bytes_in_another_process(signed):
    # model-signing writes its statement from a protobuf Struct whose key order changes from one process to the next:
    # signed in two fresh interpreters, the bundles must still be the same bytes (each build is a new process).
    code = ("import sys, pathlib; from model_build import signing; sys.stdout.buffer.write(signing.sign_model("
            f"signing.SigningKey(pathlib.Path({str(signed.key)!r})), 'm', {{'1/model.onnx': '{'ab' * 32}', "
            f"'config.pbtxt': '{'cd' * 32}'}}))")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=ROOT, check=True).stdout
            for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]
    # ... and what is signed is what was hashed: the canonical statement lists both files.
    statement = json.loads(base64.b64decode(json.loads(runs[0])["dsseEnvelope"]["payload"]))
    assert [r["name"] for r in statement["predicate"]["resources"]] == ["1/model.onnx", "config.pbtxt"]

"""The signed build statement (deployment_spec/build_statement.py, model_build/statement.py) on the command line: what
`tritonsm build --signing-key` writes beside the manifest, and each tampering it exists to catch refused by
`tritonsm verify --signatures` and by the check `tritonsm serve` runs before any server starts, each with its own
message; the untampered build passes both. One signed tiny build (conftest's ``signed``), one folder per tampering,
made once for the module."""
from __future__ import annotations

import base64
import hashlib
import json
import pathlib

import pytest

from deployment_spec import build_statement
from deployment_spec.build_statement import STATEMENT_FILE
from deployment_spec.manifest import load_manifest
from deployment_spec.parsing.errors import UserError
from deployment_spec.served import resolve_endpoint
from mb_support import TINY_SPEC
from model_build import signing
from signed_support import Signed, tampered_builds
from tritonsm.checks import signatures
from tritonsm.cli import main

THIS_ONE = ("deploy the tarball tritonsm build wrote for this build (rebuild with tritonsm build --signing-key KEY if "
            "it is gone)")
FILE_FIX = ("use one build's manifest.json, tarballs and statement together (tritonsm build --signing-key KEY writes "
            "them): the manifest names a tarball of another build (an older one, or one repacked after the build), or "
            "the statement is another build's")
EDIT_FIX = ("restore the manifest.json tritonsm build wrote, or rebuild (tritonsm build --signing-key KEY): it was "
            "edited after the build")
REBUILD = ("rebuild with the team's key (tritonsm build --signing-key KEY) and keep manifest.json, the tarballs and "
           "build-statement.dsse.json it writes together")


def _artifact(folder: pathlib.Path, endpoint: str = "single"):
    return load_manifest(folder / "manifest.json").endpoints[endpoint].artifacts[0]


def _sig_sha(tarball: pathlib.Path, model: str) -> str:
    return hashlib.sha256(signing.tarball_members(tarball).signatures[model]).hexdigest()


@pytest.fixture(scope="module")
def spec_file(signed: Signed, tmp_path_factory) -> pathlib.Path:
    folder = tmp_path_factory.mktemp("spec")
    text = TINY_SPEC.read_text().replace('triton_version: "25.04"\n',
                                         f'triton_version: "25.04"\nsigning: {{public_key: {signed.public}}}\n')
    (folder / "tiny.yaml").write_text(text)
    return folder / "tiny.yaml"


@pytest.fixture(scope="module")
def builds(signed: Signed, tmp_path_factory) -> dict[str, pathlib.Path]:
    return tampered_builds(signed, tmp_path_factory.mktemp("tampered-builds"))


def _verify(spec_file: pathlib.Path, folder: pathlib.Path, capsys) -> tuple[int, str, str]:
    code = main(["verify", "--signatures", "--spec", str(spec_file), "--environment", "dev",
                 "--manifest", str(folder / "manifest.json"), "single"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _serve_check(spec_file: pathlib.Path, folder: pathlib.Path) -> str:
    """What `tritonsm serve single` runs before it starts a server (tritonsm/commands/serve.py), its refusal."""
    manifest = folder / "manifest.json"
    local = resolve_endpoint(spec_file, "single", "dev", manifest)
    with pytest.raises(UserError) as caught:  # SignatureError, or StatementError for the statement itself
        signatures.check_before_serving(local.every_tarball, local.public_key, local.manifest, manifest)
    return str(caught.value)


def _refused(spec_file: pathlib.Path, folder: pathlib.Path, capsys) -> str:
    """The one message both commands stop with (`verify` prints it as `error: ...`)."""
    code, out, err = _verify(spec_file, folder, capsys)
    assert code == 2 and "verify --signatures:" not in out
    served = _serve_check(spec_file, folder)
    assert err == f"error: {served}\n"
    return served


# --- what the build writes --------------------------------------------------------------------------------------

def test_the_build_writes_one_statement_that_binds_the_manifest(signed):
    manifest = load_manifest(signed.out / "manifest.json")
    envelope = json.loads((signed.out / STATEMENT_FILE).read_text())
    team = signing.SigningKey(signed.key).identity
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    assert [s["keyid"] for s in envelope["signatures"]] == [team]
    statement = json.loads(base64.b64decode(envelope["payload"]))
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicate"] == build_statement.predicate(manifest)
    tarballs = {a.file: a.sha256 for ep in manifest.endpoints.values() for a in ep.artifacts}
    assert {s["name"]: s["digest"]["sha256"] for s in statement["subject"]} == tarballs
    verified = build_statement.read_statement(signed.out / STATEMENT_FILE, signed.public)
    assert verified.signer == team and verified.tarball_names() == sorted(tarballs)


def test_the_envelope_is_dsse_as_securesystemslib_and_model_signing_read_it(signed):
    # Two independent implementations: securesystemslib's DSSE envelope verifies it with the PEM public key, and
    # model-signing's pre-authentication encoding is the one signed here.
    from cryptography.hazmat.primitives import serialization
    from model_signing._signing import sign_sigstore_pb
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import SSlibKey
    raw = (signed.out / STATEMENT_FILE).read_bytes()
    key = SSlibKey.from_crypto(serialization.load_pem_public_key(signed.public.read_bytes()),
                               keyid=json.loads(raw)["signatures"][0]["keyid"], scheme="ecdsa-sha2-nistp256")
    assert key.keyid in Envelope.from_dict(json.loads(raw)).verify([key], 1)
    body = base64.b64decode(json.loads(raw)["payload"])
    assert build_statement.pae(build_statement.PAYLOAD_TYPE, body) == sign_sigstore_pb.pae(body)


def test_verify_signatures_passes_the_untampered_build(signed, spec_file, capsys):
    code, out, err = _verify(spec_file, signed.out, capsys)
    assert code == 0, err
    team = signing.SigningKey(signed.key).identity
    artifact = _artifact(signed.out)
    assert out.splitlines() == [
        f"single: verified: {artifact.file} ({', '.join(sorted(artifact.models))}) signed by {team}, bound by "
        f"{STATEMENT_FILE}", "verify --signatures: 1 tarball(s) of environment dev checked"]


def test_serve_s_check_passes_the_untampered_build(signed, spec_file, capsys):
    manifest = signed.out / "manifest.json"
    local = resolve_endpoint(spec_file, "single", "dev", manifest)
    signatures.check_before_serving(local.every_tarball, local.public_key, local.manifest, manifest)
    assert capsys.readouterr().out.startswith(f"tritonsm: verified: {_artifact(signed.out).file} (")


# --- each tampering, refused by both with its own message --------------------------------------------------------

def test_a_model_directory_swapped_for_another_signed_build_s(signed, spec_file, builds, capsys):
    tarball = builds["swapped model"] / signed.tarball().name
    expected = (
        f"{tarball.name}: model 'classifier': got a signature (classifier/model.sig) with sha256 "
        f"{_sig_sha(tarball, 'classifier')}, another build's; allowed: the signature the signed build statement names, "
        f"sha256 {_artifact(signed.out).signatures['classifier']}; fix: {THIS_ONE}: the model directory was swapped "
        "for another build's, signed with the same key")
    assert _refused(spec_file, builds["swapped model"], capsys) == expected
    # ... also where the manifest's sha256 and size were edited to match the swapped tarball.
    assert _refused(spec_file, builds["swapped model, manifest edited to match"], capsys) == expected


def test_an_extra_signed_model(signed, spec_file, builds, capsys):
    name = signed.tarball().name
    assert _refused(spec_file, builds["extra model"], capsys) == (
        f"{name}: got model 'extra' beside this build's; allowed: the models the signed build statement names for it "
        f"({', '.join(_artifact(signed.out).models)}); fix: {THIS_ONE}: a model directory was added to this copy "
        "after the build")


def test_a_tarball_rolled_back_to_an_older_signed_build(signed, spec_file, builds, capsys):
    folder = builds["rolled back"]
    older = _artifact(folder).file
    names = ", ".join(sorted(a.file for ep in load_manifest(signed.out / "manifest.json").endpoints.values()
                             for a in ep.artifacts))
    assert _refused(spec_file, folder, capsys) == (
        f"{older}: got a tarball the signed build statement does not name; allowed: this build's tarballs ({names}); "
        f"fix: {FILE_FIX}")
    # The older build's bytes under this build's name, the manifest untouched.
    models = ", ".join(_artifact(signed.out).models)
    assert _refused(spec_file, builds["rolled back in place"], capsys) == (
        f"{signed.tarball().name}: got another build's tarball under this build's name (no model's signature is the "
        f"one this build signed: {models}); allowed: the tarball the signed build statement names, sha256 "
        f"{_artifact(signed.out).sha256}; fix: {THIS_ONE}: this copy was rolled back to, or replaced by, another "
        "build's")


@pytest.mark.parametrize("field", ["sha256", "size", "models"])
def test_an_edited_manifest(signed, spec_file, builds, capsys, field):
    folder = builds[f"manifest {field}"]
    real = getattr(_artifact(signed.out), field)
    shown = {"sha256": lambda v: repr(v), "size": str, "models": lambda v: json.dumps(list(v))}[field]
    assert _refused(spec_file, folder, capsys) == (
        f"{folder / 'manifest.json'}: endpoints.single.artifacts[0].{field}: got "
        f"{shown(getattr(_artifact(folder), field))}; allowed: the signed build statement's {shown(real)}; fix: "
        f"{EDIT_FIX}")


def test_the_statement_removed(signed, spec_file, builds, capsys):
    team = signing.SigningKey(signed.key).identity
    folder = builds["statement removed"]
    assert _refused(spec_file, folder, capsys) == (
        f"{folder / STATEMENT_FILE}: got no build statement; allowed: the statement tritonsm build writes beside "
        f"manifest.json when it signs, signed by the key {team} (signing.public_key); fix: {REBUILD}")


def test_its_signature_removed(signed, spec_file, builds, capsys):
    team = signing.SigningKey(signed.key).identity
    folder = builds["signature removed"]
    assert _refused(spec_file, folder, capsys) == (
        f"{folder / STATEMENT_FILE}: got a statement without a signature; allowed: a signature by the key {team} "
        f"(signing.public_key); fix: {REBUILD}: the signature was removed, or tritonsm build did not write it")


def test_the_statement_replaced(signed, spec_file, builds, capsys):
    team = signing.SigningKey(signed.key).identity
    folder = builds["statement replaced"]
    assert _refused(spec_file, folder, capsys) == (
        f"{folder / STATEMENT_FILE}: got a signature that does not verify with the key {team} (signing.public_key); "
        f"allowed: the statement exactly as the build signed it; fix: {REBUILD}, and find out who changed this copy: "
        "its statement or its signature was replaced after signing")


def test_its_signature_replaced_by_another_key_s(signed, spec_file, builds, capsys):
    team, other = (signing.SigningKey(k).identity for k in (signed.key, signed.other_key))
    folder = builds["signature replaced"]
    assert _refused(spec_file, folder, capsys) == (
        f"{folder / STATEMENT_FILE}: got a signature by the key {other}; allowed: a signature by the key {team} "
        "(signing.public_key); fix: build with the team's key, or, if the team changed its key, commit the new "
        "public key as signing.public_key")

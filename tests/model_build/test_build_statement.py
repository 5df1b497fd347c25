"""The signed build statement (deployment_spec/builds/statement.py, model_build/statement.py) on the command line: what
`tritonsm build --signing-key` writes beside the manifest, and each tampering it exists to catch refused by
`tritonsm verify --signatures` and by the check `tritonsm serve` runs before any server starts, each with its own
message; the untampered build passes both. One signed tiny build (conftest's ``signed``), one folder per tampering,
made once for the module."""
from __future__ import annotations

import base64
import json
import pathlib

import pytest

from deployment_spec.builds import statement as build_statement
from deployment_spec.builds.statement import STATEMENT_FILE
from deployment_spec.builds.manifest import load_manifest
from deployment_spec.parsing.errors import UserError
from deployment_spec.served import resolve_endpoint
from mb_support import TINY_SPEC
from model_build import signing
from signed_support import TAMPERINGS, Signed, expected_refusal, tampered_builds
from tritonsm.checks import signatures
from tritonsm.cli import main


def _artifact(folder: pathlib.Path, endpoint: str = "single"):
    return load_manifest(folder / "manifest.json").endpoints[endpoint].artifacts[0]


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

@pytest.mark.parametrize("what", [w for w in TAMPERINGS if w != "model signature removed"])
def test_each_tampering_is_refused_with_its_own_message(signed, spec_file, builds, capsys, what):
    assert _refused(spec_file, builds[what], capsys) == expected_refusal(signed, builds, what)


def test_a_swapped_model_is_named_where_the_manifest_was_edited_to_match(signed, spec_file, builds, capsys):
    # `verify --signatures` accepted it before: the manifest's sha256 and size were all it was held to.
    folder = builds["swapped model, manifest edited to match"]
    assert _refused(spec_file, folder, capsys) == expected_refusal(signed, {**builds, "swapped model": folder},
                                                                   "swapped model")


def test_a_model_s_signature_removed_is_named_by_the_model_s_own_check_first(signed, spec_file, builds, capsys):
    # Before the statement's (what synth and the construct library name: test_build_statement_synth.py).
    team = signing.SigningKey(signed.key).identity
    assert _refused(spec_file, builds["model signature removed"], capsys) == (
        f"{signed.tarball().name}: model 'classifier' has no signature (classifier/model.sig); allowed: model "
        f"directories signed by the key {team} (signing.public_key); fix: rebuild with the team's signing key "
        "(tritonsm build --signing-key KEY, or TRITONSM_SIGNING_KEY): this tarball was built without it, or its "
        "signature was removed")

"""The signed build statement at synth and in the construct library: stacks/model_signatures.py (what every endpoint
stack of the app runs first), ``ModelArchive.from_file(public_key=...)`` and
``ModelRepositories.from_manifest(public_key=...)`` verify the statement with the public key, read each tarball
themselves (the manifest is not trusted) and refuse each tampering with its own message; the untampered build
passes, and its copies are handed the statement's digest. One signed tiny build (conftest's ``signed``), its
tampered folders made once for the module (signed_support.tampered_builds)."""
from __future__ import annotations

import pathlib

import aws_cdk as cdk
import pytest

import app as app_module  # sets JSII_NODE to the venv's Node before aws_cdk's stacks load
from deployment_spec.builds.statement import STATEMENT_FILE
from deployment_spec.builds.manifest import load_manifest
from deployment_spec.parsing.errors import PropsError
from model_build import signing
from signed_support import (STATEMENT_TAMPERINGS, TAMPERINGS, TARBALL_TAMPERINGS, Signed, expected_refusal,
                            tampered_builds)
from stacks import model_signatures
from triton_constructs import ModelArchive, ModelRepositories
from triton_constructs.errors import SynthError

@pytest.fixture(scope="module")
def builds(signed: Signed, tmp_path_factory) -> dict[str, pathlib.Path]:
    return tampered_builds(signed, tmp_path_factory.mktemp("tampered-builds"))


def _artifact(folder: pathlib.Path):
    return load_manifest(folder / "manifest.json").endpoints["single"].artifacts[0]


def _team(signed: Signed) -> str:
    return signing.SigningKey(signed.key).identity


def _synth_refusal(signed: Signed, folder: pathlib.Path) -> str:
    path = folder / "manifest.json"
    with pytest.raises(SynthError) as caught:
        model_signatures.check(cdk.Stack(cdk.App(), "Dev"), signed.spec, signed.spec.environments["dev"], "single",
                               load_manifest(path), path)
    assert caught.value.subject == "endpoints.single (environment dev)"
    return "\n".join(caught.value.problems)


# --- synth (stacks/model_signatures.py) ---------------------------------------------------------------------------

def test_synth_passes_the_untampered_build(signed):
    path = signed.out / "manifest.json"
    model_signatures.check(cdk.Stack(cdk.App(), "Dev"), signed.spec, signed.spec.environments["dev"], "single",
                           load_manifest(path), path)


@pytest.mark.parametrize("what", TAMPERINGS)
def test_synth_refuses_each_tampering_with_its_own_message(signed, builds, what):
    assert _synth_refusal(signed, builds[what]) == expected_refusal(signed, builds, what)


def test_synth_names_the_swapped_model_where_the_manifest_was_edited_to_match(signed, builds):
    # The tarball renamed to its new digest and the manifest edited synthesized before: it is read here, not trusted.
    assert _synth_refusal(signed, builds["swapped model, manifest edited to match"]) == expected_refusal(
        signed, {**builds, "swapped model": builds["swapped model, manifest edited to match"]}, "swapped model")


def test_each_field_of_the_manifest_the_statement_binds_is_held_to_it(signed, tmp_path):
    from signed_support import copied_build, edited_manifest

    def edit(raw: dict) -> None:
        raw["models"]["classifier"]["build_hash"] = "0" * 64
        raw["models"]["classifier"]["sources"]["settings"] = "1" * 64
        raw["endpoints"]["extra"] = raw["endpoints"].pop("multi")
    path = edited_manifest(copied_build(signed, tmp_path / "assets"), edit)
    bound = load_manifest(signed.out / "manifest.json").models["classifier"]
    fix = ("restore the manifest.json tritonsm build wrote, or rebuild (tritonsm build --signing-key KEY): it was "
           "edited after the build")
    assert _synth_refusal(signed, tmp_path / "assets").splitlines() == [
        f"{path}: endpoints.extra: got an entry; allowed: nothing: the signed build statement has no endpoints.extra; "
        f"fix: {fix}",
        f"{path}: endpoints.multi: got nothing; allowed: the signed build statement's entry; fix: {fix}",
        f"{path}: models.classifier.build_hash: got '{'0' * 64}'; allowed: the signed build statement's "
        f"'{bound.build_hash}'; fix: {fix}",
        f"{path}: models.classifier.sources.settings: got '{'1' * 64}'; allowed: the signed build statement's "
        f"'{bound.sources['settings']}'; fix: {fix}"]


def test_the_app_s_endpoint_stack_runs_it_before_anything_else(signed, builds, tmp_path):
    # Through app.py's stage, as `cdk synth` builds it: the stack is refused while it is made.
    path = builds["statement removed"] / "manifest.json"
    app = cdk.App(context=app_module.cdk_json_context(), outdir=str(tmp_path / "cdk.out"))
    with pytest.raises(SynthError) as caught:
        app_module.build_app(signed.spec, load_manifest(path), path, app=app, endpoints=["single"])
    assert caught.value.problems == [expected_refusal(signed, builds, "statement removed")]


# --- the construct library -----------------------------------------------------------------------------------------

def test_model_archive_takes_the_signed_archive_and_marks_its_digest_as_the_statement_s(signed):
    archive = ModelArchive.from_file(signed.tarball(), public_key=signed.public)
    assert archive.signed_by == _team(signed) and archive.sha256 == _artifact(signed.out).sha256
    assert ModelArchive.from_file(signed.tarball()).signed_by is None  # without a key: not checked


@pytest.mark.parametrize("what", [*TARBALL_TAMPERINGS, *STATEMENT_TAMPERINGS])
def test_model_archive_refuses_each_tampered_archive(signed, builds, what):
    tarball = builds[what] / _artifact(builds[what]).file
    with pytest.raises(PropsError) as caught:
        ModelArchive.from_file(tarball, public_key=signed.public)
    assert str(caught.value) == f"ModelArchive: 1 problem\n  - {expected_refusal(signed, builds, what)}"


def test_a_public_key_it_cannot_verify_with_is_refused(signed, tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    missing = tmp_path / "none.pub"
    with pytest.raises(PropsError) as caught:
        ModelArchive.from_file(signed.tarball(), public_key=missing)
    assert str(caught.value) == (
        f"ModelArchive: 1 problem\n  - public_key: got '{missing}', which is not a readable PEM public key file; "
        "allowed: the team's public key (signing.public_key), e.g. keys/model-signing.pub; fix: name the public key "
        "file (never the private key)")
    rsa_key = tmp_path / "rsa.pub"
    rsa_key.write_bytes(rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    with pytest.raises(PropsError) as caught:
        ModelArchive.from_file(signed.tarball(), public_key=rsa_key)
    assert str(caught.value) == (
        f"ModelArchive: 1 problem\n  - signing.public_key: got '{rsa_key}' (not an elliptic-curve key "
        "(id-ecPublicKey)); allowed: an elliptic-curve public key on P-256, P-384 or P-521; fix: make the key pair "
        "with `openssl ecparam -name prime256v1 -genkey -noout`")


def test_model_archive_takes_the_statement_from_elsewhere(signed, builds):
    # An archive copied out of its build folder, its statement named.
    tarball = builds["statement removed"] / signed.tarball().name
    archive = ModelArchive.from_file(tarball, public_key=signed.public, statement=signed.out / STATEMENT_FILE)
    assert archive.signed_by == _team(signed)


def test_model_repositories_from_manifest_takes_the_signed_build(signed):
    top = _artifact(signed.out).models[0]
    models = ModelRepositories.from_manifest(signed.out / "manifest.json", [top], public_key=signed.public)
    assert [a.signed_by for a in models.archives] == [_team(signed)]
    unchecked = ModelRepositories.from_manifest(signed.out / "manifest.json", [top])
    assert [a.signed_by for a in unchecked.archives] == [None]


@pytest.mark.parametrize("what", TAMPERINGS)
def test_model_repositories_from_manifest_refuses_each_tampering(signed, builds, what):
    path = builds[what] / "manifest.json"
    top = _artifact(builds[what]).models[0]
    with pytest.raises(SynthError) as caught:
        ModelRepositories.from_manifest(path, [top], public_key=signed.public)
    assert str(caught.value) == f"model archives from {path}:\n  - {expected_refusal(signed, builds, what)}"


def test_the_copy_is_handed_the_statement_s_digest(signed):
    # What the copy function compares the copied object with (triton_constructs/handlers/copy_artifact.py).
    from aws_cdk import aws_kms as kms, aws_s3 as s3
    from aws_cdk.assertions import Template
    from triton_constructs.endpoint_storage import model_data
    stack = cdk.Stack(cdk.App(), "Copies")
    key = kms.Key(stack, "Key")
    bucket = s3.Bucket(stack, "Bucket", encryption_key=key)
    top = _artifact(signed.out).models[0]
    models = ModelRepositories.from_manifest(signed.out / "manifest.json", [top], public_key=signed.public)
    model_data(stack, models, bucket, key, "single")
    copies = Template.from_stack(stack).find_resources("Custom::TritonModelArtifact")
    [copy] = copies.values()
    assert copy["Properties"]["Sha256"] == _artifact(signed.out).sha256
    assert copy["Properties"]["DigestFrom"] == "the signed build statement"

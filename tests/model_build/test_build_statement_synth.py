"""The signed build statement at synth and in the construct library: stacks/model_signatures.py (what every endpoint
stack of the app runs first), ``ModelArchive.from_file(public_key=...)`` and
``ModelRepositories.from_manifest(public_key=...)`` verify the statement with the public key, read each tarball
themselves (the manifest is not trusted) and refuse each tampering with its own message; the untampered build
passes, and its copies are handed the statement's digest. One signed tiny build (conftest's ``signed``), its
tampered folders made once for the module (signed_support.tampered_builds)."""
from __future__ import annotations

import hashlib
import json
import pathlib

import aws_cdk as cdk
import pytest

import app as app_module  # sets JSII_NODE to the venv's Node before aws_cdk's stacks load
from deployment_spec.build_statement import STATEMENT_FILE
from deployment_spec.manifest import load_manifest
from deployment_spec.parsing.errors import PropsError
from model_build import signing
from signed_support import Signed, tampered_builds
from stacks import model_signatures
from triton_constructs import ModelArchive, ModelRepositories
from triton_constructs.errors import SynthError

THIS_ONE = ("deploy the tarball tritonsm build wrote for this build (rebuild with tritonsm build --signing-key KEY if "
            "it is gone)")
FILE_FIX = ("use one build's manifest.json, tarballs and statement together (tritonsm build --signing-key KEY writes "
            "them): the manifest names a tarball of another build (an older one, or one repacked after the build), or "
            "the statement is another build's")
EDIT_FIX = ("restore the manifest.json tritonsm build wrote, or rebuild (tritonsm build --signing-key KEY): it was "
            "edited after the build")
REBUILD = ("rebuild with the team's key (tritonsm build --signing-key KEY) and keep manifest.json, the tarballs and "
           "build-statement.dsse.json it writes together")


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


def _signature_sha(tarball: pathlib.Path, model: str) -> str:
    return hashlib.sha256(signing.tarball_members(tarball).signatures[model]).hexdigest()


def _expected(signed: Signed, builds: dict[str, pathlib.Path], what: str, manifest_label: str = "") -> str:
    """The message each tampering is refused with, as `tritonsm verify --signatures` gives it too."""
    folder, name, bound = builds[what], signed.tarball().name, _artifact(signed.out)
    team, statement = _team(signed), builds[what] / STATEMENT_FILE
    label = manifest_label or str(folder / "manifest.json")
    names = ", ".join(sorted(a.file for ep in load_manifest(signed.out / "manifest.json").endpoints.values()
                             for a in ep.artifacts))
    return {
        "swapped model": (
            f"{name}: model 'classifier': got a signature (classifier/model.sig) with sha256 "
            f"{_signature_sha(folder / name, 'classifier')}, another build's; allowed: the signature the signed build "
            f"statement names, sha256 {bound.signatures['classifier']}; fix: {THIS_ONE}: the model directory was "
            "swapped for another build's, signed with the same key"),
        "extra model": (
            f"{name}: got model 'extra' beside this build's; allowed: the models the signed build statement names for "
            f"it ({', '.join(bound.models)}); fix: {THIS_ONE}: a model directory was added to this copy after the "
            "build"),
        "rolled back": (
            f"{_artifact(folder).file}: got a tarball the signed build statement does not name; allowed: this build's "
            f"tarballs ({names}); fix: {FILE_FIX}"),
        "rolled back in place": (
            f"{name}: got another build's tarball under this build's name (no model's signature is the one this build "
            f"signed: {', '.join(bound.models)}); allowed: the tarball the signed build statement names, sha256 "
            f"{bound.sha256}; fix: {THIS_ONE}: this copy was rolled back to, or replaced by, another build's"),
        "manifest sha256": (
            f"{label}: endpoints.single.artifacts[0].sha256: got '{'0' * 64}'; allowed: the signed build statement's "
            f"'{bound.sha256}'; fix: {EDIT_FIX}"),
        "manifest size": (
            f"{label}: endpoints.single.artifacts[0].size: got 7; allowed: the signed build statement's {bound.size}; "
            f"fix: {EDIT_FIX}"),
        "manifest models": (
            f"{label}: endpoints.single.artifacts[0].models: got {json.dumps([*bound.models, 'extra'])}; allowed: the "
            f"signed build statement's {json.dumps(list(bound.models))}; fix: {EDIT_FIX}"),
        "statement removed": (
            f"{statement}: got no build statement; allowed: the statement tritonsm build writes beside manifest.json "
            f"when it signs, signed by the key {team} (signing.public_key); fix: {REBUILD}"),
        "signature removed": (
            f"{statement}: got a statement without a signature; allowed: a signature by the key {team} "
            f"(signing.public_key); fix: {REBUILD}: the signature was removed, or tritonsm build did not write it"),
        "statement replaced": (
            f"{statement}: got a signature that does not verify with the key {team} (signing.public_key); allowed: the "
            f"statement exactly as the build signed it; fix: {REBUILD}, and find out who changed this copy: its "
            "statement or its signature was replaced after signing"),
        "signature replaced": (
            f"{statement}: got a signature by the key {signing.SigningKey(signed.other_key).identity}; allowed: a "
            f"signature by the key {team} (signing.public_key); fix: build with the team's key, or, if the team "
            "changed its key, commit the new public key as signing.public_key"),
    }[what]


TAMPERINGS = ["swapped model", "extra model", "rolled back", "rolled back in place", "manifest sha256",
              "manifest size", "manifest models", "statement removed", "signature removed", "statement replaced",
              "signature replaced"]


# --- synth (stacks/model_signatures.py) ---------------------------------------------------------------------------

def test_synth_passes_the_untampered_build(signed):
    path = signed.out / "manifest.json"
    model_signatures.check(cdk.Stack(cdk.App(), "Dev"), signed.spec, signed.spec.environments["dev"], "single",
                           load_manifest(path), path)


@pytest.mark.parametrize("what", TAMPERINGS)
def test_synth_refuses_each_tampering_with_its_own_message(signed, builds, what):
    assert _synth_refusal(signed, builds[what]) == _expected(signed, builds, what)


def test_synth_names_the_swapped_model_where_the_manifest_was_edited_to_match(signed, builds):
    # The tarball renamed to its new digest and the manifest edited synthesized before: it is read here, not trusted.
    assert _synth_refusal(signed, builds["swapped model, manifest edited to match"]) == _expected(
        signed, {**builds, "swapped model": builds["swapped model, manifest edited to match"]}, "swapped model")


def test_the_app_s_endpoint_stack_runs_it_before_anything_else(signed, builds, tmp_path):
    # Through app.py's stage, as `cdk synth` builds it: the stack is refused while it is made.
    path = builds["statement removed"] / "manifest.json"
    app = cdk.App(context=app_module.cdk_json_context(), outdir=str(tmp_path / "cdk.out"))
    with pytest.raises(SynthError) as caught:
        app_module.build_app(signed.spec, load_manifest(path), path, app=app, endpoints=["single"])
    assert caught.value.problems == [_expected(signed, builds, "statement removed")]


# --- the construct library -----------------------------------------------------------------------------------------

def test_model_archive_takes_the_signed_archive_and_marks_its_digest_as_the_statement_s(signed):
    archive = ModelArchive.from_file(signed.tarball(), public_key=signed.public)
    assert archive.signed_by == _team(signed) and archive.sha256 == _artifact(signed.out).sha256
    assert ModelArchive.from_file(signed.tarball()).signed_by is None  # without a key: not checked


@pytest.mark.parametrize("what", ["swapped model", "extra model", "rolled back", "rolled back in place",
                                  "statement removed", "signature removed", "statement replaced",
                                  "signature replaced"])
def test_model_archive_refuses_each_tampered_archive(signed, builds, what):
    tarball = builds[what] / _artifact(builds[what]).file
    with pytest.raises(PropsError) as caught:
        ModelArchive.from_file(tarball, public_key=signed.public)
    assert str(caught.value) == f"ModelArchive: 1 problem\n  - {_expected(signed, builds, what)}"


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
    assert str(caught.value) == f"model archives from {path}:\n  - {_expected(signed, builds, what)}"


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

"""The copy function (triton_constructs/handlers/copy_artifact.py) against each tampering issue #48 names, on a real
signed build: the tampered tarball in the model bucket where the build's should be, or in the asset bucket in place
of the CDK file asset. It knows nothing of signatures; the manifest's size and sha256 refuse them all, and for a
signed build the digest synth hands it from the signed build statement (``DigestFrom``) refuses another build's
tarball signed with the same key. The handler
runs against moto's S3 in this process (tests/infra/test_cdk_copy_handler.py covers the copy itself)."""
from __future__ import annotations

import hashlib
import importlib.util
import pathlib
import sys

import boto3
import pytest
from moto import mock_aws

from deployment_spec.builds.manifest import load_manifest
from deployment_spec.builds.statement import STATEMENT_FILE, read_statement
from signed_support import added_model, another_build, rewrite, tampered_tarballs

HANDLERS = pathlib.Path(__file__).resolve().parents[2] / "triton_constructs" / "handlers"
sys.path.insert(0, str(HANDLERS))  # as in the Lambda asset
_spec = importlib.util.spec_from_file_location("copy_artifact", HANDLERS / "copy_artifact.py")
copy_artifact = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(copy_artifact)

KEY = "models/single/single-0123456789ab.tar.gz"
URL = f"s3://models/{KEY}"
REPLACED = ("a content-versioned model object was replaced after it was copied; find out who wrote it (the bucket's "
            "server access logs / CloudTrail data events), delete that version, and deploy again")
ASSET_CHANGED = ("the CDK file asset differs from the build manifest (changed in the asset bucket, or the tarball "
                 "changed after tritonsm build hashed it)")


@pytest.fixture(scope="module")
def tampered(signed, tmp_path_factory):
    return tampered_tarballs(signed, tmp_path_factory.mktemp("tampered"))


def _copy(signed, asset: bytes, present: bytes | None, bound: bool = False) -> tuple[str, str]:
    """The handler's answer; ``bound``: handed the digest the signed build statement binds, as synth does for a
    signed build (triton_constructs.build_signing), instead of the manifest's."""
    artifact = load_manifest(signed.out / "manifest.json").endpoints["single"].artifacts[0]
    props = {"SourceBucket": "cdk-assets", "SourceKey": "asset.tar.gz", "DestinationBucket": "models",
             "DestinationKey": KEY, "Size": str(artifact.size), "Sha256": artifact.sha256,
             "KmsKeyArn": "arn:aws:kms:us-east-1:111122223333:key/k"}
    if bound:
        tarball = read_statement(signed.out / STATEMENT_FILE, signed.public).tarball(artifact.file)
        props.update(Size=str(tarball.size), Sha256=tarball.sha256, DigestFrom="the signed build statement")
    sent: list[tuple[str, str]] = []
    event = {"RequestType": "Update", "ResourceProperties": props, "StackId": "s", "RequestId": "r",
             "LogicalResourceId": "l", "ResponseURL": "https://example.invalid/response"}
    with mock_aws(), pytest.MonkeyPatch.context() as patch:
        patch.setattr(copy_artifact, "respond", lambda event, status, reason, pid: sent.append((status, reason)))
        s3 = boto3.client("s3", region_name="us-east-1")
        for bucket in ("cdk-assets", "models"):
            s3.create_bucket(Bucket=bucket)
        s3.put_object(Bucket="cdk-assets", Key="asset.tar.gz", Body=asset)
        if present is not None:
            s3.put_object(Bucket="models", Key=KEY, Body=present)
        copy_artifact.handler(event, None, s3=s3)
    return sent[0]


def _held(artifact, data: bytes) -> str:
    if len(data) != artifact.size:
        return f"{len(data)} bytes, the build manifest says {artifact.size} bytes"
    return f"sha256 {hashlib.sha256(data).hexdigest()}, the build manifest says {artifact.sha256}"


def test_the_signed_build_itself_is_copied(signed):
    assert _copy(signed, signed.tarball().read_bytes(), None) == ("SUCCESS", "copied (sha256 verified)")


@pytest.mark.parametrize("what", ["one byte changed in a model file", "a swapped config.pbtxt",
                                  "a signature from another key", "a missing signature"])
def test_a_tampered_tarball_in_the_model_bucket_is_refused(signed, tampered, what):
    data = tampered[what].read_bytes()
    artifact = load_manifest(signed.out / "manifest.json").endpoints["single"].artifacts[0]
    assert _copy(signed, signed.tarball().read_bytes(), data) == (
        "FAILED", f"RuntimeError: {URL} holds other bytes than the build ({_held(artifact, data)}): {REPLACED}")


@pytest.mark.parametrize("what", ["one byte changed in a model file", "a missing signature"])
def test_a_tampered_asset_is_refused(signed, tampered, what):
    data = tampered[what].read_bytes()
    artifact = load_manifest(signed.out / "manifest.json").endpoints["single"].artifacts[0]
    status, reason = _copy(signed, data, None)
    if len(data) != artifact.size:  # refused before anything is written
        assert (status, reason) == ("FAILED", (
            f"RuntimeError: s3://cdk-assets/asset.tar.gz (the CDK file asset to copy to {URL}) is {len(data)} bytes, "
            f"the build manifest says {artifact.size} bytes: {ASSET_CHANGED}; nothing was copied"))
    else:
        assert (status, reason) == ("FAILED", (
            f"RuntimeError: {URL}, just copied from s3://cdk-assets/asset.tar.gz, holds other bytes than the build "
            f"({_held(artifact, data)}): {ASSET_CHANGED}; nothing was deleted; find out who wrote "
            "s3://cdk-assets/asset.tar.gz (CloudTrail data events of the asset bucket), delete both objects (cdk "
            "deploy uploads an asset again only when it is missing), and deploy again"))


# --- a signed build: the digest the signed build statement binds -----------------------------------------------------

@pytest.fixture(scope="module")
def other_builds(signed, tmp_path_factory):
    """The two tamperings only the statement tells apart from the build: a model directory of another build, signed
    with the same key, and an extra signed model."""
    folder = tmp_path_factory.mktemp("other-builds")
    swapped = another_build(signed, ("classifier",))
    return {"swapped model": rewrite(signed.tarball(), folder / "swapped.tar.gz", swapped),
            "extra model": rewrite(signed.tarball(), folder / "extra.tar.gz", lambda n, d: d, added_model(signed))}


def test_the_signed_build_is_copied_against_its_statement(signed):
    assert _copy(signed, signed.tarball().read_bytes(), None, bound=True) == ("SUCCESS", "copied (sha256 verified)")


@pytest.mark.parametrize("what", ["swapped model", "extra model"])
def test_another_signed_build_in_the_model_bucket_is_refused_naming_the_statement(signed, other_builds, what):
    data = other_builds[what].read_bytes()
    artifact = load_manifest(signed.out / "manifest.json").endpoints["single"].artifacts[0]
    held = _held(artifact, data).replace("the build manifest says", "the signed build statement says")
    assert _copy(signed, signed.tarball().read_bytes(), data, bound=True) == (
        "FAILED", f"RuntimeError: {URL} holds other bytes than the build ({held}): {REPLACED}")


def test_another_signed_build_as_the_asset_is_refused_naming_the_statement(signed, other_builds):
    data = other_builds["swapped model"].read_bytes()
    artifact = load_manifest(signed.out / "manifest.json").endpoints["single"].artifacts[0]
    changed = ASSET_CHANGED.replace("the build manifest", "the signed build statement")
    status, reason = _copy(signed, data, None, bound=True)
    if len(data) != artifact.size:
        assert (status, reason) == ("FAILED", (
            f"RuntimeError: s3://cdk-assets/asset.tar.gz (the CDK file asset to copy to {URL}) is {len(data)} bytes, "
            f"the signed build statement says {artifact.size} bytes: {changed}; nothing was copied"))
    else:
        held = _held(artifact, data).replace("the build manifest says", "the signed build statement says")
        assert (status, reason) == ("FAILED", (
            f"RuntimeError: {URL}, just copied from s3://cdk-assets/asset.tar.gz, holds other bytes than the build "
            f"({held}): {changed}; nothing was deleted; find out who wrote s3://cdk-assets/asset.tar.gz (CloudTrail "
            "data events of the asset bucket), delete both objects (cdk deploy uploads an asset again only when it is "
            "missing), and deploy again"))

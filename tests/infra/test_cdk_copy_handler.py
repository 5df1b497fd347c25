"""The artifact-copy custom resource handler (triton_constructs/handlers), run against moto's S3 in this process.

moto 5.2.5 implements S3's multipart copies (UploadPartCopy), If-None-Match on CompleteMultipartUpload and stored
SHA-256 checksums, and the handler talks to it through a real boto3 client, so every request is checked against
botocore's S3 service model. No AWS. moto does not judge bucket policies: tests/infra/test_model_store_policy.py
evaluates the model bucket's. Races (an object written during the copy, a 409) are planted through botocore's own
event hooks, at the request the real service would answer that way.
"""
import hashlib
import importlib.util
import json
import sys
import types

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from moto import mock_aws

from synth_helpers import ROOT

HANDLERS = ROOT / "triton_constructs" / "handlers"
sys.path.insert(0, str(HANDLERS))  # as in the Lambda asset: the handlers import each other from its root
_spec = importlib.util.spec_from_file_location("copy_artifact", HANDLERS / "copy_artifact.py")
handler_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(handler_module)
import conditional_copy  # noqa: E402  (the module the handler imported, from the same folder)

MIB = 1024 * 1024
DATA = bytes(range(256)) * (11 * MIB // 256) + b"tail"  # 3 parts of 5 MiB (the minimum) and a short last one
KEY = "models/vision-nlp/bert-0123456789ab.tar.gz"
KMS = "arn:aws:kms:us-east-1:111122223333:key/k"
URL = f"s3://models/{KEY}"


def _props(data: bytes = DATA, **changes: str) -> dict[str, str]:
    return {"SourceBucket": "cdk-assets", "SourceKey": "abc.gz", "DestinationBucket": "models", "DestinationKey": KEY,
            "Size": str(len(data)), "Sha256": hashlib.sha256(data).hexdigest(), "KmsKeyArn": KMS, **changes}


def _event(kind: str = "Create", **props: str) -> dict:
    return {"RequestType": kind, "ResourceProperties": {**_props(), **props}, "StackId": "s", "RequestId": "r",
            "LogicalResourceId": "l", "ResponseURL": "https://example.invalid/response"}


class Calls(list):
    """The S3 operations the handler called, in order, with their parameters (botocore's provide-client-params)."""

    def __call__(self, params, model, **_):
        self.append((model.name, dict(params)))

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self]


@pytest.fixture
def s3(monkeypatch):
    monkeypatch.setattr(conditional_copy, "PART", 5 * MIB)
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        for bucket in ("cdk-assets", "models"):
            client.create_bucket(Bucket=bucket)
        client.put_object(Bucket="cdk-assets", Key="abc.gz", Body=DATA)
        client.calls = Calls()
        client.meta.events.register("provide-client-params.s3", client.calls)
        yield client


@pytest.fixture
def responses(monkeypatch):
    sent = []
    monkeypatch.setattr(handler_module, "respond", lambda event, status, reason, pid: sent.append((status, reason, pid)))
    return sent


def _no_uploads_left(s3) -> bool:
    return not s3.list_multipart_uploads(Bucket="models").get("Uploads")


def _answer(s3, operation: str, status: int, code: str, times: int = 1000, before=None) -> None:
    """Makes S3 answer ``operation`` with ``status``/``code`` (the next ``times`` calls), after running ``before``."""
    left = [times]

    def short_circuit(model, params, **_):
        if model.name == operation and left[0] > 0:
            left[0] -= 1
            if before:
                before()
            return AWSResponse("https://s3.invalid", status, {}, None), {
                "Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}}
        return None
    s3.meta.events.register("before-call.s3", short_circuit)


# --- copying -------------------------------------------------------------------------------------------------------

def test_copies_a_missing_object_server_side_completing_only_where_the_key_is_free(s3, responses):
    handler_module.handler(_event(), None, s3=s3)
    calls = list(s3.calls)
    assert responses == [("SUCCESS", "copied (sha256 verified)", URL)]
    copied = s3.get_object(Bucket="models", Key=KEY)
    assert copied["Body"].read() == DATA and copied["Metadata"] == {"sha256": hashlib.sha256(DATA).hexdigest()}
    assert copied["ServerSideEncryption"] == "aws:kms" and copied["SSEKMSKeyId"] == KMS
    # Server-side parts, completed with If-None-Match; never a CopyObject or a PutObject, which the policy would deny.
    writes = [(name, params) for name, params in calls if name not in ("HeadObject", "GetObject")]
    assert [name for name, _ in writes] == ["CreateMultipartUpload"] + ["UploadPartCopy"] * 3 + [
        "CompleteMultipartUpload"]
    assert {p["CopySourceRange"] for n, p in writes if n == "UploadPartCopy"} == {
        f"bytes=0-{5 * MIB - 1}", f"bytes={5 * MIB}-{10 * MIB - 1}", f"bytes={10 * MIB}-{len(DATA) - 1}"}
    assert writes[-1][1]["IfNoneMatch"] == "*" and _no_uploads_left(s3)
    # A multipart object has no whole-object SHA-256 in S3: the copy was read back and hashed.
    assert calls[-1][0] == "GetObject"


def test_an_object_already_in_place_is_accepted_from_its_stored_checksum_without_reading(s3, responses):
    s3.put_object(Bucket="models", Key=KEY, Body=DATA, ChecksumAlgorithm="SHA256")
    s3.calls.clear()
    handler_module.handler(_event("Update"), None, s3=s3)
    assert responses == [("SUCCESS", "already present (sha256 verified)", URL)]
    assert s3.calls.names == ["HeadObject"]


def test_a_present_object_with_one_byte_changed_is_refused_by_reading_it(s3, responses):
    changed = bytes([DATA[0] ^ 1]) + DATA[1:]
    s3.put_object(Bucket="models", Key=KEY, Body=changed)
    handler_module.handler(_event(), None, s3=s3)
    assert responses[0][:2] == ("FAILED", (
        f"RuntimeError: {URL} holds other bytes than the build (sha256 {hashlib.sha256(changed).hexdigest()}, the "
        f"build manifest says {hashlib.sha256(DATA).hexdigest()}): a content-versioned model object was replaced "
        "after it was copied; find out who wrote it (the bucket's server access logs / CloudTrail data events), "
        "delete that version, and deploy again"))
    assert "CreateMultipartUpload" not in s3.calls.names


def test_a_present_object_of_another_size_is_refused_without_reading_it(s3, responses):
    s3.put_object(Bucket="models", Key=KEY, Body=b"x" * 99)
    handler_module.handler(_event(), None, s3=s3)
    assert responses[0][:2] == ("FAILED", (
        f"RuntimeError: {URL} holds other bytes than the build (99 bytes, the build manifest says {len(DATA)} bytes): "
        "a content-versioned model object was replaced after it was copied; find out who wrote it (the bucket's "
        "server access logs / CloudTrail data events), delete that version, and deploy again"))
    assert s3.calls.names == ["PutObject", "HeadObject"]


def test_a_changed_asset_of_the_right_size_is_copied_then_refused_naming_both_objects(s3, responses):
    s3.put_object(Bucket="cdk-assets", Key="abc.gz", Body=DATA[:-1] + b"!")
    handler_module.handler(_event(), None, s3=s3)
    found = hashlib.sha256(DATA[:-1] + b"!").hexdigest()
    assert responses[0][:2] == ("FAILED", (
        f"RuntimeError: {URL}, just copied from s3://cdk-assets/abc.gz, holds other bytes than the build (sha256 "
        f"{found}, the build manifest says {hashlib.sha256(DATA).hexdigest()}): the CDK file asset differs from the "
        "build manifest (changed in the asset bucket, or the tarball changed after tritonsm build hashed it); "
        "nothing was deleted; find out who wrote s3://cdk-assets/abc.gz (CloudTrail data events of the asset "
        "bucket), delete both objects (cdk deploy uploads an asset again only when it is missing), and deploy again"))


def test_an_asset_of_another_size_is_refused_before_anything_is_written(s3, responses):
    s3.put_object(Bucket="cdk-assets", Key="abc.gz", Body=b"short")
    handler_module.handler(_event(), None, s3=s3)
    assert responses[0][:2] == ("FAILED", (
        f"RuntimeError: s3://cdk-assets/abc.gz (the CDK file asset to copy to {URL}) is 5 bytes, the build manifest "
        f"says {len(DATA)} bytes: the CDK file asset differs from the build manifest (changed in the asset bucket, "
        "or the tarball changed after tritonsm build hashed it); nothing was copied"))
    assert "CreateMultipartUpload" not in s3.calls.names and "Contents" not in s3.list_objects_v2(Bucket="models")


def test_a_missing_asset_is_named(s3, responses):
    s3.delete_object(Bucket="cdk-assets", Key="abc.gz")
    handler_module.handler(_event(), None, s3=s3)
    assert responses[0][:2] == ("FAILED", (
        f"RuntimeError: s3://cdk-assets/abc.gz (the CDK file asset to copy to {URL}) is missing or this function may "
        "not read it (HeadObject: 404): cdk deploy uploads a file asset only when the asset bucket lacks it, so "
        "deploy again; if it goes missing again, look for what deletes objects in the asset bucket (a lifecycle "
        "rule, cdk gc)"))


# --- the key taken or raced during the copy -----------------------------------------------------------------------

@pytest.mark.parametrize("written", [DATA, DATA[:-1] + b"?"], ids=["the build's bytes", "other bytes"])
def test_an_object_written_during_the_copy_is_never_overwritten(s3, responses, written):
    # Another writer puts the key just before completion: S3 answers 412 to If-None-Match.
    _answer(s3, "CompleteMultipartUpload", 412, "PreconditionFailed", times=1,
            before=lambda: s3.put_object(Bucket="models", Key=KEY, Body=written))
    handler_module.handler(_event(), None, s3=s3)
    assert s3.get_object(Bucket="models", Key=KEY)["Body"].read() == written  # what was there stays
    assert _no_uploads_left(s3)  # the copy's parts were aborted
    if written == DATA:
        assert responses == [("SUCCESS", "already present (sha256 verified)", URL)]
    else:
        assert responses[0][:2] == ("FAILED", (
            f"RuntimeError: {URL} holds other bytes than the build (sha256 {hashlib.sha256(written).hexdigest()}, "
            f"the build manifest says {hashlib.sha256(DATA).hexdigest()}): a content-versioned model object was "
            "replaced after it was copied; find out who wrote it (the bucket's server access logs / CloudTrail data "
            "events), delete that version, and deploy again"))


def test_a_copy_that_races_another_write_starts_again_then_gives_up(s3, responses):
    _answer(s3, "CompleteMultipartUpload", 409, "ConditionalRequestConflict", times=1)
    handler_module.handler(_event(), None, s3=s3)
    assert responses == [("SUCCESS", "copied (sha256 verified)", URL)]
    assert s3.calls.names.count("CreateMultipartUpload") == 2 and _no_uploads_left(s3)


def test_a_copy_that_always_races_fails_with_nothing_written(s3, responses):
    _answer(s3, "CompleteMultipartUpload", 409, "ConditionalRequestConflict")
    handler_module.handler(_event(), None, s3=s3)
    assert responses[0][:2] == ("FAILED", (
        f"RuntimeError: {URL}: 3 copies in a row met another write to the same key (409 ConditionalRequestConflict) "
        "and were abandoned, nothing written: only this deployment should write under models/; find the other "
        "writer (CloudTrail data events of the model bucket) and deploy again"))
    assert "Contents" not in s3.list_objects_v2(Bucket="models") and _no_uploads_left(s3)


def test_a_failed_part_aborts_the_upload(s3, responses):
    _answer(s3, "UploadPartCopy", 403, "AccessDenied", times=1)
    handler_module.handler(_event(), None, s3=s3)
    assert responses[0][0] == "FAILED" and "AccessDenied" in responses[0][1]
    assert "AbortMultipartUpload" in s3.calls.names and _no_uploads_left(s3)


def test_a_runtime_whose_botocore_cannot_send_if_none_match_fails_before_writing(s3, responses):
    class OldModel:
        members = {"Bucket": None, "Key": None, "UploadId": None, "MultipartUpload": None}

    class OldClient:
        """The client, as a botocore from before 2024-08-20 would describe CompleteMultipartUpload."""
        meta = types.SimpleNamespace(service_model=types.SimpleNamespace(
            operation_model=lambda name: types.SimpleNamespace(input_shape=OldModel)))

        def __getattr__(self, name):
            return getattr(s3, name)

    handler_module.handler(_event(), None, s3=OldClient())
    version = conditional_copy.botocore.__version__
    assert responses[0][:2] == ("FAILED", (
        f"RuntimeError: this function's botocore {version} cannot send If-None-Match on CompleteMultipartUpload "
        "(added to the S3 API on 2024-08-20), which the model bucket's policy requires: use a Lambda Python runtime "
        "whose boto3 is from 2024-08-20 or later (the construct library sets python3.14)"))
    assert "CreateMultipartUpload" not in s3.calls.names


def test_parts_stay_within_s3s_limits_for_the_largest_object():
    ranges = conditional_copy.part_ranges(5 * 1024 ** 4, conditional_copy.PART)  # S3's 5 TiB maximum
    assert len(ranges) <= 10_000 and ranges[-1][1] == 5 * 1024 ** 4 - 1
    assert max(last - first + 1 for first, last in ranges) <= 5 * 1024 ** 3
    assert conditional_copy.part_ranges(10, 256 * MIB) == [(0, 9)]


# --- the rest of the custom resource ------------------------------------------------------------------------------

def test_refuses_a_sha256_property_that_is_not_a_sha256(s3, responses):
    handler_module.handler(_event(Sha256="0123456789ab"), None, s3=s3)
    assert responses[0][:2] == ("FAILED", (
        f"ValueError: {URL}: the Sha256 property is '0123456789ab'; expected the 64 lowercase hex digits of the "
        "tarball's sha256 from the build manifest: rebuild the models (tritonsm build) and deploy again"))
    assert s3.calls.names == []


def test_delete_keeps_the_object(s3, responses):
    s3.put_object(Bucket="models", Key=KEY, Body=DATA)
    handler_module.handler(_event("Delete"), None, s3=s3)
    assert responses[0][0] == "SUCCESS" and "DeleteObject" not in s3.calls.names


def test_response_is_put_to_the_presigned_url(monkeypatch):
    seen = []

    class Reply:
        status = 200

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    import cfn_response
    monkeypatch.setattr(cfn_response.urllib.request, "urlopen", lambda request, timeout: seen.append(request) or Reply())
    cfn_response.respond(_event(), "SUCCESS", "copied", "s3://models/x")
    [request] = seen
    assert (request.get_method(), request.full_url) == ("PUT", "https://example.invalid/response")
    assert json.loads(request.data) == {"Status": "SUCCESS", "Reason": "copied", "PhysicalResourceId": "s3://models/x",
                                        "StackId": "s", "RequestId": "r", "LogicalResourceId": "l"}

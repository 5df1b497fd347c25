"""The artifact-copy custom resource handler, run locally against a fake S3 client (no AWS)."""
import base64
import importlib.util
import json
import sys

import pytest
from botocore.exceptions import ClientError

from synth_helpers import ROOT

HANDLERS = ROOT / "triton_constructs" / "handlers"
sys.path.insert(0, str(HANDLERS))  # as in the Lambda asset: the handlers import cfn_response from its root
_spec = importlib.util.spec_from_file_location("copy_artifact", HANDLERS / "copy_artifact.py")
handler_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(handler_module)

PROPS = {"SourceBucket": "cdk-assets", "SourceKey": "abc.gz", "DestinationBucket": "models",
         "DestinationKey": "models/vision-nlp/bert-0123456789ab.tar.gz", "Size": "1234",
         "Sha256": "0123456789abcdef" * 4, "KmsKeyArn": "arn:aws:kms:us-east-1:111122223333:key/k"}
# What S3 stores for an object written in one request with ChecksumAlgorithm=SHA256: its SHA-256, base64.
STORED = base64.b64encode(bytes.fromhex(PROPS["Sha256"])).decode()


class FakeS3:
    """HeadObject and the managed copy only: a stored full-object SHA-256 answers the check, so nothing is read."""

    def __init__(self, existing_size=None, head_error="404", checksum=STORED):
        self.existing_size, self.head_error, self.checksum, self.copies = existing_size, head_error, checksum, []

    def head_object(self, Bucket, Key, ChecksumMode):
        assert ChecksumMode == "ENABLED"  # without it S3 returns no checksum
        if self.existing_size is None:
            raise ClientError({"Error": {"Code": self.head_error}}, "HeadObject")
        return {"ContentLength": self.existing_size, "ETag": '"e"', "ChecksumSHA256": self.checksum}

    def copy(self, source, bucket, key, ExtraArgs, Config):
        self.copies.append((source, bucket, key, ExtraArgs, Config.multipart_chunksize))
        self.existing_size = int(PROPS["Size"])


@pytest.fixture
def responses(monkeypatch):
    sent = []
    monkeypatch.setattr(handler_module, "respond", lambda event, status, reason, pid: sent.append((status, reason, pid)))
    return sent


def _event(kind="Create", **props):
    return {"RequestType": kind, "ResourceProperties": {**PROPS, **props}, "StackId": "s", "RequestId": "r",
            "LogicalResourceId": "l", "ResponseURL": "https://example.invalid/response"}


@pytest.mark.parametrize("head_error", ["404", "403"])
def test_copies_a_missing_object_server_side(responses, head_error):
    s3 = FakeS3(head_error=head_error)
    handler_module.handler(_event(), None, s3=s3)
    # One server-side copy with the bucket's key, SHA-256 checksums and the sha256 as metadata, in 256 MiB parts.
    assert s3.copies == [({"Bucket": "cdk-assets", "Key": "abc.gz"}, "models", PROPS["DestinationKey"], {
        "ServerSideEncryption": "aws:kms", "SSEKMSKeyId": PROPS["KmsKeyArn"], "ChecksumAlgorithm": "SHA256",
        "Metadata": {"sha256": PROPS["Sha256"]}, "MetadataDirective": "REPLACE"}, 256 * 1024 * 1024)]
    assert responses == [("SUCCESS", "copied (sha256 verified)", f"s3://models/{PROPS['DestinationKey']}")]


def test_an_object_already_in_place_is_not_copied_again(responses):
    s3 = FakeS3(existing_size=1234)
    handler_module.handler(_event("Update"), None, s3=s3)
    assert s3.copies == [] and responses[0][:2] == ("SUCCESS", "already present (sha256 verified)")


def test_never_overwrites_a_content_versioned_object(responses):
    s3 = FakeS3(existing_size=99)
    handler_module.handler(_event(), None, s3=s3)
    assert s3.copies == []
    assert responses[0][:2] == ("FAILED", (
        f"RuntimeError: s3://models/{PROPS['DestinationKey']} holds other bytes than the build (99 bytes, the build "
        "manifest says 1234 bytes): a content-versioned model object was replaced after it was copied; find out who "
        "wrote it (the bucket's server access logs / CloudTrail data events), delete that version, and deploy again"))


def test_refuses_a_sha256_property_that_is_not_a_sha256(responses):
    s3 = FakeS3()
    handler_module.handler(_event(Sha256="0123456789ab"), None, s3=s3)
    assert s3.copies == []
    assert responses[0][:2] == ("FAILED", (
        f"ValueError: s3://models/{PROPS['DestinationKey']}: the Sha256 property is '0123456789ab'; expected the 64 "
        "lowercase hex digits of the tarball's sha256 from the build manifest: rebuild the models (tritonsm build) "
        "and deploy again"))


def test_delete_keeps_the_object(responses):
    s3 = FakeS3(existing_size=1234)
    handler_module.handler(_event("Delete"), None, s3=s3)
    assert s3.copies == [] and responses[0][0] == "SUCCESS"


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

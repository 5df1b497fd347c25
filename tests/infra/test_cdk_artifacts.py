"""Model tarballs: CDK file assets copied server-side under the endpoint's prefix, with a narrow copy role."""
import hashlib
import json

import aws_cdk as cdk
from aws_cdk import aws_kms as kms, aws_s3 as s3
from aws_cdk.assertions import Capture, Match, Template
from cdk_nag import AwsSolutionsChecks

from synth_helpers import resource_id, statements
from triton_constructs.artifacts import ArtifactFile, ModelArtifacts


def test_one_copy_per_tarball_under_the_endpoint_prefix(default_synth):
    template = default_synth.template("dev", "vision-nlp")
    manifest = json.loads(default_synth.manifest_path.read_text())
    expected = sorted(f"models/vision-nlp/{a['file']}" for a in manifest["endpoints"]["vision-nlp"]["artifacts"])
    copies = template.find_resources("Custom::TritonModelArtifact")
    # Each tarball lands at <prefix><content-versioned name>, with its sha256 and size for the handler.
    assert sorted(c["Properties"]["DestinationKey"] for c in copies.values()) == expected
    for copy in copies.values():
        assert copy["Properties"]["ServiceTimeout"] == "960"
        assert copy["Properties"]["KmsKeyArn"] == {"Fn::ImportValue": "Triton-dev-Storage-KeyArn"}


def test_copy_function_runs_the_latest_python_for_up_to_15_minutes(default_synth):
    default_synth.template("dev", "classifier").has_resource_properties("AWS::Lambda::Function", {
        "Runtime": "python3.14", "Timeout": 900, "Handler": "copy_artifact.handler", "Architectures": ["arm64"]})


def test_copy_role_reads_exactly_its_assets_and_writes_only_its_prefix(default_synth):
    template = default_synth.template("dev", "vision-nlp")
    role_id = resource_id(template, "AWS::IAM::Role", {
        "Description": "Copies model tarballs from CDK assets into the model bucket",
        "AssumeRolePolicyDocument": Match.object_like({
            "Statement": [Match.object_like({"Principal": {"Service": "lambda.amazonaws.com"}})]})})
    found = {json.dumps(s["Action"]): s["Resource"] for s in statements(template, role_id)}
    # Reads: one ARN per asset object, no wildcard.
    reads = found['"s3:GetObject"']
    assert len(reads) == 2 and "*" not in json.dumps(reads)
    # Writes: only the endpoint's prefix of the model bucket.
    assert found[json.dumps(["s3:AbortMultipartUpload", "s3:GetObject", "s3:PutObject"])] == {"Fn::Join": ["", [
        {"Fn::ImportValue": "Triton-dev-Storage-BucketArn"}, "/models/vision-nlp/*"]]}


def test_many_tarballs_fall_back_to_an_acknowledged_asset_bucket_read(tmp_path):
    app = cdk.App()
    stack = cdk.Stack(app, "Bare", env=cdk.Environment(account="111122223333", region="us-east-1"))
    files = []
    for i in range(41):  # above MAX_EXACT_SOURCES
        data = f"TEST DATA {i}".encode()
        sha = hashlib.sha256(data).hexdigest()
        path = tmp_path / f"m{i}-{sha[:12]}.tar.gz"
        path.write_bytes(data)
        files.append(ArtifactFile(path, sha, len(data), path.name))
    bucket = s3.Bucket.from_bucket_name(stack, "Models", "models")
    key = kms.Key.from_key_arn(stack, "Key", "arn:aws:kms:us-east-1:111122223333:key/k")
    ModelArtifacts(stack, "Artifacts", bucket=bucket, key=key, prefix="models/many/", files=files)
    read = Capture()
    Template.from_stack(stack).has_resource_properties("AWS::IAM::Policy", {"PolicyDocument": {
        "Statement": Match.array_with([{"Action": "s3:GetObject", "Effect": "Allow", "Resource": read}])}})
    # One wildcard on the asset bucket instead of 41 ARNs (IAM's inline policy size limit)...
    assert read.as_object()["Fn::Join"][1][-1].endswith("-assets-111122223333-us-east-1/*")
    # ... and it carries its own acknowledgement.
    result = AwsSolutionsChecks().validate_scope(app)
    assert result.success, sorted(v.rule_name for v in result.violations)

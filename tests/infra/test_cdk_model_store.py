"""The model bucket: encrypted with its own rotating key, versioned, SSL-only, private, logged; removal per environment."""
from aws_cdk.assertions import Capture, Match

from synth_helpers import resource_id


def test_bucket_is_encrypted_with_its_own_rotating_key(default_synth):
    template = default_synth.template("prod")
    key_id = resource_id(template, "AWS::KMS::Key")
    # The customer-managed key rotates yearly.
    template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})
    # The model bucket uses that key (SSE-KMS, bucket key on), is versioned and blocks all public access.
    template.has_resource_properties("AWS::S3::Bucket", {
        "BucketEncryption": {"ServerSideEncryptionConfiguration": [{
            "BucketKeyEnabled": True,
            "ServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms",
                                              "KMSMasterKeyID": {"Fn::GetAtt": [key_id, "Arn"]}}}]},
        "VersioningConfiguration": {"Status": "Enabled"},
        "PublicAccessBlockConfiguration": {"BlockPublicAcls": True, "BlockPublicPolicy": True,
                                           "IgnorePublicAcls": True, "RestrictPublicBuckets": True},
    })


def test_model_bucket_logs_access_to_the_log_bucket(default_synth):
    template = default_synth.template("prod")
    logs_id = resource_id(template, "AWS::S3::Bucket", {"LoggingConfiguration": Match.absent(),
                                                        "VersioningConfiguration": {"Status": "Enabled"}})
    # Versioned (checkov CKV_AWS_21), so a log cannot be silently replaced; old versions expire too.
    template.has_resource_properties("AWS::S3::Bucket", {
        "LoggingConfiguration": Match.absent(), "LifecycleConfiguration": {"Rules": [Match.object_like(
            {"ExpirationInDays": 365, "NoncurrentVersionExpiration": {"NoncurrentDays": 30}})]}})
    # Server access logs of the model bucket land in the (SSE-S3) log bucket.
    template.has_resource_properties("AWS::S3::Bucket", {
        "LoggingConfiguration": {"DestinationBucketName": {"Ref": logs_id}, "LogFilePrefix": "model-bucket/"}})
    template.has_resource_properties("AWS::S3::Bucket", {
        "BucketEncryption": {"ServerSideEncryptionConfiguration": [
            {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]}})


def test_both_buckets_deny_requests_without_tls(default_synth):
    template = default_synth.template("prod")
    # Each bucket policy denies every request with aws:SecureTransport false.
    policies = template.find_resources("AWS::S3::BucketPolicy")
    assert len(policies) == 2
    for policy in policies.values():
        assert {"Action": "s3:*", "Condition": {"Bool": {"aws:SecureTransport": "false"}}, "Effect": "Deny",
                "Principal": {"AWS": "*"}} in [
            {k: v for k, v in s.items() if k != "Resource"} for s in policy["Properties"]["PolicyDocument"]["Statement"]]


def test_prod_retains_bucket_and_key(default_synth):
    template = default_synth.template("prod")
    # removal_policy retain (the default): CloudFormation keeps bucket, log bucket and key.
    for type_ in ("AWS::S3::Bucket", "AWS::KMS::Key"):
        for resource in template.find_resources(type_).values():
            assert resource["DeletionPolicy"] == "Retain"
    # ...and never empties them.
    template.resource_count_is("Custom::S3AutoDeleteObjects", 0)


def test_dev_destroys_buckets_with_their_objects(default_synth):
    template = default_synth.template("dev")
    for type_ in ("AWS::S3::Bucket", "AWS::KMS::Key"):
        for resource in template.find_resources(type_).values():
            assert resource["DeletionPolicy"] == "Delete"
    # removal_policy destroy: both buckets are emptied before deletion.
    template.resource_count_is("Custom::S3AutoDeleteObjects", 2)
    window = Capture()
    template.has_resource_properties("AWS::KMS::Key", {"PendingWindowInDays": window})
    assert window.as_number() == 7


def test_exports_are_named_for_the_endpoint_stacks(default_synth):
    outputs = default_synth.template("staging").find_outputs("*")
    # The endpoint stacks import the alarm topic, bucket and key by these fixed names.
    assert sorted(o["Export"]["Name"] for o in outputs.values()) == [
        "Triton-staging-Storage-AlarmTopicArn", "Triton-staging-Storage-BucketArn", "Triton-staging-Storage-BucketName",
        "Triton-staging-Storage-KeyArn"]


def test_every_endpoint_alarm_notifies_the_stage_topic(default_synth):
    storage = default_synth.template("staging")
    key_id = storage.get_resource_id("AWS::KMS::Key")
    # The stage's topic, encrypted with the stage key (CloudWatch may use it: the key policy says so).
    storage.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": {"Fn::GetAtt": [key_id, "Arn"]}})
    storage.has_resource_properties("AWS::KMS::Key", {"KeyPolicy": {"Statement": Match.array_with([Match.object_like(
        {"Principal": {"Service": "cloudwatch.amazonaws.com"}, "Action": ["kms:Decrypt", "kms:GenerateDataKey*"]})])}})
    # Every alarm of an endpoint stack notifies it on ALARM and OK (AWS Control Tower's CT.CLOUDWATCH.PR.1).
    topic = {"Fn::ImportValue": "Triton-staging-Storage-AlarmTopicArn"}
    alarms = default_synth.template("staging", "classifier").find_resources("AWS::CloudWatch::Alarm")
    assert alarms and all(a["Properties"]["AlarmActions"] == [topic] and a["Properties"]["OKActions"] == [topic]
                          for a in alarms.values())

"""The asynchronous side of an endpoint: where requests and answers live, who is told, who may call.

SageMaker Asynchronous Inference (developer guide, "Asynchronous inference"; botocore's SageMaker model,
``AsyncInferenceConfig``): callers put the request body in S3 and call ``InvokeEndpointAsync`` with its location;
SageMaker queues it, calls the container's ``/invocations`` as for a real-time request, writes the answer under
``S3OutputPath`` (a failure under ``S3FailurePath``) and publishes to the success or error topic.

Layout, by default under the stage's encrypted bucket: ``async/<storage name>/input/`` (where callers put requests:
the execution role reads only there), ``.../output/`` and ``.../failure/``.
"""
from __future__ import annotations

from typing import Optional

import aws_cdk as cdk
from aws_cdk import aws_iam as iam, aws_kms as kms, aws_s3 as s3, aws_sagemaker as sagemaker, aws_sns as sns
from constructs import Construct

from deployment_spec.sections.asynchronous import Asynchronous, endpoint_prefix, input_prefix
from triton_constructs.nag import acknowledge_wildcard

# IncludeInferenceResponseIn: the answer (up to 128 KB) in the notification (botocore, AsyncInferenceNotificationConfig).
_INCLUDE_IN = ["SUCCESS_NOTIFICATION_TOPIC", "ERROR_NOTIFICATION_TOPIC"]


class AsyncInference(Construct):
    """Locations, topics and permissions of one asynchronous endpoint.

    Args:
        scope: Parent construct.
        id_: Construct ID.
        settings: The ``asynchronous`` settings (``deployment_spec.sections.asynchronous.Asynchronous``).
        bucket: The stage bucket: input, output and failure prefixes, unless the settings name locations.
        key: The stage key: encrypts the objects SageMaker writes and the topics this construct creates.
        storage_name: The prefixes are ``async/<storage_name>/{input,output,failure}/``.

    Attributes:
        input_url, output_url, failure_url: ``s3://`` locations (the input one is the stage bucket's).
        success_topic, error_topic: The SNS topics SageMaker publishes to.
    """

    def __init__(self, scope: Construct, id_: str, *, settings: Asynchronous, bucket: s3.IBucket, key: kms.IKey,
                 storage_name: str) -> None:
        super().__init__(scope, id_)
        self.settings = settings
        self._bucket, self._key = bucket, key
        self.input_prefix = input_prefix(storage_name)
        base = f"s3://{bucket.bucket_name}/{endpoint_prefix(storage_name)}"
        self.input_url = f"s3://{bucket.bucket_name}/{self.input_prefix}"
        self.output_url = settings.output_path or f"{base}output/"
        self.failure_url = settings.failure_path or f"{base}failure/"
        self.success_topic = self._topic("SuccessTopic", settings.success_topic_arn, f"{storage_name} answers")
        self.error_topic = self._topic("ErrorTopic", settings.error_topic_arn, f"{storage_name} failures")

    def _topic(self, id_: str, arn: Optional[str], display_name: str) -> sns.ITopic:
        if arn is not None:
            return sns.Topic.from_topic_arn(self, id_, arn)
        return sns.Topic(self, id_, master_key=self._key, enforce_ssl=True, display_name=display_name)

    def config(self) -> sagemaker.CfnEndpointConfig.AsyncInferenceConfigProperty:
        """The endpoint configuration's ``AsyncInferenceConfig``."""
        return sagemaker.CfnEndpointConfig.AsyncInferenceConfigProperty(
            client_config=sagemaker.CfnEndpointConfig.AsyncInferenceClientConfigProperty(
                max_concurrent_invocations_per_instance=self.settings.max_concurrent_invocations_per_instance),
            output_config=sagemaker.CfnEndpointConfig.AsyncInferenceOutputConfigProperty(
                s3_output_path=self.output_url, s3_failure_path=self.failure_url, kms_key_id=self._key.key_arn,
                notification_config=sagemaker.CfnEndpointConfig.AsyncInferenceNotificationConfigProperty(
                    success_topic=self.success_topic.topic_arn, error_topic=self.error_topic.topic_arn,
                    include_inference_response_in=_INCLUDE_IN if self.settings.include_response_in_notifications
                    else None)))

    def grant_serve(self, role: iam.Role) -> None:
        """What the execution role needs: read requests under the input prefix, write answers and failures under
        their locations, publish to the two topics (the SageMaker developer guide's asynchronous-inference
        execution-role permissions, scoped to these resources)."""
        # The stage key through S3 (objects) and SNS (the topics this construct encrypts with it); a topic of
        # yours is encrypted with your key, whose policy is yours to open to the role.
        services = [f"{service}.{cdk.Aws.REGION}.{cdk.Aws.URL_SUFFIX}" for service in ("s3", "sns")]
        inputs = self._bucket.arn_for_objects(f"{self.input_prefix}*")
        writes = [_objects_arn(self.output_url), _objects_arn(self.failure_url)]
        role.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=[inputs]))
        role.add_to_policy(iam.PolicyStatement(actions=["s3:PutObject", "s3:AbortMultipartUpload"], resources=writes))
        role.add_to_policy(iam.PolicyStatement(actions=["kms:Decrypt", "kms:GenerateDataKey"],
                                               resources=[self._key.key_arn],
                                               conditions={"StringEquals": {"kms:ViaService": services}}))
        role.add_to_policy(iam.PolicyStatement(
            actions=["sns:Publish"], resources=[self.success_topic.topic_arn, self.error_topic.topic_arn]))
        for resource in (inputs, *writes):
            acknowledge_wildcard(role, self, resource, (
                "Asynchronous Inference reads requests the callers name under the endpoint's input prefix, and "
                "writes answers and failures it names per request under the endpoint's output and failure "
                "locations only."))

    def grant_invoke(self, grantee: iam.IGrantable, endpoint_arn: str) -> iam.Grant:
        """``sagemaker:InvokeEndpointAsync`` on the endpoint, writing requests under the input prefix, reading
        answers and failures."""
        grant = iam.Grant.add_to_principal(grantee=grantee, actions=["sagemaker:InvokeEndpointAsync"],
                                           resource_arns=[endpoint_arn])
        inputs = self._bucket.arn_for_objects(f"{self.input_prefix}*")
        answers = [_objects_arn(self.output_url), _objects_arn(self.failure_url)]
        iam.Grant.add_to_principal(grantee=grantee, actions=["s3:PutObject"], resource_arns=[inputs])
        iam.Grant.add_to_principal(grantee=grantee, actions=["s3:GetObject"], resource_arns=answers)
        self._key.grant(grantee, "kms:Decrypt", "kms:GenerateDataKey")
        # The three object wildcards are what cdk-nag's IAM5 reports on the caller's policy: acknowledged there,
        # with the reason, so a caller's app passes cdk-nag as the endpoint's own does.
        principal = grantee.grant_principal
        if isinstance(principal, Construct):
            for resource in (inputs, *answers):
                acknowledge_wildcard(principal, principal, resource, (
                    "Callers of an asynchronous endpoint put requests they name under its input prefix and read the "
                    "answers and failures SageMaker names per request under its output and failure locations, "
                    "and nothing else (grant_invoke_async)."))
        return grant


def _objects_arn(url: str) -> str:
    """``s3://bucket/prefix/`` -> the ARN of every object under it."""
    bucket_and_prefix = url.removeprefix("s3://").rstrip("/")
    return f"arn:{cdk.Aws.PARTITION}:s3:::{bucket_and_prefix}/*"

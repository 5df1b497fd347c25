"""The model bucket and alarm topic of one environment, shared by its endpoint stacks through named exports."""
from __future__ import annotations

from typing import Any, Optional

import aws_cdk as cdk
from aws_cdk import aws_kms as kms, aws_s3 as s3, aws_sns as sns
from constructs import Construct

from triton_constructs.alarms import allow_alarms
from triton_constructs.model_store import ModelStore
from triton_constructs.stage_budget import StageBudget


class StorageStack(cdk.Stack):
    """Holds the environment's ``ModelStore`` and exports its bucket and key under fixed names.

    Named exports (``<stack>-BucketArn``, ``-BucketName``, ``-KeyArn``) are the
    contract with the endpoint stacks: readable in ``cdk diff``, and the same
    text in IAM policies before and after synthesis (so each cdk-nag
    acknowledgement names one exact finding).

    Args:
        scope: The stage.
        id_: Construct ID.
        removal_policy: ``RETAIN`` keeps bucket, objects and key when the stack is deleted;
            ``DESTROY`` deletes them.
        object_lock: S3 Object Lock on both buckets (``ModelStore``). Defaults to False.
        budget_usd: The environment's monthly budget (``StageBudget``, alerting the alarm topic), if any.
        cost_tag: The cost-allocation tag (key, value) the budget counts.
        **kwargs: ``cdk.Stack`` arguments (stack name, termination protection, ...).

    Attributes:
        store: The model store.
    """

    def __init__(self, scope: Construct, id_: str, *, removal_policy: cdk.RemovalPolicy, object_lock: bool = False,
                 budget_usd: Optional[float] = None, cost_tag: tuple[str, str] = ("", ""), **kwargs: Any) -> None:
        super().__init__(scope, id_, description="Triton model bucket, its KMS key and access logs", **kwargs)
        # The stage's log groups (endpoint logs, custom-resource functions) are named <project>-<env>-...
        self.store = ModelStore(self, "ModelStore", removal_policy=removal_policy, object_lock=object_lock,
                                log_group_prefix=self.stack_name.removesuffix("Storage"))
        # Every endpoint's alarms notify this topic (CT.CLOUDWATCH.PR.1: an alarm has an action); subscribe the
        # on-call address or chat channel to it. Encrypted with the stage key, which CloudWatch may use for it.
        self.alarm_topic = sns.Topic(self, "AlarmTopic", master_key=self.store.key, enforce_ssl=True,
                                     display_name=f"{self.stack_name.removesuffix('-Storage')} Triton alarms")
        allow_alarms(self.store.key)
        if budget_usd is not None:
            # The environment's budget: the stage tags every resource with cost_tag (TritonStage), this alerts on it.
            StageBudget(self, "Budget", monthly_usd=budget_usd, tag_key=cost_tag[0], tag_value=cost_tag[1],
                        topic=self.alarm_topic, topic_key=self.store.key)
        for name, value in (("BucketArn", self.store.bucket.bucket_arn),
                            ("BucketName", self.store.bucket.bucket_name), ("KeyArn", self.store.key.key_arn),
                            ("AlarmTopicArn", self.alarm_topic.topic_arn)):
            cdk.CfnOutput(self, name, value=value, export_name=self._export(name))

    def _export(self, name: str) -> str:
        return f"{self.stack_name}-{name}"

    def import_into(self, consumer: cdk.Stack) -> tuple[s3.IBucket, kms.IKey]:
        """The bucket and key as seen from ``consumer``, which then deploys after this stack."""
        consumer.add_stack_dependency(self, "imports the model bucket and key")
        bucket = s3.Bucket.from_bucket_attributes(
            consumer, "ModelBucket", bucket_arn=cdk.Fn.import_value(self._export("BucketArn")),
            bucket_name=cdk.Fn.import_value(self._export("BucketName")))
        key = kms.Key.from_key_arn(consumer, "ModelKey", cdk.Fn.import_value(self._export("KeyArn")))
        return bucket, key

    def alarm_topic_into(self, consumer: cdk.Stack) -> sns.ITopic:
        """The stage's alarm topic as seen from ``consumer`` (which imports the bucket too, so depends on this)."""
        return sns.Topic.from_topic_arn(consumer, "AlarmTopic", cdk.Fn.import_value(self._export("AlarmTopicArn")))

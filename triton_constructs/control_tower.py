"""AWS Control Tower's proactive controls, checked at synth by the cfn-guard rules AWS publishes for them.

In a Control Tower landing zone each enabled proactive control is a CloudFormation hook that fails the
deploy of a resource breaking it, with no per-resource exception
(https://docs.aws.amazon.com/controltower/latest/controlreference/proactive-controls.html). The same
rules ship as cfn-guard files, with the cfn-guard binary, in ``cdklabs-cdk-validator-cfnguard`` (PyPI
0.0.62: cfn-guard 3.1.1, ``rules/control-tower/cfn-guard/<service>/ct-*.guard``); ``validator()`` is that
package's CDK policy-validation plugin, so ``cdk synth`` reports what a hook would refuse.

Where this library knowingly breaks a control (a choice with a prop, or a check that only the static
form of a rule can fail), the resource acknowledges that one finding with the reason, as cdk-nag
findings are acknowledged; docs/operations/governed-accounts.md lists each.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any, cast

import aws_cdk as cdk
import jsii
from aws_cdk import aws_iam as iam, aws_kms as kms, aws_s3 as s3
from constructs import IConstruct, IValidation

from triton_constructs.escape_hatch import default_child

# The plugin's name: an acknowledgement ID is "<plugin>::<cfn-guard rule name>".
PLUGIN = "cdk-validator-cfnguard"
PACKAGE = "cdklabs-cdk-validator-cfnguard"


@dataclasses.dataclass(frozen=True)
class Control:
    """One proactive control: its Control Tower ID and the rule name inside its cfn-guard file."""

    id: str
    rule: str

    @property
    def finding(self) -> str:
        return f"{PLUGIN}::{self.rule}"


ALARM_ACTION = Control("CT.CLOUDWATCH.PR.1", "cloudwatch_alarm_action_check")
LOG_RETENTION = Control("CT.CLOUDWATCH.PR.2", "cloudwatch_log_group_retention_period_check")
LOG_ENCRYPTED = Control("CT.CLOUDWATCH.PR.3", "cloudwatch_log_group_encrypted_check")
GRANTS_FOR_AWS = Control("CT.KMS.PR.3", "kms_create_grant_aws_service_check")
LAMBDA_IN_VPC = Control("CT.LAMBDA.PR.3", "lambda_inside_vpc_check")
BUCKET_LOGGING = Control("CT.S3.PR.2", "s3_bucket_logging_enabled_check")
BUCKET_EVENTS = Control("CT.S3.PR.4", "s3_event_notifications_enabled_check")
OBJECT_LOCK = Control("CT.S3.PR.9", "s3_bucket_object_lock_enabled_check")
BUCKET_SSE_KMS = Control("CT.S3.PR.10", "s3_bucket_default_encryption_kms_check")


def validator() -> cdk.IPolicyValidationPlugin:
    """The Control Tower rule set as a policy-validation plugin: ``Validations.of(app).add_plugins(validator())``.

    Raises:
        ModuleNotFoundError: the package is not installed (it is not part of the base install).
    """
    try:
        from cdklabs.cdk_validator_cfnguard import CfnGuardValidator
    except ModuleNotFoundError as missing:
        raise ModuleNotFoundError(
            f"the Control Tower checks need the Python package {PACKAGE}, which the base install leaves out; "
            f"install it: pip install {PACKAGE}==0.0.62 (in a checkout of the repository, `make` installs it)"
        ) from missing

    class FailingValidator(CfnGuardValidator):
        """Every finding is an error. The plugin leaves a violation's severity unset, and once any finding of
        the app is acknowledged aws-cdk-lib 2.275 counts only "error" and "fatal" ones as failing the synth."""

        def validate(self, context: cdk.IPolicyValidationContextBeta1) -> cdk.PolicyValidationPluginReportBeta1:
            report = super().validate(context)
            violations = [cdk.PolicyViolationBeta1(
                rule_name=v.rule_name, description=v.description, violating_resources=v.violating_resources,
                fix=v.fix, rule_metadata=v.rule_metadata, severity="error") for v in report.violations]
            return cdk.PolicyValidationPluginReportBeta1(success=report.success, violations=violations,
                                                         metadata=report.metadata, plugin_version=report.plugin_version)

    # The plugin implements the Beta1 interface, which has the shape Validations.add_plugins takes.
    return cast(cdk.IPolicyValidationPlugin, FailingValidator())


def acknowledge(scope: IConstruct, control: Control, reason: str) -> None:
    """Acknowledges ``control``'s finding on ``scope`` and below: a choice this library makes, with why."""
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=control.finding, reason=f"{control.id}: {reason}"))


def acknowledge_if_imported(resource: IConstruct, value: object, control: Control, reason: str) -> None:
    """Acknowledges ``control`` on ``resource`` only if ``value`` (a property of it, e.g. the log group's key
    ARN) resolves to an ``Fn::ImportValue`` in its template: the static rule accepts only a string or a
    reference to a resource of the same template, while the hook sees the resolved value. Decided once
    CDK has turned cross-stack references into imports (node validations run after that and before the
    plugins)."""
    resource.node.add_validation(_AcknowledgeImported(resource, value, control, reason))


@jsii.implements(IValidation)
class _AcknowledgeImported:
    def __init__(self, resource: IConstruct, value: object, control: Control, reason: str) -> None:
        self.resource, self.value, self.control, self.reason = resource, value, control, reason

    def validate(self) -> list[str]:
        resolved: Any = cdk.Stack.of(self.resource).resolve(self.value)
        if "Fn::ImportValue" in json.dumps(resolved):
            acknowledge(self.resource, self.control, self.reason)
        return []


def deny_grants_for_non_aws_resources(key: kms.IKey) -> None:
    """CT.KMS.PR.3: ``kms:CreateGrant`` only for AWS services acting for AWS resources (the statement the
    control's rule asks for). SageMaker's grants for the endpoint's volumes are for AWS resources; a person
    or an application can no longer grant itself use of the key. Nothing for an imported key (its owner's)."""
    key.add_to_resource_policy(iam.PolicyStatement(
        sid="CreateGrantOnlyForAwsResources", effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()],
        actions=["kms:CreateGrant"], resources=["*"],
        conditions={"BoolIfExists": {"kms:GrantIsForAWSResource": "false", "aws:PrincipalIsAWSService": "false"}}))


# Why a library function runs outside a VPC when none is given (NetworkProps.functions_in_vpc places them).
NO_VPC_GIVEN = ("the library's functions got no VPC placement: no NetworkProps(vpc=...) (the YAML spec names subnets "
                "only), functions_in_vpc=False, or public subnets; in an account that enables this control, give the "
                "library a VPC with private subnets")


def acknowledge_imported_key(log_group: IConstruct, key: kms.IKey) -> None:
    """CT.CLOUDWATCH.PR.3 on a log group encrypted with a key of another stack: the static rule cannot tell
    an imported key ARN from none, the hook sees the resolved ARN (tests/infra/test_control_tower.py feeds
    the rule's hook form the resolved properties)."""
    acknowledge_if_imported(log_group, key.key_arn, LOG_ENCRYPTED,
                            "encrypted with the stage's key, whose ARN this template imports (Fn::ImportValue); "
                            "the rule's static form accepts only a literal ARN or a key of the same template, the "
                            "hook checks the resolved ARN")


OBJECT_LOCK_OFF = ("S3 Object Lock is off by default (ModelStore(object_lock=True), the spec's environment "
                   "object_lock: true turn it on): once on it can never be turned off (https://docs.aws.amazon.com/"
                   "AmazonS3/latest/userguide/object-lock.html), and SageMaker does not need it")


def bucket_events(bucket: s3.Bucket, object_lock: bool) -> None:
    """CT.S3.PR.4: the bucket's events go to Amazon EventBridge (its default bus, where a rule may pick them
    up; nothing subscribes here). Written on the L1 resource: CDK's ``event_bridge_enabled`` adds a custom
    resource and its Lambda function, which would need a VPC of their own (CT.LAMBDA.PR.3).
    CT.S3.PR.9 is the ``object_lock`` choice: acknowledged where it is off."""
    default_child(bucket, s3.CfnBucket).notification_configuration = s3.CfnBucket.NotificationConfigurationProperty(
        event_bridge_configuration=s3.CfnBucket.EventBridgeConfigurationProperty(event_bridge_enabled=True))
    if not object_lock:
        acknowledge(bucket, OBJECT_LOCK, OBJECT_LOCK_OFF)

"""checkov skips, written where the resource is made: one check per call, each with a reason.

checkov reads ``Metadata: {checkov: {skip: [{id, comment}]}}`` on a CloudFormation resource
(https://www.checkov.io/2.Basics/Suppressing%20and%20Skipping%20Policies.html, "CloudFormation");
the test suite runs checkov over every synthesized template and accepts no other suppression.
"""
from __future__ import annotations

import aws_cdk as cdk
from constructs import IConstruct

KEY = "checkov"


def skip(scope: IConstruct, check_id: str, reason: str) -> None:
    """Skips ``check_id`` on ``scope``'s CloudFormation resource (the construct itself or its default child)."""
    resource = scope if isinstance(scope, cdk.CfnResource) else scope.node.default_child
    if not isinstance(resource, cdk.CfnResource):
        raise TypeError(f"{scope.node.path} has no CloudFormation resource to carry a checkov skip")
    current = resource.get_metadata(KEY) or {"skip": []}
    if any(entry["id"] == check_id for entry in current["skip"]):
        return
    resource.add_metadata(KEY, {"skip": [*current["skip"], {"id": check_id, "comment": reason}]})


# Shared reasons for the custom-resource functions this app deploys (artifact copy, scaling handover).
CUSTOM_RESOURCE_DLQ = ("invoked by CloudFormation, which waits for the function's reply: a failed invocation fails the "
                       "stack operation, and the event holds nothing to replay later")
CUSTOM_RESOURCE_VPC = ("calls only AWS service APIs (S3, SageMaker, Application Auto Scaling) on their public "
                       "endpoints; a VPC would need NAT or interface endpoints that this app does not own")


def skip_custom_resource_function(function: IConstruct) -> None:
    """The DLQ and VPC checks, which do not fit a CloudFormation custom-resource handler."""
    skip(function, "CKV_AWS_116", CUSTOM_RESOURCE_DLQ)
    skip(function, "CKV_AWS_117", CUSTOM_RESOURCE_VPC)

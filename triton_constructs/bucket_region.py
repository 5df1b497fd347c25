"""The model bucket must be in the endpoint's region, checked where the construct is built.

SageMaker reads model artifacts only from a bucket in the model's own region: botocore's SageMaker model,
``ContainerDefinition.ModelDataUrl``, "The model artifacts must be in an S3 bucket that is in the same region as
the model or endpoint you are creating". CDK lets a stack in one region use a bucket of a stack in another
(``cross_region_references=True``) and synthesizes without a word; CreateModel would fail minutes into the deploy.
"""
from __future__ import annotations

from typing import Optional

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3
from constructs import Construct

from deployment_spec.parsing.errors import Problem

UNKNOWN = "tritonsm:bucketRegionUnknown"


def bucket_region_problems(scope: Construct, bucket: Optional[s3.IBucket]) -> list[Problem]:
    """A refusal where the regions of ``bucket`` and of ``scope``'s stack are both known and differ; a synth
    warning (``UNKNOWN``) on ``scope`` where either is a token and they are not the stack's own region.

    The bucket's region is ``bucket.env.region``: its stack's for a bucket created in CDK, the ``region`` given
    when it was imported, else the importing stack's (what CDK assumes of an import, so such a bucket in the
    endpoint's stack counts as in its region, token or not).
    """
    if bucket is None:
        return []
    stack = cdk.Stack.of(scope)
    home = cdk.Stack.of(bucket)
    endpoint_region, bucket_region = stack.region, bucket.env.region
    imported = not isinstance(bucket.node.default_child, s3.CfnBucket)
    if bucket_region == endpoint_region and home.node.path == stack.node.path:
        return []  # created in the endpoint's stack, or imported there without a region
    where = "imported" if imported else f"stack {home.stack_name}"
    if not cdk.Token.is_unresolved(endpoint_region) and not cdk.Token.is_unresolved(bucket_region):
        if bucket_region == endpoint_region:
            return []
        return [Problem("bucket", f"a bucket in {bucket_region} ({where})",
                        f"a bucket in the endpoint's region {endpoint_region} (SageMaker's "
                        "ContainerDefinition.ModelDataUrl: the model artifacts must be in the same region as the model)",
                        f"give a bucket of {endpoint_region}, or leave bucket out: the endpoint then makes its own")]
    unknown = []
    if cdk.Token.is_unresolved(endpoint_region):
        unknown.append(f"the endpoint's stack {stack.stack_name} has no region (env-agnostic)")
    if cdk.Token.is_unresolved(bucket_region):
        unknown.append(f"the bucket ({where}) has no region" + ("" if imported else " (its stack is env-agnostic)"))
    cdk.Annotations.of(scope).add_warning_v2(UNKNOWN, (
        f"the model bucket's region could not be checked against the endpoint's: {' and '.join(unknown)}. SageMaker "
        "needs the model artifacts in the endpoint's region (ContainerDefinition.ModelDataUrl); give the stacks an env "
        "with a region (and an imported bucket its region=) to have it checked at synth"))
    return []

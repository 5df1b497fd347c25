"""cdk-nag v3 acknowledgements: one finding per call, each with a reason about that resource."""
from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import jsii
from constructs import IConstruct, IValidation


def acknowledge(scope: IConstruct, finding: str, reason: str) -> None:
    """Acknowledges one cdk-nag finding on ``scope`` and everything below it.

    Args:
        scope: The construct whose resources carry the finding; keep it as narrow as possible.
        finding: The exact finding ID, e.g. ``"AwsSolutions-IAM5[Resource::*]"``.
        reason: Why this resource needs it (shown in the validation report).
    """
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=finding, reason=reason))


def acknowledge_wildcard(scope: IConstruct, role_scope: IConstruct, resource_arn: str, reason: str) -> None:
    """Acknowledges the IAM5 finding of a wildcard ``resource_arn`` on ``scope``, wherever its parts live.

    Named now (right when the ARN is of this stack) and again once CDK has resolved cross-stack references
    (a validation runs after them and before the templates are written): a bucket of another stack
    turns ``<Bucket.Arn>`` into the export's name (``Fn::ImportValue``), a different finding.

    Args:
        scope: The construct carrying the finding (a role, a policy).
        role_scope: A construct of the stack the policy is written into (the ARN is resolved there).
        resource_arn: The wildcard ARN, e.g. ``bucket.arn_for_objects("models/x/*")``.
        reason: Why this resource needs it.
    """
    acknowledge(scope, wildcard_finding(role_scope, resource_arn), reason)
    scope.node.add_validation(_AcknowledgeOnceResolved(scope, role_scope, resource_arn, reason))


@jsii.implements(IValidation)
class _AcknowledgeOnceResolved:
    def __init__(self, scope: IConstruct, role_scope: IConstruct, resource_arn: str, reason: str) -> None:
        self.scope, self.role_scope, self.resource_arn, self.reason = scope, role_scope, resource_arn, reason

    def validate(self) -> list[str]:
        acknowledge(self.scope, wildcard_finding(self.role_scope, self.resource_arn), self.reason)
        return []


def wildcard_finding(scope: IConstruct, resource_arn: str) -> str:
    """The IAM5 finding ID cdk-nag reports for a wildcard resource ARN used in ``scope``'s stack.

    cdk-nag flattens the resolved ARN (``Fn::Join`` joined, ``Fn::GetAtt`` as ``<Id.Attr>``,
    ``Fn::ImportValue`` as the export name, ``Ref`` as ``<Id>``); computing the same string here
    keeps acknowledgements exact without hard-coding logical IDs.
    """
    resolved: Any = cdk.Stack.of(scope).resolve(resource_arn)
    return f"AwsSolutions-IAM5[Resource::{_flatten(resolved)}]"


def statement_findings(statement: dict[str, Any]) -> list[str]:
    """The IAM5 findings cdk-nag reports for one resolved policy statement: wildcard actions and resources."""
    actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
    resources = statement.get("Resource", [])
    resources = resources if isinstance(resources, list) else [resources]
    out = [f"AwsSolutions-IAM5[Action::{a}]" for a in actions if "*" in a]
    for resource in resources:
        flat = _flatten(resource)
        if "*" in flat:
            out.append(f"AwsSolutions-IAM5[Resource::{flat}]")
    return out


def _flatten(node: Any) -> str:
    if isinstance(node, str):
        return node.replace("${", "<").replace("}", ">")
    if isinstance(node, dict):
        if "Fn::Join" in node:
            delimiter, items = node["Fn::Join"]
            return str(delimiter).join(_flatten(item) for item in items)
        if "Fn::Sub" in node:
            return _flatten(node["Fn::Sub"])
        if "Fn::GetAtt" in node:
            resource, attribute = node["Fn::GetAtt"]
            return f"<{_flatten(resource)}.{_flatten(attribute)}>"
        if "Fn::ImportValue" in node:
            return _flatten(node["Fn::ImportValue"])
        if "Ref" in node:
            return f"<{_flatten(node['Ref'])}>"
    raise ValueError(f"cannot name the cdk-nag finding for {node!r}")

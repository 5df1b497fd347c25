"""AWS Security Hub's SageMaker controls for models, endpoint configurations and endpoints, checked at synth.

Security Hub evaluates each control with an AWS Config managed rule on the deployed resource
(https://docs.aws.amazon.com/securityhub/latest/userguide/sagemaker-controls.html). Each rule below is that
Config rule's documented logic, applied to the synthesized ``AWS::SageMaker::*`` properties, so a finding
shows at ``cdk synth`` instead of hours after the deploy. ``checks()`` is a CDK policy-validation plugin
(``Validations.of(app).add_plugins(checks())``); a resource that knowingly breaks a control acknowledges
that one finding with the reason (``acknowledge``), as cdk-nag and Control Tower findings are.
"""
from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any, Callable, Optional

import aws_cdk as cdk
import jsii
from constructs import IConstruct

PLUGIN = "triton-security-hub"
MODEL, ENDPOINT_CONFIG = "AWS::SageMaker::Model", "AWS::SageMaker::EndpointConfig"
CONFIG_RULES = "https://docs.aws.amazon.com/config/latest/developerguide/"


@dataclasses.dataclass(frozen=True)
class Control:
    """One control: its Security Hub ID (or none, for a Config rule outside Security Hub's list), the Config
    rule that evaluates it, the resource type, and the rule's logic: the properties in, compliant or not."""

    id: str
    config_rule: str
    resource_type: str
    description: str
    fix: str
    compliant: Callable[[dict[str, Any]], bool]

    @property
    def finding(self) -> str:
        return f"{PLUGIN}::{self.id}"


def _instance_count_above_one(properties: dict[str, Any]) -> bool:
    # NON_COMPLIANT if a production variant's InitialInstanceCount equals 1 (serverless variants have none).
    return all(v.get("InitialInstanceCount") != 1 for v in properties.get("ProductionVariants", []))


def _network_isolation(properties: dict[str, Any]) -> bool:
    return properties.get("EnableNetworkIsolation") is True


def _private_registry(properties: dict[str, Any]) -> bool:
    # NON_COMPLIANT if the PrimaryContainer's ImageConfig is missing or its RepositoryAccessMode is Platform.
    container = properties.get("PrimaryContainer")
    return container is None or container.get("ImageConfig", {}).get("RepositoryAccessMode") == "Vpc"


def _volume_key(properties: dict[str, Any]) -> bool:
    return bool(properties.get("KmsKeyId"))


INSTANCE_COUNT = Control(
    "SageMaker.4", "sagemaker-endpoint-config-prod-instance-count", ENDPOINT_CONFIG,
    "SageMaker endpoint production variants should have an initial instance count greater than 1",
    "Set InitialInstanceCount to 2 or more, so SageMaker spreads the instances over Availability Zones",
    _instance_count_above_one)
NETWORK_ISOLATION = Control(
    "SageMaker.5", "sagemaker-model-isolation-enabled", MODEL,
    "SageMaker models should have network isolation enabled",
    "Set EnableNetworkIsolation to true", _network_isolation)
PRIVATE_REGISTRY = Control(
    "SageMaker.16", "sagemaker-model-private-registry-required", MODEL,
    "SageMaker models should pull their primary container's image from a private registry in a VPC",
    "Set PrimaryContainer.ImageConfig.RepositoryAccessMode to Vpc, with the image in a Docker registry of your VPC",
    _private_registry)
# An AWS Config managed rule that Security Hub does not list as a SageMaker control; checked all the same.
VOLUME_KEY = Control(
    "SAGEMAKER_ENDPOINT_CONFIGURATION_KMS_KEY_CONFIGURED", "sagemaker-endpoint-configuration-kms-key-configured",
    ENDPOINT_CONFIG, "SageMaker endpoint configurations should name a KMS key for the instances' storage",
    "Set KmsKeyId", _volume_key)
CONTROLS = (INSTANCE_COUNT, NETWORK_ISOLATION, PRIVATE_REGISTRY, VOLUME_KEY)


def evaluate(template: dict[str, Any], controls: tuple[Control, ...] = CONTROLS) -> tuple[list[tuple[Control, str]], int]:
    """(each (control, logical ID) that is NON_COMPLIANT, how many (control, resource) pairs were judged)."""
    failed, judged = [], 0
    for logical_id, resource in template.get("Resources", {}).items():
        for control in controls:
            if resource.get("Type") == control.resource_type:
                judged += 1
                if not control.compliant(resource.get("Properties", {})):
                    failed.append((control, logical_id))
    return failed, judged


@jsii.implements(cdk.IPolicyValidationPlugin)
class _SecurityHubChecks:
    """The plugin: every template of the assembly, every control; a finding is an error unless acknowledged."""

    @property
    def name(self) -> str:
        return PLUGIN

    @property
    def version(self) -> str:
        return "1"

    @property
    def rule_ids(self) -> list[str]:
        return [c.id for c in CONTROLS]

    def validate(self, context: cdk.IPolicyValidationContext) -> cdk.PolicyValidationPluginReport:
        violations: dict[str, list[cdk.PolicyViolatingResource]] = {}
        for path in context.template_paths:
            failed, _ = evaluate(json.loads(pathlib.Path(path).read_text()))
            for control, logical_id in failed:
                violations.setdefault(control.id, []).append(cdk.PolicyViolatingResource(
                    locations=[f"/Resources/{logical_id}/Properties"], resource_logical_id=logical_id,
                    template_path=path))
        by_id = {c.id: c for c in CONTROLS}
        return cdk.PolicyValidationPluginReport(success=not violations, violations=[cdk.PolicyViolation(
            rule_name=control_id, description=f"[{control_id}] {by_id[control_id].description}",
            fix=by_id[control_id].fix, violating_resources=resources, severity="error",
            rule_metadata={"ConfigRule": CONFIG_RULES + by_id[control_id].config_rule + ".html"})
            for control_id, resources in violations.items()])


def checks() -> cdk.IPolicyValidationPlugin:
    """The SageMaker controls as a policy-validation plugin: ``Validations.of(app).add_plugins(checks())``."""
    plugin: cdk.IPolicyValidationPlugin = _SecurityHubChecks()
    return plugin


def acknowledge(scope: IConstruct, control: Control, reason: str, when: Optional[bool] = True) -> None:
    """Acknowledges ``control``'s finding on ``scope`` and below (when ``when``): a choice, with why."""
    if when:
        cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=control.finding, reason=f"{control.id}: {reason}"))


# The reasons this library gives where it knowingly breaks a control (docs/operations/governed-accounts.md).
AWS_IMAGE = ("the Triton image is AWS's sagemaker-tritonserver in AWS's own ECR registry, which SageMaker pulls with "
             "RepositoryAccessMode Platform, the only mode for an ECR image (https://docs.aws.amazon.com/sagemaker/"
             "latest/APIReference/API_ImageConfig.html); the rule passes only for a Docker registry inside your VPC")
ONE_INSTANCE = ("one instance, as asked (initial_instances=1): the spec's production: true environments keep 2+ "
                "instances unless an endpoint gives single_instance_reason")
OWN_ECR_IMAGE = ("the Triton image is a copy in your own ECR repository, which SageMaker pulls with "
                 "RepositoryAccessMode Platform like any ECR image; the rule passes only for a Docker registry inside "
                 "your VPC (RepositoryAccessMode Vpc)")

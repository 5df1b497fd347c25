"""The SageMaker model: the Triton image, its model data and the container environment."""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam, aws_sagemaker as sagemaker
from constructs import Construct

from triton_constructs import security_hub
from triton_constructs.image import TritonImage

class TritonModel(Construct):
    """A SageMaker model (``AWS::SageMaker::Model``) running the Triton image.

    The L2 alpha ``Model`` has no multi-model mode, so this wraps the L1 resource.
    The model depends on its role (and so on the role's policy), because
    CreateModel checks access to the model data and fails if the policy is
    not there yet.

    The rules SageMaker applies to these values (environment limits, VPC settings) are checked by
    ``TritonSageMakerEndpoint`` (``deployment_spec.rules.sagemaker``) before it builds this.

    Args:
        scope: Parent construct.
        id_: Construct ID.
        image: The Triton image.
        role: The execution role (its policy must grant the model data, image and logs).
        model_data_url: ``s3://`` URL of the tarball (single-model), or of the prefix ending in '/'
            that holds one tarball per model (multi-model).
        multi_model: Serve many models from the prefix. Defaults to False.
        environment: Container environment, e.g. from ``container_environment``. Defaults to none.
        model_cache: Multi-model only: keep loaded models cached (False unloads after each call, for
            rarely used models). Changing it replaces the model. Defaults to True.
        subnet_ids: Subnets (2 or more, in different zones) to run in. Defaults to no VPC.
        security_group_ids: Security groups for the VPC. Required with ``subnet_ids``.
        network_isolation: Forbid the container any network access. Defaults to False.
        removal_policy: What happens to the model when it leaves the template or its stack is deleted
            (``DeletionPolicy``); a replaced model is always kept (see below). Defaults to
            ``RETAIN_ON_UPDATE_OR_DELETE`` (CloudFormation ``RetainExceptOnCreate``): kept, but removed when
            the operation that created it rolls back. ``DESTROY`` suits throw-away environments.

    Attributes:
        resource: The ``CfnModel``.
        model_name: Its CloudFormation-generated name.
    """

    def __init__(self, scope: Construct, id_: str, *, image: TritonImage, role: iam.IRole, model_data_url: str,
                 multi_model: bool = False, environment: Optional[Mapping[str, str]] = None,
                 model_cache: bool = True, subnet_ids: Sequence[str] = (), security_group_ids: Sequence[str] = (),
                 network_isolation: bool = False,
                 removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE) -> None:
        super().__init__(scope, id_)
        env = dict(environment or {})
        container = sagemaker.CfnModel.ContainerDefinitionProperty(
            image=image.image_uri, model_data_url=model_data_url,
            mode="MultiModel" if multi_model else "SingleModel",
            environment=env or None,
            multi_model_config=sagemaker.CfnModel.MultiModelConfigProperty(
                model_cache_setting="Enabled" if model_cache else "Disabled") if multi_model else None)
        vpc = sagemaker.CfnModel.VpcConfigProperty(subnets=list(subnet_ids), security_group_ids=list(security_group_ids)) \
            if subnet_ids else None
        self.resource = sagemaker.CfnModel(self, "Resource", execution_role_arn=role.role_arn,
                                           primary_container=container, vpc_config=vpc,
                                           enable_network_isolation=network_isolation or None)
        # Kept when replaced, for the same reason as the endpoint config (TritonEndpoint): a rolled-back
        # endpoint may still run it. Deleted or kept otherwise as removal_policy says.
        self.resource.apply_removal_policy(removal_policy, apply_to_update_replace_policy=False)
        self.resource.cfn_options.update_replace_policy = cdk.CfnDeletionPolicy.RETAIN
        # Depend on the role's policy, not just the role: CreateModel checks the model data with it.
        # (The role itself is already ordered by the ARN reference; naming it again is cfn-lint W3005.)
        policy = role.node.try_find_child("DefaultPolicy")
        self.resource.node.add_dependency(policy if policy is not None else role)
        self.model_name: str = self.resource.attr_model_name
        security_hub.acknowledge(self.resource, security_hub.PRIVATE_REGISTRY,
                                 security_hub.OWN_ECR_IMAGE if image.own_repository else security_hub.AWS_IMAGE)

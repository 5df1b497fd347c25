"""The spec's network settings as the constructs' ``NetworkProps``: one recipe for every endpoint stack."""
from __future__ import annotations

from typing import Optional

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from deployment_spec.sections.endpoint import Network
from triton_constructs import NetworkProps


def network_props(scope: Construct, network: Optional[Network]) -> NetworkProps:
    """The spec names subnets and security groups by ID; the constructs take them as CDK objects."""
    if network is None:
        return NetworkProps()
    subnets = [ec2.Subnet.from_subnet_id(scope, f"Subnet{i}", s) for i, s in enumerate(network.subnet_ids)]
    for subnet in subnets:
        # CDK warns that an imported subnet has no route table; SageMaker's VpcConfig takes subnet IDs only.
        cdk.Annotations.of(subnet).acknowledge_warning(
            "@aws-cdk/aws-ec2:noSubnetRouteTableId", "SageMaker's VpcConfig needs the subnet ID only")
    groups = [ec2.SecurityGroup.from_security_group_id(scope, f"SecurityGroup{i}", g)
              for i, g in enumerate(network.security_group_ids)]
    return NetworkProps(subnets=ec2.SubnetSelection(subnets=subnets) if subnets else None, security_groups=groups,
                        isolation=network.isolation, isolation_opt_out_reason=network.isolation_opt_out_reason)

"""Where a Triton model runs on the network: your VPC, its subnets and security groups, and isolation."""
from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from deployment_spec import network_rules
from deployment_spec.errors import Problem, raise_problems
from deployment_spec.parse import typed_fields_problems


@dataclasses.dataclass(frozen=True)
class NetworkProps:
    """Network settings of a ``TritonSageMakerEndpoint``'s model.

    Attributes:
        vpc: Run the model's instances in this VPC (SageMaker attaches network interfaces in its subnets;
            https://docs.aws.amazon.com/sagemaker/latest/dg/host-vpc.html). The model data is then read
            through the VPC: give it an S3 gateway endpoint or a NAT. Defaults to no VPC: SageMaker's
            own network.
        subnets: Which subnets of ``vpc`` (2 to 16, in different Availability Zones). Without ``vpc``,
            a selection of explicit subnets (``ec2.SubnetSelection(subnets=[...])``). Defaults to the
            VPC's private subnets.
        security_groups: The model's security groups. Defaults to one new group in ``vpc`` with no
            inbound rules.
        isolation: ``EnableNetworkIsolation``: the container may make no network call at all (SageMaker
            still downloads the model data and writes the logs). Defaults to True; a Triton model needs
            no network.
        isolation_opt_out_reason: Why the container needs the network; required with ``isolation=False``.
    """

    vpc: Optional[ec2.IVpc] = None
    subnets: Optional[ec2.SubnetSelection] = None
    security_groups: Sequence[ec2.ISecurityGroup] = ()
    isolation: bool = True
    isolation_opt_out_reason: Optional[str] = None

    def __post_init__(self) -> None:
        typed = typed_fields_problems(self)
        raise_problems("NetworkProps", typed)
        problems = network_rules.network_isolation_reason(self.isolation, self.isolation_opt_out_reason)
        if self.vpc is None and self.subnets is not None and not self.subnets.subnets:
            problems.append(Problem("subnets", "a subnet selection without a vpc", "explicit subnets "
                                    "(ec2.SubnetSelection(subnets=[...])) or a vpc to select from",
                                    "pass vpc=, or list the subnets"))
        if self.vpc is None and self.subnets is None and self.security_groups:
            problems += network_rules.vpc_complete(0, len(self.security_groups))
        raise_problems("NetworkProps", problems)

    def subnet_ids(self) -> list[str]:
        """The selected subnets' IDs (empty: no VPC)."""
        if self.vpc is not None:
            chosen = self.subnets or ec2.SubnetSelection()
            return list(self.vpc.select_subnets(
                availability_zones=chosen.availability_zones, one_per_az=chosen.one_per_az,
                subnet_filters=chosen.subnet_filters, subnet_group_name=chosen.subnet_group_name,
                subnets=chosen.subnets, subnet_type=chosen.subnet_type).subnet_ids)
        return [subnet.subnet_id for subnet in (self.subnets.subnets or [])] if self.subnets else []

    def security_group_ids(self, scope: Construct, description: str) -> list[str]:
        """The model's security groups: yours, or in a VPC one new group ``SecurityGroup`` under ``scope``
        with no inbound rule (outbound for the model data download through the VPC)."""
        if self.security_groups or self.vpc is None:
            return [g.security_group_id for g in self.security_groups]
        group = ec2.SecurityGroup(scope, "SecurityGroup", vpc=self.vpc, allow_all_outbound=True, description=description)
        return [group.security_group_id]

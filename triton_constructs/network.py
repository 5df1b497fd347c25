"""Where a Triton model runs on the network: your VPC, its subnets and security groups, and isolation."""
from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from deployment_spec.facts import network_rules
from deployment_spec.parsing.errors import Problem, raise_problems
from deployment_spec.parsing.parse import typed_fields_problems


# What the library's own Lambda functions call, so what a VPC without a NAT must offer them.
FUNCTION_ENDPOINTS = ("an S3 gateway endpoint (the model copy, and every function's answer to CloudFormation, "
                      "a pre-signed S3 URL)",
                      "interface endpoints for sagemaker.api and application-autoscaling (the scaling handover)")


@dataclasses.dataclass(frozen=True)
class FunctionPlacement:
    """Where the library's Lambda functions (model copy, scaling handover) run: a VPC, subnets, groups."""

    vpc: ec2.IVpc
    subnets: ec2.SubnetSelection
    security_groups: tuple[ec2.ISecurityGroup, ...]


@dataclasses.dataclass(frozen=True)
class NetworkProps:
    """Network settings of a Triton endpoint's model, and of the library's own Lambda functions.

    Attributes:
        vpc: Run the model's instances in this VPC (SageMaker attaches network interfaces in its subnets;
            https://docs.aws.amazon.com/sagemaker/latest/dg/host-vpc.html). The model data is then read
            through the VPC: give it an S3 gateway endpoint or a NAT. Defaults to no VPC: SageMaker's
            own network.
        subnets: Which subnets of ``vpc`` (2 to 16, in different Availability Zones). Without ``vpc``,
            a selection of explicit subnets (``ec2.SubnetSelection(subnets=[...])``). Defaults to the
            VPC's private (or isolated) subnets; a VPC with none is refused, not silently served from
            public subnets.
        public_subnets_reason: Why the model may run in public subnets; required to select them.
        security_groups: The model's security groups. Defaults to one new group in ``vpc`` with no
            inbound rules.
        isolation: ``EnableNetworkIsolation``: the container may make no network call at all (SageMaker
            still downloads the model data and writes the logs). Defaults to True; a Triton model needs
            no network.
        isolation_opt_out_reason: Why the container needs the network; required with ``isolation=False``.
        functions_in_vpc: Run the library's own Lambda functions (the model copy, the scaling handover) in
            ``vpc`` too, in the same subnets (AWS Control Tower's CT.LAMBDA.PR.3 requires every function in a
            VPC). Without a NAT the VPC then needs ``FUNCTION_ENDPOINTS``. Defaults to None: in ``vpc`` when one
            is given (unless its public subnets are chosen), else Lambda's network; False keeps them on Lambda's
            network beside a VPC.
        function_security_groups: The functions' security groups. Defaults to one new group with no
            inbound rule and outbound HTTPS (443) only.
    """

    vpc: Optional[ec2.IVpc] = None
    subnets: Optional[ec2.SubnetSelection] = None
    public_subnets_reason: Optional[str] = None
    security_groups: Sequence[ec2.ISecurityGroup] = ()
    isolation: bool = True
    isolation_opt_out_reason: Optional[str] = None
    functions_in_vpc: Optional[bool] = None
    function_security_groups: Sequence[ec2.ISecurityGroup] = ()

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
        if (self.functions_in_vpc or self.function_security_groups) and self.vpc is None:
            problems.append(Problem("functions_in_vpc", "a function placement without a vpc",
                                    "functions_in_vpc and function_security_groups together with vpc",
                                    "pass vpc=, or leave the functions on Lambda's network"))
        if self.function_security_groups and self.functions_in_vpc is False:
            problems.append(Problem("function_security_groups", f"{len(self.function_security_groups)} groups "
                                    "with functions_in_vpc=False", "groups only for functions in the VPC",
                                    "set functions_in_vpc=True, or remove them"))
        raise_problems("NetworkProps", problems)

    def _selection(self) -> ec2.SubnetSelection:
        if self.subnets is not None:
            return self.subnets
        # CDK's default selection falls back to public subnets when a VPC has no private ones.
        private = self.vpc is not None and (self.vpc.private_subnets or self.vpc.isolated_subnets)
        kind = ec2.SubnetType.PRIVATE_WITH_EGRESS if self.vpc is not None and self.vpc.private_subnets \
            else ec2.SubnetType.PRIVATE_ISOLATED
        return ec2.SubnetSelection(subnet_type=kind) if private else ec2.SubnetSelection()

    def problems(self) -> list[Problem]:
        """What the chosen subnets must be (paths relative to the network): not public without a reason."""
        if self.vpc is None:
            return []
        public_ids = {s.subnet_id for s in self.vpc.public_subnets}
        chosen = self.subnet_ids()
        reason = (self.public_subnets_reason or "").strip()
        if chosen and set(chosen) <= public_ids and not reason:
            got = ("a VPC with public subnets only" if self.subnets is None
                   else f"{len(chosen)} public subnets")
            return [Problem("subnets", got, "private or isolated subnets: the model and the functions need no "
                            "inbound route from the internet (https://docs.aws.amazon.com/sagemaker/latest/dg/"
                            "host-vpc.html)",
                            "add private subnets to the VPC (with an S3 gateway endpoint for the model data), or "
                            "select the public ones explicitly with subnets=ec2.SubnetSelection(subnet_type="
                            "ec2.SubnetType.PUBLIC) and say why in public_subnets_reason")]
        if reason and not (chosen and set(chosen) <= public_ids):
            return [Problem("public_subnets_reason", repr(self.public_subnets_reason),
                            "a reason only when the selected subnets are public", "remove it")]
        return []

    def subnet_ids(self) -> list[str]:
        """The selected subnets' IDs (empty: no VPC)."""
        if self.vpc is not None:
            chosen = self._selection()
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

    def function_placement(self, scope: Construct) -> Optional[FunctionPlacement]:
        """Where the library's functions run: None (Lambda's network), or the VPC's chosen subnets with
        your groups or one new ``FunctionSecurityGroup`` (no inbound; outbound HTTPS only)."""
        # By default not into public subnets (chosen with a reason): Lambda gives a function there no internet.
        if self.functions_in_vpc is False or self.vpc is None or (self.functions_in_vpc is None
                                                                 and self.public_subnets_reason):
            return None
        groups = tuple(self.function_security_groups)
        if not groups:
            group = ec2.SecurityGroup(scope, "FunctionSecurityGroup", vpc=self.vpc, allow_all_outbound=False,
                                      description="Triton endpoint Lambda functions: AWS APIs over HTTPS only")
            group.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443),
                                  "AWS APIs (S3, SageMaker, Application Auto Scaling) through the VPC's endpoints")
            groups = (group,)
        return FunctionPlacement(self.vpc, self._selection(), groups)

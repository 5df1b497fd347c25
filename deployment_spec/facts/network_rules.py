"""SageMaker's rules on a model's network settings (CreateModel's VpcConfig and EnableNetworkIsolation), each once.

Plain values in, problems out, with paths relative to the network settings; the spec's ``Network``
and the construct library's ``NetworkProps`` both call them. Sources: botocore's SageMaker service
model (``VpcConfig``: 1-16 subnets, 1-5 security groups) and
https://docs.aws.amazon.com/sagemaker/latest/dg/host-vpc.html (subnets in different Availability Zones).
"""
from __future__ import annotations

from typing import Optional

from deployment_spec.parsing.errors import Problem


def network_isolation_reason(isolation: bool, reason: Optional[str]) -> list[Problem]:
    """Network isolation (on by default) may be turned off only with the reason the container needs the network.

    Paths here and in the two rules below are relative to the network settings.
    """
    if not isolation and not (reason or "").strip():
        return [Problem("isolation", "false", "false only with isolation_opt_out_reason (why the container "
                        "needs the network)",
                        "add isolation_opt_out_reason, e.g. 'model.py reads a feature store over HTTPS', or remove "
                        "isolation: false (network isolation is on by default)")]
    if isolation and reason:
        return [Problem("isolation_opt_out_reason", repr(reason),
                        "a reason only together with isolation: false", "remove it, or set isolation: false")]
    return []


def subnets_in_zones(subnet_count: int, field: str = "subnet_ids") -> list[Problem]:
    """SageMaker wants 2-16 subnets in different Availability Zones (VpcConfig.Subnets)."""
    if subnet_count == 0 or 2 <= subnet_count <= 16:
        return []
    return [Problem(field, f"{subnet_count} subnet{'s' if subnet_count != 1 else ''}",
                    "2 to 16 subnets in different availability zones",
                    "add a subnet in another zone" if subnet_count < 2 else "select at most 16 subnets")]


def vpc_complete(subnet_count: int, security_group_count: int) -> list[Problem]:
    """VpcConfig needs both subnets and security groups."""
    if bool(subnet_count) == bool(security_group_count):
        return []
    return [Problem("", "subnets without security groups or the reverse",
                    "both subnet_ids and security_group_ids, or neither", "give both lists")]

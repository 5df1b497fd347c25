"""Graphs of PromQL queries on a CloudWatch dashboard: a custom widget and the Lambda function behind it.

No dashboard widget of CloudWatch (nor of this aws-cdk-lib) draws PromQL; a custom widget does: the dashboard
calls a Lambda function, which queries CloudWatch's Prometheus-compatible API and answers with the graph
(``handlers/promql_graph.py`` says how). One function serves every graph of a stack's dashboards.
"""
from __future__ import annotations

from typing import Mapping, Optional

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch, aws_iam as iam, aws_kms as kms
from constructs import Construct

from triton_constructs.custom_resource import custom_resource_function
from triton_constructs.nag import acknowledge
from triton_constructs.network import FunctionPlacement

# QueryMetrics needs both (CloudWatch-PromQL-API-QueryMetrics.html, "Required IAM permissions"); neither has
# resource-level permissions (Service Authorization Reference, Amazon CloudWatch: resource types "*"). SageMaker's
# monitoring-detailed-observability-promql.html also lists "cloudwatch:QueryMetrics", but that is no IAM action: the
# IAM action list cfn-lint 1.58 ships (AWS's policy data, Policies.json) has none such for CloudWatch and its W3037
# refuses it. The PromQL QueryMetrics operation is authorized by the two actions CloudWatch's own page names.
QUERY_ACTIONS = ["cloudwatch:GetMetricData", "cloudwatch:ListMetrics"]


class PromQLGraphs(Construct):
    """The function that draws PromQL graphs on dashboards, and the widgets that call it.

    Each dashboard refresh, resize or time-range change calls the function once per graph: it costs one
    Lambda invocation and one CloudWatch query per graph and view. Whoever views the dashboard needs
    ``lambda:InvokeFunction`` on it (the console calls it as them).

    Args:
        scope: Parent construct.
        id_: Construct ID.
        log_key: KMS key of the function's log group. Defaults to CloudWatch Logs' own encryption.
        placement: Run the function in this VPC (it then needs a route to CloudWatch: a NAT or the
            ``monitoring`` interface endpoint). Defaults to Lambda's own network.

    Attributes:
        function: The Lambda function (``function_arn`` is what a custom widget names).
    """

    def __init__(self, scope: Construct, id_: str, *, log_key: Optional[kms.IKey] = None,
                 placement: Optional[FunctionPlacement] = None) -> None:
        super().__init__(scope, id_)
        self.function, role = custom_resource_function(
            self, id_prefix="", handler="promql_graph.handler", memory_size=256,
            role_description="Reads CloudWatch metrics with PromQL to draw dashboard graphs",
            description="CloudWatch dashboard custom widget: draws a PromQL query (Triton's own metrics)",
            reserved_concurrency=10,  # a dashboard's graphs load together; more would only queue
            timeout=cdk.Duration.seconds(30), log_key=log_key, placement=placement)
        role.add_to_policy(iam.PolicyStatement(actions=QUERY_ACTIONS, resources=["*"]))
        acknowledge(role, "AwsSolutions-IAM5[Resource::*]",
                    "cloudwatch:GetMetricData and ListMetrics have no resource-level permissions; both only read.")

    def widget(self, title: str, query: str, *, unit: str = "", width: int = 8, height: int = 6
               ) -> cloudwatch.CustomWidget:
        """A dashboard widget drawing ``query`` over the dashboard's time range (``unit`` labels the y axis)."""
        return cloudwatch.CustomWidget(function_arn=self.function.function_arn, title=title, width=width,
                                       height=height, params={"query": query, "unit": unit})

    def widgets(self, queries: Mapping[str, str]) -> list[cloudwatch.IWidget]:
        """One graph per ``title: query``."""
        return [self.widget(title, query) for title, query in queries.items()]

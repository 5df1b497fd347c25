"""An AWS Budgets cost budget on one cost-allocation tag, alerting an SNS topic: what a stage may cost per month.

The budget sees only costs that carry the tag (``CostFilters`` ``TagKeyValue`` ``user:<key>$<value>``; AWS::Budgets::Budget
BudgetData, and botocore's budgets model, ``Budget.CostFilters``), and AWS Billing counts a user tag only once it is
activated as a cost-allocation tag in the payer account (Billing console or Cost Explorer's
UpdateCostAllocationTagsStatus, which CloudFormation cannot do): tag every billable resource of the stage with
``cdk.Tags.of(stage).add(key, value)`` and activate the key once.

Budgets publishes to the topic as the service principal budgets.amazonaws.com, which the topic's policy must allow
(AWS Budgets user guide, "Creating an Amazon SNS topic for budget notifications",
https://docs.aws.amazon.com/cost-management/latest/userguide/budgets-sns-policy.html), and an encrypted topic's key must
let that principal make data keys (Amazon SNS developer guide, "Enable compatibility between event sources from AWS
services and encrypted topics", https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html).
"""
from __future__ import annotations

from typing import Optional

import aws_cdk as cdk
from aws_cdk import aws_budgets as budgets, aws_iam as iam, aws_kms as kms, aws_sns as sns
from constructs import Construct

BUDGETS = "budgets.amazonaws.com"
# Alerts at 80 % and 100 % of the actual month-to-date cost, and at 100 % of AWS's forecast for the month.
THRESHOLDS = (("ACTUAL", 80.0), ("ACTUAL", 100.0), ("FORECASTED", 100.0))


class StageBudget(Construct):
    """A monthly cost budget of ``monthly_usd`` on the cost-allocation tag ``tag_key=tag_value``, alerting ``topic``.

    Args:
        scope: Parent construct (any stack of the account the costs are billed to).
        id_: Construct ID.
        monthly_usd: The budget, in USD per month.
        tag_key: The cost-allocation tag every billable resource of the stage carries.
        tag_value: Its value for this stage.
        topic: Receives the alerts; its policy is extended to let AWS Budgets publish.
        topic_key: The topic's KMS key, if encrypted with a key this app manages: its policy is extended to let
            AWS Budgets make data keys. An imported key's owner must grant the same.

    Attributes:
        budget: The ``AWS::Budgets::Budget``.
    """

    def __init__(self, scope: Construct, id_: str, *, monthly_usd: float, tag_key: str, tag_value: str,
                 topic: sns.ITopic, topic_key: Optional[kms.IKey] = None) -> None:
        super().__init__(scope, id_)
        stack = cdk.Stack.of(self)
        own_account = {"aws:SourceAccount": stack.account}
        topic.add_to_resource_policy(iam.PolicyStatement(
            sid="BudgetsPublish", principals=[iam.ServicePrincipal(BUDGETS)], actions=["sns:Publish"],
            resources=[topic.topic_arn], conditions={
                "StringEquals": own_account,
                "ArnLike": {"aws:SourceArn": f"arn:{stack.partition}:budgets::{stack.account}:*"}}))
        if topic_key is not None:
            topic_key.add_to_resource_policy(iam.PolicyStatement(
                principals=[iam.ServicePrincipal(BUDGETS)], actions=["kms:GenerateDataKey*", "kms:Decrypt"],
                resources=["*"], conditions={"StringEquals": own_account}))
        subscriber = budgets.CfnBudget.SubscriberProperty(subscription_type="SNS", address=topic.topic_arn)
        self.budget = budgets.CfnBudget(
            self, "Budget",
            budget=budgets.CfnBudget.BudgetDataProperty(
                # Named, not generated: the Budgets console and its alerts show this name.
                budget_name=f"{tag_value} endpoints", budget_type="COST", time_unit="MONTHLY",
                budget_limit=budgets.CfnBudget.SpendProperty(amount=monthly_usd, unit="USD"),
                cost_filters={"TagKeyValue": [f"user:{tag_key}${tag_value}"]}),
            notifications_with_subscribers=[budgets.CfnBudget.NotificationWithSubscribersProperty(
                notification=budgets.CfnBudget.NotificationProperty(
                    notification_type=kind, comparison_operator="GREATER_THAN", threshold=percent,
                    threshold_type="PERCENTAGE"),
                subscribers=[subscriber]) for kind, percent in THRESHOLDS])

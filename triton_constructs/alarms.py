"""Alarms of one endpoint variant, optionally notifying an encrypted SNS topic."""
from __future__ import annotations

from typing import Optional, Sequence

import aws_cdk as cdk
from aws_cdk import (aws_cloudwatch as cloudwatch, aws_cloudwatch_actions as actions, aws_iam as iam,
                     aws_kms as kms, aws_sns as sns)
from constructs import Construct

from deployment_spec.sections.asynchronous import Asynchronous
from deployment_spec.sections.endpoint import Alarms
from triton_constructs import control_tower, generation_promql, triton_promql
from triton_constructs.async_alarms import queue_alarms
from triton_constructs.metrics import EndpointMetrics


class EndpointAlarms(Construct):
    """CloudWatch alarms on latency, errors, GPU memory and disk (and model loading on multi-model endpoints).

    ``ModelLatency`` and ``ModelLoadingWaitTime`` are in microseconds, so the
    millisecond thresholds of the spec are multiplied by 1000.
    ``GPUMemoryUtilization`` sums over GPUs, so its threshold is per-GPU
    percent x GPUs. Missing data (no traffic) is not breaching.

    Args:
        scope: Parent construct.
        id_: Construct ID.
        metrics: The variant's metrics (alarms exist before the endpoint, which names them for rollback).
        thresholds: From the spec.
        gpu_count: GPUs per instance; 0 on CPU types (no GPU memory alarm).
        multi_model: Add the model-loading and cache-hit alarms. Defaults to False.
        notify: Create an SNS topic (KMS-encrypted, SSL-only) for alarm and OK actions. Defaults to False.
        topic: Notify this topic of yours instead. Defaults to none.
        triton_metrics: The container publishes Triton's metrics and SageMaker's detailed observability is on:
            add the PromQL alarm on Triton's queue time (``triton_promql``). Defaults to False.
        generating: The container runs the generate route (its model generates text): with ``triton_metrics`` and
            ``thresholds.time_to_first_token_ms``, add the PromQL alarm on the time to first token. Defaults to False.
        asynchronous: The endpoint serves asynchronously: add the queue's alarms (``async_alarms``); latency and
            5XX stay, among the common endpoint metrics SageMaker publishes for it. Defaults to none.
        subject: What the descriptions name, e.g. ``<endpoint> variant B`` beside another variant's alarms.
            Defaults to the endpoint's name.

    Attributes:
        latency, errors: The alarms that roll a guarded deployment back.
        all: Every alarm.
        topic: The SNS topic, or None.
    """

    def __init__(self, scope: Construct, id_: str, *, metrics: EndpointMetrics, thresholds: Alarms,
                 gpu_count: int, multi_model: bool = False, notify: bool = False,
                 topic: Optional[sns.ITopic] = None, triton_metrics: bool = False,
                 asynchronous: Optional[Asynchronous] = None, subject: Optional[str] = None,
                 generating: bool = False) -> None:
        super().__init__(scope, id_)
        endpoint_name = subject or metrics.endpoint_name

        def alarm(id_: str, metric: cloudwatch.Metric, threshold: float, description: str,
                  *, below: bool = False, periods: int = 3) -> cloudwatch.Alarm:
            return cloudwatch.Alarm(
                self, id_, metric=metric, threshold=threshold, evaluation_periods=periods,
                datapoints_to_alarm=periods, alarm_description=f"{endpoint_name}: {description}",
                comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD if below
                else cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING)

        t = thresholds
        self.latency = alarm("ModelLatency", metrics.invocation("ModelLatency", "Average"),
                             t.latency_sla_ms * 1000, f"average model latency at or above the {t.latency_sla_ms} ms "
                             "SLA (ModelLatency is in microseconds)", periods=2)
        self.errors = alarm("Errors5xx", metrics.invocation("Invocation5XXErrors", "Sum"), t.error_5xx_threshold,
                            f"{t.error_5xx_threshold:g} or more 5XX errors per minute", periods=1)
        self.all: list[cloudwatch.AlarmBase] = [self.latency, self.errors]
        self.queue: list[cloudwatch.Alarm] = []
        if asynchronous is not None:
            self.queue = queue_alarms(alarm, metrics, asynchronous)
            self.all += self.queue
        if gpu_count:
            self.all.append(alarm("GpuMemory", metrics.instance("GPUMemoryUtilization"),
                                  t.gpu_memory_percent * gpu_count,
                                  f"GPU memory at or above {t.gpu_memory_percent:g} % per GPU ({gpu_count} GPUs)"))
        self.all.append(alarm("Disk", metrics.instance("DiskUtilization"), t.disk_percent,
                              f"disk at or above {t.disk_percent:g} %"))
        if multi_model:
            self.all.append(alarm("ModelLoadingWait", metrics.invocation("ModelLoadingWaitTime", "Average"),
                                  t.model_loading_wait_ms * 1000, f"requests wait {t.model_loading_wait_ms:g} ms or "
                                  "more for a model to load (microseconds)"))
            self.all.append(alarm("CacheHit", metrics.invocation("ModelCacheHit", "Average"), t.cache_hit_ratio_min,
                                  f"model cache hit ratio below {t.cache_hit_ratio_min:g}", below=True, periods=5))
        self.triton_queue: Optional[cloudwatch.PromQLAlarm] = None
        if triton_metrics:
            self.triton_queue = queue_alarm(self, metrics.endpoint_name, t)
            self.all.append(self.triton_queue)
        self.time_to_first_token: Optional[cloudwatch.PromQLAlarm] = None
        if triton_metrics and generating and t.time_to_first_token_ms is not None:
            self.time_to_first_token = time_to_first_token_alarm(self, metrics.endpoint_name, t.time_to_first_token_ms)
            self.all.append(self.time_to_first_token)
        self.topic: Optional[sns.ITopic] = topic
        if notify and topic is None:
            key = kms.Key(self, "TopicKey", enable_key_rotation=True, description=f"{endpoint_name} alarm topic")
            allow_alarms(key)
            control_tower.deny_grants_for_non_aws_resources(key)
            self.topic = sns.Topic(self, "Topic", master_key=key, enforce_ssl=True,
                                   display_name=f"{endpoint_name} alarms")
        if self.topic is not None:
            notify_topic(self.all, self.topic)


def allow_alarms(key: kms.IKey) -> None:
    """CloudWatch publishes alarms to a topic encrypted with ``key``: it needs the key, for this account only."""
    key.add_to_resource_policy(iam.PolicyStatement(
        principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
        actions=["kms:Decrypt", "kms:GenerateDataKey*"], resources=["*"],
        conditions={"StringEquals": {"aws:SourceAccount": cdk.Aws.ACCOUNT_ID}}))


def notify_topic(alarms: Sequence[cloudwatch.AlarmBase], topic: sns.ITopic) -> None:
    """Each alarm notifies ``topic`` on ALARM and on OK: an alarm with an action (CT.CLOUDWATCH.PR.1)."""
    for each in alarms:
        each.add_alarm_action(actions.SnsAction(topic))
        each.add_ok_action(actions.SnsAction(topic))


def queue_alarm(scope: Construct, endpoint_name: str, thresholds: Alarms,
                component_name: Optional[str] = None) -> cloudwatch.PromQLAlarm:
    """Alarms when requests wait in Triton's queue longer than ``queue_share_of_sla`` of the latency SLA for
    5 minutes, per model: the sign that instances (or instance_group count) are too few, or dynamic batching
    waits too long (``max_queue_delay_microseconds``)."""
    share, sla = thresholds.queue_share_of_sla, thresholds.latency_sla_ms
    subject = component_name or endpoint_name
    return cloudwatch.PromQLAlarm(
        scope, "TritonQueue", query=triton_promql.queue_over_sla(endpoint_name, sla, share, component_name),
        evaluation_interval=cdk.Duration.minutes(1), pending_period=cdk.Duration.minutes(5),
        recovery_period=cdk.Duration.minutes(5),
        alarm_description=f"{subject}: Triton queue time per request above {share:.0%} of the {sla:g} ms SLA "
                          "(Triton's own metrics through SageMaker detailed observability)")


def time_to_first_token_alarm(scope: Construct, endpoint_name: str, threshold_ms: float,
                              component_name: Optional[str] = None) -> cloudwatch.PromQLAlarm:
    """Alarms when a generating model's p90 time to first token stays above ``threshold_ms`` for 5 minutes, per
    model (of one inference component where ``component_name`` is given): requests wait for a place in the running
    batch (too few instances or copies, or max_batch_size too small) or prompts take long to read
    (``generation_promql``)."""
    return cloudwatch.PromQLAlarm(
        scope, "TimeToFirstToken",
        query=generation_promql.time_to_first_token_over(endpoint_name, threshold_ms, component_name),
        evaluation_interval=cdk.Duration.minutes(1), pending_period=cdk.Duration.minutes(5),
        recovery_period=cdk.Duration.minutes(5),
        alarm_description=f"{component_name or endpoint_name}: p{generation_promql.ALARM_QUANTILE * 100:g} time to "
                          f"first token above "
                          f"{threshold_ms:g} ms (the generating model's own metric through SageMaker detailed "
                          "observability)")

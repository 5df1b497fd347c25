"""`tritonsm bench recommender ENDPOINT --import JOB`: a finished Inference Recommender job's result
becomes the endpoint's capacity record (capacity.json), which sets its invocations target.

DescribeInferenceRecommendationsJob reports, per instance, ``MaxInvocations`` (requests per minute
the instance sustained within the job's stopping conditions) and ``ModelLatency`` at that load
(botocore's sagemaker model, ``InferenceMetrics`` / ``RecommendationMetrics``). A job on an existing
endpoint (this app's request, tritonsm.benchmarking.recommender_request) reports ``EndpointPerformances``;
instance types tried besides report ``InferenceRecommendations``, whose ``RecommendationMetrics`` also carry
AWS's own ``CostPerHour`` and ``CostPerInference``: kept in the record (``recommender_cost``) to compare with our
cost per million (tritonsm.benchmarking.recommender_cost). ``InferenceMetrics`` carry no cost.
"""
from __future__ import annotations

from typing import Any

from deployment_spec.cost.capacity import Measurement
from deployment_spec.parsing.errors import UserError
from deployment_spec.cost.measured_cost import RecommenderCost

OPERATION = "describe_inference_recommendations_job"


def measurement(job: dict[str, Any], endpoint: Any, endpoint_name: str | None = None) -> Measurement:
    """The measurement for the spec endpoint's instance type from a described job; UserError if there is none."""
    name, status = job["JobName"], job["Status"]
    if status != "COMPLETED":
        reason = f": {job['FailureReason']}" if job.get("FailureReason") else ""
        raise UserError(f"Inference Recommender job {name} is {status}{reason}; import it once it is COMPLETED")
    instance_type = endpoint.instance_type
    found = None
    for rec in job.get("InferenceRecommendations", []):
        config = rec.get("EndpointConfiguration", {})
        if config.get("InstanceType") == instance_type:
            found = (rec["Metrics"], f"{instance_type} ({config.get('InitialInstanceCount', 1)} instance)", False)
            break
    for perf in job.get("EndpointPerformances", []) if found is None else ():
        if endpoint_name is None or perf["EndpointInfo"]["EndpointName"] == endpoint_name:
            found = (perf["Metrics"], f"{instance_type}, endpoint {perf['EndpointInfo']['EndpointName']}", True)
            break
    if found is None:
        raise UserError(f"Inference Recommender job {name} has no result for {instance_type} (endpoint "
                        f"{endpoint.name}'s instance type); run a job that includes it (tritonsm bench recommender "
                        f"{endpoint.name} ...)")
    metrics, where, on_endpoint = found
    absent = _absent(metrics)
    if absent:
        raise UserError(f"Inference Recommender job {name}'s result for {instance_type} has no {' or '.join(absent)}; "
                        "nothing to record (the capacity record needs both): run the job again, or set "
                        f"endpoints.{endpoint.name}.scaling.max_rps_per_instance")
    return _measurement(job, metrics, where, endpoint, instance_type, on_endpoint)


def other_types(job: dict[str, Any], endpoint: Any) -> list[Measurement]:
    """What the job measured on every other instance type it tried (its InferenceRecommendations), each with AWS's
    cost, to compare per instance type; results without a rate or a latency are left out."""
    out = []
    for rec in job.get("InferenceRecommendations", []):
        config, metrics = rec.get("EndpointConfiguration", {}), rec.get("Metrics", {})
        instance_type = config.get("InstanceType")
        if instance_type and instance_type != endpoint.instance_type and not _absent(metrics):
            where = f"{instance_type} ({config.get('InitialInstanceCount', 1)} instance)"
            out.append(_measurement(job, metrics, where, endpoint, instance_type, False))
    return out


def _absent(metrics: dict[str, Any]) -> list[str]:
    # Optional in RecommendationMetrics (botocore's sagemaker model), so a result may lack them.
    return [key for key in ("MaxInvocations", "ModelLatency") if metrics.get(key) is None]


def _measurement(job: dict[str, Any], metrics: dict[str, Any], where: str, endpoint: Any, instance_type: str,
                 on_endpoint: bool) -> Measurement:
    name = job["JobName"]
    return Measurement(
        max_rps_per_instance=round(metrics["MaxInvocations"] / 60, 3),
        latency_sla_ms=float(endpoint.alarms.latency_sla_ms),
        p99_ms=float(metrics["ModelLatency"]),
        measured_on=f"{where}, Inference Recommender job {name}",
        command=f"tritonsm bench recommender {endpoint.name} --import {name}",
        recommender_cost=aws_cost(job, metrics, instance_type, on_endpoint))


def aws_cost(job: dict[str, Any], metrics: dict[str, Any], instance_type: str, on_endpoint: bool) -> RecommenderCost:
    """AWS's CostPerHour and CostPerInference of the chosen result, or why the job reported none."""
    # The region AWS priced is the job's own: arn:aws:sagemaker:<region>:<account>:inference-recommendations-job/...
    region = job["JobArn"].split(":")[3]
    reported = {key: metrics.get(key) for key in ("CostPerHour", "CostPerInference")}
    missing = [key for key, value in reported.items() if value is None]
    if not missing:
        note = None
    elif on_endpoint:
        note = ("the job measured an existing endpoint: its EndpointPerformances carry MaxInvocations and "
                "ModelLatency only (botocore InferenceMetrics), no CostPerHour or CostPerInference")
    else:
        note = f"the job's result for {instance_type} carries no {' or '.join(missing)}"
    return RecommenderCost(job["JobName"], region, instance_type, reported["CostPerHour"],
                           reported["CostPerInference"], note)


def describe(client: Any, job_name: str) -> dict[str, Any]:
    """The job as DescribeInferenceRecommendationsJob returns it; UserError for API errors."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return client.describe_inference_recommendations_job(JobName=job_name)
    except ClientError as exc:
        raise UserError(f"cannot read Inference Recommender job {job_name}: {exc}") from None
    except BotoCoreError as exc:
        raise UserError(f"cannot reach SageMaker to read Inference Recommender job {job_name}: {exc}; configure "
                        "AWS credentials and --region") from None

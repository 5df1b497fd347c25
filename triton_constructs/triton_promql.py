"""Triton's own metrics in CloudWatch, as PromQL: queue time, compute time, batch sizes and pending requests per
model.

With detailed observability (``MetricsConfig.EnableDetailedObservability``) SageMaker publishes the metrics
it scrapes from the container as OpenTelemetry metrics, queried with PromQL in CloudWatch (SageMaker
developer guide, monitoring-cloudwatch-detailed-observability.html; labels such as
``aws.sagemaker.endpoint.name`` and ``aws.sagemaker.inference_component.name``: inference-monitoring.html).
Metric names and label syntax: Prometheus 3's quoted UTF-8 form, as CloudWatch's PromQL querying page
writes it (``{"metric", "label"="value"}``). Triton's counters: its docs/user_guide/metrics.md (r25.09).

Whether SageMaker scrapes the sagemaker-tritonserver image's metrics port is not documented (the guide
names vLLM and SGLang; for other containers it scrapes ``/metrics`` on 8080, which Triton's SageMaker
front end does not serve): these queries and the alarm built on them answer only once Triton's series
appear in Query Studio. docs/operations/observability.md.
"""
from __future__ import annotations

from typing import Optional

ENDPOINT_LABEL = "aws.sagemaker.endpoint.name"
COMPONENT_LABEL = "aws.sagemaker.inference_component.name"
WINDOW = "5m"


def _series(metric: str, endpoint_name: str, component_name: Optional[str]) -> str:
    labels = [f'"{metric}"', f'"{ENDPOINT_LABEL}"="{endpoint_name}"']
    if component_name is not None:
        labels.append(f'"{COMPONENT_LABEL}"="{component_name}"')
    return "{" + ", ".join(labels) + "}"


def _per_model_rate(metric: str, endpoint_name: str, component_name: Optional[str]) -> str:
    return f"sum by (model) (rate({_series(metric, endpoint_name, component_name)}[{WINDOW}]))"


def per_request_ms(counter: str, endpoint_name: str, component_name: Optional[str] = None) -> str:
    """Milliseconds of a cumulative-microseconds counter per successful request, per model."""
    return (f"({_per_model_rate(counter, endpoint_name, component_name)} / "
            f"{_per_model_rate('nv_inference_request_success', endpoint_name, component_name)}) / 1000")


def queue_ms(endpoint_name: str, component_name: Optional[str] = None) -> str:
    """Time a request waits in Triton's queue, ms, per model."""
    return per_request_ms("nv_inference_queue_duration_us", endpoint_name, component_name)


def compute_ms(endpoint_name: str, component_name: Optional[str] = None) -> str:
    """Time the model computes for a request, ms, per model."""
    return per_request_ms("nv_inference_compute_infer_duration_us", endpoint_name, component_name)


def average_batch(endpoint_name: str, component_name: Optional[str] = None) -> str:
    """Inferences per execution: the batch size dynamic batching actually formed, per model."""
    return (f"{_per_model_rate('nv_inference_count', endpoint_name, component_name)} / "
            f"{_per_model_rate('nv_inference_exec_count', endpoint_name, component_name)}")


def pending_requests(endpoint_name: str, component_name: Optional[str] = None) -> str:
    """Requests Triton holds and has not started computing (a gauge), per model: a queue that grows here
    while queue time rises asks for instances, not a longer batching delay."""
    return f"sum by (model) ({_series('nv_inference_pending_request_count', endpoint_name, component_name)})"


def queue_over_sla(endpoint_name: str, latency_sla_ms: float, share: float,
                   component_name: Optional[str] = None) -> str:
    """The models whose queue time exceeds ``share`` of the latency SLA (each model one contributor)."""
    return f"{queue_ms(endpoint_name, component_name)} > {latency_sla_ms * share:g}"


def dashboard_queries(endpoint_name: str, component_name: Optional[str] = None) -> dict[str, str]:
    """The queries a dashboard lists (title: query), for an endpoint or one of its inference components."""
    return {"queue ms per request": queue_ms(endpoint_name, component_name),
            "compute ms per request": compute_ms(endpoint_name, component_name),
            "average batch formed": average_batch(endpoint_name, component_name),
            "pending requests": pending_requests(endpoint_name, component_name)}

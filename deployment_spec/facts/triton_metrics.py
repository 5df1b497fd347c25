"""Where Triton's Prometheus metrics may listen on SageMaker, and how often SageMaker publishes metrics.

The container's serve script (triton-inference-server/server ``docker/sagemaker/serve``, r25.09) starts
``tritonserver --allow-metrics=false`` unless ``SAGEMAKER_TRITON_ALLOW_METRICS`` says otherwise, passes
``SAGEMAKER_TRITON_METRICS_PORT`` as ``--metrics-port`` and SageMaker's ``SAGEMAKER_SAFE_PORT_RANGE`` as
``--sagemaker-safe-port-range``. tritonserver then exits at start when the metrics port lies outside that
range or equals the SageMaker port (``src/command_line_parser.cc``, r25.09: "The server cannot listen to
metrics requests at port ..., allowed port range is [...]").

The range's value is not in the SageMaker documentation; 23000-23999 is what that message reports on
SageMaker hosts (a public deployment log, 2026). A port inside it is safe under both readings: with no
range set, any port is accepted.
"""
from __future__ import annotations

from deployment_spec.parsing.errors import Problem

SAGEMAKER_PORT = 8080
SAFE_PORT_RANGE = (23000, 23999)
DEFAULT_METRICS_PORT = SAFE_PORT_RANGE[0]
# MetricsConfig.MetricPublishFrequencyInSeconds (botocore's SageMaker service model, CreateEndpointConfig).
PUBLISH_FREQUENCIES_S = (10, 30, 60, 120, 180, 240, 300)


def metrics_port_problems(port: int, path: str) -> list[Problem]:
    """The metrics port must lie in SageMaker's safe port range (never the SageMaker port itself)."""
    low, high = SAFE_PORT_RANGE
    if low <= port <= high:
        return []
    return [Problem(path, str(port), f"a port in {low}-{high}: SageMaker gives the container SAGEMAKER_SAFE_PORT_RANGE "
                    "and tritonserver exits at start when its metrics port lies outside it "
                    "(src/command_line_parser.cc, r25.09)",
                    f"use {DEFAULT_METRICS_PORT} (the default), or leave metrics_port out")]


def publish_frequency_problems(seconds: int, path: str) -> list[Problem]:
    if seconds in PUBLISH_FREQUENCIES_S:
        return []
    allowed = ", ".join(str(s) for s in PUBLISH_FREQUENCIES_S)
    return [Problem(path, str(seconds), f"one of {allowed} (MetricsConfig.MetricPublishFrequencyInSeconds)",
                    "pick the nearest of those")]


def graphs_problems(graphs: bool, *, detailed: bool, container_metrics: bool, path: str) -> list[Problem]:
    """Graphs of Triton's metrics need the metrics: Triton publishing them and SageMaker collecting them."""
    if graphs and not detailed:
        return [Problem(path, "true with detailed: false", "graphs with detailed: true (SageMaker publishes "
                        "Triton's metrics only with detailed observability)", "set detailed: true or remove graphs")]
    if graphs and not container_metrics:
        return [Problem(path, "true with container.metrics: false", "graphs with container.metrics: true "
                        "(Triton's metrics are what they draw)", "set container.metrics: true or remove graphs")]
    return []

"""Where an alarm on a generating model's time to first token can work (issue #59).

The time to first token is the served model's own metric (``tritonsm_generation_time_to_first_token_seconds``,
model_build/python_models/generation_metrics.py), which only a generating task's model records. Such a model is served
through Triton's generate route: the container's ``SAGEMAKER_TRITON_INFERENCE_TYPE`` is ``generate`` or
``generate_stream`` (the spec sets the latter where a model streams: deployment_spec.rules.streaming), so the
container's mode is what says an endpoint generates, for the spec and the construct library alike. The alarm reads
the metric through SageMaker's detailed observability, as the queue-time alarm on Triton's own metrics does.
"""
from __future__ import annotations

from typing import Optional

from deployment_spec.parsing.errors import Problem

GENERATE_ROUTES = ("generate", "generate_stream")


def generates(inference_type: Optional[str]) -> bool:
    """Whether the container runs the generate route, i.e. serves a generating model."""
    return inference_type in GENERATE_ROUTES


def time_to_first_token_problems(threshold_ms: Optional[float], inference_type: Optional[str], *, metrics: bool,
                                 detailed: bool, path: str = "alarms.time_to_first_token_ms") -> list[Problem]:
    """On a single-model endpoint the alarm is the endpoint's; on inference components each component whose
    container generates has its own (triton_constructs.component_monitoring), the threshold the endpoint's."""
    if threshold_ms is None:
        return []
    if not generates(inference_type):
        mode = inference_type or "infer"
        return [Problem(path, f"{threshold_ms:g} on an endpoint whose container runs {mode} (no model of it "
                        "generates text)", "a threshold only where the endpoint serves a text-generation or "
                        "text2text-generation task that streams (its container then runs generate_stream, and its "
                        "model measures the time to first token)", "remove alarms.time_to_first_token_ms")]
    if not (metrics and detailed):
        return [Problem(path, f"{threshold_ms:g} with container.metrics: {str(metrics).lower()} and "
                        f"observability.detailed: {str(detailed).lower()}", "a threshold with both on (the model's "
                        "metric reaches CloudWatch through Triton's metrics port and SageMaker's detailed "
                        "observability)", "turn both on, or remove alarms.time_to_first_token_ms")]
    return []

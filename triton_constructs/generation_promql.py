"""A generating model's own metrics in CloudWatch, as PromQL: time to first token, inter-token latency, tokens/s.

The served model (model_build/python_models/generation_metrics.py) records them on Triton's metrics port, beside
Triton's own series; SageMaker's detailed observability publishes both the same way, so these read them with the
labels ``triton_promql`` uses (its module docstring says what is and is not documented about that path). The
histograms' ``_bucket`` series give quantiles; their ``_sum`` and ``_count`` (also the two counters a release
without histograms gets) give averages.
"""
from __future__ import annotations

from typing import Optional

from triton_constructs.triton_promql import COMPONENT_LABEL, ENDPOINT_LABEL, WINDOW

PREFIX = "tritonsm_generation_"
TIME_TO_FIRST_TOKEN = PREFIX + "time_to_first_token_seconds"
INTER_TOKEN_LATENCY = PREFIX + "inter_token_latency_seconds"
OUTPUT_TOKENS = PREFIX + "output_tokens_total"
ALARM_QUANTILE = 0.9


def _rate(metric: str, endpoint_name: str, by: str = "model", component_name: Optional[str] = None) -> str:
    component = f', "{COMPONENT_LABEL}"="{component_name}"' if component_name is not None else ""
    return f'sum by ({by}) (rate({{"{metric}", "{ENDPOINT_LABEL}"="{endpoint_name}"{component}}}[{WINDOW}]))'


def time_to_first_token_ms(endpoint_name: str, quantile: float, component_name: Optional[str] = None) -> str:
    """The ``quantile`` of the time to first token over the window, ms, per model (of one inference component
    where ``component_name`` is given)."""
    buckets = _rate(TIME_TO_FIRST_TOKEN + "_bucket", endpoint_name, by="model, le", component_name=component_name)
    return f"histogram_quantile({quantile:g}, {buckets}) * 1000"


def inter_token_ms(endpoint_name: str, component_name: Optional[str] = None) -> str:
    """The average gap between two generated tokens of a request, ms, per model."""
    return (f"({_rate(INTER_TOKEN_LATENCY + '_sum', endpoint_name, component_name=component_name)} / "
            f"{_rate(INTER_TOKEN_LATENCY + '_count', endpoint_name, component_name=component_name)}) * 1000")


def output_tokens_per_second(endpoint_name: str, component_name: Optional[str] = None) -> str:
    """Tokens generated per second, per model (over all of the endpoint's instances, or the component's copies)."""
    return _rate(OUTPUT_TOKENS, endpoint_name, component_name=component_name)


def time_to_first_token_over(endpoint_name: str, threshold_ms: float, component_name: Optional[str] = None) -> str:
    """The models whose p90 time to first token exceeds ``threshold_ms`` (each model one contributor)."""
    return f"{time_to_first_token_ms(endpoint_name, ALARM_QUANTILE, component_name)} > {threshold_ms:g}"


def dashboard_queries(endpoint_name: str, component_name: Optional[str] = None) -> dict[str, str]:
    """The generation graphs of an endpoint's (or one inference component's) dashboard (title: query)."""
    return {"time to first token p50 (ms)": time_to_first_token_ms(endpoint_name, 0.5, component_name),
            "time to first token p90 (ms)": time_to_first_token_ms(endpoint_name, ALARM_QUANTILE, component_name),
            "inter-token latency (ms, average)": inter_token_ms(endpoint_name, component_name),
            "output tokens per second": output_tokens_per_second(endpoint_name, component_name)}

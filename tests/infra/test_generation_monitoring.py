"""A generating endpoint's monitoring as synthesized (issue #59): its dashboard draws the model's time to first token,
inter-token latency and tokens per second beside Triton's own metrics, and ``alarms.time_to_first_token_ms`` becomes a
PromQL alarm on the p90 time to first token; refused, with the reason, where no model of the endpoint generates."""
from __future__ import annotations

import json
from typing import Any

import pytest

from deployment_spec.parsing.errors import SpecError
from deployment_spec.rules import generation_alarms
from triton_constructs import generation_promql

EXAMPLE = "examples/t5-streaming-sme"
STAGES = ("dev", "staging", "prod")


def _resources(template: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r for r in template.get("Resources", {}).values() if r["Type"] == kind]


def _dashboard_text(template: dict[str, Any]) -> str:
    [dashboard] = _resources(template, "AWS::CloudWatch::Dashboard")
    return json.dumps(dashboard["Properties"]["DashboardBody"])


def _promql_alarms(template: dict[str, Any]) -> list[str]:
    return [a["Properties"]["EvaluationCriteria"]["PromQLCriteria"]["Query"]
            for a in _resources(template, "AWS::CloudWatch::Alarm") if "EvaluationCriteria" in a["Properties"]]


@pytest.mark.parametrize("stage", STAGES)
def test_the_streaming_examples_dashboard_and_alarm_read_the_models_generation_metrics(every_assembly, stage):
    assembly = every_assembly[EXAMPLE]
    template = assembly.template(stage, "t5-stream")
    text = _dashboard_text(template)
    for metric in (generation_promql.TIME_TO_FIRST_TOKEN + "_bucket", generation_promql.INTER_TOKEN_LATENCY + "_sum",
                   generation_promql.OUTPUT_TOKENS):
        assert metric in text
    assert "histogram_quantile(0.5" in text and "histogram_quantile(0.9" in text
    ttft = [q for q in _promql_alarms(template) if generation_promql.TIME_TO_FIRST_TOKEN in q]
    assert len(ttft) == 1 and ttft[0].startswith("histogram_quantile(0.9, sum by (model, le) (rate(")
    assert ttft[0].endswith(") * 1000 > 1500")
    assert assembly.nag_findings == []


def test_no_other_example_gets_generation_graphs_or_alarms(every_assembly):
    # Guard twin: the graphs follow the container's generate route, not every endpoint with Triton's metrics.
    # specs/vllm-engine streams too, from NVIDIA's vLLM image, which publishes its own metrics: no graphs of ours there.
    found = [template.name for name, assembly in every_assembly.items() if name != EXAMPLE
             for template in assembly.templates() if generation_promql.PREFIX in template.read_text()]
    assert found == []


def _spec(tmp_path, endpoint: str, task: str = "task: {kind: text-generation}") -> Any:
    from deployment_spec import load_spec

    (tmp_path / "ckpt").mkdir(exist_ok=True)
    (tmp_path / "gen.yaml").write_text(f"""\
project: Gen
triton_version: "25.09"
signing: {{unsigned_reason: "test"}}
models:
  writer: {{backend: python, weights: ckpt, max_batch_size: 8, {task}}}
endpoints:
  chat: {{kind: single-model, models: [writer], instance_type: ml.g5.2xlarge, {endpoint}}}
environments:
  dev: {{region: us-east-1}}
""")
    return load_spec(tmp_path / "gen.yaml")


def _refusals(tmp_path, endpoint: str, task: str = "task: {kind: text-generation}") -> list[str]:
    with pytest.raises(SpecError) as caught:
        _spec(tmp_path, endpoint, task)
    return [line.strip() for line in str(caught.value).splitlines() if "time_to_first_token_ms" in line]


def test_a_generating_endpoint_takes_the_threshold(tmp_path):
    spec = _spec(tmp_path, "alarms: {time_to_first_token_ms: 800}")
    assert spec.endpoints["chat"].alarms.time_to_first_token_ms == 800


def test_the_threshold_where_no_model_generates_is_refused(tmp_path):
    assert _refusals(tmp_path, "alarms: {time_to_first_token_ms: 800}", "task: {kind: text-classification}") == [
        "- endpoints.chat.alarms.time_to_first_token_ms: got 800 on an endpoint whose container runs infer (no model "
        "of it generates text); allowed: a threshold only where the endpoint serves a text-generation or "
        "text2text-generation task that streams (its container then runs generate_stream, and its model measures the "
        "time to first token); fix: remove alarms.time_to_first_token_ms"]


def test_the_threshold_without_the_metrics_path_is_refused(tmp_path):
    assert _refusals(tmp_path, "alarms: {time_to_first_token_ms: 800}, container: {metrics: false}, "
                               "observability: {detailed: true}") == [
        "- endpoints.chat.alarms.time_to_first_token_ms: got 800 with container.metrics: false and "
        "observability.detailed: true; allowed: a threshold with both on (the model's metric reaches CloudWatch "
        "through Triton's metrics port and SageMaker's detailed observability); fix: turn both on, or remove "
        "alarms.time_to_first_token_ms"]


def test_the_threshold_on_inference_components_is_refused():
    [problem] = generation_alarms.time_to_first_token_problems(800, "generate_stream", metrics=True, detailed=True,
                                                                components=True)
    assert str(problem) == (
        "alarms.time_to_first_token_ms: got 800 on an inference-components endpoint; allowed: a threshold on a "
        "single-model endpoint (the time-to-first-token alarm is not made per component yet); fix: remove "
        "alarms.time_to_first_token_ms, or serve the model from a single-model endpoint")


def test_the_construct_library_refuses_the_threshold_on_an_infer_container(tmp_path):
    from user_app import model_archive, user_stack
    from triton_constructs import Alarms, ModelArchive, ModelRepositories, PropsError, TritonSageMakerEndpoint

    models = ModelRepositories.from_archives([ModelArchive.from_file(model_archive(tmp_path, "resnet50"))])
    with pytest.raises(PropsError) as caught:
        TritonSageMakerEndpoint(user_stack(), "Endpoint", models=models, instance_type="ml.g5.xlarge",
                                alarms=Alarms(time_to_first_token_ms=800))
    assert "alarms.time_to_first_token_ms: got 800 on an endpoint whose container runs infer" in str(caught.value)

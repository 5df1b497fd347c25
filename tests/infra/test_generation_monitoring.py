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


def _components_endpoint(environment: dict[str, str], observability: Any = None) -> Any:
    import aws_cdk as cdk

    from deployment_spec.sections.endpoint import Alarms, Observability
    from triton_constructs.execution_role import TritonExecutionRole
    from triton_constructs.image import TritonImage
    from triton_constructs.inference_components import ComponentProps, TritonInferenceComponents

    stack = cdk.Stack(cdk.App(), "Shared", env=cdk.Environment(region="us-east-1"))
    image = TritonImage(stack, "Image", version="25.09")
    role = TritonExecutionRole(stack, "Role", image=image, bucket=cdk.aws_s3.Bucket(stack, "Bucket"),
                               key=cdk.aws_kms.Key(stack, "Key"), model_prefix="models/e/")
    components = [ComponentProps(model=m, name=f"e-{m}", model_data_url=f"s3://b/{m}.tar.gz", archive_models=[m],
                                 environment=environment) for m in ("writer", "chat")]
    TritonInferenceComponents(stack, "Endpoint", image=image, execution_role=role, endpoint_name="e",
                              instance_type="ml.g5.12xlarge", components=components,
                              thresholds=Alarms(time_to_first_token_ms=800),
                              observability=observability or Observability(detailed=True))
    return stack


GENERATING = {"SAGEMAKER_TRITON_INFERENCE_TYPE": "generate_stream", "SAGEMAKER_TRITON_ALLOW_METRICS": "true"}


def test_each_generating_inference_component_has_its_own_time_to_first_token_alarm():
    from aws_cdk.assertions import Template

    template = Template.from_stack(_components_endpoint(GENERATING)).to_json()
    queries = sorted(q for q in _promql_alarms(template) if generation_promql.TIME_TO_FIRST_TOKEN in q)
    assert queries == [
        'histogram_quantile(0.9, sum by (model, le) (rate({"tritonsm_generation_time_to_first_token_seconds_bucket", '
        f'"aws.sagemaker.endpoint.name"="e", "aws.sagemaker.inference_component.name"="e-{model}"}}[5m]))) * 1000 '
        "> 800" for model in ("chat", "writer")]
    # Each component's dashboard lists its generation queries beside Triton's (as text without graphs: Query Studio).
    dashboards = [json.dumps(r["Properties"]["DashboardBody"]) for r in template["Resources"].values()
                  if r["Type"] == "AWS::CloudWatch::Dashboard"]
    assert len(dashboards) == 2
    for text in dashboards:
        assert generation_promql.OUTPUT_TOKENS in text and generation_promql.INTER_TOKEN_LATENCY in text


def test_the_threshold_on_components_that_do_not_generate_is_refused():
    from deployment_spec.sections.endpoint import Observability
    from triton_constructs import PropsError

    with pytest.raises(PropsError) as caught:
        _components_endpoint({"SAGEMAKER_TRITON_ALLOW_METRICS": "true"})
    assert "thresholds.time_to_first_token_ms: got 800 on an endpoint whose container runs infer" in str(caught.value)
    with pytest.raises(PropsError) as caught:
        _components_endpoint(GENERATING, Observability(detailed=False))
    assert ("thresholds.time_to_first_token_ms: got 800 with container.metrics: true and observability.detailed: "
            "false") in str(caught.value)


def test_the_construct_library_refuses_the_threshold_on_an_infer_container(tmp_path):
    from user_app import model_archive, user_stack
    from triton_constructs import Alarms, ModelArchive, ModelRepositories, PropsError, TritonSageMakerEndpoint

    models = ModelRepositories.from_archives([ModelArchive.from_file(model_archive(tmp_path, "resnet50"))])
    with pytest.raises(PropsError) as caught:
        TritonSageMakerEndpoint(user_stack(), "Endpoint", models=models, instance_type="ml.g5.xlarge",
                                alarms=Alarms(time_to_first_token_ms=800))
    assert "alarms.time_to_first_token_ms: got 800 on an endpoint whose container runs infer" in str(caught.value)

"""Triton's own metrics on, on a port SageMaker allows, and MetricsConfig explicit on every kind of endpoint."""
import json

import pytest
from aws_cdk.assertions import Template

from user_app import model_archive, user_stack
from triton_constructs import (Container, ModelArchive, ModelRepositories, Observability, PropsError,
                               TritonComponentsEndpoint, TritonSageMakerEndpoint)

METRICS_ENV = {"SAGEMAKER_TRITON_ALLOW_METRICS": "true", "SAGEMAKER_TRITON_METRICS_PORT": "23000"}


def _models(tmp_path, *names: str) -> ModelRepositories:
    return ModelRepositories.from_archives([ModelArchive.from_file(model_archive(tmp_path, n)) for n in names])


def _environments(template: Template) -> list[dict]:
    models = template.find_resources("AWS::SageMaker::Model").values()
    return [m["Properties"]["PrimaryContainer"]["Environment"] for m in models]


def _metrics_configs(template: Template) -> list[dict]:
    return [c["Properties"]["MetricsConfig"] for c in template.find_resources("AWS::SageMaker::EndpointConfig").values()]


def test_single_model_endpoint_turns_triton_metrics_on_and_enhanced_metrics(tmp_path):
    stack = user_stack()
    TritonSageMakerEndpoint(stack, "Single", models=_models(tmp_path, "resnet50"), instance_type="ml.g5.xlarge")
    template = Template.from_stack(stack)
    [env] = _environments(template)
    assert {k: env[k] for k in METRICS_ENV} == METRICS_ENV
    assert _metrics_configs(template) == [{"EnableDetailedObservability": True, "EnableEnhancedMetrics": True,
                                           "MetricPublishFrequencyInSeconds": 60}]


def test_multi_model_endpoint_has_no_enhanced_metrics(tmp_path):
    stack = user_stack()
    TritonSageMakerEndpoint(stack, "Multi", models=_models(tmp_path, "resnet50", "bert"), instance_type="ml.g5.xlarge",
                            multi_model=True, observability=Observability(publish_frequency_s=10))
    template = Template.from_stack(stack)
    [env] = _environments(template)
    assert {k: env[k] for k in METRICS_ENV} == METRICS_ENV
    assert _metrics_configs(template) == [{"EnableDetailedObservability": True, "EnableEnhancedMetrics": False,
                                           "MetricPublishFrequencyInSeconds": 10}]


def test_inference_components_carry_the_metrics_environment_and_config(tmp_path):
    stack = user_stack()
    TritonComponentsEndpoint(stack, "Shared", models=_models(tmp_path, "resnet50", "bert"),
                             instance_type="ml.g5.12xlarge", container=Container(metrics_port=23100))
    template = Template.from_stack(stack)
    envs = _environments(template)
    assert len(envs) == 2 and all(e["SAGEMAKER_TRITON_METRICS_PORT"] == "23100" for e in envs)
    assert _metrics_configs(template) == [{"EnableDetailedObservability": True, "EnableEnhancedMetrics": True,
                                           "MetricPublishFrequencyInSeconds": 60}]


def test_metrics_off_leaves_the_serve_script_default(tmp_path):
    stack = user_stack()
    TritonSageMakerEndpoint(stack, "Single", models=_models(tmp_path, "resnet50"), instance_type="ml.g5.xlarge",
                            container=Container(metrics=False), observability=Observability(detailed=False))
    template = Template.from_stack(stack)
    [env] = _environments(template)
    assert not set(METRICS_ENV) & set(env)
    assert _metrics_configs(template)[0]["EnableDetailedObservability"] is False


def test_a_metrics_port_outside_sagemakers_range_is_refused():
    with pytest.raises(PropsError) as caught:
        Container(metrics_port=8002)
    assert str(caught.value) == (
        "Container: 1 problem\n  - metrics_port: got 8002; allowed: a port in 23000-23999: SageMaker gives the "
        "container SAGEMAKER_SAFE_PORT_RANGE and tritonserver exits at start when its metrics port lies outside it "
        "(src/command_line_parser.cc, r25.09); fix: use 23000 (the default), or leave metrics_port out")


def test_enhanced_metrics_on_a_multi_model_endpoint_are_refused(tmp_path):
    with pytest.raises(PropsError) as caught:
        TritonSageMakerEndpoint(user_stack(), "Multi", models=_models(tmp_path, "resnet50"),
                                instance_type="ml.g5.xlarge", multi_model=True,
                                observability=Observability(enhanced=True))
    assert str(caught.value) == (
        "TritonSageMakerEndpoint UserApp/Multi: 1 problem\n  - observability.enhanced: got true on a multi-model "
        "endpoint; allowed: single-model and inference-component endpoints only (EnableEnhancedMetrics); fix: remove "
        "observability.enhanced")


def _promql_queries(template: Template) -> list[str]:
    return [a["Properties"]["EvaluationCriteria"]["PromQLCriteria"]["Query"]
            for a in template.find_resources("AWS::CloudWatch::Alarm").values()
            if "EvaluationCriteria" in a["Properties"]]


def test_each_component_gets_its_own_queue_alarm_and_none_without_metrics(tmp_path):
    stack = user_stack()
    shared = TritonComponentsEndpoint(stack, "Shared", models=_models(tmp_path, "resnet50", "bert"),
                                      instance_type="ml.g5.12xlarge", endpoint_name="shared")
    queries = _promql_queries(Template.from_stack(stack))
    assert sorted(q.split('"aws.sagemaker.inference_component.name"="')[1].split('"')[0] for q in queries) == [
        shared.component_name("bert"), shared.component_name("resnet50")]
    quiet = user_stack()
    TritonSageMakerEndpoint(quiet, "Single", models=_models(tmp_path, "resnet50"), instance_type="ml.g5.xlarge",
                            container=Container(metrics=False))
    assert _promql_queries(Template.from_stack(quiet)) == []


def test_promql_queries_for_query_studio_name_the_endpoint_and_component(tmp_path):
    stack = user_stack()
    single = TritonSageMakerEndpoint(stack, "Single", models=_models(tmp_path, "resnet50"),
                                     instance_type="ml.g5.xlarge", endpoint_name="single")
    shared = TritonComponentsEndpoint(stack, "Shared", models=_models(tmp_path, "bert"),
                                      instance_type="ml.g5.12xlarge", endpoint_name="shared")
    assert single.promql_average_batch() == (
        'sum by (model) (rate({"nv_inference_count", "aws.sagemaker.endpoint.name"="single"}[5m])) / '
        'sum by (model) (rate({"nv_inference_exec_count", "aws.sagemaker.endpoint.name"="single"}[5m]))')
    assert single.promql_compute_ms().startswith(
        '(sum by (model) (rate({"nv_inference_compute_infer_duration_us", "aws.sagemaker.endpoint.name"="single"}')
    assert f'"aws.sagemaker.inference_component.name"="{shared.component_name("bert")}"' in shared.promql_queue_ms("bert")
    # Pending requests is a gauge: summed per model, no rate.
    assert single.promql_pending_requests() == (
        'sum by (model) ({"nv_inference_pending_request_count", "aws.sagemaker.endpoint.name"="single"})')
    assert shared.promql_pending_requests("bert").endswith(
        f'"aws.sagemaker.inference_component.name"="{shared.component_name("bert")}"}})')


def test_the_dashboard_shows_tritons_queries_and_the_queue_alarm(tmp_path):
    stack = user_stack()
    single = TritonSageMakerEndpoint(stack, "Single", models=_models(tmp_path, "resnet50"),
                                     instance_type="ml.g5.xlarge", endpoint_name="single")
    [dashboard] = Template.from_stack(stack).find_resources("AWS::CloudWatch::Dashboard").values()
    # The body is a Fn::Join of JSON text and tokens (the alarm's ARN).
    text = "".join(part if isinstance(part, str) else "<token>" for part in dashboard["Properties"]["DashboardBody"][
        "Fn::Join"][1])
    # The queries in a text widget (for Query Studio), the PromQL alarm's state in an alarm widget.
    assert "### Triton's own metrics (PromQL, CloudWatch Query Studio)" in text
    assert json.dumps(f"**average batch formed**\n```\n{single.promql_average_batch()}\n```")[1:-1] in text
    assert json.dumps(f"**pending requests**\n```\n{single.promql_pending_requests()}\n```")[1:-1] in text
    assert '{"type":"alarm","width":8,"height":6,"x":0,"y":18,"properties":{"title":"Triton queue time",' \
           '"alarms":["<token>"]}}' in text


def test_each_component_dashboard_shows_its_own_triton_queries_and_queue_alarm(tmp_path):
    stack = user_stack()
    shared = TritonComponentsEndpoint(stack, "Shared", models=_models(tmp_path, "bert"),
                                      instance_type="ml.g5.12xlarge", endpoint_name="shared")
    [dashboard] = [d for d in Template.from_stack(stack).find_resources("AWS::CloudWatch::Dashboard").values()
                   if d["Properties"]["DashboardName"] == shared.component_name("bert")]
    text = "".join(part if isinstance(part, str) else "<token>" for part in dashboard["Properties"]["DashboardBody"][
        "Fn::Join"][1])
    assert json.dumps(f"**pending requests**\n```\n{shared.promql_pending_requests('bert')}\n```")[1:-1] in text
    assert '"properties":{"title":"Triton queue time","alarms":["<token>"]}}' in text

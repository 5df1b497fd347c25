"""Weighted variants (an A/B test) and a shadow variant on TritonSageMakerEndpoint, as a user's own CDK app uses
them, and as the spec app builds them from examples/bert-classifier-candidate.yaml: the endpoint configuration, a
model, scaling target and alarms per variant, the comparison alarms' metric math, the comparison dashboard, the
guardrails left out, the scaling handover's leaving variants; the API-model check and cdk-nag over both shapes
(each with a planted twin); every refusal with its exact message."""
from __future__ import annotations

import copy
import importlib.util
import json
import pathlib
import sys

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Annotations, Match, Template
from botocore.exceptions import ClientError
from cdk_nag import AwsSolutionsChecks

import api_model_check
from api_model_check import check_template
from synth_helpers import ROOT, resource_id, statements, synth_spec
from user_app import model_archive, user_stack
from deployment_spec.sections.variants import shadow_weight
from triton_constructs import (Alarms, Asynchronous, Comparison, DataCapture, Deployment, ModelArchive,
                               ModelRepositories, PropsError, Scaling, Shadow, TritonSageMakerEndpoint, Variant)

NAME = "vision"
EXAMPLE = ROOT / "examples" / "bert-classifier-candidate.yaml"
ENDPOINT_ARCHIVE = "s3://my-models/vision/resnet50-0123456789ab.tar.gz"
CANDIDATE_ARCHIVE = "s3://my-models/vision/vit-0123456789ab.tar.gz"
HANDLERS = ROOT / "triton_constructs" / "handlers"


def _local(tmp: pathlib.Path, name: str) -> ModelRepositories:
    return ModelRepositories.from_archives([ModelArchive.from_file(model_archive(tmp, name), [name])])


def _s3(*urls: str) -> ModelRepositories:
    return ModelRepositories.from_archives([ModelArchive.from_s3(u, [u.rsplit("/", 1)[-1].split("-")[0]])
                                            for u in urls])


def _config(template: Template) -> dict:
    return next(iter(template.find_resources("AWS::SageMaker::EndpointConfig").values()))["Properties"]


def _endpoint_props(template: Template) -> dict:
    return next(iter(template.find_resources("AWS::SageMaker::Endpoint").values()))["Properties"]


def _model_urls(template: Template) -> dict[str, str]:
    """Each model's logical ID -> the object its ModelDataUrl names (the tail of the URL)."""
    out = {}
    for logical_id, model in template.find_resources("AWS::SageMaker::Model").items():
        url = model["Properties"]["PrimaryContainer"]["ModelDataUrl"]
        out[logical_id] = url["Fn::Join"][1][-1] if isinstance(url, dict) else url
    return out


@pytest.fixture(scope="module")
def weighted(module_tmp) -> tuple[cdk.Stack, TritonSageMakerEndpoint, Template]:
    """Two weighted variants with different models and instance types, local archives, guarded updates asked for."""
    tmp = module_tmp.mktemp("weighted")
    stack = user_stack()
    endpoint = TritonSageMakerEndpoint(
        stack, "Vision", models=_local(tmp, "resnet50"), instance_type="ml.g5.xlarge", endpoint_name=NAME,
        scaling=Scaling(min_instances=1, max_instances=4), alarms=Alarms(sns_topic=True), deployment=Deployment(),
        data_capture=DataCapture(sampling_percent=50),
        variants=[Variant(name="incumbent", weight=90),
                  Variant(name="candidate", model="vit", weight=10, instance_type="ml.g6.xlarge",
                          scaling=Scaling(min_instances=1, max_instances=2))],
        variant_models={"candidate": _local(tmp, "vit")},
        comparison=Comparison(error_rate_margin_percent=2, latency_margin_percent=25, periods=3))
    return stack, endpoint, Template.from_stack(stack)


@pytest.fixture(scope="module")
def shadowed() -> tuple[cdk.Stack, TritonSageMakerEndpoint, Template]:
    """The endpoint's own production variant and a shadow of another model, half the requests copied to it."""
    stack = user_stack()
    endpoint = TritonSageMakerEndpoint(
        stack, "Vision", models=_s3(ENDPOINT_ARCHIVE), instance_type="ml.g5.xlarge", endpoint_name=NAME,
        scaling=Scaling(min_instances=1, max_instances=4), data_capture=DataCapture(sampling_percent=100),
        shadow=Shadow(model="vit", sampling_percent=50), variant_models={"Shadow": _s3(CANDIDATE_ARCHIVE)})
    return stack, endpoint, Template.from_stack(stack)


# --- the endpoint configuration --------------------------------------------------------------------------------

def test_each_weighted_variant_serves_its_own_model_on_its_own_type_with_its_weight(weighted):
    _, endpoint, template = weighted
    config = _config(template)
    variants = config["ProductionVariants"]
    assert [(v["VariantName"], v["InitialVariantWeight"], v["InstanceType"], v["InitialInstanceCount"])
            for v in variants] == [("incumbent", 90, "ml.g5.xlarge", 1), ("candidate", 10, "ml.g6.xlarge", 1)]
    assert "ShadowProductionVariants" not in config
    # Two models, each reading its own archive (copied under the endpoint's one prefix, which the role reads).
    urls = _model_urls(template)
    by_variant = {v["VariantName"]: urls[v["ModelName"]["Fn::GetAtt"][0]] for v in variants}
    assert by_variant["incumbent"].startswith(f"/models/{NAME}/resnet50-")
    assert by_variant["candidate"].startswith(f"/models/{NAME}/vit-")
    copies = sorted(c["Properties"]["DestinationKey"] for c in template.find_resources(
        "Custom::TritonModelArtifact").values())
    assert [c.split("-")[0] for c in copies] == [f"models/{NAME}/resnet50", f"models/{NAME}/vit"]
    assert set(endpoint.variant_models) == {"candidate"}


def test_the_shadow_gets_its_sampled_share_and_data_capture_covers_it(shadowed):
    _, endpoint, template = shadowed
    config = _config(template)
    [production] = config["ProductionVariants"]
    [shadow] = config["ShadowProductionVariants"]
    assert (production["VariantName"], production["InitialVariantWeight"]) == ("AllTraffic", 1)
    assert (shadow["VariantName"], shadow["InitialVariantWeight"]) == ("Shadow", shadow_weight(1.0, 50)) == (
        "Shadow", 0.5)
    assert shadow["InstanceType"] == "ml.g5.xlarge"  # the endpoint's, as none was given
    urls = _model_urls(template)
    assert urls[production["ModelName"]["Fn::GetAtt"][0]] == ENDPOINT_ARCHIVE
    assert urls[shadow["ModelName"]["Fn::GetAtt"][0]] == CANDIDATE_ARCHIVE
    # One DataCaptureConfig for the configuration: SageMaker writes each variant's under <endpoint>/<variant>/.
    assert config["DataCaptureConfig"]["InitialSamplingPercentage"] == 100
    assert endpoint.variant_name == "AllTraffic"


def test_guardrails_are_left_out_with_an_info_and_weights_follow_the_configuration(weighted, shadowed):
    for stack, _, template in (weighted, shadowed):
        props = _endpoint_props(template)
        assert "DeploymentConfig" not in props
        # Scaled: the count is the autoscaler's, the weights the configuration's (restored on each update).
        assert props["RetainAllVariantProperties"] is True
        assert props["ExcludeRetainedVariantProperties"] == [{"VariantPropertyType": "DesiredWeight"},
                                                             {"VariantPropertyType": "DataCaptureConfig"}]
    infos = Annotations.from_stack(weighted[0]).find_info("*", Match.string_like_regexp(
        "deployment guardrails left out with 2 production variant"))
    assert len(infos) == 1 and "Deployment guardrails > Exclusions" in infos[0].entry.data
    # Nothing to roll back on: the role is not granted the rollback alarms.
    role = resource_id(weighted[2], "AWS::IAM::Role", {"Description": "Runs one Triton model on SageMaker "
                                                                     "(least privilege)"})
    assert not [s for s in statements(weighted[2], role) if s["Action"] == "cloudwatch:DescribeAlarms"]


def test_one_production_variant_without_a_shadow_keeps_its_guarded_update():
    stack = user_stack()
    TritonSageMakerEndpoint(stack, "Vision", models=_s3(ENDPOINT_ARCHIVE), instance_type="ml.g5.xlarge",
                            endpoint_name=NAME, deployment=Deployment())
    assert "DeploymentConfig" in _endpoint_props(Template.from_stack(stack))


def test_an_unscaled_variant_beside_a_scaled_one_is_told_its_count_sticks():
    stack = user_stack()
    TritonSageMakerEndpoint(stack, "Vision", models=_s3(ENDPOINT_ARCHIVE), instance_type="ml.g5.xlarge",
                            endpoint_name=NAME, variants=[Variant(name="a", scaling=Scaling()), Variant(name="b")])
    [info] = Annotations.from_stack(stack).find_info("*", Match.string_like_regexp("have no scaling beside"))
    assert info.entry.data == (
        "endpoint vision: variant(s) b have no scaling beside scaled ones; SageMaker keeps every variant's running "
        "instance count across updates (RetainAllVariantProperties), so a changed initial_instances reaches them "
        "only when the endpoint is created; give them scaling to size them")
    assert _endpoint_props(Template.from_stack(stack))["RetainAllVariantProperties"] is True


# --- scaling, alarms, dashboard per variant --------------------------------------------------------------------

def test_each_variant_scales_on_its_own_target_and_the_handover_is_shared(weighted, shadowed):
    for (_, _, template), variants, maxima in ((weighted, ("incumbent", "candidate"), (4, 2)),
                                              (shadowed, ("AllTraffic", "Shadow"), (4, 4))):
        targets = {t["Properties"]["ResourceId"]: t["Properties"]["MaxCapacity"]
                   for t in template.find_resources("AWS::ApplicationAutoScaling::ScalableTarget").values()}
        assert targets == {f"endpoint/{NAME}/variant/{v}": m for v, m in zip(variants, maxima)}
        # One handover function for the endpoint; each variant's Before knows every variant of the configuration.
        assert len(template.find_resources("AWS::Lambda::Function", {"Properties": {
            "Handler": "scaling_handover.handler"}})) == 1
        befores = [h["Properties"] for h in template.find_resources("Custom::TritonScalingHandover").values()
                   if h["Properties"]["Phase"] == "before"]
        assert sorted(b["VariantName"] for b in befores) == sorted(variants)
        assert {b["Variants"] for b in befores} == {",".join(variants)}
    # The candidate on ml.g6.xlarge tracks GPU utilization for its one GPU like the incumbent.
    gpu = [p["Properties"]["TargetTrackingScalingPolicyConfiguration"]["CustomizedMetricSpecification"]
           for p in weighted[2].find_resources("AWS::ApplicationAutoScaling::ScalingPolicy").values()
           if "CustomizedMetricSpecification" in p["Properties"]["TargetTrackingScalingPolicyConfiguration"]]
    assert sorted(d["Value"] for m in gpu for d in m["Dimensions"] if d["Name"] == "VariantName") == [
        "candidate", "incumbent"]


def test_every_production_variant_has_the_endpoint_alarms_the_shadow_the_comparison(weighted, shadowed):
    def errors_5xx(template: Template) -> list[str]:
        return sorted(d["Value"] for a in template.find_resources("AWS::CloudWatch::Alarm").values()
                      if a["Properties"].get("MetricName") == "Invocation5XXErrors"
                      for d in a["Properties"]["Dimensions"] if d["Name"] == "VariantName")
    assert errors_5xx(weighted[2]) == ["candidate", "incumbent"]
    assert errors_5xx(shadowed[2]) == ["AllTraffic"]  # the shadow's answers reach nobody
    # One topic for the endpoint; every alarm, the comparison's too, notifies it.
    template = weighted[2]
    [topic] = template.find_resources("AWS::SNS::Topic")
    alarms = template.find_resources("AWS::CloudWatch::Alarm").values()
    assert all(a["Properties"]["AlarmActions"] == [{"Ref": topic}] for a in alarms)
    assert any("vision variant candidate:" in a["Properties"]["AlarmDescription"] for a in alarms)


def _comparison_alarms(template: Template) -> dict[str, dict]:
    """The comparison alarms by the expression they watch."""
    out = {}
    for alarm in template.find_resources("AWS::CloudWatch::Alarm").values():
        metrics = alarm["Properties"].get("Metrics", [])
        watched = [m for m in metrics if m.get("ReturnData", True) and "Expression" in m]
        if watched and watched[0]["Expression"].startswith("candidate - incumbent"):
            out[watched[0]["Expression"]] = alarm["Properties"]
    return out


def test_the_comparison_alarms_watch_the_candidate_against_the_incumbent(weighted):
    _, _, template = weighted
    alarms = _comparison_alarms(template)
    assert sorted(alarms) == ["candidate - incumbent", "candidate - incumbent * 1.25"]
    rate, latency = alarms["candidate - incumbent"], alarms["candidate - incumbent * 1.25"]
    for alarm in (rate, latency):
        assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"], alarm["ComparisonOperator"],
                alarm["TreatMissingData"]) == (3, 3, "GreaterThanThreshold", "notBreaching")
    assert (rate["Threshold"], latency["Threshold"]) == (2, 0)
    queries = {m["Id"]: m for m in rate["Metrics"]}
    # Each variant's rate: failed invocations over invocations, missing counts 0, no division by zero.
    assert queries["candidate"]["Expression"] == (
        "100 * (FILL(ce4, 0) + FILL(ce5, 0) + FILL(cem, 0)) / IF(FILL(cinv, 0) > 0, FILL(cinv, 0), 1)")
    assert queries["incumbent"]["Expression"] == (
        "100 * (FILL(ie4, 0) + FILL(ie5, 0) + FILL(iem, 0)) / IF(FILL(iinv, 0) > 0, FILL(iinv, 0), 1)")
    counted = {(key, q["MetricStat"]["Metric"]["MetricName"], q["MetricStat"]["Stat"], q["MetricStat"]["Period"],
                {d["Name"]: d["Value"] for d in q["MetricStat"]["Metric"]["Dimensions"]}["VariantName"])
               for key, q in queries.items() if "MetricStat" in q}
    assert counted == {(f"{p}{k}", metric, "Sum", 60, variant)
                       for p, variant in (("c", "candidate"), ("i", "incumbent"))
                       for k, metric in (("e4", "Invocation4XXErrors"), ("e5", "Invocation5XXErrors"),
                                         ("em", "InvocationModelErrors"), ("inv", "Invocations"))}
    p99 = {q["Id"]: (q["MetricStat"]["Metric"]["MetricName"], q["MetricStat"]["Stat"],
                     q["MetricStat"]["Metric"]["Dimensions"]) for q in latency["Metrics"] if "MetricStat" in q}
    assert p99 == {key: ("ModelLatency", "p99", [{"Name": "EndpointName", "Value": NAME},
                                                 {"Name": "VariantName", "Value": key}])
                   for key in ("candidate", "incumbent")}


def test_the_shadow_is_the_candidate(shadowed):
    alarms = _comparison_alarms(shadowed[2])
    latency = alarms["candidate - incumbent * 1.2"]  # Comparison()'s 20 % margin
    variants = {q["Id"]: q["MetricStat"]["Metric"]["Dimensions"][1]["Value"] for q in latency["Metrics"]
                if "MetricStat" in q}
    assert variants == {"candidate": "Shadow", "incumbent": "AllTraffic"}
    assert alarms["candidate - incumbent"]["Threshold"] == 1 and latency["EvaluationPeriods"] == 5


def _widgets(body: dict) -> list[dict]:
    """The dashboard body's widgets (the alarms' ARNs, tokens in the template, read as "ARN")."""
    text = "".join(part if isinstance(part, str) else "ARN" for part in body["Fn::Join"][1])
    return json.loads(text)["widgets"]


def test_the_comparison_dashboard_draws_both_variants_side_by_side(weighted):
    _, endpoint, template = weighted
    dashboards = {d["Properties"]["DashboardName"]: d["Properties"]["DashboardBody"]
                  for d in template.find_resources("AWS::CloudWatch::Dashboard").values()}
    assert sorted(dashboards) == [NAME, f"{NAME}-variants"]  # the incumbent's own dashboard stays
    widgets = _widgets(dashboards[f"{NAME}-variants"])
    # deployment_spec.rules.variant_plan.describe_weights, as a review sees the split
    assert "Traffic: incumbent 90 %, candidate 10 %" in widgets[0]["properties"]["markdown"]
    graphs = {w["properties"]["title"]: w["properties"] for w in widgets if w["type"] in ("metric", "alarm")}
    assert sorted(graphs) == sorted([
        "Invocations per minute", "ModelLatency p50 (microseconds)", "ModelLatency p99 (microseconds)",
        "Failed invocations (% of invocations)", "Invocation4XXErrors per minute", "Invocation5XXErrors per minute",
        "InvocationModelErrors per minute", "GPU utilization (% summed over each instance's GPUs)",
        "Candidate against incumbent"])
    for title in ("Invocations per minute", "ModelLatency p99 (microseconds)", "InvocationModelErrors per minute"):
        lines = [m for m in graphs[title]["metrics"] if "expression" not in m[-1]]
        assert [line[line.index("VariantName") + 1] for line in lines] == ["incumbent", "candidate"], title
    gpu = graphs["GPU utilization (% summed over each instance's GPUs)"]["metrics"]
    assert [(line[0], line[1], line[-1]["label"]) for line in gpu] == [
        ("/aws/sagemaker/Endpoints", "GPUUtilization", "incumbent (1 GPU)"),
        ("/aws/sagemaker/Endpoints", "GPUUtilization", "candidate (1 GPU)")]
    rates = [m[-1] for m in graphs["Failed invocations (% of invocations)"]["metrics"] if "expression" in m[-1]]
    assert [r["label"] for r in rates] == ["incumbent (%)", "candidate (%)"]
    assert len(graphs["Candidate against incumbent"]["alarms"]) == 2
    assert endpoint.variant_dashboard is not None and endpoint.comparison is not None


# --- the checks that must find nothing, each with a planted twin -------------------------------------------------

def _template_json(stack: cdk.Stack) -> dict:
    return Template.from_stack(stack).to_json()


def test_both_shapes_match_the_api_model(weighted, shadowed):
    checked = 0
    for stack, _, _ in (weighted, shadowed):
        report = check_template(_template_json(stack))
        assert report.findings == []
        checked += report.checked
    assert checked >= 150, checked


def test_the_api_model_check_sees_a_planted_shadow_defect(shadowed):
    template = copy.deepcopy(_template_json(shadowed[0]))
    [(config_id, config)] = [(k, r) for k, r in template["Resources"].items()
                             if r["Type"] == "AWS::SageMaker::EndpointConfig"]
    config["Properties"]["ShadowProductionVariants"][0]["VariantName"] = "Shadow_1"
    pattern = api_model_check.shapes("sagemaker")["VariantName"]["pattern"]
    assert check_template(template).findings == [
        f"{config_id} (AWS::SageMaker::EndpointConfig): ShadowProductionVariants[0].VariantName: 'Shadow_1' does "
        f"not match VariantName's pattern {pattern}"]


def _nag(stack: cdk.Stack) -> list[str]:
    return sorted(v.rule_name for v in AwsSolutionsChecks().validate_scope(stack).violations
                  if "/Vision/" in str(v))


def test_cdk_nag_finds_nothing_under_either_shape(weighted, shadowed):
    assert _nag(weighted[0]) == [] and _nag(shadowed[0]) == []


def test_cdk_nag_sees_a_planted_wildcard_under_the_variant_endpoint(module_tmp):
    # The twin: the weighted shape again, with one role of its own granting an action on every resource.
    tmp = module_tmp.mktemp("planted")
    stack = user_stack()
    endpoint = TritonSageMakerEndpoint(
        stack, "Vision", models=_local(tmp, "resnet50"), instance_type="ml.g5.xlarge", endpoint_name=NAME,
        variants=[Variant(name="a"), Variant(name="b", instance_type="ml.g6.xlarge")],
        variant_models={"b": _local(tmp, "vit")})
    role = iam.Role(endpoint, "Planted", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    role.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=["*"]))
    assert _nag(stack) == ["AwsSolutions-IAM5[Resource::*]"]


def test_cloudwatch_query_metrics_is_no_iam_action_so_the_graphs_function_is_not_granted_it():
    # SageMaker's page on querying detailed-observability metrics lists cloudwatch:QueryMetrics; AWS's IAM action
    # data (as cfn-lint ships it) has no such action, CloudWatch's QueryMetrics page names these two.
    import cfnlint
    from triton_constructs.promql_graphs import QUERY_ACTIONS
    policies = json.loads((pathlib.Path(cfnlint.__file__).parent / "data" / "AdditionalSpecs" / "Policies.json")
                          .read_text())
    actions = set(policies["cloudwatch"]["Actions"])
    assert "querymetrics" not in actions and {"getmetricdata", "listmetrics"} <= actions
    assert QUERY_ACTIONS == ["cloudwatch:GetMetricData", "cloudwatch:ListMetrics"]


# --- the scaling handover deregisters the variants that leave ----------------------------------------------------

def _handover():
    sys.path.insert(0, str(HANDLERS))  # as in the Lambda asset: the handlers import cfn_response from its root
    spec = importlib.util.spec_from_file_location("scaling_handover_variants", HANDLERS / "scaling_handover.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Targets:
    """Application Auto Scaling's targets of two endpoints, two per page; SageMaker's endpoint without the shadow."""

    def __init__(self, registered: list[str], gone_first: str = ""):
        self.registered, self.calls, self.gone_first = list(registered), [], gone_first

    def describe_scalable_targets(self, ServiceNamespace, ScalableDimension, ResourceIds=None, NextToken=None):
        ids = [r for r in self.registered if ResourceIds is None or r in ResourceIds]
        start = int(NextToken or 0)
        page = {"ScalableTargets": [{"ResourceId": r} for r in ids[start:start + 2]]}
        if start + 2 < len(ids):
            page["NextToken"] = str(start + 2)
        return page

    def deregister_scalable_target(self, ServiceNamespace, ResourceId, ScalableDimension):
        self.calls.append(("deregister", ResourceId))
        if ResourceId == self.gone_first:  # another variant's handover deregistered it a moment ago
            raise ClientError({"Error": {"Code": "ObjectNotFoundException", "Message": "no such target"}},
                              "DeregisterScalableTarget")

    def describe_endpoint(self, EndpointName):
        return {"EndpointConfigName": "config"}

    def describe_endpoint_config(self, EndpointConfigName):
        return {"ProductionVariants": [{"VariantName": "AllTraffic", "InstanceType": "ml.g5.xlarge"}]}


def _before(handover, cloud, kind="Update", **extra) -> list:
    sent = []
    handover.respond = lambda event, status, reason, pid: sent.append((status, reason))
    props = {"ResourceId": "endpoint/vision/variant/AllTraffic", "EndpointName": "vision", "VariantName": "AllTraffic",
             "InstanceType": "ml.g5.xlarge", "MinCapacity": "1", "MaxCapacity": "4", "Policies": "[]",
             "ScheduledActions": "[]", "Phase": "before", **extra}
    handover.handler({"RequestType": kind, "ResourceProperties": props}, None, sagemaker=cloud, autoscaling=cloud)
    return sent


def test_the_handover_deregisters_a_removed_shadow_before_the_endpoint_update():
    handover = _handover()
    # The shadow leaves the configuration (promotion): it is still a scaling target, which UpdateEndpoint refuses.
    cloud = _Targets(["endpoint/vision/variant/AllTraffic", "endpoint/other/variant/Shadow",
                      "endpoint/vision/variant/Shadow", "endpoint/vision/variant/candidate"],
                     gone_first="endpoint/vision/variant/candidate")
    sent = _before(handover, cloud, Variants="AllTraffic")
    # Across pages, only this endpoint's, only the leavers; one already gone is no error.
    assert cloud.calls == [("deregister", "endpoint/vision/variant/Shadow"),
                           ("deregister", "endpoint/vision/variant/candidate")]
    assert sent == [("SUCCESS", "deregistered endpoint/vision/variant/Shadow: the new configuration has no such "
                                "variant; deregistered endpoint/vision/variant/candidate: the new configuration has "
                                "no such variant; no change: endpoint/vision/variant/AllTraffic runs ml.g5.xlarge, "
                                "desired ml.g5.xlarge, registered True")]


def test_a_new_variant_s_handover_deregisters_the_leavers_but_registers_nothing():
    handover = _handover()
    cloud = _Targets(["endpoint/vision/variant/AllTraffic"])
    sent = _before(handover, cloud, kind="Create", VariantName="incumbent", Variants="incumbent,candidate")
    assert cloud.calls == [("deregister", "endpoint/vision/variant/AllTraffic")]
    assert sent == [("SUCCESS", "deregistered endpoint/vision/variant/AllTraffic: the new configuration has no such "
                                "variant")]


def test_the_handover_moves_a_scaled_shadow_to_another_instance_type():
    handover = _handover()

    class ShadowOnG5(_Targets):
        def describe_endpoint_config(self, EndpointConfigName):
            return {"ProductionVariants": [{"VariantName": "AllTraffic", "InstanceType": "ml.g5.xlarge"}],
                    "ShadowProductionVariants": [{"VariantName": "Shadow", "InstanceType": "ml.g5.xlarge"}]}

    cloud = ShadowOnG5(["endpoint/vision/variant/AllTraffic", "endpoint/vision/variant/Shadow"])
    sent = _before(handover, cloud, ResourceId="endpoint/vision/variant/Shadow", VariantName="Shadow",
                   InstanceType="ml.g6.xlarge", Variants="AllTraffic,Shadow")
    # SageMaker refuses to change a scaling target's instance type: the shadow's is deregistered first.
    assert cloud.calls == [("deregister", "endpoint/vision/variant/Shadow")]
    assert sent[0][1].startswith("deregistered endpoint/vision/variant/Shadow (runs ml.g5.xlarge, moving to "
                                 "ml.g6.xlarge)")


def test_handover_properties_from_before_variants_existed_deregister_nothing():
    handover = _handover()
    cloud = _Targets(["endpoint/vision/variant/AllTraffic", "endpoint/vision/variant/Shadow"])
    _before(handover, cloud)
    assert cloud.calls == []


# --- what SageMaker refuses, refused at synth ------------------------------------------------------------------

def _refused(**props) -> str:
    props.setdefault("instance_type", "ml.g5.xlarge")
    with pytest.raises(PropsError) as caught:
        TritonSageMakerEndpoint(user_stack(), "Vision", models=props.pop("models", _s3(ENDPOINT_ARCHIVE)),
                                endpoint_name=NAME, **props)
    return str(caught.value)


SHADOW_BUILD = {"Shadow": _s3(CANDIDATE_ARCHIVE)}
SUBJECT = "TritonSageMakerEndpoint UserApp/Vision: 1 problem\n  - "


def test_a_shadow_on_a_multi_model_endpoint_is_refused():
    assert _refused(multi_model=True, shadow=Shadow(model="vit"), variant_models=SHADOW_BUILD) == SUBJECT + (
        "shadow: got shadow on kind: multi-model; allowed: variants and a shadow on kind: single-model endpoints "
        "only (each variant serves one model repository, built for it as a single-model endpoint); fix: remove "
        "shadow, or serve the models it compares from a kind: single-model endpoint")


def test_a_shadow_beside_asynchronous_inference_is_refused():
    assert _refused(asynchronous=Asynchronous(), shadow=Shadow(model="vit"), variant_models=SHADOW_BUILD) == SUBJECT + (
        "shadow: got shadow beside asynchronous; allowed: variants and a shadow on real-time endpoints only (an "
        "asynchronous endpoint here has one variant: its queue, backlog scaling and answers belong to the "
        "endpoint); fix: remove shadow, or the asynchronous block")


def test_a_shadow_beside_weighted_variants_is_refused():
    assert _refused(shadow=Shadow(model="vit"), variants=[Variant(name="A"), Variant(name="B")], variant_models=SHADOW_BUILD) == SUBJECT + (
        "shadow: got a shadow beside 2 variants; allowed: a shadow with exactly one production variant, the "
        "endpoint's own model (CreateEndpointConfig: with ShadowProductionVariants, one variant in "
        "ProductionVariants); fix: remove variants: (the endpoint's model is the production variant), or remove "
        "the shadow")


def test_a_variant_name_sagemaker_would_refuse_is_refused_when_built():
    with pytest.raises(PropsError) as caught:
        Variant(name="candidate_1")
    assert str(caught.value) == (
        "Variant: 1 problem\n  - name: got 'candidate_1'; allowed: 1-63 letters, digits or '-', starting and "
        "ending with a letter or digit; fix: rename it to match")


def test_all_zero_weights_are_refused():
    assert _refused(variants=[Variant(name="A", weight=0), Variant(name="B", weight=0)]) == SUBJECT + (
        "variants[0].weight: got every weight 0; allowed: at least one weight above 0 (each variant's share of the "
        "traffic is its weight / the sum of the weights); fix: give the incumbent a weight, e.g. 90, and the "
        "candidate 10")


def test_a_single_variant_is_refused():
    assert _refused(variants=[Variant(name="A")]) == SUBJECT + (
        "variants: got 1 variant; allowed: 2 to 10 variants (CreateEndpointConfig: ProductionVariants holds 1-10; "
        "one is the endpoint itself); fix: remove variants: and serve the one model from the endpoint, or add the "
        "variant to compare it with")


def test_a_build_keyed_by_no_variant_s_name_is_refused():
    assert _refused(variants=[Variant(name="A"), Variant(name="B")], variant_models={"C": _s3(CANDIDATE_ARCHIVE)}
                    ) == SUBJECT + (
        "variant_models.C: got 'C'; allowed: the name of a variant or of the shadow (A, B); fix: key each build by "
        "the name of the variant that serves it")
    assert _refused(variant_models={"B": _s3(CANDIDATE_ARCHIVE)}) == SUBJECT + (
        "variant_models.B: got 'B'; allowed: the name of a variant or of the shadow (none given); fix: key each "
        "build by the name of the variant that serves it")


def test_a_variant_naming_a_model_without_its_archives_is_refused():
    assert _refused(variants=[Variant(name="A"), Variant(name="B", model="vit")]) == SUBJECT + (
        "variants[1].model: got 'vit'; allowed: a variant_models entry for 'B': the construct serves archives, and "
        "model only names them; fix: add variant_models={'B': ModelRepositories...}, or remove model: the variant "
        "then serves the endpoint's models")


def test_a_shadow_naming_a_model_without_its_archives_is_refused():
    # Without its own archives the shadow would serve the endpoint's model and compare it with itself.
    assert _refused(shadow=Shadow(model="vit")) == SUBJECT + (
        "shadow.model: got 'vit'; allowed: a variant_models entry for 'Shadow': the construct serves archives, and "
        "model only names them; fix: add variant_models={'Shadow': ModelRepositories...}")


def test_a_variant_naming_a_model_its_archives_do_not_hold_is_refused():
    assert _refused(shadow=Shadow(model="bert"), variant_models={"Shadow": _s3(CANDIDATE_ARCHIVE)}) == SUBJECT + (
        "shadow.model: got 'bert'; allowed: a model variant_models['Shadow'] serves (vit); fix: name the model its "
        "archives hold, or give the archives that hold it")


def test_a_variant_s_archives_the_role_cannot_read_are_refused():
    assert _refused(variants=[Variant(name="A"), Variant(name="B")],
                    variant_models={"B": _s3("s3://other/vit/vit-0123456789ab.tar.gz")}) == SUBJECT + (
        "variant_models.B: got archives from another place than the endpoint's; allowed: S3 objects under the "
        "endpoint's prefix s3://my-models/vision/, which the execution role reads; fix: give the variant's archives "
        "the way the endpoint's are given")


def test_a_variant_s_archives_are_held_to_single_model_rules():
    assert _refused(shadow=Shadow(model="vit"), variant_models={"Shadow": _s3(CANDIDATE_ARCHIVE, ENDPOINT_ARCHIVE)}
                    ) == SUBJECT + (
        "variant_models.Shadow.models: got 2 archives; allowed: exactly one on a single-model endpoint (SageMaker "
        "unpacks one ModelDataUrl into /opt/ml/model); fix: pack the models into one archive, or use a multi-model "
        "endpoint")


def test_a_variant_s_own_instance_type_meets_the_instance_rules():
    assert _refused(variants=[Variant(name="A"), Variant(name="B", instance_type="ml.t2.medium", scaling=Scaling())]
                    ) == SUBJECT + (
        "variants[1].scaling: got auto-scaling on ml.t2.medium; allowed: no auto-scaling on burstable ml.t* types; "
        "fix: remove scaling or use a non-burstable type such as ml.c5.xlarge")


def test_a_mapping_given_for_a_variant_shows_the_object_to_build():
    assert _refused(variants=[{"name": "A"}]) == SUBJECT + (
        "variants[0]: got {'name': 'A'} (dict); allowed: a Variant; fix: build it: Variant(name='A')")


# --- the spec app: examples/bert-classifier-candidate.yaml --------------------------------------------------------

@pytest.fixture(scope="module")
def example(module_tmp):
    return synth_spec(EXAMPLE, module_tmp.mktemp("candidate"))


def test_the_app_serves_the_candidate_s_own_build_and_the_incumbent_the_endpoint_s(example):
    manifest = json.loads(example.manifest_path.read_text())
    assert {"classifier", "classifier.candidate", "classifier.Shadow"} <= set(manifest["endpoints"])
    own = {name: manifest["endpoints"][name]["artifacts"][0]["file"] for name in ("classifier",
                                                                                  "classifier.candidate")}
    template = example.template("prod", "classifier")
    variants = _config(template)["ProductionVariants"]
    urls = _model_urls(template)
    served = {v["VariantName"]: urls[v["ModelName"]["Fn::GetAtt"][0]].rsplit("/", 1)[-1] for v in variants}
    assert served == {"incumbent": own["classifier"], "candidate": own["classifier.candidate"]}
    assert [(v["InitialVariantWeight"], v["InitialInstanceCount"]) for v in variants] == [(90, 2), (10, 2)]
    assert "DeploymentConfig" not in _endpoint_props(template)  # prod has guardrails: left out with variants
    assert Annotations.from_stack(example.stack("prod", "classifier")).find_info("*", Match.string_like_regexp(
        "endpoint Sentiment-prod-classifier: deployment guardrails left out with 2 production variant"))


def test_the_app_runs_the_shadow_in_staging_only(example):
    staging = _config(example.template("staging", "classifier"))
    assert [v["VariantName"] for v in staging["ShadowProductionVariants"]] == ["Shadow"]
    assert "DataCaptureConfig" in staging
    assert "ShadowProductionVariants" not in _config(example.template("dev", "classifier"))
    targets = sorted(t["Properties"]["ResourceId"] for t in example.template("staging", "classifier").find_resources(
        "AWS::ApplicationAutoScaling::ScalableTarget").values())
    assert targets == ["endpoint/Sentiment-staging-classifier/variant/AllTraffic",
                       "endpoint/Sentiment-staging-classifier/variant/Shadow"]


def test_the_example_matches_the_api_model_and_cdk_nag(example):
    findings, checked = [], 0
    for stack in example.stacks():
        report = check_template(Template.from_stack(stack).to_json())
        findings += report.findings
        checked += report.checked
    assert findings == [] and checked >= 200, (findings, checked)
    assert sorted(v.rule_name for v in AwsSolutionsChecks().validate_scope(example.app).violations) == []

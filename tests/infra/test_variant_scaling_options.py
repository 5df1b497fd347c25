"""High-resolution concurrency scaling and scheduled bounds on single-model, multi-model and inference-component
endpoints."""
import json

import pytest
from aws_cdk.assertions import Template
from cfnlint.api import ManualArgs, lint_file

from api_model_check import check_template
from user_app import model_archive, user_stack
from deployment_spec.sections.scheduled_scaling import ScheduledCopies, ScheduledScaling
from triton_constructs import (ComponentSpec, CopyScaling, ModelArchive, ModelRepositories, PropsError, Scaling,
                               TritonComponentsEndpoint, TritonSageMakerEndpoint)

OFFICE = ScheduledScaling(name="office", schedule="cron(0 8 ? * MON-FRI *)", time_zone="Europe/Berlin",
                          min_instances=2)
NIGHT = ScheduledScaling(name="night", schedule="cron(0 20 ? * * *)", time_zone="Europe/Berlin", min_instances=1)


def _endpoint(tmp_path, scaling: Scaling, multi_model: bool = False):
    stack = user_stack()
    models = ModelRepositories.from_archives([ModelArchive.from_file(model_archive(tmp_path, "resnet50"))])
    TritonSageMakerEndpoint(stack, "Endpoint", models=models, instance_type="ml.g5.xlarge", endpoint_name="e",
                            multi_model=multi_model, scaling=scaling)
    return stack


def test_concurrency_and_schedules_reach_the_template_and_the_handover(tmp_path):
    stack = _endpoint(tmp_path, Scaling(max_instances=4, concurrent_requests_per_model=4, schedules=(OFFICE, NIGHT)))
    template = Template.from_stack(stack)
    [target] = template.find_resources("AWS::ApplicationAutoScaling::ScalableTarget").values()
    assert target["Properties"]["ScheduledActions"] == [
        {"ScheduledActionName": "Schedule-office", "Schedule": "cron(0 8 ? * MON-FRI *)", "Timezone": "Europe/Berlin",
         "ScalableTargetAction": {"MinCapacity": 2}},
        {"ScheduledActionName": "Schedule-night", "Schedule": "cron(0 20 ? * * *)", "Timezone": "Europe/Berlin",
         "ScalableTargetAction": {"MinCapacity": 1}}]
    metrics = sorted(p["Properties"]["TargetTrackingScalingPolicyConfiguration"].get(
        "PredefinedMetricSpecification", {}).get("PredefinedMetricType", "custom")
        for p in template.find_resources("AWS::ApplicationAutoScaling::ScalingPolicy").values())
    assert metrics == ["SageMakerVariantConcurrentRequestsPerModelHighResolution", "custom"]  # + GPUUtilization
    # The handover puts the scheduled actions back after re-registering the variant.
    handovers = template.find_resources("Custom::TritonScalingHandover").values()
    assert handovers and all('"Schedule-office"' in h["Properties"]["ScheduledActions"] for h in handovers)
    # SageMaker and Application Auto Scaling's own service models, and cfn-lint, accept every value.
    body = template.to_json()
    assert check_template(body).findings == []
    written = tmp_path / "endpoint.template.json"
    written.write_text(json.dumps(body))
    assert [str(m) for m in lint_file(written, config=ManualArgs(regions=["us-east-1"]))] == []


def test_two_load_targets_on_one_variant_are_refused():
    with pytest.raises(PropsError) as caught:
        Scaling(max_instances=4, concurrent_requests_per_model=4, max_rps_per_instance=30)
    assert str(caught.value) == (
        "Scaling: 1 problem\n  - concurrent_requests_per_model: got 4; allowed: one load target: "
        "concurrent_requests_per_model, or invocations_target / max_rps_per_instance; fix: keep one; concurrency "
        "reacts within a minute, invocations per instance within several")


def test_concurrency_on_a_multi_model_endpoint_is_refused(tmp_path):
    with pytest.raises(PropsError) as caught:
        _endpoint(tmp_path, Scaling(max_instances=4, concurrent_requests_per_model=4), multi_model=True)
    assert str(caught.value) == (
        "TritonSageMakerEndpoint UserApp/Endpoint: 1 problem\n  - scaling.concurrent_requests_per_model: got 4 on a "
        "multi-model endpoint; allowed: single-model endpoints (inference components: concurrent_requests_per_copy); "
        "fix: scale the multi-model endpoint on max_rps_per_instance or invocations_target")


def test_a_schedule_outside_the_scaling_bounds_is_refused():
    with pytest.raises(PropsError) as caught:
        Scaling(max_instances=4, schedules=(ScheduledScaling(name="peak", schedule="cron(0 8 * * ? *)",
                                                             min_instances=6),))
    assert str(caught.value) == (
        "Scaling: 1 problem\n  - schedules[0]: got bounds 6..4 from then on; allowed: min_instances <= max_instances "
        "<= the endpoint's scaling.max_instances (4); fix: lower the schedule's bounds, or raise scaling.max_instances")


def test_a_schedule_to_zero_instances_on_a_variant_is_refused(tmp_path):
    weekend = ScheduledScaling(name="weekend", schedule="cron(0 0 ? * SAT *)", min_instances=0)
    with pytest.raises(PropsError) as caught:
        _endpoint(tmp_path, Scaling(max_instances=4, schedules=(weekend,)))
    assert "  - scaling.schedules[0].min_instances: got 0; allowed: 1 or more on a real-time variant endpoint" in str(caught.value)


def test_a_malformed_schedule_and_time_zone_are_refused():
    with pytest.raises(PropsError) as caught:
        ScheduledScaling(name="x", schedule="0 8 * * *", time_zone="Berlin", max_instances=2)
    assert str(caught.value) == (
        "ScheduledScaling: 2 problems\n"
        "  - schedule: got '0 8 * * *'; allowed: cron(m h dom mon dow year) with six fields, rate(N minutes|hours|days) "
        "or at(yyyy-mm-ddThh:mm:ss); fix: e.g. 'cron(0 8 ? * MON-FRI *)' for weekdays at 08:00\n"
        "  - time_zone: got 'Berlin'; allowed: an IANA time zone name; fix: e.g. 'Europe/Berlin' or 'UTC'")


def test_a_component_s_copy_schedules_reach_its_scalable_target(tmp_path):
    stack = user_stack()
    nights = ScheduledCopies(name="nights", schedule="cron(0 22 ? * * *)", time_zone="Europe/Berlin", max_copies=1)
    scaling = CopyScaling(min_copies=1, max_copies=3, invocations_per_copy=600, schedules=(nights,))
    models = ModelRepositories.from_archives([ModelArchive.from_file(model_archive(tmp_path, "resnet50"))])
    TritonComponentsEndpoint(stack, "Shared", models=models, instance_type="ml.g5.12xlarge", endpoint_name="shared",
                             components={"resnet50": ComponentSpec(scaling=scaling)})
    template = Template.from_stack(stack)
    [target] = template.find_resources("AWS::ApplicationAutoScaling::ScalableTarget").values()
    assert target["Properties"]["ScalableDimension"] == "sagemaker:inference-component:DesiredCopyCount"
    assert target["Properties"]["ScheduledActions"] == [
        {"ScheduledActionName": "Schedule-nights", "Schedule": "cron(0 22 ? * * *)", "Timezone": "Europe/Berlin",
         "ScalableTargetAction": {"MaxCapacity": 1}}]
    assert check_template(template.to_json()).findings == []


def test_copy_schedules_outside_the_bounds_or_to_zero_without_the_wake_up_are_refused():
    with pytest.raises(PropsError) as caught:
        CopyScaling(min_copies=1, max_copies=3, invocations_per_copy=600, schedules=(
            ScheduledCopies(name="peak", schedule="cron(0 8 ? * MON-FRI *)", min_copies=5),
            ScheduledCopies(name="weekend", schedule="cron(0 0 ? * SAT *)", min_copies=0)))
    assert str(caught.value) == (
        "CopyScaling: 2 problems\n"
        "  - schedules[0]: got bounds 5..3 from then on; allowed: min_copies <= max_copies <= the component's "
        "scaling.max_copies (3); fix: lower the schedule's bounds, or raise scaling.max_copies\n"
        "  - schedules[1].min_copies: got 0; allowed: 0 only where scaling.min_copies is 0 (that adds the policy "
        "that starts a copy when a request finds none); fix: set scaling.min_copies: 0 too, or keep the schedule at 1 "
        "or more")

"""The scaling handover: its template wiring, and its handler run through a whole instance-type
change (and its rollback) against in-memory SageMaker and Application Auto Scaling (no AWS)."""
import importlib.util
import json
import sys

import pytest
from aws_cdk.assertions import Match
import botocore.session
import botocore.validate
from botocore.exceptions import ClientError

from synth_helpers import ROOT, resource_id

HANDLERS = ROOT / "triton_constructs" / "handlers"
sys.path.insert(0, str(HANDLERS))  # as in the Lambda asset: the handlers import cfn_response from its root
_spec = importlib.util.spec_from_file_location("scaling_handover", HANDLERS / "scaling_handover.py")
handover = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(handover)

RID = "endpoint/Triton-prod-classifier/variant/AllTraffic"
POLICIES = [{"PolicyName": "Invocations", "Configuration": {
    "TargetValue": "900", "ScaleInCooldown": "300", "ScaleOutCooldown": "300",
    "PredefinedMetricSpecification": {"PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"}}}]


class Cloud:
    """SageMaker (one endpoint, one variant) and Application Auto Scaling, as far as the handler uses them."""

    def __init__(self, instance_type="ml.g5.xlarge", registered=True):
        self.instance_type, self.registered, self.policies, self.calls = instance_type, registered, {}, []
        if registered:
            self.policies = {"Invocations": {"TargetValue": 900.0}}
        self.endpoint_exists = True

    # SageMaker
    def describe_endpoint(self, EndpointName):
        if not self.endpoint_exists:
            raise ClientError({"Error": {"Code": "ValidationException",
                                         "Message": f"Could not find endpoint \"{EndpointName}\"."}}, "DescribeEndpoint")
        return {"EndpointConfigName": f"config-{self.instance_type}"}

    def describe_endpoint_config(self, EndpointConfigName):
        return {"ProductionVariants": [{"VariantName": "AllTraffic", "InstanceType": EndpointConfigName[7:]}]}

    def update_endpoint(self, instance_type):
        """What UpdateEndpoint does (https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-scaling-update.html)."""
        if self.registered and instance_type != self.instance_type:
            raise RuntimeError("UpdateEndpoint: the variant is a scaling target and its instance type changes")
        self.instance_type = instance_type

    # Application Auto Scaling
    def describe_scalable_targets(self, ServiceNamespace, ResourceIds, ScalableDimension):
        assert (ServiceNamespace, ResourceIds, ScalableDimension) == (
            "sagemaker", [RID], "sagemaker:variant:DesiredInstanceCount")
        return {"ScalableTargets": [{"ResourceId": RID}] if self.registered else []}

    def deregister_scalable_target(self, ServiceNamespace, ResourceId, ScalableDimension):
        self.calls.append("deregister")
        self.registered, self.policies = False, {}  # deregistering deletes the policies

    def register_scalable_target(self, ServiceNamespace, ResourceId, ScalableDimension, MinCapacity, MaxCapacity):
        self.calls.append(("register", MinCapacity, MaxCapacity))
        self.registered = True

    def put_scaling_policy(self, PolicyName, ServiceNamespace, ResourceId, ScalableDimension, PolicyType,
                           TargetTrackingScalingPolicyConfiguration):
        self.calls.append(("put", PolicyName, TargetTrackingScalingPolicyConfiguration))
        self.policies[PolicyName] = TargetTrackingScalingPolicyConfiguration

    def put_scheduled_action(self, **arguments):
        # The arguments as botocore's own validator checks them against the service model.
        shape = botocore.session.get_session().get_service_model("application-autoscaling").operation_model(
            "PutScheduledAction").input_shape
        botocore.validate.validate_parameters(arguments, shape)
        self.calls.append(("schedule", arguments["ScheduledActionName"], arguments["ScalableTargetAction"]))


@pytest.fixture
def responses(monkeypatch):
    sent = []
    monkeypatch.setattr(handover, "respond", lambda event, status, reason, pid: sent.append((status, reason)))
    return sent


def _call(cloud, phase, instance_type, kind="Update", scheduled=None):
    props = {"ResourceId": RID, "EndpointName": "Triton-prod-classifier", "VariantName": "AllTraffic",
             "InstanceType": instance_type, "MinCapacity": "1", "MaxCapacity": "6",
             "Policies": json.dumps(POLICIES), "Phase": phase}
    if scheduled is not None:
        props["ScheduledActions"] = json.dumps(scheduled)
    handover.handler({"RequestType": kind, "ResourceProperties": props}, None, sagemaker=cloud, autoscaling=cloud)


def test_an_instance_type_change_goes_through_and_scaling_comes_back(responses):
    cloud = Cloud()
    with pytest.raises(RuntimeError):  # what CloudFormation alone would run into
        Cloud().update_endpoint("ml.g5.2xlarge")
    _call(cloud, "before", "ml.g5.2xlarge")
    cloud.update_endpoint("ml.g5.2xlarge")
    _call(cloud, "after", "ml.g5.2xlarge")
    assert cloud.calls == ["deregister", ("register", 1, 6), ("put", "Invocations", {
        "TargetValue": 900.0, "ScaleInCooldown": 300, "ScaleOutCooldown": 300,
        "PredefinedMetricSpecification": {"PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"}})]
    assert (cloud.instance_type, cloud.registered, list(cloud.policies)) == ("ml.g5.2xlarge", True, ["Invocations"])
    assert [status for status, _ in responses] == ["SUCCESS", "SUCCESS"]


def test_scheduled_actions_come_back_with_the_registration(responses):
    # As the template writes them (ScalableTarget ScheduledActions, numbers as strings).
    scheduled = [{"ScheduledActionName": "Schedule-office", "Schedule": "cron(0 8 ? * MON-FRI *)",
                  "Timezone": "Europe/Berlin", "ScalableTargetAction": {"MinCapacity": "2"}}]
    cloud = Cloud()
    _call(cloud, "before", "ml.g5.2xlarge", scheduled=scheduled)
    cloud.update_endpoint("ml.g5.2xlarge")
    _call(cloud, "after", "ml.g5.2xlarge", scheduled=scheduled)
    assert cloud.calls[-1] == ("schedule", "Schedule-office", {"MinCapacity": 2})
    assert [status for status, _ in responses] == ["SUCCESS", "SUCCESS"]


def test_instance_pools_name_what_the_variant_runs_on(responses):
    # With InstancePools the variant has no InstanceType: the pools by priority stand for it.
    cloud = Cloud()
    cloud.describe_endpoint_config = lambda EndpointConfigName: {"ProductionVariants": [{
        "VariantName": "AllTraffic", "InstancePools": [{"InstanceType": "ml.g6.xlarge", "Priority": 2},
                                                       {"InstanceType": "ml.g5.xlarge", "Priority": 1}]}]}
    assert handover.running_instance_type(cloud, "Triton-prod-classifier", "AllTraffic") == "ml.g5.xlarge,ml.g6.xlarge"
    _call(cloud, "before", "ml.g5.xlarge,ml.g6.xlarge")
    assert cloud.calls == [] and responses[-1][1].startswith("no change")


def test_a_failed_endpoint_update_rolls_back_to_the_old_registration(responses):
    # Forward: Before deregisters; the endpoint update fails (say, no capacity). CloudFormation rolls
    # back in reverse: the endpoint stays on the old type, Before runs again with the old properties.
    cloud = Cloud()
    _call(cloud, "before", "ml.g5.2xlarge")
    _call(cloud, "before", "ml.g5.xlarge")
    assert cloud.calls[0] == "deregister" and cloud.calls[1] == ("register", 1, 6)
    assert (cloud.instance_type, cloud.registered, list(cloud.policies)) == ("ml.g5.xlarge", True, ["Invocations"])


def test_a_failure_after_the_handover_rolls_the_endpoint_back_through_it(responses):
    # Everything moved to the new type and scaling is back on; then a later resource fails. The
    # rollback runs After (old properties: deregister so the endpoint may change back), rolls the
    # endpoint back, then Before (registers on the old type).
    cloud = Cloud()
    _call(cloud, "before", "ml.g5.2xlarge")
    cloud.update_endpoint("ml.g5.2xlarge")
    _call(cloud, "after", "ml.g5.2xlarge")
    _call(cloud, "after", "ml.g5.xlarge")
    cloud.update_endpoint("ml.g5.xlarge")
    _call(cloud, "before", "ml.g5.xlarge")
    assert (cloud.instance_type, cloud.registered, list(cloud.policies)) == ("ml.g5.xlarge", True, ["Invocations"])
    assert [c if isinstance(c, str) else c[0] for c in cloud.calls] == [
        "deregister", "register", "put", "deregister", "register", "put"]


def test_same_instance_type_changes_nothing(responses):
    cloud = Cloud()
    _call(cloud, "before", "ml.g5.xlarge")
    _call(cloud, "after", "ml.g5.xlarge")
    assert cloud.calls == [] and responses[0][1] == (
        f"no change: {RID} runs ml.g5.xlarge, desired ml.g5.xlarge, registered True")


def test_create_and_delete_leave_scaling_to_the_stack_resources(responses):
    cloud = Cloud(registered=False)
    cloud.endpoint_exists = False
    _call(cloud, "before", "ml.g5.xlarge", kind="Create")
    _call(cloud, "after", "ml.g5.xlarge", kind="Delete")
    assert cloud.calls == [] and [s for s, _ in responses] == ["SUCCESS", "SUCCESS"]


def test_a_missing_endpoint_is_not_an_error(responses):
    cloud = Cloud()
    cloud.endpoint_exists = False
    _call(cloud, "before", "ml.g5.2xlarge")
    assert cloud.calls == [] and responses == [("SUCCESS", f"no change: {RID} runs None, desired ml.g5.2xlarge, "
                                                            "registered True")]


def test_an_api_error_reaches_cloudformation_as_a_failure(responses):
    class Denied(Cloud):
        def describe_scalable_targets(self, **kwargs):
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "not allowed"}},
                              "DescribeScalableTargets")
    _call(Denied(), "before", "ml.g5.2xlarge")
    assert responses == [("FAILED", "ClientError: An error occurred (AccessDeniedException) when calling the "
                                    "DescribeScalableTargets operation: not allowed")]


def test_the_template_wires_before_and_after_around_the_endpoint(default_synth):
    template = default_synth.template("prod", "classifier")
    endpoint_id = resource_id(template, "AWS::SageMaker::Endpoint")
    before_id = resource_id(template, "Custom::TritonScalingHandover", {"Phase": "before"})
    after_id = resource_id(template, "Custom::TritonScalingHandover", {"Phase": "after"})
    resources = template.to_json()["Resources"]
    assert before_id in resources[endpoint_id]["DependsOn"]
    assert endpoint_id in resources[after_id]["DependsOn"]
    props = resources[before_id]["Properties"]
    assert {k: props[k] for k in ("ResourceId", "EndpointName", "VariantName", "InstanceType", "MinCapacity",
                                  "MaxCapacity")} == {
        "ResourceId": "endpoint/Triton-prod-classifier/variant/AllTraffic", "EndpointName": "Triton-prod-classifier",
        "VariantName": "AllTraffic", "InstanceType": "ml.g5.xlarge", "MinCapacity": "2", "MaxCapacity": "6"}
    # The definition it re-registers is exactly the stack's own policies (same names, same configuration).
    stack_policies = sorted(
        ({"PolicyName": p["Properties"]["PolicyName"],
          "Configuration": p["Properties"]["TargetTrackingScalingPolicyConfiguration"]}
         for p in template.find_resources("AWS::ApplicationAutoScaling::ScalingPolicy").values()),
        key=lambda p: p["PolicyName"])
    assert sorted(json.loads(props["Policies"]), key=lambda p: p["PolicyName"]) == stack_policies
    assert json.loads(resources[after_id]["Properties"]["Policies"]) == json.loads(props["Policies"])
    template.has_resource_properties("AWS::Lambda::Function", {"Handler": "scaling_handover.handler",
                                                               "Runtime": "python3.14", "Timeout": 120})
    template.has_resource_properties("AWS::IAM::Policy", {"PolicyDocument": {"Statement": Match.array_with([
        Match.object_like({"Action": ["sagemaker:DescribeEndpoint", "sagemaker:UpdateEndpointWeightsAndCapacities"],
                           "Resource": {"Fn::Join": ["", Match.array_with(
                               [":endpoint/triton-prod-classifier"])]}})])}})


def test_a_renamed_variant_is_left_to_its_new_scalable_target(responses):
    # The first variant renamed (AllTraffic -> incumbent when variants are added): its ScalableTarget's ResourceId is
    # create-only, so CloudFormation creates a new target after After; registering it here would make that create
    # fail with AlreadyExists (tests/infra/test_change_matrix.py). The twin: the same After with its ResourceId
    # unchanged registers the unregistered variant (sync).
    renamed = "endpoint/Triton-prod-classifier/variant/incumbent"
    props = {"ResourceId": renamed, "EndpointName": "Triton-prod-classifier", "VariantName": "incumbent",
             "InstanceType": "ml.g5.xlarge", "MinCapacity": "1", "MaxCapacity": "6",
             "Policies": json.dumps(POLICIES), "Phase": "after"}
    cloud = Cloud(registered=False)
    handover.handler({"RequestType": "Update", "ResourceProperties": props,
                      "OldResourceProperties": {**props, "ResourceId": RID, "VariantName": "AllTraffic"}},
                     None, sagemaker=cloud, autoscaling=cloud)
    assert cloud.calls == []
    assert responses == [("SUCCESS", f"nothing to do: {renamed} is a renamed variant, registered by its new "
                                     "ScalableTarget")]
    _call(cloud, "after", "ml.g5.xlarge")
    assert cloud.calls[0] == ("register", 1, 6)

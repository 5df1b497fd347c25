"""The change matrix: each change a user makes to the spec, synthesized before and after, and what
CloudFormation will do with it (replaced / updated resources, by logical ID and type), checked
against the service rules that decide whether the deploy goes through (fixtures/change_plan.py).
"""
import copy
import hashlib
import json
import pathlib

import pytest
import yaml

from change_plan import component_calls, plan, resource, service_problems
from deployment_spec import SpecError, load_spec
from fake_build import fake_build
from synth_helpers import ROOT, Synth

MODEL, CONFIG, ENDPOINT = "AWS::SageMaker::Model", "AWS::SageMaker::EndpointConfig", "AWS::SageMaker::Endpoint"
TARGET, POLICY = "AWS::ApplicationAutoScaling::ScalableTarget", "AWS::ApplicationAutoScaling::ScalingPolicy"
BASE = yaml.safe_load((ROOT / "triton.yaml").read_text())


def _synth(raw: dict, folder: pathlib.Path, new_artifact_for: str = "") -> Synth:
    folder.mkdir(parents=True)
    (folder / "triton.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    spec = load_spec(folder / "triton.yaml")
    manifest_path = fake_build(spec, folder / "assets")
    if new_artifact_for:
        _rebuild_artifact(manifest_path, new_artifact_for)
    return Synth(spec, manifest_path, folder / "cdk.out")


def _rebuild_artifact(manifest_path: pathlib.Path, endpoint: str) -> None:
    """A new build of the endpoint's first tarball: other bytes, so another sha256 and object name."""
    body = json.loads(manifest_path.read_text())
    artifact = body["endpoints"][endpoint]["artifacts"][0]
    data = (manifest_path.parent / artifact["file"]).read_bytes() + b"retrained"
    sha = hashlib.sha256(data).hexdigest()
    artifact.update(file=f"{artifact['file'].rsplit('-', 1)[0]}-{sha[:12]}.tar.gz", sha256=sha, size=len(data))
    (manifest_path.parent / artifact["file"]).write_bytes(data)
    manifest_path.write_text(json.dumps(body))


def _templates(synth: Synth, environment: str, endpoint: str) -> dict:
    return synth.template(environment, endpoint).to_json()


def _change(tmp_path, mutate=None, environment="prod", endpoint="classifier", base=None, **after_args):
    before_raw = copy.deepcopy(base or BASE)
    after_raw = copy.deepcopy(before_raw)
    if mutate:
        mutate(after_raw)
    before = _templates(_synth(before_raw, tmp_path / "before"), environment, endpoint)
    after = _templates(_synth(after_raw, tmp_path / "after", **after_args), environment, endpoint)
    change = plan(before, after)
    return before, after, change


def _types(ids: dict) -> set[str]:
    return set(ids.values())


def _updated_types(after: dict, change) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for lid, keys in change.updated.items():
        out.setdefault(after["Resources"][lid]["Type"], set()).update(keys)
    return out


def _unscaled(raw):
    """The classifier without auto-scaling (prod, a production environment, keeps 2 instances)."""
    raw["endpoints"]["classifier"].pop("scaling")
    raw["environments"]["prod"]["overrides"]["endpoints"]["classifier"] = {"initial_instances": 2}


def test_new_model_artifact_on_a_single_model_endpoint(tmp_path):
    before, after, change = _change(tmp_path, new_artifact_for="classifier")
    # A new Model and EndpointConfig, then a blue/green UpdateEndpoint onto them (model changes are
    # allowed on a scaled variant); scaling is not touched.
    assert {MODEL, CONFIG} <= _types(change.replaced) and not change.removed
    assert _updated_types(after, change)[ENDPOINT] == {"EndpointConfigName"}
    assert not {TARGET, POLICY} & (_types(change.replaced) | set(_updated_types(after, change)))
    assert service_problems(before, after, change) == []


def test_new_model_artifact_on_a_multi_model_endpoint(tmp_path):
    before, after, change = _change(tmp_path, endpoint="vision-nlp", new_artifact_for="vision-nlp")
    # The model reads the prefix: a new tarball is a new object under it (never an overwrite); the
    # Model, EndpointConfig and Endpoint stay, clients call the new TargetModel name.
    touched = _types(change.replaced) | _types(change.added) | set(_updated_types(after, change))
    assert not {MODEL, CONFIG, ENDPOINT, TARGET} & touched
    assert before["Outputs"]["TargetModels"] != after["Outputs"]["TargetModels"]


def test_triton_version_bump(tmp_path):
    before, after, change = _change(tmp_path, lambda raw: raw.__setitem__("triton_version", "26.05"))
    assert {MODEL, CONFIG} <= _types(change.replaced)
    assert _updated_types(after, change)[ENDPOINT] == {"EndpointConfigName"}
    assert resource(after, MODEL)[1]["Properties"]["PrimaryContainer"]["Image"].endswith(
        "sagemaker-tritonserver:26.05-py3")
    assert service_problems(before, after, change) == []


def test_instance_type_change_without_scaling(tmp_path):
    base = copy.deepcopy(BASE)
    _unscaled(base)
    before, after, change = _change(
        tmp_path, lambda raw: raw["endpoints"]["classifier"].__setitem__("instance_type", "ml.g5.2xlarge"), base=base,
        environment="staging")
    assert CONFIG in _types(change.replaced) and MODEL not in _types(change.replaced)
    assert _updated_types(after, change)[ENDPOINT] == {"EndpointConfigName"}
    assert service_problems(before, after, change) == []


def test_instance_type_change_of_a_scaled_endpoint(tmp_path):
    before, after, change = _change(
        tmp_path, lambda raw: raw["endpoints"]["classifier"].__setitem__("instance_type", "ml.g5.2xlarge"))
    # Without the handover this is the update SageMaker refuses (the variant is a scaling target):
    handovers = {lid for lid, r in after["Resources"].items() if r["Type"] == "Custom::TritonScalingHandover"}
    without = {**after, "Resources": {k: v for k, v in after["Resources"].items() if k not in handovers}}
    assert service_problems(before, without, plan(before, without)) == [
        "variant AllTraffic is a scaling target and its instance type changes (ml.g5.xlarge -> ml.g5.2xlarge): "
        "UpdateEndpoint fails"]
    # With it: the Before resource (the endpoint depends on it) deregisters first, After registers again.
    assert {lid: change.updated[lid] for lid in handovers} == {lid: {"InstanceType"} for lid in handovers}
    assert CONFIG in _types(change.replaced) and not {TARGET, POLICY} & _types(change.replaced)
    assert service_problems(before, after, change) == []


def test_scaling_bounds(tmp_path):
    before, after, change = _change(
        tmp_path, lambda raw: raw["environments"]["prod"]["overrides"]["endpoints"]["classifier"]["scaling"]
        .__setitem__("max_instances", 9))
    assert not change.replaced and not change.added and not change.removed
    # The handover resources carry the bounds too; they run, find the same instance type, change nothing.
    assert _updated_types(after, change) == {TARGET: {"MaxCapacity"}, "Custom::TritonScalingHandover": {"MaxCapacity"}}


def test_adding_a_fallback_instance_pool_to_a_scaled_endpoint(tmp_path):
    before, after, change = _change(
        tmp_path, lambda raw: raw["endpoints"]["classifier"].__setitem__("fallback_instance_types", ["ml.g6.xlarge"]))
    # InstancePools replace InstanceType: a new config, and the handover moves the scaling registration around
    # it as for an instance-type change (SageMaker treats the variant's types as changed).
    handovers = {lid for lid, r in after["Resources"].items() if r["Type"] == "Custom::TritonScalingHandover"}
    assert {lid: change.updated[lid] for lid in handovers} == {lid: {"InstanceType"} for lid in handovers}
    assert CONFIG in _types(change.replaced) and _updated_types(after, change)[ENDPOINT] == {"EndpointConfigName"}
    without = {**after, "Resources": {k: v for k, v in after["Resources"].items() if k not in handovers}}
    assert service_problems(before, without, plan(before, without)) == [
        "variant AllTraffic is a scaling target and its instance type changes (ml.g5.xlarge -> "
        "ml.g5.xlarge,ml.g6.xlarge): UpdateEndpoint fails"]
    assert service_problems(before, after, change) == []


def test_adding_a_capacity_reservation(tmp_path):
    reservation = {"arn": "arn:aws:sagemaker:us-east-1:123456789012:ml-reservation/plan-1",
                   "instance_type": "ml.g5.xlarge", "instances": 6}
    before, after, change = _change(
        tmp_path, lambda raw: raw["environments"]["prod"]["overrides"]["endpoints"]["classifier"]
        .__setitem__("capacity_reservation", reservation))
    # A new config (CapacityReservationConfig) and a blue/green update onto it; the instance type is the same,
    # so the scaling registration stays where it is.
    assert _types(change.replaced) == {CONFIG}
    assert _updated_types(after, change) == {ENDPOINT: {"EndpointConfigName"}}
    variant = resource(after, CONFIG)[1]["Properties"]["ProductionVariants"][0]
    assert variant["CapacityReservationConfig"]["MlReservationArn"] == reservation["arn"]
    assert service_problems(before, after, change) == []


def test_adding_a_schedule(tmp_path):
    before, after, change = _change(
        tmp_path, lambda raw: raw["environments"]["prod"]["overrides"]["endpoints"]["classifier"]["scaling"]
        .__setitem__("schedules", [{"name": "night", "schedule": "cron(0 20 ? * * *)", "min_instances": 2}]))
    # The scalable target is updated in place (ScheduledActions); the handover carries them, to put them back.
    assert not change.replaced and not change.added and not change.removed
    assert _updated_types(after, change) == {TARGET: {"ScheduledActions"},
                                             "Custom::TritonScalingHandover": {"ScheduledActions"}}
    assert service_problems(before, after, change) == []


def test_initial_instances_of_a_scaled_endpoint(tmp_path):
    before, after, change = _change(
        tmp_path, lambda raw: raw["endpoints"]["classifier"].__setitem__("initial_instances", 2), environment="staging")
    # A new config, but the running count is retained: scaling owns it (the synth says so).
    assert CONFIG in _types(change.replaced)
    assert resource(after, ENDPOINT)[1]["Properties"]["RetainAllVariantProperties"] is True
    assert service_problems(before, after, change) == []


def test_initial_instances_without_scaling_takes_effect(tmp_path):
    base = copy.deepcopy(BASE)
    _unscaled(base)
    before, after, change = _change(
        tmp_path, lambda raw: raw["endpoints"]["classifier"].__setitem__("initial_instances", 2), base=base,
        environment="staging")
    assert CONFIG in _types(change.replaced)
    assert resource(after, ENDPOINT)[1]["Properties"]["RetainAllVariantProperties"] is False
    (variant,) = resource(after, CONFIG)[1]["Properties"]["ProductionVariants"]
    assert variant["InitialInstanceCount"] == 2


def test_removing_a_model_from_a_multi_model_endpoint(tmp_path):
    before, after, change = _change(
        tmp_path, lambda raw: raw["endpoints"]["vision-nlp"].__setitem__("models", ["resnet50"]),
        endpoint="vision-nlp")
    # Only the artifact side changes; the endpoint keeps serving the prefix (the removed tarball stays
    # in the versioned bucket, so in-flight callers of its TargetModel are not cut off mid-deploy).
    touched = _types(change.replaced) | _types(change.added) | set(_updated_types(after, change))
    assert not {MODEL, CONFIG, ENDPOINT, TARGET} & touched
    assert "bert" not in after["Outputs"]["TargetModels"]["Value"]


def test_renaming_an_endpoint_makes_a_new_stack_and_leaves_the_old_one(tmp_path):
    raw = copy.deepcopy(BASE)
    raw["endpoints"]["text-api"] = raw["endpoints"].pop("classifier")
    raw["environments"]["prod"]["overrides"]["endpoints"]["text-api"] = \
        raw["environments"]["prod"]["overrides"]["endpoints"].pop("classifier")
    before = _synth(copy.deepcopy(BASE), tmp_path / "before")
    after = _synth(raw, tmp_path / "after")
    names = {s.stack_name for s in before.stacks()}, {s.stack_name for s in after.stacks()}
    # A new stack (new endpoint name, new resources); the old stack is simply absent from the assembly:
    # `cdk deploy` creates the new one and leaves the old endpoint running until `cdk destroy` of it.
    assert names[0] - names[1] == {"Triton-dev-classifier", "Triton-staging-classifier", "Triton-prod-classifier"}
    assert names[1] - names[0] == {"Triton-dev-text-api", "Triton-staging-text-api", "Triton-prod-text-api"}


def test_turning_guardrails_off(tmp_path):
    before, after, change = _change(
        tmp_path, lambda raw: raw["environments"]["prod"].__setitem__("guardrails", False))
    # The endpoint is updated in place (no DeploymentConfig: SageMaker's default all-at-once update);
    # no model or config is replaced, the role loses its alarm-reading grant.
    assert not {MODEL, CONFIG} & _types(change.replaced)
    assert "DeploymentConfig" in _updated_types(after, change)[ENDPOINT]
    assert service_problems(before, after, change) == []


def test_recreating_a_retained_environment_meets_its_kept_log_group(default_synth):
    # What stays behind when a retained environment's endpoint stack is deleted: its log group, under
    # the name SageMaker writes to. A static name and RetainExceptOnCreate are what CloudFormation's
    # auto-import needs, so `cdk deploy --import-existing-resources` adopts it on re-create
    # (docs/operations/changes.md); a failed first create deletes it instead.
    groups = [r for r in default_synth.template("prod", "classifier").to_json()["Resources"].values()
              if r["Type"] == "AWS::Logs::LogGroup" and "LogGroupName" in r["Properties"]]
    assert [(g["Properties"]["LogGroupName"], g["DeletionPolicy"]) for g in groups] == [
        ("/aws/sagemaker/Endpoints/Triton-prod-classifier", "RetainExceptOnCreate")]


# --- Inference components (examples/inference-components.yaml): each change of a component, and the endpoint's.
IC = "AWS::SageMaker::InferenceComponent"
ALARM = "AWS::CloudWatch::Alarm"
COMPONENTS = yaml.safe_load((ROOT / "examples" / "inference-components.yaml").read_text())


def _ic_change(tmp_path, mutate, environment="staging", **after_args):
    return _change(tmp_path, mutate, environment=environment, endpoint="shared-gpu", base=COMPONENTS, **after_args)


def _component(raw, model):
    return raw["endpoints"]["shared-gpu"]["components"][model]


def _dev(raw, environment="dev"):
    """An environment's component overrides."""
    return raw["environments"][environment]["overrides"]["endpoints"]["shared-gpu"]["components"]


def _remove_resnet(raw):
    raw["endpoints"]["shared-gpu"]["models"].remove("resnet50")
    for components in (raw["endpoints"]["shared-gpu"]["components"], _dev(raw), _dev(raw, "prod")):
        components.pop("resnet50")


def test_components_adding_one(tmp_path):
    def add(raw):
        raw["models"]["bert-large"] = {**raw["models"]["bert"], "source": {"recipe": "bert-base"}}
        raw["endpoints"]["shared-gpu"]["models"].append("bert-large")
        raw["endpoints"]["shared-gpu"]["components"]["bert-large"] = {
            "reservation": {"gpus": 1, "memory_mb": 8192},
            "scaling": {"min_copies": 1, "max_copies": 1, "concurrent_requests_per_copy": 4}}
        _dev(raw)["bert-large"] = {"scaling": {"min_copies": 0, "max_copies": 1, "concurrent_requests_per_copy": 4}}
    before, after, change = _ic_change(tmp_path, add)
    # A new model, component, scaling target and alarms; the endpoint and the other components are untouched:
    # SageMaker creates the component on the running endpoint (no endpoint update, no other copy restarts).
    assert {MODEL, IC, TARGET, POLICY, ALARM} <= _types(change.added)
    assert not {CONFIG, ENDPOINT, IC} & (_types(change.replaced) | set(_updated_types(after, change)))
    assert component_calls(after, change) == {"Shared-staging-shared-gpu-bert-large": {"CreateInferenceComponent"}}
    assert service_problems(before, after, change) == []


def test_components_removing_one(tmp_path):
    before, after, change = _ic_change(tmp_path, _remove_resnet)
    # The component, its scaling and alarms go (DeleteInferenceComponent); its model leaves the template but is
    # kept (RetainExceptOnCreate outside throw-away environments); the endpoint and the others stay as they are.
    assert {IC, TARGET, POLICY, ALARM} <= _types(change.removed)
    assert not {CONFIG, ENDPOINT, IC} & (_types(change.replaced) | set(_updated_types(after, change)))
    model = [body for lid, body in before["Resources"].items() if lid in change.removed and body["Type"] == MODEL]
    assert [m["DeletionPolicy"] for m in model] == ["RetainExceptOnCreate"]


def test_components_changing_a_reservation(tmp_path):
    before, after, change = _ic_change(tmp_path, lambda raw: _component(raw, "bert")["reservation"].__setitem__(
        "memory_mb", 12288))
    # The component is updated in place (AWS::SageMaker::InferenceComponent has no create-only property):
    # UpdateInferenceComponent, which under guardrails rolls the new copies out in batches; nothing else moves.
    assert not change.replaced and not change.added and not change.removed
    assert _updated_types(after, change) == {IC: {"Specification"}}
    assert component_calls(after, change) == {"Shared-staging-shared-gpu-bert": {"UpdateInferenceComponent"}}
    assert "RollingUpdatePolicy" in resource_by_name(after, "Shared-staging-shared-gpu-bert")["DeploymentConfig"]


def resource_by_name(template, name):
    return next(r["Properties"] for r in template["Resources"].values()
                if r["Type"] == IC and r["Properties"]["InferenceComponentName"] == name)


def test_components_changing_the_initial_copies(tmp_path):
    def two(raw):
        _component(raw, "bert")["copies"] = 2
        _dev(raw)["bert"]["copies"] = 1  # dev keeps at most one copy
    before, after, change = _ic_change(tmp_path, two)
    # Only the runtime configuration: UpdateInferenceComponentRuntimeConfig sets the copy count (also over what
    # the autoscaler chose, until its next step; docs/howto/inference-components.md).
    assert _updated_types(after, change) == {IC: {"RuntimeConfig"}}
    assert component_calls(after, change) == {"Shared-staging-shared-gpu-bert": {"UpdateInferenceComponentRuntimeConfig"}}


def test_components_changing_scaling(tmp_path):
    def scale(raw):
        _component(raw, "bert")["scaling"].update(max_copies=3, concurrent_requests_per_copy=6)
    before, after, change = _ic_change(tmp_path, scale)
    # The scalable target's bound and the policy's target value, in place (and the dashboard's target line);
    # no component or endpoint call.
    assert not change.replaced and not change.added and not change.removed
    assert _updated_types(after, change) == {TARGET: {"MaxCapacity"},
                                             POLICY: {"TargetTrackingScalingPolicyConfiguration"},
                                             "AWS::CloudWatch::Dashboard": {"DashboardBody"}}


def test_components_changing_the_instance_type(tmp_path):
    def to_g6(raw):  # the example's fallback pool becomes its one type
        raw["endpoints"]["shared-gpu"].update(instance_type="ml.g6.12xlarge", fallback_instance_types=[])

    before, after, change = _ic_change(tmp_path, to_g6)
    # A new endpoint configuration and UpdateEndpoint; the components are not touched by CloudFormation (same
    # endpoint name). Their copies' scaling targets are not the variant's, so SageMaker's refusal to change a
    # scaled variant's instance type does not apply. What SageMaker does with the running copies during that
    # UpdateEndpoint is not documented: UNVERIFIED (docs/howto/inference-components.md).
    assert CONFIG in _types(change.replaced) and _updated_types(after, change)[ENDPOINT] == {"EndpointConfigName"}
    assert not {IC, TARGET} & (_types(change.replaced) | set(_updated_types(after, change)))
    assert service_problems(before, after, change) == []


def test_components_adding_a_fallback_pool(tmp_path):
    base = copy.deepcopy(COMPONENTS)
    base["endpoints"]["shared-gpu"]["fallback_instance_types"] = []
    before, after, change = _change(
        tmp_path, lambda raw: raw["endpoints"]["shared-gpu"].__setitem__("fallback_instance_types", ["ml.g6.12xlarge"]),
        environment="staging", endpoint="shared-gpu", base=base)
    # InstancePools replace InstanceType: a new configuration and UpdateEndpoint; the components and their copies'
    # scaling targets are not touched (no handover: the variant itself is not a scaling target).
    assert CONFIG in _types(change.replaced) and _updated_types(after, change)[ENDPOINT] == {"EndpointConfigName"}
    assert not {IC, TARGET} & (_types(change.replaced) | set(_updated_types(after, change)))
    assert service_problems(before, after, change) == []


def test_components_an_instance_type_too_small_is_refused_at_synth(tmp_path):
    raw = copy.deepcopy(COMPONENTS)
    raw["endpoints"]["shared-gpu"]["instance_type"] = "ml.g5.2xlarge"
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    with pytest.raises(SpecError) as caught:
        load_spec(tmp_path / "spec.yaml")
    # Three one-GPU copies on at most two one-GPU instances can never all be placed.
    assert caught.value.problems[0].path == "endpoints.shared-gpu.components.*.copies"


def test_components_scale_to_zero_on(tmp_path):
    def zero(raw):
        raw["environments"]["staging"]["overrides"] = copy.deepcopy(raw["environments"]["dev"]["overrides"])
    before, after, change = _ic_change(tmp_path, zero)
    # MinInstanceCount 0 is a new endpoint configuration (UpdateEndpoint); the targets' minimum drops to 0 in
    # place, and each component gets the wake-up step policy and its NoCapacityInvocationFailures alarm.
    assert CONFIG in _types(change.replaced) and _updated_types(after, change)[ENDPOINT] == {"EndpointConfigName"}
    assert _updated_types(after, change)[TARGET] == {"MinCapacity", "MaxCapacity"}
    added = [r["Properties"] for lid, r in after["Resources"].items() if lid in change.added]
    assert sorted(p.get("PolicyType", p.get("MetricName")) for p in added) == [
        "NoCapacityInvocationFailures"] * 3 + ["StepScaling"] * 3
    assert not {IC} & (_types(change.replaced) | set(_updated_types(after, change)))


def test_components_scale_to_zero_off(tmp_path):
    before, after, change = _ic_change(
        tmp_path, lambda raw: raw["environments"]["dev"].pop("overrides"), environment="dev")
    # The reverse: a new configuration with MinInstanceCount 1, the wake-up policies and alarms removed.
    assert CONFIG in _types(change.replaced)
    assert sorted(_types(change.removed)) == [POLICY, ALARM]
    assert len(change.removed) == 6


def test_components_new_model_build(tmp_path):
    before, after, change = _ic_change(tmp_path, None, new_artifact_for="shared-gpu")
    # A retrained model: its archive is a new object, its SageMaker model is replaced, its component updated in
    # place onto it (UpdateInferenceComponent: a rolling update under guardrails). The endpoint is not updated.
    assert MODEL in _types(change.replaced)
    assert not {CONFIG, ENDPOINT} & (_types(change.replaced) | set(_updated_types(after, change)))
    assert component_calls(after, change) == {"Shared-staging-shared-gpu-resnet50": {"UpdateInferenceComponent"}}

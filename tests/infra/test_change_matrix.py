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


# --- Weighted variants and a shadow (examples/bert-classifier-candidate.yaml, docs/howto/variants.md): an A/B test in
# prod (guardrails and scaling on), a shadow in staging (guardrails and scaling on).
CANDIDATE = yaml.safe_load((ROOT / "examples" / "bert-classifier-candidate.yaml").read_text())
HANDOVER = "Custom::TritonScalingHandover"
DASHBOARD = "AWS::CloudWatch::Dashboard"


def _classifier(raw, environment):
    return raw["environments"][environment]["overrides"]["endpoints"]["classifier"]


def _ab(raw, incumbent="AllTraffic", weights=(90, 10)):
    """prod's A/B test: the example's variants, the incumbent under ``incumbent`` (AllTraffic: the name the endpoint's
    one variant has without variants, so the running variant stays; the example's own ``incumbent`` renames it)."""
    variants = copy.deepcopy(CANDIDATE["environments"]["prod"]["overrides"]["endpoints"]["classifier"]["variants"])
    variants[0]["name"] = incumbent
    for variant, weight in zip(variants, weights):
        variant["weight"] = weight
    _classifier(raw, "prod")["variants"] = variants


def _one_model(raw):
    """prod without the A/B test: the incumbent alone (as dev and the example before its candidate)."""
    _classifier(raw, "prod").pop("variants", None)


def _promoted(raw):
    """The candidate serves everyone: the endpoint's model is the candidate's, no variants, no shadow."""
    raw["endpoints"]["classifier"]["models"] = ["sentiment-v2"]
    _one_model(raw)
    _classifier(raw, "staging").pop("shadow", None)


def _base(mutate):
    raw = copy.deepcopy(CANDIDATE)
    mutate(raw)
    return raw


def _variant_change(tmp_path, before, mutate, environment="prod"):
    return _change(tmp_path, mutate, environment=environment, endpoint="classifier", base=before)


def _config_variants(template, key="ProductionVariants"):
    return {v["VariantName"]: v for v in resource(template, CONFIG)[1]["Properties"].get(key, [])}


def _targets(template):
    """The variants' scalable targets: ResourceId -> logical ID."""
    return {r["Properties"]["ResourceId"]: lid for lid, r in template["Resources"].items() if r["Type"] == TARGET}


def _planted_guardrails(before, after):
    """The new template with the old endpoint's DeploymentConfig (the construct leaves it out with several variants)."""
    out = copy.deepcopy(after)
    resource(out, ENDPOINT)[1]["Properties"]["DeploymentConfig"] = resource(before, ENDPOINT)[1]["Properties"][
        "DeploymentConfig"]
    return out


def _planted_without_variants(after):
    """The new template with handovers as they were before #47: no ``Variants``, so no removed variant deregistered."""
    out = copy.deepcopy(after)
    for body in out["Resources"].values():
        if body["Type"] == HANDOVER:
            body["Properties"].pop("Variants")
    return out


def _planted_instance_type(after, variant, instance_type):
    """The new template with a variant on another instance type that its handover does not carry."""
    out = copy.deepcopy(after)
    _config_variants(out)[variant]["InstanceType"] = instance_type
    return out


def _registering_after(before, after, change):
    """Twin of the renamed-variant fix: the problems if the handover's After still registered a renamed variant's
    target (the handler before the fix synced whatever its ResourceId), as if its old ResourceId were the new one."""
    planted = copy.deepcopy(before)
    for lid, body in after["Resources"].items():
        if body["Type"] == HANDOVER and body["Properties"].get("Phase") == "after" and lid in planted["Resources"]:
            planted["Resources"][lid]["Properties"]["ResourceId"] = body["Properties"]["ResourceId"]
    return service_problems(planted, after, change)


def _problems(before, after):
    return service_problems(before, after, plan(before, after))


def test_variants_adding_an_ab_test(tmp_path):
    before, after, change = _variant_change(tmp_path / "kept", _base(_one_model), _ab)
    # The candidate's Model, scalable target, policies, handover, alarms (its own and the two comparison alarms) and the
    # comparison dashboard are added; the configuration is replaced (two ProductionVariants), the endpoint updated. The
    # incumbent keeps its name, so its model, scalable target, policies and alarms stay as they are; its handover is
    # updated (Variants) and finds nothing to do.
    assert _types(change.replaced) == {CONFIG}
    assert {MODEL, TARGET, POLICY, HANDOVER, ALARM, DASHBOARD} <= _types(change.added)
    assert not change.removed
    assert _updated_types(after, change)[ENDPOINT] == {"EndpointConfigName", "DeploymentConfig"}
    assert _updated_types(after, change)[HANDOVER] == {"Variants"}
    assert not {MODEL, ALARM, TARGET, POLICY} & set(_updated_types(after, change))
    assert {name: v["InitialVariantWeight"] for name, v in _config_variants(after).items()} == {
        "AllTraffic": 90, "candidate": 10}
    # Several variants: no DeploymentConfig (guardrails need the same variant names before and after), so SageMaker's
    # default blue/green update with all traffic shifted at once.
    assert "DeploymentConfig" not in resource(after, ENDPOINT)[1]["Properties"]
    assert _targets(before).items() <= _targets(after).items()
    assert service_problems(before, after, change) == []
    # Twin: the same update guarded (the old endpoint's DeploymentConfig kept) is what SageMaker refuses.
    assert _problems(before, _planted_guardrails(before, after)) == [
        "a guarded update (BlueGreenUpdatePolicy) from variants AllTraffic to AllTraffic, candidate: blue/green and "
        "rolling updates need the same variant names in the old and the new configuration: UpdateEndpoint fails"]


def test_variants_adding_an_ab_test_that_renames_the_incumbent(tmp_path):
    # The example's names: the running variant AllTraffic becomes `incumbent`. Its scalable target's ResourceId
    # changes (create-only): replaced, with its policies. The handover's Before deregisters AllTraffic (Variants no
    # longer has it); its After, updated too, sees its ResourceId changed and leaves registering `incumbent` to the
    # replacement target CloudFormation creates after it.
    before, after, change = _variant_change(tmp_path, _base(_one_model), lambda raw: _ab(raw, "incumbent"))
    assert _types(change.replaced) == {CONFIG, TARGET, POLICY}
    assert _updated_types(after, change)[HANDOVER] == {"Policies", "ResourceId", "VariantName", "Variants"}
    assert _updated_types(after, change)[ALARM] == {"Dimensions"}  # the incumbent's alarms follow its new name
    assert service_problems(before, after, change) == []
    assert _registering_after(before, after, change) == [
        "scalable target endpoint/Sentiment-prod-classifier/variant/incumbent: the scaling handover's After registers "
        "it before CloudFormation creates it: the create fails (AlreadyExists)"]


def test_variants_reweighting(tmp_path):
    before, after, change = _variant_change(tmp_path, CANDIDATE, lambda raw: _ab(raw, "incumbent", (50, 50)))
    # InitialVariantWeight is part of the configuration (create-only): a new configuration and a full endpoint update
    # (UpdateEndpoint "deploys the EndpointConfig specified in the request to a new fleet of instances", botocore's
    # SageMaker service model; all at once), not UpdateEndpointWeightsAndCapacities. The weights follow it
    # (DesiredWeight is excluded from what the endpoint retains); nothing else moves but the dashboard's split line.
    assert _types(change.replaced) == {CONFIG} and not change.added and not change.removed
    assert _updated_types(after, change) == {ENDPOINT: {"EndpointConfigName"}, DASHBOARD: {"DashboardBody"}}
    assert {n: v["InitialVariantWeight"] for n, v in _config_variants(after).items()} == {"incumbent": 50,
                                                                                         "candidate": 50}
    assert {"VariantPropertyType": "DesiredWeight"} in resource(after, ENDPOINT)[1]["Properties"][
        "ExcludeRetainedVariantProperties"]
    assert service_problems(before, after, change) == []
    # Twin: a scaled variant moved to another type that its handover does not carry is refused.
    assert _problems(before, _planted_instance_type(after, "candidate", "ml.g5.2xlarge")) == [
        "variant candidate is a scaling target and its instance type changes (ml.g5.xlarge -> ml.g5.2xlarge): "
        "UpdateEndpoint fails"]


def test_variants_promoting_the_candidate_in_one_deploy_is_refused_under_guardrails(tmp_path):
    ab = _base(_ab)
    before, after, change = _variant_change(tmp_path, ab, _promoted)
    # Back to one variant: the endpoint's guardrails return (DeploymentConfig) while the running endpoint still has
    # both variants' names. Synth sees only the new spec, so it cannot refuse this; SageMaker does.
    assert "DeploymentConfig" in _updated_types(after, change)[ENDPOINT]
    assert service_problems(before, after, change) == [
        "a guarded update (BlueGreenUpdatePolicy) from variants AllTraffic, candidate to AllTraffic: blue/green and "
        "rolling updates need the same variant names in the old and the new configuration: UpdateEndpoint fails"]


def test_variants_promoting_the_candidate_in_two_deploys(tmp_path):
    # docs/howto/variants.md, "Guardrails": first the candidate takes all the traffic (the variants stay: unguarded,
    # the same names), then the variants go with guardrails off for that deploy.
    ab = _base(_ab)
    before, after, change = _variant_change(tmp_path / "weights", ab, lambda raw: _ab(raw, weights=(0, 100)))
    assert _types(change.replaced) == {CONFIG} and not change.added and not change.removed
    assert {n: v["InitialVariantWeight"] for n, v in _config_variants(after).items()} == {"AllTraffic": 0,
                                                                                         "candidate": 100}
    assert service_problems(before, after, change) == []
    assert _problems(before, _planted_instance_type(after, "AllTraffic", "ml.g5.2xlarge")) == [
        "variant AllTraffic is a scaling target and its instance type changes (ml.g5.xlarge -> ml.g5.2xlarge): "
        "UpdateEndpoint fails"]

    def promote_unguarded(raw):
        _promoted(raw)
        raw["environments"]["prod"]["guardrails"] = False
    before, after, change = _variant_change(tmp_path / "remove", _base(lambda raw: _ab(raw, weights=(0, 100))),
                                            promote_unguarded)
    # The endpoint's Model is replaced by the candidate's build (the one variant serves it), the configuration
    # replaced, the endpoint updated without DeploymentConfig; the candidate's model, scaling, handover, alarms and
    # the comparison dashboard are removed. AllTraffic keeps its scalable target (a model change is allowed on a
    # scaled variant); its handover's Before deregisters the candidate's target before the endpoint update.
    assert _types(change.replaced) == {MODEL, CONFIG}
    assert {MODEL, TARGET, POLICY, HANDOVER, ALARM, DASHBOARD} <= _types(change.removed)
    assert not {TARGET, POLICY} & (_types(change.added) | _types(change.replaced))
    assert _updated_types(after, change)[ENDPOINT] == {"EndpointConfigName"}  # unguarded before and after
    assert "DeploymentConfig" not in resource(after, ENDPOINT)[1]["Properties"]
    assert list(_config_variants(after)) == ["AllTraffic"]
    assert service_problems(before, after, change) == []
    # Twin: without the handover's Variants (before #47), the candidate is still a scaling target at UpdateEndpoint.
    assert _problems(before, _planted_without_variants(after)) == [
        "variant candidate is a scaling target and the new configuration removes it: UpdateEndpoint fails"]


def test_variants_promoting_a_renamed_incumbent(tmp_path):
    # The example's names (incumbent, candidate), guardrails off: the one variant is AllTraffic again, a new scalable
    # target; the handover's After (its ResourceId changed) leaves registering it to CloudFormation.
    def promote_unguarded(raw):
        _promoted(raw)
        raw["environments"]["prod"]["guardrails"] = False
    before, after, change = _variant_change(
        tmp_path, _base(lambda raw: _ab(raw, "incumbent", (0, 100))), promote_unguarded)
    assert TARGET in _types(change.replaced)
    assert service_problems(before, after, change) == []
    assert _registering_after(before, after, change) == [
        "scalable target endpoint/Sentiment-prod-classifier/variant/AllTraffic: the scaling handover's After "
        "registers it before CloudFormation creates it: the create fails (AlreadyExists)"]


def _shadowed(raw):
    """staging's shadow, as the example has it."""
    _classifier(raw, "staging")["shadow"] = copy.deepcopy(_classifier(CANDIDATE, "staging")["shadow"])


def test_shadow_adding_one(tmp_path):
    no_shadow = _base(lambda raw: _classifier(raw, "staging").pop("shadow"))
    before, after, change = _variant_change(tmp_path / "add", no_shadow, _shadowed, environment="staging")
    # The shadow's Model, scalable target, policies, handover, comparison alarms and dashboard are added; the
    # configuration is replaced (ShadowProductionVariants), the endpoint updated without DeploymentConfig. The
    # production variant keeps its name, model and scaling.
    assert _types(change.replaced) == {CONFIG}
    assert {MODEL, TARGET, POLICY, HANDOVER, ALARM, DASHBOARD} <= _types(change.added)
    assert not change.removed
    assert _updated_types(after, change)[ENDPOINT] == {"EndpointConfigName", "DeploymentConfig"}
    assert _updated_types(after, change)[HANDOVER] == {"Variants"}
    assert list(_config_variants(after)) == ["AllTraffic"]
    assert list(_config_variants(after, "ShadowProductionVariants")) == ["Shadow"]
    assert _targets(before).items() <= _targets(after).items()
    assert service_problems(before, after, change) == []
    # The same change with the production variant renamed (variant_name) replaces its scalable target, which the
    # handover's After leaves to CloudFormation (the twin: an After that registered it first).
    def shadowed_renamed(raw):
        _shadowed(raw)
        _classifier(raw, "staging")["variant_name"] = "Primary"
    before, after, change = _variant_change(tmp_path / "renamed", no_shadow, shadowed_renamed, environment="staging")
    assert service_problems(before, after, change) == []
    assert _registering_after(before, after, change) == [
        "scalable target endpoint/Sentiment-staging-classifier/variant/Primary: the scaling handover's After "
        "registers it before CloudFormation creates it: the create fails (AlreadyExists)"]


def _shadow_removed(tmp_path, mutate):
    return _variant_change(tmp_path, CANDIDATE, mutate, environment="staging")


def test_shadow_promoting_it(tmp_path):
    before, after, change = _shadow_removed(tmp_path / "promote", _promoted)
    # The production variant serves the shadow's model: the endpoint's Model replaced by the candidate's build, the
    # configuration replaced (no ShadowProductionVariants), the shadow's model, scaling, handover and comparison
    # resources removed. Guardrails return (one variant, no shadow) and pass: the production variant keeps its name.
    # The handover's Before deregisters the shadow's target before the endpoint update.
    assert _types(change.replaced) == {MODEL, CONFIG}
    assert {MODEL, TARGET, POLICY, HANDOVER, ALARM, DASHBOARD} <= _types(change.removed)
    assert not {TARGET, POLICY} & (_types(change.added) | _types(change.replaced))
    assert _updated_types(after, change)[ENDPOINT] == {"EndpointConfigName", "DeploymentConfig"}
    assert "BlueGreenUpdatePolicy" in resource(after, ENDPOINT)[1]["Properties"]["DeploymentConfig"]
    assert not _config_variants(after, "ShadowProductionVariants")
    assert service_problems(before, after, change) == []
    # Twins: without the handover's Variants the shadow is still a scaling target; with the production variant
    # renamed in the same deploy the guarded update is refused.
    assert _problems(before, _planted_without_variants(after)) == [
        "variant Shadow is a scaling target and the new configuration removes it: UpdateEndpoint fails"]

    def promote_renamed(raw):
        _promoted(raw)
        raw["endpoints"]["classifier"]["variant_name"] = "Primary"
    before, after, change = _shadow_removed(tmp_path / "renamed", promote_renamed)
    assert service_problems(before, after, change) == [
        "a guarded update (BlueGreenUpdatePolicy) from variants AllTraffic to Primary: blue/green and rolling updates "
        "need the same variant names in the old and the new configuration: UpdateEndpoint fails"]


def test_shadow_removing_it(tmp_path):
    before, after, change = _shadow_removed(tmp_path, lambda raw: _classifier(raw, "staging").pop("shadow"))
    # Abandoned: as the promotion, but the production variant keeps its model (no Model replaced).
    assert _types(change.replaced) == {CONFIG}
    assert {MODEL, TARGET, POLICY, HANDOVER, ALARM, DASHBOARD} <= _types(change.removed)
    assert _updated_types(after, change)[ENDPOINT] == {"EndpointConfigName", "DeploymentConfig"}
    assert service_problems(before, after, change) == []
    assert _problems(before, _planted_without_variants(after)) == [
        "variant Shadow is a scaling target and the new configuration removes it: UpdateEndpoint fails"]

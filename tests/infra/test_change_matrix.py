"""The change matrix: each change a user makes to the spec, synthesized before and after, and what
CloudFormation will do with it (replaced / updated resources, by logical ID and type), checked
against the service rules that decide whether the deploy goes through (fixtures/change_plan.py).
"""
import copy
import hashlib
import json
import pathlib

import yaml

from change_plan import plan, resource, service_problems
from deployment_spec import load_spec
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
    # (README, "Changing a deployed spec"); a failed first create deletes it instead.
    groups = [r for r in default_synth.template("prod", "classifier").to_json()["Resources"].values()
              if r["Type"] == "AWS::Logs::LogGroup" and "LogGroupName" in r["Properties"]]
    assert [(g["Properties"]["LogGroupName"], g["DeletionPolicy"]) for g in groups] == [
        ("/aws/sagemaker/Endpoints/Triton-prod-classifier", "RetainExceptOnCreate")]

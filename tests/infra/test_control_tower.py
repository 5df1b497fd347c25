"""AWS Control Tower's proactive controls (the cfn-guard rules of cdklabs-cdk-validator-cfnguard 0.0.62, run by the
app's policy-validation plugin) over every stage of the default spec, every example and every test spec: synth
fails on any finding not acknowledged, and the acknowledged ones are exactly the documented choices
(docs/operations/governed-accounts.md). Each guard here has a twin that plants defects and sees each reported by rule
name."""
import json
import pathlib

import aws_cdk as cdk
import pytest
from aws_cdk import aws_cloudwatch as cloudwatch, aws_ec2 as ec2, aws_kms as kms, aws_logs as logs, aws_s3 as s3

from deployment_spec import load_spec
from deployment_spec.parsing.errors import SpecError
from guard import VERSION, Guard
from synth_helpers import ROOT, synth_spec
from triton_constructs import (Alarms, ModelArchive, ModelRepositories, ModelStore, NetworkProps, Scaling,
                               TritonSageMakerEndpoint, control_tower)
from user_app import model_archive

LOG_GROUP, FUNCTION, BUCKET = "AWS::Logs::LogGroup", "AWS::Lambda::Function", "AWS::S3::Bucket"


@pytest.fixture(scope="module")
def guard(module_tmp) -> Guard:
    return Guard(module_tmp.mktemp("guard"))


def _templates(*synths) -> list[pathlib.Path]:
    out = []
    for synth in synths:
        # synth() runs the plugins: it raises on any finding not acknowledged.
        out += sorted(pathlib.Path(synth.app.synth().directory).rglob("*.template.json"))
    return out


def _types(templates: list[pathlib.Path]) -> dict[tuple[str, str], str]:
    return {(path.name, logical_id): resource["Type"] for path in templates
            for logical_id, resource in json.loads(path.read_text())["Resources"].items()}


def test_the_plugin_is_the_pinned_package():
    # The rules are those of the version docs/operations/governed-accounts.md names.
    assert VERSION == "0.0.62"


def test_default_spec_meets_every_control_but_the_documented_choices(default_synth, guard):
    templates = _templates(default_synth)
    evaluated, failed = guard.judge(templates)
    types = _types(templates)
    # What cfn-guard still fails, all acknowledged in the app: the imported key's log groups (static form only),
    # the functions without a VPC (the default spec gives none), the access-log bucket (SSE-S3, logs itself
    # nowhere) and object lock (off by default).
    assert sorted({(control, types[(name, lid)]) for control, name, lid in failed}) == [
        ("CT.CLOUDWATCH.PR.3", LOG_GROUP), ("CT.LAMBDA.PR.3", FUNCTION), ("CT.S3.PR.10", BUCKET),
        ("CT.S3.PR.2", BUCKET), ("CT.S3.PR.9", BUCKET)]
    # The rules really judged the stages: 20 rules on 9 templates when this was written.
    assert len(evaluated) >= 20 and len(templates) == 9, (sorted(evaluated), len(templates))
    # Fixed by default: alarm actions, retention, event notifications, CreateGrant only for AWS resources.
    fixed = (control_tower.ALARM_ACTION, control_tower.LOG_RETENTION, control_tower.BUCKET_EVENTS,
             control_tower.GRANTS_FOR_AWS)
    assert {c.rule for c in fixed} <= evaluated and not {c for c, _, _ in failed} & {c.id for c in fixed}


def test_every_stage_and_example_passes_the_plugin(every_assembly, guard):
    # The shared synth ran the plugin too (app.synth() raises on a finding not acknowledged).
    templates = [t for assembly in every_assembly.values() for t in assembly.templates()]
    evaluated, failed = guard.judge(templates)
    types = _types(templates)
    assert {(control, types[(name, lid)]) for control, name, lid in failed} <= {
        ("CT.CLOUDWATCH.PR.3", LOG_GROUP), ("CT.LAMBDA.PR.3", FUNCTION), ("CT.S3.PR.10", BUCKET),
        ("CT.S3.PR.2", BUCKET), ("CT.S3.PR.9", BUCKET)}
    assert len(evaluated) >= 20 and len(templates) >= 52, (len(evaluated), len(templates))


def test_the_plugin_reports_planted_defects_by_rule_name(tmp_path):
    # The twin: the default spec with one defect per family, planted on the real resources after they are built.
    synth = synth_spec(ROOT / "triton.yaml", tmp_path)
    stage = synth.stage("prod")
    endpoint, storage = stage.endpoints["classifier"], stage.storage
    group = next(c for c in endpoint.node.find_all() if isinstance(c, logs.CfnLogGroup))
    group.retention_in_days = 30
    alarm = next(c for c in endpoint.node.find_all() if isinstance(c, cloudwatch.CfnAlarm))
    alarm.alarm_actions = []
    bucket = storage.store.bucket.node.default_child
    assert isinstance(bucket, s3.CfnBucket)
    bucket.notification_configuration = None
    # A key made without the library's recipe (no CreateGrant statement).
    key = kms.Key(storage, "PlantedKey", enable_key_rotation=True).node.default_child
    assert isinstance(key, kms.CfnKey)
    with pytest.raises(RuntimeError, match="^ValidationFailed: "):
        synth.app.synth()
    report = json.loads((tmp_path / "cdk.out" / "validation-report.json").read_text())
    found = {(v["ruleName"], c["constructPath"]) for r in report["pluginReports"] for v in r["violations"]
             for c in v["violatingConstructs"]}
    assert found == {
        ("cloudwatch_log_group_retention_period_check", group.node.path),
        ("cloudwatch_alarm_action_check", alarm.node.path),
        ("s3_event_notifications_enabled_check", bucket.node.path),
        ("kms_create_grant_aws_service_check", key.node.path),
    }


def _hook(resource_type: str, properties: dict) -> str:
    """The document a CloudFormation hook hands the rule: the resource's resolved properties."""
    return json.dumps({resource_type: {"resourceProperties": properties}})


def test_log_groups_with_the_imported_key_pass_the_hook_form(default_synth, guard, tmp_path):
    # CT.CLOUDWATCH.PR.3 fails statically on KmsKeyId: {Fn::ImportValue: ...}; at deploy the hook sees the
    # ARN the import resolves to. Every log group of every endpoint stack, its key resolved as the hook would.
    rule = guard.rule_file("CT.CLOUDWATCH.PR.3")
    arn = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    documents = []
    for template in _templates(default_synth):
        for logical_id, resource in json.loads(template.read_text())["Resources"].items():
            if resource["Type"] == LOG_GROUP:
                properties = dict(resource["Properties"])
                assert "Fn::ImportValue" in json.dumps(properties.pop("KmsKeyId")), logical_id
                for name, with_key in (("resolved", {**properties, "KmsKeyId": arn}), ("none", properties)):
                    path = tmp_path / f"{template.stem}-{logical_id}-{name}.json"
                    path.write_text(_hook(LOG_GROUP, with_key))
                    documents.append(path)
    statuses = {}
    for result in guard.run(documents, rule):
        statuses.setdefault(pathlib.Path(result["name"]).stem.rsplit("-", 1)[1], set()).add(result["status"])
    # 18 log groups (3 per endpoint stack); resolved they pass, and the twin without a key fails.
    assert len(documents) == 2 * 18
    assert statuses == {"resolved": {"PASS"}, "none": {"FAIL"}}


def test_object_lock_is_a_choice_of_the_model_store(guard, tmp_path):
    # ModelStore(object_lock=True) meets CT.S3.PR.9 on both buckets; the default leaves it off, acknowledged.
    app = cdk.App(outdir=str(tmp_path / "cdk.out"))
    for name, lock in (("Locked", True), ("Default", False)):
        ModelStore(cdk.Stack(app, name), "ModelStore", object_lock=lock)
    cdk.Validations.of(app).add_plugins(control_tower.validator())
    templates = sorted(pathlib.Path(app.synth().directory).glob("*.template.json"))
    _, failed = guard.judge(templates)
    by_stack = {(name.split(".")[0], control) for control, name, _ in failed}
    assert ("Locked", "CT.S3.PR.9") not in by_stack and ("Default", "CT.S3.PR.9") in by_stack
    locked = json.loads((tmp_path / "cdk.out" / "Locked.template.json").read_text())["Resources"]
    assert [r["Properties"].get("ObjectLockEnabled") for r in locked.values() if r["Type"] == BUCKET] == [True, True]


def test_the_spec_turns_object_lock_on_per_environment(tmp_path):
    text = (ROOT / "triton.yaml").read_text().replace("    termination_protection: true\n",
                                                      "    termination_protection: true\n    object_lock: true\n")
    path = tmp_path / "locked.yaml"
    path.write_text(text)
    spec = load_spec(path)
    # Only prod asked for it.
    assert {name: env.object_lock for name, env in spec.environments.items()} == {
        "dev": False, "staging": False, "prod": True}
    path.write_text(text.replace("object_lock: true", "object_lock: yes-please"))
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert str(caught.value) == (f"{path}: 1 problem\n  - environments.prod.object_lock: got 'yes-please'; allowed: "
                                 "true or false; fix: write true or false without quotes")


def test_functions_in_a_vpc_of_another_stack_pass_the_hook_form(guard, tmp_path):
    # A team's VPC in its own stack: the library's functions get its subnets as imports, which CT.LAMBDA.PR.3's
    # static form cannot judge (acknowledged, so synth passes); the hook sees the resolved IDs.
    app = cdk.App(outdir=str(tmp_path / "cdk.out"))
    env = cdk.Environment(account="111122223333", region="us-east-1")
    network = cdk.Stack(app, "Network", env=env)
    vpc = ec2.Vpc(network, "Vpc", max_azs=2, nat_gateways=0, subnet_configuration=[
        ec2.SubnetConfiguration(name="private", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)])
    stack = cdk.Stack(app, "Inference", env=env)
    models = ModelRepositories.from_archives([ModelArchive.from_file(model_archive(tmp_path, "resnet50"))])
    TritonSageMakerEndpoint(stack, "Endpoint", models=models, instance_type="ml.g5.xlarge",
                            network=NetworkProps(vpc=vpc), scaling=Scaling(max_instances=2),
                            alarms=Alarms(sns_topic=True))  # without a topic CT.CLOUDWATCH.PR.1 would fail
    cdk.Validations.of(app).add_plugins(control_tower.validator())
    template = pathlib.Path(app.synth().directory) / "Inference.template.json"
    _, failed = guard.judge([template])
    functions = {lid: r for lid, r in json.loads(template.read_text())["Resources"].items() if r["Type"] == FUNCTION}
    assert len(functions) == 2 and {(c, lid) for c, _, lid in failed if c == "CT.LAMBDA.PR.3"} == {
        ("CT.LAMBDA.PR.3", lid) for lid in functions}
    documents = []
    for lid, function in functions.items():
        properties = dict(function["Properties"])
        resolved = {"SubnetIds": ["subnet-0a1b2c3d4e5f60718", "subnet-0f1e2d3c4b5a69788"],
                    "SecurityGroupIds": ["sg-0123456789abcdef0"]}
        assert "Fn::ImportValue" in json.dumps(properties.pop("VpcConfig")["SubnetIds"])
        for name, value in (("resolved", {**properties, "VpcConfig": resolved}), ("none", properties)):
            path = tmp_path / f"{lid}-{name}.json"
            path.write_text(_hook(FUNCTION, value))
            documents.append(path)
    statuses: dict[str, set] = {}
    for result in guard.run(documents, guard.rule_file("CT.LAMBDA.PR.3")):
        statuses.setdefault(pathlib.Path(result["name"]).stem.rsplit("-", 1)[1], set()).add(result["status"])
    assert statuses == {"resolved": {"PASS"}, "none": {"FAIL"}}

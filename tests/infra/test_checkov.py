"""checkov, the open-source IaC scanner teams run on every pull request, over every synthesized stage
of the default spec, every example and every test spec: no failed check. A check that does not fit a
resource is skipped on that resource, with a reason (triton_constructs/checkov.py); nothing else.
Each guard here has a twin that plants one defect and sees exactly it reported."""
import copy
import json
import pathlib
import subprocess

import pytest

from synth_helpers import ROOT
from triton_constructs import security_hub as hub

CHECKOV = ROOT / ".venv" / "bin" / "checkov"
MODEL, CONFIG = hub.MODEL, hub.ENDPOINT_CONFIG


def _templates(*synths) -> list[pathlib.Path]:
    out = []
    for synth in synths:
        out += sorted(pathlib.Path(synth.app.synth().directory).rglob("*.template.json"))
    return out


def _scan(templates: list[pathlib.Path]) -> tuple[list[str], int]:
    """checkov's failed checks (``<check> <resource> in <file>``) and how many checks passed."""
    if not CHECKOV.exists():
        pytest.fail(f"{CHECKOV} is missing: run `make setup` (scripts/bootstrap.sh installs checkov from "
                    "requirements-checkov.lock)")
    args = [str(CHECKOV), "--framework", "cloudformation", "--compact", "--quiet", "--skip-download", "-o", "json"]
    for path in templates:
        args += ["-f", str(path)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=600, cwd=ROOT)
    reports = json.loads(done.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    failed = [f"{c['check_id']} {c['resource']} in {pathlib.Path(c['file_path']).name}"
              for r in reports for c in r["results"]["failed_checks"]]
    return failed, sum(r["summary"]["passed"] for r in reports)


def test_checkov_finds_nothing_in_any_stage(every_assembly):
    templates = [t for assembly in every_assembly.values() for t in assembly.templates()]
    failed, passed = _scan(templates)
    assert failed == []
    # The scan really covered the stages: 52 templates, 2317 checks passed when this was written.
    assert passed >= 2200 and len(templates) >= 52, (passed, len(templates))


def test_checkov_reports_a_planted_model_without_network_isolation(default_synth, tmp_path):
    # The twin: one real template with one defect, its model's network isolation turned off.
    [source] = [t for t in _templates(default_synth) if t.parent.name == "assembly-TritonProd" and "classifier" in t.name]
    template = json.loads(source.read_text())
    [(model_id, model)] = [(k, r) for k, r in template["Resources"].items() if r["Type"] == MODEL]
    model["Properties"]["EnableNetworkIsolation"] = False
    planted = tmp_path / source.name
    planted.write_text(json.dumps(template))
    failed, passed = _scan([planted])
    assert failed == [f"CKV_AWS_370 {MODEL}.{model_id} in {source.name}"] and passed > 20


def test_every_skip_names_its_reason(every_assembly):
    skips = set()
    shown = [a for name, a in every_assembly.items() if not name.startswith("specs/") or name == "specs/variety"]
    for path in [t for assembly in shown for t in assembly.templates()]:
        for resource in json.loads(path.read_text())["Resources"].values():
            for entry in resource.get("Metadata", {}).get("checkov", {}).get("skip", []):
                assert len(entry["comment"]) > 40, entry
                skips.add((entry["id"], resource["Type"]))
    # docs/operations/security.md lists these, with their reasons.
    assert skips == {
        ("CKV_AWS_18", "AWS::S3::Bucket"),                 # the access-log bucket itself
        ("CKV_AWS_115", "AWS::Lambda::Function"),          # CDK's auto-delete handler (dev stages)
        ("CKV_AWS_116", "AWS::Lambda::Function"),          # custom-resource handlers: no DLQ
        ("CKV_AWS_117", "AWS::Lambda::Function"),          # custom-resource handlers: no VPC
        ("CKV_AWS_111", "AWS::IAM::Policy"),               # scaling handover, VPC network interfaces
        ("CKV_AWS_109", "AWS::IAM::Policy"),               # VPC: CreateNetworkInterfacePermission
    }


def _config_rule_findings(resources: dict[str, dict], production: bool) -> tuple[list[str], int]:
    """What the AWS Config managed rules behind Security Hub's SageMaker controls would flag here (``<rule>
    <logical ID>``) and how many resources they judged: model isolation and the endpoint config's KMS key
    everywhere, the instance count in production (triton_constructs.security_hub holds each rule's logic)."""
    controls = (hub.NETWORK_ISOLATION, hub.VOLUME_KEY) + ((hub.INSTANCE_COUNT,) if production else ())
    found, _ = hub.evaluate({"Resources": resources}, controls)
    judged = sum(r["Type"] in (MODEL, CONFIG) for r in resources.values())
    return [f"{control.config_rule} {logical_id}" for control, logical_id in found], judged


def test_aws_config_sagemaker_rules_hold(every_assembly):
    judged = 0
    for synth in [a for name, a in every_assembly.items() if not name.startswith("specs/")]:
        for environment, env in synth.spec.environments.items():
            for endpoint in env.endpoints:
                resources = synth.template(environment, endpoint)["Resources"]
                found, count = _config_rule_findings(resources, env.production)
                assert found == [], (synth.spec.path.name, environment, endpoint)
                judged += count
    # A model and a config in every endpoint stack, three stages each: the default spec (2 endpoints) and the
    # examples; the inference-components endpoint has a model per component (3) and one config. The candidate
    # example's endpoint: dev a model and a config, staging and prod a second model (the shadow's, the candidate's).
    assert judged == 3 * (2 * (2 + 1 + 1 + 1 + 1 + 2 + 1 + 1 + 1) + (3 + 1)) + (2 + 3 + 3), judged


def test_aws_config_rules_report_a_planted_single_instance_production_config(default_synth):
    # The twin: prod's classifier config with one instance; only the production rule may object.
    resources = copy.deepcopy(default_synth.template("prod", "classifier").to_json()["Resources"])
    [(config_id, config)] = [(k, r) for k, r in resources.items() if r["Type"] == CONFIG]
    config["Properties"]["ProductionVariants"][0]["InitialInstanceCount"] = 1
    assert _config_rule_findings(resources, production=True) == (
        [f"sagemaker-endpoint-config-prod-instance-count {config_id}"], 2)

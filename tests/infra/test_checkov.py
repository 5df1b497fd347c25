"""checkov, the open-source IaC scanner teams run on every pull request, over every synthesized stage
of the default spec, every example and the test spec: no failed check. A check that does not fit a
resource is skipped on that resource, with a reason (triton_constructs/checkov.py); nothing else."""
import json
import pathlib
import subprocess

import pytest

from synth_helpers import ROOT

CHECKOV = ROOT / ".venv" / "bin" / "checkov"


def _templates(*synths) -> list[pathlib.Path]:
    out = []
    for synth in synths:
        out += sorted(pathlib.Path(synth.app.synth().directory).rglob("*.template.json"))
    return out


def _scan(templates: list[pathlib.Path]) -> list[dict]:
    if not CHECKOV.exists():
        pytest.fail(f"{CHECKOV} is missing: run `make setup` (scripts/bootstrap.sh installs checkov from "
                    "requirements-checkov.lock)")
    args = [str(CHECKOV), "--framework", "cloudformation", "--compact", "--quiet", "--skip-download", "-o", "json"]
    for path in templates:
        args += ["-f", str(path)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=600, cwd=ROOT)
    reports = json.loads(done.stdout)
    return reports if isinstance(reports, list) else [reports]


def test_checkov_finds_nothing_in_any_stage(default_synth, example_synths, variety_synth):
    templates = _templates(default_synth, variety_synth, *example_synths.values())
    reports = _scan(templates)
    failed = [f"{c['check_id']} {c['resource']} in {pathlib.Path(c['file_path']).name}"
              for r in reports for c in r["results"]["failed_checks"]]
    passed = sum(r["summary"]["passed"] for r in reports)
    assert failed == []
    assert passed > 400 and len(templates) >= 40  # the scan really covered the stages


def test_every_skip_names_its_reason(default_synth, example_synths, variety_synth):
    skips = set()
    for path in _templates(default_synth, variety_synth, *example_synths.values()):
        for resource in json.loads(path.read_text())["Resources"].values():
            for entry in resource.get("Metadata", {}).get("checkov", {}).get("skip", []):
                assert len(entry["comment"]) > 40, entry
                skips.add((entry["id"], resource["Type"]))
    # The README lists these, with their reasons.
    assert skips == {
        ("CKV_AWS_18", "AWS::S3::Bucket"),                 # the access-log bucket itself
        ("CKV_AWS_115", "AWS::Lambda::Function"),          # CDK's auto-delete handler (dev stages)
        ("CKV_AWS_116", "AWS::Lambda::Function"),          # custom-resource handlers: no DLQ
        ("CKV_AWS_117", "AWS::Lambda::Function"),          # custom-resource handlers: no VPC
        ("CKV_AWS_111", "AWS::IAM::Policy"),               # scaling handover, VPC network interfaces
        ("CKV_AWS_109", "AWS::IAM::Policy"),               # VPC: CreateNetworkInterfacePermission
    }


def test_aws_config_sagemaker_rules_hold(default_synth, example_synths):
    # The AWS Config managed rules a Security Hub / Config conformance pack applies to these resources:
    # SAGEMAKER_MODEL_ISOLATION_ENABLED, SAGEMAKER_ENDPOINT_CONFIGURATION_KMS_KEY_CONFIGURED and, for
    # production, SAGEMAKER_ENDPOINT_CONFIG_PROD_INSTANCE_COUNT (InitialInstanceCount > 1).
    checked = 0
    for synth in [default_synth, *example_synths.values()]:
        for environment, env in synth.spec.environments.items():
            for endpoint in env.endpoints:
                resources = synth.template(environment, endpoint).to_json()["Resources"].values()
                for r in resources:
                    if r["Type"] == "AWS::SageMaker::Model":
                        assert r["Properties"]["EnableNetworkIsolation"] is True
                    if r["Type"] == "AWS::SageMaker::EndpointConfig":
                        assert "KmsKeyId" in r["Properties"]
                        if env.production:
                            assert all(v["InitialInstanceCount"] > 1 for v in r["Properties"]["ProductionVariants"])
                        checked += 1
    assert checked == 3 * (2 + 1 + 1 + 1 + 1 + 2 + 1 + 1)  # every stage of the default spec (2) and the examples

"""The real app wiring: stages, outputs, cdk-nag, cfn-lint, deterministic synth, minimal diffs, app.py errors."""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam, aws_sagemaker as sagemaker
from aws_cdk.assertions import Match

import app as app_module
from cfn_lint_check import lint_assembly, stack_templates, validation_violations
from deployment_spec.facts import images
from synth_helpers import ROOT, nag_findings, run_app, synth_spec

EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def test_one_stage_per_environment_with_termination_protection_where_asked(default_synth):
    assert [c.node.id for c in default_synth.app.node.children if hasattr(c, "synth")] == [
        "TritonDev", "TritonStaging", "TritonProd"]
    for environment, protected in (("dev", False), ("staging", False), ("prod", True)):
        for name in ("Storage", "vision-nlp", "classifier"):
            stack = default_synth.stack(environment, name)
            assert stack.termination_protection is protected, (environment, name)
    # Stacks are named like the endpoint they hold.
    assert default_synth.stack("prod", "vision-nlp").stack_name == "Triton-prod-vision-nlp"


def test_outputs_name_the_endpoint_and_show_an_invoke_command(default_synth):
    sme = default_synth.template("prod", "classifier").find_outputs("*")
    assert sme["EndpointName"]["Value"] == "Triton-prod-classifier"
    assert sme["InvokeCommand"]["Value"] == (
        "aws sagemaker-runtime invoke-endpoint --region us-east-1 --endpoint-name Triton-prod-classifier "
        "--content-type application/json --body fileb://request.json response.json")
    mme = default_synth.template("prod", "vision-nlp").find_outputs("*")
    manifest = json.loads(default_synth.manifest_path.read_text())
    names = [a["file"] for a in manifest["endpoints"]["vision-nlp"]["artifacts"]]
    # A multi-model call names its TargetModel: the content-versioned object name.
    assert f"--target-model {names[0]} " in mme["InvokeCommand"]["Value"]
    assert mme["TargetModels"]["Value"] == " ".join(names)


def test_cdk_nag_passes_on_every_stage_of_every_spec(every_assembly):
    resources = 0
    for name, assembly in every_assembly.items():
        assert assembly.nag_findings == [], name
        resources += sum(len(json.loads(t.path.read_text())["Resources"]) for t in stack_templates(assembly.directory))
    # What the rules looked at: every resource of the 52 templates (937 when this was written).
    assert resources >= 900, resources


def test_cdk_nag_reports_a_planted_wildcard(tmp_path):
    # The twin: a stage holding one role whose policy grants an action on every resource.
    stack = _planted_stage_stack(tmp_path)
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    role.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=["*"]))
    assert nag_findings(stack.node.root) == ["AwsSolutions-IAM5[Resource::*]"]


def _planted_stage_stack(tmp_path: pathlib.Path) -> cdk.Stack:
    """A stack in a stage of a new app with the app's feature flags, as the app makes them: for planted defects."""
    app = cdk.App(context=app_module.cdk_json_context(), outdir=str(tmp_path))
    return cdk.Stack(cdk.Stage(app, "Dev", env=cdk.Environment(account="123456789012", region="us-east-1")),
                     "Endpoint")


def test_cfn_lint_finds_nothing_in_any_synthesized_template(every_assembly):
    linted = []
    for shared in every_assembly.values():
        assembly = shared.directory
        result = lint_assembly(assembly)
        # Every template file of the assembly, nested stage assemblies included, went through cfn-lint.
        assert sorted(result.templates) == sorted(assembly.rglob("*.template.json"))
        assert result.findings == []
        # aws-cdk-lib's own synth-time rules ("CloudFormation Validate", printed by `cdk synth`) agree.
        assert validation_violations(assembly) == []
        linted += result.templates
    # The default spec (9 stacks), 5 examples (33) and 2 test specs (10): 52 templates.
    assert len(linted) >= 52, len(linted)


def test_cfn_lint_reports_a_planted_defect_in_a_stage_assembly(tmp_path):
    # The twin of the test above: a real CDK assembly (a stage, as the app makes them) whose one template has
    # one known defect, an endpoint config kept on replacement but not on deletion; exactly that is reported.
    stack = _planted_stage_stack(tmp_path)
    config = sagemaker.CfnEndpointConfig(stack, "Config", production_variants=[
        sagemaker.CfnEndpointConfig.ProductionVariantProperty(
            variant_name="AllTraffic", model_name="m", instance_type="ml.g5.xlarge", initial_instance_count=1)])
    config.cfn_options.update_replace_policy = cdk.CfnDeletionPolicy.RETAIN
    assembly = pathlib.Path(stack.node.root.synth().directory)
    [template] = (assembly / "assembly-Dev").glob("*.template.json")
    assert lint_assembly(assembly).findings == [
        f"{template.name}: [W3011: Check resources with UpdateReplacePolicy/DeletionPolicy have both] (Both "
        f"'UpdateReplacePolicy' and 'DeletionPolicy' are needed to protect resource from deletion) matched "
        f"{template}:3"]
    assert validation_violations(assembly) == ["CloudFormation Validate W3011 Dev/Endpoint/Config"]


def test_two_synths_of_unchanged_inputs_are_identical(default_synth, tmp_path):
    # The session's synth of the default spec (other tests have usually synthesized it already: CDK keeps the
    # assembly) against a second one, in another folder, from another fabricated build.
    first = default_synth.app.synth()
    second = synth_spec(ROOT / "triton.yaml", tmp_path / "b").app.synth()
    files = sorted(p.relative_to(first.directory) for p in pathlib.Path(first.directory).rglob("*")
                   if p.suffix == ".json" and p.name not in ("tree.json", "validation-report.json"))
    assert any(str(f).endswith(".assets.json") for f in files)
    for relative in files:
        # Templates and asset manifests (hence asset hashes) are byte-identical.
        assert (pathlib.Path(first.directory) / relative).read_bytes() == \
            (pathlib.Path(second.directory) / relative).read_bytes(), relative


def test_raising_max_instances_changes_only_the_scalable_target_and_its_handover(default_synth, tmp_path):
    text = (ROOT / "triton.yaml").read_text()
    changed = tmp_path / "triton.yaml"
    assert "max_instances: 8}" in text
    changed.write_text(text.replace("max_instances: 8}", "max_instances: 9}"))
    after = synth_spec(changed, tmp_path)
    differences = []
    for stack in default_synth.stacks():
        env = next(e for e in default_synth.spec.environments if default_synth.stage(e) is stack.node.scope)
        name = "Storage" if stack is default_synth.stack(env) else stack.node.id
        old = default_synth.template(env, name).to_json()
        new = after.template(env, name).to_json()
        for logical_id in sorted(set(old["Resources"]) | set(new["Resources"])):
            if old["Resources"].get(logical_id) != new["Resources"].get(logical_id):
                differences.append((env, name, new["Resources"][logical_id]["Type"]))
        assert old.get("Outputs") == new.get("Outputs")
    # The scalable target, and the two handover resources that carry its definition (they run, see the
    # same instance type, and change nothing).
    assert sorted(differences) == [("prod", "vision-nlp", "AWS::ApplicationAutoScaling::ScalableTarget"),
                                   ("prod", "vision-nlp", "Custom::TritonScalingHandover"),
                                   ("prod", "vision-nlp", "Custom::TritonScalingHandover")]


def test_china_region_uses_its_domain_and_partition(variety_synth):
    template = variety_synth.template("china", "cpu")
    template.has_resource_properties("AWS::SageMaker::Model", {"PrimaryContainer": Match.object_like({
        "Image": "727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/sagemaker-tritonserver:25.04-py3"})})
    template.has_resource_properties("AWS::IAM::Policy", {"PolicyDocument": {"Statement": Match.array_with([
        Match.object_like({"Resource": "arn:aws-cn:ecr:cn-north-1:727897471807:repository/sagemaker-tritonserver"})])}})


def test_environment_agnostic_stage_maps_the_image_by_region(variety_synth):
    template = variety_synth.template("dev", "cpu").to_json()
    [mapping_id] = template["Mappings"]
    mapping = template["Mappings"][mapping_id]
    # Exactly the regions that publish the image, each with the SDK's URI and account.
    assert sorted(mapping) == images.regions("25.04")
    assert all(v == {"Uri": images.image_uri("25.04", r), "Account": images.account("25.04", r)}
               for r, v in mapping.items())
    model = next(r for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Model")
    assert model["Properties"]["PrimaryContainer"]["Image"] == {
        "Fn::FindInMap": [mapping_id, {"Ref": "AWS::Region"}, "Uri"]}


_run_app = run_app


def test_app_without_a_build_says_to_run_tritonsm_build(tmp_path):
    missing = tmp_path / "assets" / "manifest.json"
    done = _run_app(tmp_path, {"manifest": str(missing)})
    assert done.returncode == 2
    assert done.stderr == (f"error: {missing}: no build manifest; run `tritonsm build` first "
                           f"(it writes {missing})\n")


def test_app_with_a_build_for_another_release_s_runtimes_prints_the_problems_without_a_traceback(tmp_path,
                                                                                               default_synth):
    # The constructs refuse it (PropsError), not the spec loader: app.py prints it as it prints a spec error.
    body = json.loads(default_synth.manifest_path.read_text())
    body["models"]["resnet50"]["verification"]["triton_version"] = "25.04"
    stale = tmp_path / "stale" / "manifest.json"
    stale.parent.mkdir()
    for artifact in default_synth.manifest_path.parent.glob("*.tar.gz"):
        shutil.copy(artifact, stale.parent)
    stale.write_text(json.dumps(body))
    done = _run_app(tmp_path, {"manifest": str(stale)})
    assert done.returncode == 2
    assert done.stderr == (
        "error: TritonSageMakerEndpoint TritonDev/vision-nlp/Default: 1 problem\n"
        "  - models.resnet50: got a model verified in the runtimes of Triton 25.04; allowed: a model verified in the "
        "runtimes of Triton 25.09, which serves it; fix: run `tritonsm build` for triton_version 25.09\n")


# A line of Python's import log (-X importtime): "import time: <self us> | <cumulative us> | <indent><module>".
IMPORT_LOG = r"^import time:[^|]*\|[^|]*\|\s*([\w.]+)$"


@pytest.fixture(scope="module")
def cli_synth(module_tmp, default_synth) -> tuple[subprocess.CompletedProcess, pathlib.Path, set[str]]:
    """`cdk synth` as users run it (cdk.json's app command) on the default spec: its result, its output folder and
    every module the app imported (Python's own import log, PYTHONPROFILEIMPORTTIME, read from the app's stderr,
    which the CLI passes on). One synthesis of every stage answers the three tests below."""
    cdk = next((p for p in (ROOT / ".venv/bin/cdk", ROOT / "node_modules/.bin/cdk") if p.exists()), None)
    if cdk is None or shutil.which("node") is None and not (ROOT / ".venv/bin/node").exists():
        pytest.skip("the CDK CLI is not installed (scripts/bootstrap.sh installs it)")
    out = module_tmp.mktemp("cli") / "cdk.out"
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    done = subprocess.run([str(cdk), "synth", "--quiet", "-c", f"manifest={default_synth.manifest_path}",
                           "-o", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    imported = {m.group(1) for m in re.finditer(IMPORT_LOG, done.stderr, re.M)}
    done.stderr = "\n".join(line for line in done.stderr.splitlines() if not line.startswith("import time:"))
    return done, out, imported


def test_app_synthesizes_every_stage_with_cdk_nag(cli_synth):
    done, out, _ = cli_synth
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(p.name for p in out.glob("assembly-*")) == [
        "assembly-TritonDev", "assembly-TritonProd", "assembly-TritonStaging"]


def test_cdk_cli_synth_exits_zero(cli_synth):
    done, _, _ = cli_synth
    assert done.returncode == 0, done.stderr[-3000:]
    # Every recommended feature flag is set in cdk.json: the CLI has nothing to point out.
    assert "feature flags are not configured" not in done.stderr, done.stderr[-3000:]


def test_synth_path_imports_no_torch_model_build_or_sagemaker_sdk(cli_synth):
    # A whole synthesis of every stage (app.py, as `cdk synth` runs it), then a look at what it imported.
    done, out, imported = cli_synth
    assert done.returncode == 0, done.stderr[-3000:]
    # The import log was read: the app's own packages are in it.
    assert {"stacks", "triton_constructs", "deployment_spec", "aws_cdk"} <= {m.split(".")[0] for m in imported}
    # app.py, stacks/ and triton_constructs/ load only aws-cdk-lib, cdk-nag and the spec loader.
    assert sorted({m.split(".")[0] for m in imported} & {"torch", "onnx", "onnxruntime", "tensorrt", "model_build",
                                                         "sagemaker", "transformers"}) == []
    assert (out / "assembly-TritonProd").is_dir()
    # Every synth says what each stage costs (deployment_spec.cost.figures), one line per stage, the report beside it.
    report = (out / "cost-report.txt").read_text().splitlines()
    assert [line.split(":")[0] for line in report if line[:1].isalpha() and not line.startswith(
        ("prices:", "note:"))] == ["dev", "staging", "prod"]
    assert [line.split(":")[1].strip() for line in done.stderr.splitlines() if line.startswith("cost: ")][:3] == [
        "dev", "staging", "prod"]


def test_the_import_log_reader_sees_a_heavy_import():
    # The twin of the import check: the same log of a Python that imports one of the forbidden packages names it.
    done = subprocess.run([sys.executable, "-c", "import onnx"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    assert "onnx" in {m.group(1) for m in re.finditer(IMPORT_LOG, done.stderr, re.M)}


def test_a_new_capacity_measurement_changes_only_the_invocations_policy(tmp_path):
    # The classifier's target comes from capacity.json when the spec gives no RPS; a new measurement
    # must show in `cdk diff` as that one policy's TargetValue and nothing else.
    from deployment_spec.cost.capacity import Measurement

    text = (ROOT / "triton.yaml").read_text()
    measured_spec = tmp_path / "triton.yaml"
    measured_spec.write_text(text.replace("max_instances: 3, max_rps_per_instance: 30}", "max_instances: 3}"))

    def measured(rps: float) -> dict:
        return {"classifier": Measurement(rps, 500, 400.0, "ml.g5.xlarge load test", "tritonsm bench load")}

    before = synth_spec(measured_spec, tmp_path / "before", capacity=measured(20.0))
    after = synth_spec(measured_spec, tmp_path / "after", capacity=measured(30.0))
    old = before.template("dev", "classifier").to_json()["Resources"]
    new = after.template("dev", "classifier").to_json()["Resources"]
    changed = sorted((k for k in set(old) | set(new) if old.get(k) != new.get(k)),
                     key=lambda k: new[k]["Type"] != "AWS::ApplicationAutoScaling::ScalingPolicy")
    # The policy, and the handover resources that carry its definition.
    assert sorted(new[k]["Type"] for k in changed) == [
        "AWS::ApplicationAutoScaling::ScalingPolicy", "Custom::TritonScalingHandover", "Custom::TritonScalingHandover"]
    # 20 and 30 rps x 60 s x 0.5 safety factor.
    config = "TargetTrackingScalingPolicyConfiguration"
    assert (old[changed[0]]["Properties"][config]["TargetValue"],
            new[changed[0]]["Properties"][config]["TargetValue"]) == (600, 900)
    # The synth output says where the number came from.
    from aws_cdk.assertions import Annotations
    Annotations.from_stack(after.stack("dev", "classifier")).has_warning("*", Match.string_like_regexp(
        r"invocations target 900 per instance per minute comes from capacity\.json: 30(\.0)? rps measured on "
        r"ml\.g5\.xlarge load test x 60 x 0\.5"))


def test_a_measured_concurrency_becomes_the_high_resolution_policy_and_synth_says_where_from(tmp_path):
    from aws_cdk.assertions import Annotations
    from deployment_spec.cost.capacity import Measurement

    spec = tmp_path / "triton.yaml"
    spec.write_text((ROOT / "triton.yaml").read_text().replace(
        "max_instances: 3, max_rps_per_instance: 30}", "max_instances: 3, load_metric: concurrency}"))
    measured = {"classifier": Measurement(20.0, 500, 400.0, "ml.g5.xlarge load test", "tritonsm bench load",
                                          max_concurrency=8)}
    synth = synth_spec(spec, tmp_path / "out", capacity=measured)
    policies = synth.template("dev", "classifier").find_resources("AWS::ApplicationAutoScaling::ScalingPolicy")
    tracked = {p["Properties"]["TargetTrackingScalingPolicyConfiguration"].get("PredefinedMetricSpecification", {})
               .get("PredefinedMetricType", "custom"): p["Properties"]["TargetTrackingScalingPolicyConfiguration"]
               ["TargetValue"] for p in policies.values()}
    # 8 requests in flight within the SLA x 0.5; GPU utilization beside it, no invocations policy.
    assert tracked == {"SageMakerVariantConcurrentRequestsPerModelHighResolution": 4, "custom": 70}
    Annotations.from_stack(synth.stack("dev", "classifier")).has_warning("*", Match.string_like_regexp(
        r"concurrency target 4 requests in flight per model comes from capacity\.json: concurrency 8 within the "
        r"SLA measured on ml\.g5\.xlarge load test x 0\.5"))

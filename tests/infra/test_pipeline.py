"""The delivery pipeline (CDK Pipelines) of a spec with a pipeline: section: steps, order, commands, approvals,
least-privilege post-deploy tests, the GPU-architecture refusal, cdk-nag, cfn-lint and checkov."""
import json
import pathlib
import re
import os
import subprocess
import sys

import pytest
import yaml

from cfn_lint_check import lint_assembly, validation_violations
from stacks.pipeline_commands import BUILD_COMMANDS, SYNTH_COMMANDS
from synth_helpers import ROOT, synth_spec
from triton_constructs import SynthError

CONNECTION = "arn:aws:codeconnections:us-east-1:123456789012:connection/12345678-1234-1234-1234-123456789012"
PIPELINE = {"connection_arn": CONNECTION, "repository": "acme/triton-models", "account": "123456789012",
            "stages": ["dev", "staging", "prod"], "manual_approval": ["prod"]}


def _with_pipeline(source: pathlib.Path, tmp: pathlib.Path, overrides: dict | None = None, **pipeline) -> pathlib.Path:
    raw = yaml.safe_load(source.read_text())
    raw["pipeline"] = {**PIPELINE, **pipeline}
    for env, endpoints in (overrides or {}).items():
        raw["environments"][env].setdefault("overrides", {}).setdefault("endpoints", {}).update(endpoints)
    path = tmp / source.name
    path.write_text(yaml.safe_dump(raw))
    return path


def _synth(source, tmp, **kwargs):
    relative = source.relative_to(ROOT).as_posix()
    return synth_spec(_with_pipeline(source, tmp, **kwargs), tmp, spec_file=relative)


@pytest.fixture(scope="module")
def default_pipeline(module_tmp):
    synth = _synth(ROOT / "triton.yaml", module_tmp.mktemp("pipeline"))
    assembly = synth.app.synth()  # runs cdk-nag (the app's plugin): any unacknowledged finding raises
    return synth, pathlib.Path(assembly.directory)


def _template(assembly: pathlib.Path) -> dict:
    return json.loads((assembly / "TritonPipeline.template.json").read_text())


def _projects(template: dict) -> dict[str, dict]:
    """CodeBuild projects by their step name (the buildspec's own commands tell them apart)."""
    out = {}
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::CodeBuild::Project":
            out[resource["Properties"]["Description"].split("/")[-1]] = resource["Properties"]
    return out


def _actions(template: dict) -> list[tuple[str, str, str, int]]:
    [pipeline] = [r for r in template["Resources"].values() if r["Type"] == "AWS::CodePipeline::Pipeline"]
    return [(stage["Name"], action["Name"], action["ActionTypeId"]["Provider"], action["RunOrder"])
            for stage in pipeline["Properties"]["Stages"] for action in stage["Actions"]]


def _commands(project: dict) -> list[str]:
    spec = json.loads(project["Source"]["BuildSpec"])
    return spec["phases"]["build"]["commands"]


def test_steps_run_in_order_with_the_approval_before_prod(default_pipeline):
    actions = _actions(_template(default_pipeline[1]))
    assert [a[0] for a in actions if a[2] != "CloudFormation"] == [
        "Source", "Build", "Build", "UpdatePipeline", *["Assets"] * 5, "TritonDev", "TritonStaging", "TritonStaging",
        "TritonProd", "TritonProd"]
    # Each stage verifies the tarballs it deploys (sha256, signatures) before any of its stacks deploys.
    for stage in ("TritonDev", "TritonStaging", "TritonProd"):
        here = [a for a in actions if a[0] == stage]
        verify = next(a for a in here if a[1] == f"VerifyModels-{stage.removeprefix('Triton').lower()}")
        assert verify[2] == "CodeBuild" and verify[3] < min(a[3] for a in here if a[2] == "CloudFormation")
    assert [(a[1], a[3]) for a in actions if a[0] == "Build"] == [("BuildModels", 1), ("Synth", 2)]
    stages = list(dict.fromkeys(a[0] for a in actions if a[2] == "CloudFormation"))
    assert stages == ["TritonDev", "TritonStaging", "TritonProd"]
    prod = [a for a in actions if a[0] == "TritonProd"]
    assert prod[0][1:] == ("VerifyModels-prod", "CodeBuild", 1) and prod[1][1:] == ("Approve-prod", "Manual", 2)
    assert all(a[3] > 2 for a in prod[2:])
    # The smoke and load test runs after the staging stacks, the stage right before the approval.
    staging = [a for a in actions if a[0] == "TritonStaging"]
    assert staging[-1][1:3] == ("SmokeAndLoadTest-staging", "CodeBuild")
    assert staging[-1][3] > max(a[3] for a in staging[:-1])
    assert not any(a[1] == "Manual" for a in actions if a[0] != "TritonProd")


def test_the_gpu_build_runs_the_readme_commands_privileged_on_a_gpu_with_a_cache(default_pipeline):
    projects = _projects(_template(default_pipeline[1]))
    build = next(p for p in projects.values() if any(c.startswith(".venv/bin/tritonsm build") for c in _commands(p)))
    assert _commands(build) == list(BUILD_COMMANDS)
    environment = build["Environment"]
    assert (environment["Type"], environment["ComputeType"], environment["PrivilegedMode"]) == (
        "LINUX_GPU_CONTAINER", "BUILD_GENERAL1_SMALL", True)
    assert {"Name": "TRITONSM_SPEC", "Type": "PLAINTEXT", "Value": "triton.yaml"} in environment["EnvironmentVariables"]
    assert build["Cache"]["Type"] == "S3"
    buildspec = json.loads(build["Source"]["BuildSpec"])
    assert buildspec["cache"]["paths"] == ["/root/.cache/**/*", ".tritonsm/build/**/*"]
    assert buildspec["env"]["variables"]["TRITONSM_CACHE_DIR"] == "/root/.cache/tritonsm"
    synth = next(p for p in projects.values() if _commands(p)[-1].startswith(".venv/bin/cdk synth"))
    assert _commands(synth)[-len(SYNTH_COMMANDS):] == list(SYNTH_COMMANDS)
    assert synth["Environment"]["Type"] == "LINUX_CONTAINER"


def test_the_docs_show_the_pipeline_commands():
    page = (ROOT / "docs" / "operations" / "pipeline.md").read_text()
    section = page.split("# Delivery pipeline", 1)[1].split("\n# ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    lines = [line for line in block.splitlines() if line and not line.startswith("#")]
    assert lines == ["export TRITONSM_SPEC=examples/tensorrt-bert-mme.yaml", *BUILD_COMMANDS, *SYNTH_COMMANDS[1:]]


def test_the_post_deploy_test_may_only_invoke_the_staging_endpoints(default_pipeline):
    template = _template(default_pipeline[1])
    projects = _projects(template)
    [smoke] = [p for p in projects.values() if any("--deployed" in c for c in _commands(p))]
    commands = _commands(smoke)
    assert sorted(c.split(" --")[0] for c in commands if "tritonsm" in c) == [
        ".venv/bin/tritonsm bench", ".venv/bin/tritonsm bench", ".venv/bin/tritonsm smoke classifier",
        ".venv/bin/tritonsm smoke vision-nlp"]
    assert all("--environment staging" in c and "--deployed" in c for c in commands if "tritonsm" in c)
    # each deployed answer is compared with what the build step recorded on the local server
    assert all("--expected-dir build-output/expected" in c for c in commands if "tritonsm smoke" in c)
    role = smoke["ServiceRole"]["Fn::GetAtt"][0]
    statements = [s for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Policy"
                  and {"Ref": role} in r["Properties"]["Roles"] for s in r["Properties"]["PolicyDocument"]["Statement"]]
    [invoke] = [s for s in statements if "sagemaker" in json.dumps(s["Action"])]
    assert invoke["Action"] == "sagemaker:InvokeEndpoint" and sorted(invoke["Resource"]) == [
        "arn:aws:sagemaker:us-west-2:123456789012:endpoint/triton-staging-classifier",
        "arn:aws:sagemaker:us-west-2:123456789012:endpoint/triton-staging-vision-nlp"]


def test_the_gpu_build_records_in_the_image_and_may_pull_only_that_image(default_pipeline):
    template = _template(default_pipeline[1])
    build = next(p for p in _projects(template).values() if "LINUX_GPU_CONTAINER" == p["Environment"]["Type"])
    assert any(" --image --record-dir build-output/expected" in c for c in _commands(build))
    role = build["ServiceRole"]["Fn::GetAtt"][0]
    statements = [s for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Policy"
                  and {"Ref": role} in r["Properties"]["Roles"] for s in r["Properties"]["PolicyDocument"]["Statement"]]
    ecr = [(s["Action"], s["Resource"]) for s in statements if "ecr:" in json.dumps(s["Action"])]
    assert ecr == [("ecr:GetAuthorizationToken", "*"), (
        ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
        "arn:aws:ecr:us-east-1:763104351884:repository/sagemaker-tritonserver")]


def test_a_pipeline_region_without_the_image_is_refused(tmp_path):
    with pytest.raises(SynthError) as caught:
        _synth(ROOT / "triton.yaml", tmp_path, region="cn-north-1")
    assert str(caught.value) == (
        "pipeline:\n  - the build step runs each endpoint in sagemaker-tritonserver:25.09, pulled in the pipeline's "
        "region cn-north-1, where the SageMaker SDK lists no such image (regions: af-south-1, ap-east-1, ap-east-2, "
        "ap-northeast-1, ap-northeast-2, ap-northeast-3, ap-south-1, ap-south-2, ap-southeast-1, ap-southeast-2, "
        "ap-southeast-3, ap-southeast-4, ap-southeast-5, ap-southeast-6, ap-southeast-7, ca-central-1, ca-west-1, "
        "eu-central-1, eu-central-2, eu-north-1, eu-south-1, eu-south-2, eu-west-1, eu-west-2, eu-west-3, "
        "il-central-1, me-central-1, me-south-1, mx-central-1, sa-east-1, us-east-1, us-east-2, us-west-1, "
        "us-west-2); set pipeline.region to one of those, or choose a triton_version published there")


def test_artifacts_are_encrypted_with_a_rotated_key_and_the_cache_bucket_is_private(default_pipeline):
    template = _template(default_pipeline[1])
    keys = [r for r in template["Resources"].values() if r["Type"] == "AWS::KMS::Key"]
    assert keys and all(k["Properties"]["EnableKeyRotation"] for k in keys)
    for bucket in [r for r in template["Resources"].values() if r["Type"] == "AWS::S3::Bucket"]:
        assert bucket["Properties"]["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True, "RestrictPublicBuckets": True}
        assert "BucketEncryption" in bucket["Properties"]
    policies = [r for r in template["Resources"].values() if r["Type"] == "AWS::S3::BucketPolicy"]
    assert all(any(s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}} and s["Effect"] == "Deny"
                   for s in p["Properties"]["PolicyDocument"]["Statement"]) for p in policies)


def test_cfn_lint_finds_nothing_in_the_pipeline_stack(default_pipeline):
    assembly = default_pipeline[1]
    result = lint_assembly(assembly)
    # The pipeline stack, its cross-region support stack, the app's 3 stages and the 3 the pipeline deploys.
    assert sorted(result.templates) == sorted(assembly.rglob("*.template.json"))
    assert {"TritonPipeline.template.json", "cross-region-stack-123456789012_us-west-2.template.json"} <= {
        t.name for t in result.templates} and len(result.templates) >= 20, result.templates
    assert result.findings == [] and validation_violations(assembly) == []


def test_the_tensorrt_example_synthesizes_with_its_gpu_build(tmp_path):
    synth = _synth(ROOT / "examples" / "tensorrt-bert-mme.yaml", tmp_path)
    assembly = pathlib.Path(synth.app.synth().directory)
    template = json.loads((assembly / "TrtBertPipeline.template.json").read_text())
    assert any(a[1] == "Approve-prod" for a in _actions(template))


def test_a_tensorrt_endpoint_on_another_gpu_than_the_build_is_refused(tmp_path):
    with pytest.raises(SynthError) as caught:
        _synth(ROOT / "examples" / "tensorrt-bert-mme.yaml", tmp_path,
               overrides={"staging": {"bert-mme": {"instance_type": "ml.g4dn.xlarge"}}})
    assert str(caught.value) == (
        "pipeline:\n  - model 'bert' (backend tensorrt) of endpoint 'bert-mme' runs on ml.g4dn.xlarge (NVIDIA T4, "
        "compute capability 7.5) in stage 'staging', but pipeline.build_compute gpu-small (NVIDIA A10G, compute "
        "capability 8.6) builds its plan, which runs only on the GPU architecture it was built on; no on-demand "
        "CodeBuild GPU compute has an NVIDIA T4 (gpu-small: A10G, gpu-large: Tesla V100): set "
        "pipeline.build_compute to {kind: fleet, instance_type: g4dn.xlarge}, a reserved-capacity fleet of that GPU "
        "(billed while it exists; CodeBuild accepts only some instance types: "
        "https://docs.aws.amazon.com/codebuild/latest/userguide/fleets.html), or build on such a host and deploy by "
        "hand")


def test_a_fleet_of_the_endpoint_gpu_builds_it(tmp_path):
    synth = _synth(ROOT / "examples" / "tensorrt-bert-mme.yaml", tmp_path, build_compute={
        "kind": "fleet", "instance_type": "g5.2xlarge"})
    template = json.loads((pathlib.Path(synth.app.synth().directory) / "TrtBertPipeline.template.json").read_text())
    [(fleet_id, fleet)] = [(k, r["Properties"]) for k, r in template["Resources"].items()
                           if r["Type"] == "AWS::CodeBuild::Fleet"]
    assert (fleet["ComputeType"], fleet["EnvironmentType"], fleet["ComputeConfiguration"]["instanceType"]) == (
        "CUSTOM_INSTANCE_TYPE", "LINUX_GPU_CONTAINER", "g5.2xlarge")
    [build] = [p for p in _projects(template).values() if p["Environment"].get("Fleet")]
    assert build["Environment"]["Fleet"] == {"FleetArn": {"Fn::GetAtt": [fleet_id, "Arn"]}}
    assert build["Environment"]["Type"] == "LINUX_GPU_CONTAINER"


def test_checkov_finds_nothing_in_the_pipeline_stack(default_pipeline):
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "checkov"), "--framework", "cloudformation", "--compact",
                           "--quiet", "--skip-download", "-o", "json", "-f",
                           str(default_pipeline[1] / "TritonPipeline.template.json")],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    report = json.loads(done.stdout)
    failed = [f"{c['check_id']} {c['resource']}" for c in report["results"]["failed_checks"]]
    assert failed == [] and report["summary"]["passed"] > 20


def test_without_a_pipeline_section_there_is_no_pipeline_stack(default_synth):
    assert not [c for c in default_synth.app.node.children if re.search("Pipeline$", c.node.id)]


def test_pipeline_only_deploys_the_pipeline_without_stages_or_a_build(tmp_path):
    # The first `cdk deploy <Project>Pipeline` from a machine without the GPU: no manifest is read, no stage is
    # made; the pipeline's first run builds the models and its self-mutation adds the stages.
    folder = ROOT / ".tritonsm" / "test-specs"
    folder.mkdir(parents=True, exist_ok=True)
    spec = _with_pipeline(ROOT / "examples" / "tensorrt-bert-mme.yaml", folder)
    code = "import sys, app; sys.exit(app.main())"
    env = {**os.environ, "CDK_OUTDIR": str(tmp_path / "out"), "CDK_CONTEXT_JSON": json.dumps(
        {"spec": str(spec.relative_to(ROOT)), "manifest": str(tmp_path / "absent.json"), "pipeline_only": "true"})}
    try:
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600,
                              env=env)
    finally:
        spec.unlink()
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(p.name for p in (tmp_path / "out").glob("*.template.json")) == ["TrtBertPipeline.template.json"]
    assert not list((tmp_path / "out").glob("assembly-*"))
    template = json.loads((tmp_path / "out" / "TrtBertPipeline.template.json").read_text())
    assert [a[0] for a in _actions(template)] == ["Source", "Build", "Build", "UpdatePipeline"]


def test_an_asynchronous_endpoint_is_smoke_tested_through_s3_and_not_load_tested(tmp_path):
    # InvokeEndpoint is refused on an asynchronous endpoint: the smoke test goes through its S3 locations (the
    # role may use only its own async/<endpoint>/ prefixes and its stack's outputs); no load test (bench drain's
    # drain rate sets its target instead). cdk-nag runs on the synth: every finding is acknowledged with a reason.
    synth = _synth(ROOT / "examples" / "image-async-sme.yaml", tmp_path, stages=["dev", "staging", "prod"])
    template = json.loads((pathlib.Path(synth.app.synth().directory) / "PhotoLabelsPipeline.template.json").read_text())
    [smoke] = [p for p in _projects(template).values() if any("--deployed" in c for c in _commands(p))]
    assert [c.split(" --")[0] for c in _commands(smoke) if "tritonsm" in c] == [".venv/bin/tritonsm smoke photos"]
    role = smoke["ServiceRole"]["Fn::GetAtt"][0]
    statements = {s.get("Sid", ""): s for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Policy"
                  and {"Ref": role} in r["Properties"]["Roles"] for s in r["Properties"]["PolicyDocument"]["Statement"]}
    assert statements["AsyncSmokeTestInvoke"]["Resource"] == (
        "arn:aws:sagemaker:eu-west-1:123456789012:endpoint/photolabels-staging-photos")
    assert statements["AsyncSmokeTestStacks"]["Resource"] == (
        "arn:aws:cloudformation:eu-west-1:123456789012:stack/PhotoLabels-staging-Storage/*")
    objects = [r["Fn::Join"][1][-1] for r in statements["AsyncSmokeTestObjects"]["Resource"]]
    assert sorted(objects) == [":s3:::*/async/photos/failure/*", ":s3:::*/async/photos/input/*",
                               ":s3:::*/async/photos/output/*"]
    assert statements["AsyncSmokeTestKey"]["Condition"] == {
        "StringEquals": {"kms:ViaService": "s3.eu-west-1.amazonaws.com"}}

"""The construct library as a user installs it: the wheel, base install only (no torch), in a fresh virtual
environment, synthesizing a team's own CDK app (examples/cdk-app/) that cdk-nag, cfn-lint and checkov pass.

Installs from the package index with requirements.lock as constraints (pip's cache makes repeats quick).
"""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import zipfile

import pytest
import yaml
from cfnlint.api import ManualArgs, lint_file

from deployment_spec import load_spec
from fake_build import fake_build
from synth_helpers import ROOT

EXAMPLE = ROOT / "examples" / "cdk-app"
NODE = pathlib.Path(sys.executable).with_name("node")


def _run(args: list, **kwargs) -> subprocess.CompletedProcess:
    # Without PYTHONPATH: a checkout on it (with an .egg-info) would make pip take the library as installed.
    kwargs.setdefault("env", {k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=900, **kwargs)


INSTALL_PAGE = ROOT / "docs" / "howto" / "install.md"


def install_page_command(wheel: pathlib.Path) -> list[str]:
    """The `pip install ...` of the install page's library block, as pip arguments: its dist/ wheel and the
    checkout's requirements.lock resolved here."""
    section = INSTALL_PAGE.read_text().split("## 2.", 1)[1].split("## 3.", 1)[0]
    [line] = [line for line in re.findall(r"```sh\n(.*?)```", section, re.S)[1].splitlines()
              if line.startswith("pip install ")]
    words = line.split()[1:]
    resolved = {"dist/triton_sagemaker_cdk-*.whl": str(wheel), "requirements.lock": str(ROOT / "requirements.lock")}
    return ["pip", *[resolved.get(w, w) for w in words], "-q", "--disable-pip-version-check"]


def test_the_install_page_command_is_the_one_this_module_runs(tmp_path):
    assert install_page_command(tmp_path / "x.whl") == [
        "pip", "install", "-c", str(ROOT / "requirements.lock"), str(tmp_path / "x.whl"), "cdk-nag",
        "cdklabs-cdk-validator-cfnguard", "-q", "--disable-pip-version-check"]


@pytest.fixture(scope="module")
def installed(module_tmp) -> tuple[pathlib.Path, pathlib.Path]:
    """(the fresh environment's python, the wheel)."""
    tmp = module_tmp.mktemp("wheel")
    # Built from a copy, so setuptools' build/ folder does not land in the checkout.
    source = tmp / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "node_modules", "assets", "cdk.out", "build", "tests", "examples", "benchmarks",
        ".tritonsm", "__pycache__", "*.egg-info"))
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                  tmp / "dist", source])
    assert built.returncode == 0, built.stderr[-3000:]
    [wheel] = (tmp / "dist").glob("triton_sagemaker_cdk-*.whl")
    venv = tmp / "fresh"
    created = _run([sys.executable, "-m", "venv", venv])
    assert created.returncode == 0, created.stderr
    python = venv / "bin" / "python"
    # The install page's command as written (docs/howto/install.md, way 2): the library and, as the app's own
    # choices, cdk-nag and the Control Tower rules; its dist/ wheel is the one built above.
    done = _run([python, "-m", *install_page_command(wheel)])
    assert done.returncode == 0, done.stderr[-3000:]
    return python, wheel


def test_the_wheel_holds_no_generic_top_level_package(installed):
    _, wheel = installed
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist() if not name.startswith("triton_sagemaker")}
    # Only the product's own names; the repository's CDK app (stacks/) stays out, the measuring code lives
    # inside tritonsm; the handlers ship as data for their Lambda asset.
    assert tops == {"deployment_spec", "triton_constructs", "model_build", "local_endpoint", "tritonsm"}, tops
    # The spec app's stacks under the product's name (a top-level `stacks` would shadow a user app's own).
    assert "triton_sagemaker_stacks/spec_app.py" in zipfile.ZipFile(wheel).namelist()
    assert "triton_constructs/handlers/copy_artifact.py" in zipfile.ZipFile(wheel).namelist()


def test_the_base_install_has_no_torch_and_no_model_build_dependencies(installed):
    python, _ = installed
    done = _run([python, "-c", "import importlib.util as u; print([m for m in ('torch', 'onnx', 'onnxruntime', "
                 "'transformers', 'tritonclient', 'matplotlib', 'pytest', 'cfnlint') if u.find_spec(m)])"])
    assert done.stdout.strip() == "[]", done.stderr
    assert _run([python, "-c", "import torch"]).returncode == 1


def test_the_pages_last_command_answers_from_the_wheel(installed):
    # `tritonsm --version`, the install page's check of every way in, from the wheel's own console script.
    python, wheel = installed
    done = _run([python.with_name("tritonsm"), "--version"])
    version = wheel.name.split("-")[1]
    assert (done.returncode, done.stdout.strip()) == (0, f"tritonsm {version} (triton-sagemaker-cdk)"), done.stderr[-2000:]


def _spec_app_folder(folder: pathlib.Path, **sections) -> pathlib.Path:
    """A team's folder for the wheel's spec app: a spec (the default one's classifier endpoint, one environment),
    its build's manifest and tarballs in assets/, and a cdk.json naming the app as the install page does."""
    raw = yaml.safe_load((ROOT / "triton.yaml").read_text())
    raw["endpoints"] = {"classifier": raw["endpoints"]["classifier"]}
    raw["environments"] = {"dev": raw["environments"]["dev"]}
    folder.mkdir()
    (folder / "triton.yaml").write_text(yaml.safe_dump({**raw, **sections}))
    fake_build(load_spec(folder / "triton.yaml"), folder / "assets")
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    (folder / "cdk.json").write_text(json.dumps({"app": "python -m triton_sagemaker_stacks", "context": context}))
    return folder


def _spec_app(python: pathlib.Path, folder: pathlib.Path, out: pathlib.Path) -> subprocess.CompletedProcess:
    """The app as `cdk synth` runs it in the folder of its cdk.json, nothing of this checkout importable."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("CDK_", "PYTHON"))},
           "CDK_OUTDIR": str(out), "JSII_NODE": str(NODE)}
    return _run([python, "-m", "triton_sagemaker_stacks"], cwd=folder, env=env)


def test_the_wheels_spec_app_synthesizes_a_teams_spec_with_every_check(installed, tmp_path):
    python, _ = installed
    done = _spec_app(python, _spec_app_folder(tmp_path / "team"), tmp_path / "cdk.out")
    assert done.returncode == 0, done.stderr[-4000:]
    assert sorted(p.name for p in (tmp_path / "cdk.out").glob("assembly-*")) == ["assembly-TritonDev"]
    [template] = (tmp_path / "cdk.out" / "assembly-TritonDev").glob("*classifier*.template.json")
    kinds = {r["Type"] for r in json.loads(template.read_text())["Resources"].values()}
    assert {"AWS::SageMaker::Endpoint", "AWS::SageMaker::Model"} <= kinds
    report = json.loads((tmp_path / "cdk.out" / "validation-report.json").read_text())
    assert {(r["pluginName"], r["conclusion"]) for r in report["pluginReports"]} == {
        ("cdk-validator-cfnguard", "success"), ("triton-security-hub", "success")}, report
    assert "cost: dev: floor $" in done.stderr, done.stderr[-3000:]  # the stage's cost line, as from a clone


def test_the_wheels_spec_app_refuses_a_pipeline_outside_a_clone(installed, tmp_path):
    python, _ = installed
    pipeline = {"connection_arn": "arn:aws:codeconnections:us-east-1:123456789012:connection/"
                "12345678-1234-1234-1234-123456789012", "repository": "acme/models", "stages": ["dev"]}
    folder = _spec_app_folder(tmp_path / "team", pipeline=pipeline)
    done = _spec_app(python, folder, tmp_path / "cdk.out")
    assert (done.returncode, done.stderr) == (2, (
        "error: pipeline:\n  - triton.yaml has a pipeline: section, whose steps run this project's `make setup` and "
        f"`.venv/bin/tritonsm` in a clone of its repository, and {folder} is not one (no Makefile and "
        "scripts/bootstrap.sh); synthesize the pipeline from a clone (docs/howto/install.md, way 1), or remove "
        "pipeline: and deploy the stages from your own pipeline\n")), done.stderr[-3000:]


def test_a_teams_own_multi_stack_app_synthesizes_clean(installed, tmp_path):
    """examples/cdk-app: network, key, buckets and topic in one stack, three endpoints in another, callers in a
    third; every grant and acknowledgement across stacks, cdk-nag, cfn-lint and checkov clean."""
    python, _ = installed
    manifest = fake_build(load_spec(ROOT / "triton.yaml"), tmp_path / "assets")
    context = {**json.loads((EXAMPLE / "cdk.json").read_text())["context"], "manifest": str(manifest),
               "archive_bucket": "team-model-archive"}
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("CDK_", "PYTHON"))},
           "CDK_CONTEXT_JSON": json.dumps(context), "CDK_OUTDIR": str(tmp_path / "cdk.out"), "JSII_NODE": str(NODE)}
    # Run from the example's folder, so nothing of this checkout is importable but the installed wheel.
    done = _run([python, "app.py"], cwd=EXAMPLE, env=env)
    # app.synth() with the cdk-nag, Control Tower and Security Hub plugins registered fails on any unacknowledged
    # finding, and on a cycle.
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads((tmp_path / "cdk.out" / "validation-report.json").read_text())
    # The Control Tower and Security Hub plugins ran and found nothing unacknowledged (cdk-nag reports apart).
    assert {(r["pluginName"], r["conclusion"]) for r in report["pluginReports"]} == {
        ("cdk-validator-cfnguard", "success"), ("triton-security-hub", "success")}, report
    templates = {name: tmp_path / "cdk.out" / f"{name}.template.json"
                 for name in ("TeamPlatform", "TeamInference", "TeamCallers")}
    resources = json.loads(templates["TeamInference"].read_text())["Resources"]
    kinds = sorted({r["Type"] for r in resources.values() if r["Type"].startswith("AWS::SageMaker::")})
    assert kinds == ["AWS::SageMaker::Endpoint", "AWS::SageMaker::EndpointConfig", "AWS::SageMaker::InferenceComponent",
                     "AWS::SageMaker::Model"]
    assert sum(r["Type"] == "AWS::SageMaker::Endpoint" for r in resources.values()) == 3
    # Instance pools and scheduled bounds, for the variant's instances and a component's copies.
    pools = [v["InstancePools"] for r in resources.values() if r["Type"] == "AWS::SageMaker::EndpointConfig"
             for v in r["Properties"]["ProductionVariants"] if "InstancePools" in v]
    assert pools == [[{"InstanceType": "ml.g5.xlarge", "Priority": 1}, {"InstanceType": "ml.g6.xlarge", "Priority": 2}]]
    scheduled = sorted(a["ScheduledActionName"] for r in resources.values()
                       if r["Type"] == "AWS::ApplicationAutoScaling::ScalableTarget"
                       for a in r["Properties"].get("ScheduledActions", []))
    assert scheduled == ["Schedule-evening", "Schedule-nights", "Schedule-workday"]
    # The library's functions run in the platform's VPC (functions_in_vpc).
    functions = [r for r in resources.values() if r["Type"] == "AWS::Lambda::Function"]
    assert functions and all("VpcConfig" in f["Properties"] for f in functions)
    # The bucket, key and subnets come from the platform stack; the callers' grants name the endpoints' ARNs, and
    # the callers import only the on-call topic (their alarm's action).
    assert "Fn::ImportValue" in templates["TeamInference"].read_text()
    callers = templates["TeamCallers"].read_text()
    imports = re.findall(r'"Fn::ImportValue": "([^"]+)"', callers)
    assert "endpoint/search-prod" in callers and imports and all("OnCall" in name for name in imports), imports
    for name, template in templates.items():
        # cfn-lint with AWS's resource schemas: nothing.
        assert [str(m) for m in lint_file(template, config=ManualArgs(regions=["us-east-1"]))] == [], name
        # checkov: no failed check, and it really scanned the stack.
        scan = _run([ROOT / ".venv" / "bin" / "checkov", "--framework", "cloudformation", "--compact", "--quiet",
                     "--skip-download", "-o", "json", "-f", template], cwd=tmp_path)
        report = json.loads(scan.stdout)
        assert [c["check_id"] + " " + c["resource"] for c in report["results"]["failed_checks"]] == [], name
        assert report["summary"]["passed"] > {"TeamPlatform": 20, "TeamInference": 120, "TeamCallers": 10}[name]


def test_mypy_checks_the_example_app_against_the_installed_wheel(installed, tmp_path):
    """py.typed ships: mypy reads the library's types from the wheel (not skipped as untyped)."""
    python, _ = installed
    [site] = (python.parent.parent / "lib").glob("python3*/site-packages")
    assert (site / "triton_constructs" / "py.typed").is_file()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}, "MYPYPATH": "",
           "MYPY_CACHE_DIR": str(tmp_path / "mypy-cache")}
    # The twin: a prop of the wrong type in a copy of the app is an error mypy reports, so the check can fail.
    # One run checks both. The library's own types are what is checked here: aws-cdk-lib's (jsii's thousands of
    # generated modules, most of this run's time when read) are taken as Any; the app synthesizing in the test
    # above proves its aws-cdk-lib calls, and tests/test_types.py checks ours against aws-cdk-lib's types.
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\n[mypy-aws_cdk.*,constructs.*,jsii.*,cdk_nag.*,cdklabs.*,publication.*,typeguard.*]\n"
                      "follow_imports = skip\n")
    wrong = tmp_path / "wrong_app.py"
    wrong.write_text((EXAMPLE / "app.py").read_text().replace("max_instances=4, max_rps_per_instance=40",
                                                              "max_instances='4', max_rps_per_instance=40"))
    assert "max_instances='4'" in wrong.read_text()
    checked = _run([sys.executable, "-m", "mypy", "--config-file", config, "--python-executable", python, "--no-incremental",
                    "--follow-imports=silent", "--ignore-missing-imports", EXAMPLE / "app.py", wrong],
                   cwd=tmp_path, env=env)
    errors = [line for line in checked.stdout.splitlines() if ": error:" in line]
    assert checked.returncode == 1 and errors, checked.stdout[-3000:]
    assert all(line.split(":", 1)[0].endswith("wrong_app.py") for line in errors), checked.stdout[-3000:]
    assert any('Argument "max_instances" to "Scaling" has incompatible type "str"' in line for line in errors)


def test_the_command_line_says_which_extra_a_command_needs(installed, tmp_path):
    python, _ = installed
    tritonsm = python.with_name("tritonsm")
    # The spec loader is part of the base install; building models is not.
    assert _run([tritonsm, "validate", "--spec", ROOT / "triton.yaml"], cwd=tmp_path).returncode == 0
    done = _run([tritonsm, "build", "--spec", ROOT / "triton.yaml"], cwd=tmp_path)
    assert (done.returncode, done.stderr.splitlines()[-1]) == (2, (
        "error: tritonsm build needs the Python package 'protobuf', which is not installed (the base install, the "
        "construct library, leaves it out); install the build extra: pip install 'triton-sagemaker-cdk[build]' (in a checkout of the "
        "repository, `make` installs everything)"))

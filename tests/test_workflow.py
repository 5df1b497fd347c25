"""The pull-request workflow is valid for GitHub Actions (the GitHub workflow JSON schema that
check-jsonschema ships, `vendor.github-workflows`) and runs exactly the README's two commands."""
import pathlib
import re
import subprocess

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "pull-request.yml"
CHECKER = ROOT / ".venv" / "bin" / "check-jsonschema"


def _check(path: pathlib.Path) -> subprocess.CompletedProcess:
    if not CHECKER.exists():
        pytest.fail(f"{CHECKER} is missing: run `make setup` (scripts/bootstrap.sh installs it from "
                    "requirements-checkov.lock)")
    return subprocess.run([str(CHECKER), "--builtin-schema", "vendor.github-workflows", str(path)],
                          capture_output=True, text=True, timeout=120)


def test_the_workflow_passes_the_github_workflow_schema():
    done = _check(WORKFLOW)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_schema_check_rejects_a_broken_workflow(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text(WORKFLOW.read_text().replace("runs-on: ubuntu-latest", "runs_on: ubuntu-latest"))
    done = _check(broken)
    assert done.returncode == 1 and "runs-on" in done.stdout


def test_the_workflow_runs_the_readme_commands():
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"^(make(?: test)?)\s+#", readme.split("```sh", 1)[1].split("```", 1)[0], re.MULTILINE)
    assert commands == ["make", "make test"]
    steps = yaml.safe_load(WORKFLOW.read_text())["jobs"]["synth-and-test"]["steps"]
    runs = [step.get("run", "").strip() for step in steps]
    assert runs[:4] == ["", "", "make", "make test"]  # checkout, Python 3.11, then the README's two commands


def test_the_workflow_posts_the_cost_change_against_the_base_commit():
    steps = yaml.safe_load(WORKFLOW.read_text())["jobs"]["synth-and-test"]["steps"]
    assert steps[0]["with"]["fetch-depth"] == 0  # the base commit's spec must be in the clone
    cost, = [step for step in steps if "tritonsm cost --diff" in step.get("run", "")]
    assert cost["env"]["BASE"] == "${{ github.event.pull_request.base.sha }}"
    assert '.venv/bin/tritonsm cost --diff "$BASE"' in cost["run"] and "GITHUB_STEP_SUMMARY" in cost["run"]

"""The unsigned-models warning (stacks/model_signatures.py, ``tritonsm:unsignedModels``) on every synth's stderr.

The CDK CLI reports annotations of the top-level stacks only when `cdk synth` gets no stack pattern, and every
endpoint stack sits in a stage's nested assembly: app.py prints the stages' warnings itself (``_stage_warnings``),
as it prints the cost lines. Run as `cdk synth` runs it (``python app.py``); the twin gives the reason and the
warning becomes an info that is not printed.
"""
from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest
from aws_cdk import cx_api

from deployment_spec import load_spec
from fake_build import fake_build
from synth_helpers import ROOT, run_app

SPEC = """\
# TEST DATA for tests/infra/test_unsigned_warning.py: one endpoint, one environment, an unsigned build.
project: Warned
triton_version: "25.04"
{signing}models:
  bert:
    backend: onnxruntime
    source: {{recipe: tiny-bert}}
    max_batch_size: 8
endpoints:
  classifier:
    kind: single-model
    models: [bert]
    instance_type: ml.g5.xlarge
environments:
  dev:
    region: us-east-1
"""


def _build(tmp_path: pathlib.Path, signing: str = "") -> tuple[pathlib.Path, pathlib.Path]:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(signing=signing))
    return spec, fake_build(load_spec(spec), tmp_path / "assets")


def _synth(tmp_path: pathlib.Path, signing: str = "") -> tuple[list[str], str]:
    spec, manifest = _build(tmp_path, signing)
    done = run_app(tmp_path, {"spec": str(spec), "manifest": str(manifest)})
    assert done.returncode == 0, done.stderr[-3000:]
    return _warnings(done.stderr), _tarball(tmp_path)


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning: ")]


def _tarball(tmp_path: pathlib.Path) -> str:
    return next(p.name for p in (tmp_path / "assets").glob("classifier-*.tar.gz"))


def _expected(tarball: str) -> str:
    return (f"warning: WarnedDev/classifier: unsigned model tarballs: {tarball}; nothing proves they are what the "
            "build verified (set signing.public_key and build with --signing-key, or give signing.unsigned_reason: "
            "docs/howto/signing.md) [ack: tritonsm:unsignedModels]")


def _carries_it(stack: cx_api.CloudFormationStackArtifact) -> bool:
    return any("[ack: tritonsm:unsignedModels]" in str(m.entry.data) for m in stack.messages)


def test_a_plain_synth_prints_the_unsigned_models_warning(tmp_path):
    warnings, tarball = _synth(tmp_path)
    assert warnings == [_expected(tarball)]
    # Why app.py prints it: the top-level stacks, all that `cdk synth` without a pattern reports on, carry none of
    # it; the stage's stack in its nested assembly does.
    assembly = cx_api.CloudAssembly(str(tmp_path / "cdk.out"))
    assert [s.hierarchical_id for s in assembly.stacks if _carries_it(s)] == []
    assert [s.hierarchical_id for s in assembly.stacks_recursively if _carries_it(s)] == ["WarnedDev/classifier"]


def test_the_cdk_cli_s_plain_synth_shows_it(tmp_path):
    cdk = next((p for p in (ROOT / ".venv/bin/cdk", ROOT / "node_modules/.bin/cdk") if p.exists()), None)
    if cdk is None or shutil.which("node") is None and not (ROOT / ".venv/bin/node").exists():
        pytest.skip("the CDK CLI is not installed (scripts/bootstrap.sh installs it)")
    spec, manifest = _build(tmp_path)
    done = subprocess.run([str(cdk), "synth", "--quiet", "-c", f"spec={spec}", "-c", f"manifest={manifest}",
                           "-o", str(tmp_path / "cdk.out")], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert _warnings(done.stderr) == [_expected(_tarball(tmp_path))]


def test_with_the_reason_in_the_spec_nothing_is_printed(tmp_path):
    warnings, _ = _synth(tmp_path, 'signing: {unsigned_reason: "test data, built without a key"}\n')
    assert warnings == []

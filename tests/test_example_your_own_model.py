"""examples/your-own-model/README.md, walked as written: a user's package with a torch.nn.Module and its
recipe function, built, served on the local Triton server, invoked, and synthesized with the CDK CLI.

The example is copied to a temporary folder and the README's commands run there (their paths are
relative to the repository root, which the copy reproduces), so the checkout gets no build output.
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "your-own-model"
STARTED = "press Ctrl-C to stop"


def readme_commands() -> list[str]:
    """The shell block of section 2, one command per line."""
    section = EXAMPLE.joinpath("README.md").read_text().split("## 2.", 1)[1]
    block = section.split("```sh", 1)[1].split("```", 1)[0]
    return [line.strip() for line in block.strip().splitlines()]


def test_the_readme_walks_build_serve_invoke_synth():
    assert [command.split()[:2] for command in readme_commands()] == [
        ["tritonsm", "build"], ["tritonsm", "serve"], ["tritonsm", "invoke"], ["cdk", "synth"]]


def _argv(command: str, port: int) -> list[str]:
    """A README command as this test runs it: the venv's interpreter, a free port, no trailing '&'."""
    words = command.rstrip(" &").replace("8080", str(port)).split()
    if words[0] == "tritonsm":
        return [sys.executable, "-m", "tritonsm", *words[1:]]
    # The CDK CLI runs app.py from the repository, as cdk.json says, with the README's context.
    return [str(ROOT / ".venv" / "bin" / "cdk"), *words[1:], "--app", f"{sys.executable} {ROOT / 'app.py'}",
            "--output", "cdk.out"]


@pytest.mark.triton
def test_the_walkthrough_runs_as_written(tmp_path):
    from local_endpoint.server.ports import free_port

    shutil.copytree(EXAMPLE, tmp_path / "examples" / "your-own-model",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ, PYTHONPATH=str(ROOT), PATH=f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}")
    port = free_port()
    build, serve, invoke, synth = (_argv(command, port) for command in readme_commands())

    done = subprocess.run(build, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    manifest = json.loads((tmp_path / "build" / "your-own-model" / "manifest.json").read_text())
    check = manifest["models"]["sentiment"]["verification"]
    assert (check["version"], check["cases"], check["invariance_error"] < 1e-6) == ("1.23.0", 9, True)

    server = subprocess.Popen(serve, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in server.stdout:
            lines.append(line)
            if STARTED in line:
                break
        else:
            raise AssertionError(f"tritonsm serve did not start: {lines} {server.stderr.read()}")
        answer = subprocess.run([*invoke, "--output", "answer.npz"], cwd=tmp_path, env=env, capture_output=True,
                                text=True, timeout=120)
    finally:
        server.send_signal(signal.SIGINT)
        server.communicate(timeout=60)
    assert answer.returncode == 0, answer.stderr
    assert "logits FP32 [1, 2]" in answer.stdout
    np.testing.assert_allclose(np.load(tmp_path / "answer.npz")["logits"], _eager(tmp_path), rtol=1e-5, atol=1e-6)

    done = subprocess.run(synth, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    templates = {p.name: json.loads(p.read_text()) for p in (tmp_path / "cdk.out").rglob("*.template.json")}
    resources = [r for t in templates.values() for r in t["Resources"].values()]
    # The ReviewsDev stage deploys one endpoint, serving the tarball the build wrote.
    assert [r["Type"] for r in resources].count("AWS::SageMaker::Endpoint") == 1
    artifact = manifest["endpoints"]["reviews"]["artifacts"][0]
    copies = [r["Properties"] for r in resources if r["Type"] == "Custom::TritonModelArtifact"]
    assert [(c["Sha256"], c["DestinationKey"].rsplit("/", 1)[1]) for c in copies] == [
        (artifact["sha256"], artifact["file"])]
    assert (tmp_path / "cdk.out" / "assembly-ReviewsDev").is_dir()  # the stage `cdk deploy "ReviewsDev/*"` names


def _eager(folder: pathlib.Path) -> np.ndarray:
    """ReviewClassifier in eager PyTorch, built by the example's own recipe, on request.json."""
    import torch

    from deployment_spec import load_spec

    sys.path.insert(0, str(folder / "examples" / "your-own-model"))
    try:
        from reviews.recipe import exportable
        spec = load_spec(folder / "examples" / "your-own-model" / "spec.yaml")
        module = exportable(spec.models["sentiment"]).module
    finally:
        sys.path.remove(str(folder / "examples" / "your-own-model"))
    request = {t["name"]: torch.tensor(t["data"]) for t in
               json.loads((folder / "examples" / "your-own-model" / "request.json").read_text())["inputs"]}
    with torch.no_grad():
        return module(**request).numpy()

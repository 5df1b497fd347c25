"""A built spec (hand-made manifest over the test tarballs) and a fake `docker` first on PATH, for `--image` tests."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pathlib
import shutil
import sys

from deployment_spec.builds.manifest import Artifact, EndpointArtifacts, Manifest, ModelEntry, TensorSpec

HERE = pathlib.Path(__file__).parent
SPEC = """\
project: ImageTest
triton_version: "25.09"
models:
  add: {backend: python, source: {python_dir: model-sources}, max_batch_size: 8}
  times2: {backend: python, source: {python_dir: model-sources}, max_batch_size: 8}
endpoints:
  add-sme: {kind: single-model, models: [add], instance_type: ml.g5.xlarge}
  add-mme:
    kind: multi-model
    models: [add, times2]
    instance_type: ml.g5.2xlarge
    container: {shm_default_bytes: 33554432, thread_count: 4}
environments:
  dev: {region: us-east-1, removal_policy: destroy}
"""
ADD_IO = ((TensorSpec("A", "TYPE_FP32", (4,)), TensorSpec("B", "TYPE_FP32", (4,))),
          (TensorSpec("SUM", "TYPE_FP32", (4,)),))
AFFINE_IO = ((TensorSpec("INPUT", "TYPE_FP32", (-1,)),), (TensorSpec("OUTPUT", "TYPE_FP32", (-1,)),))


@dataclasses.dataclass(frozen=True)
class BuiltSpec:
    spec: pathlib.Path
    manifest: pathlib.Path

    def flags(self) -> list[str]:
        return ["--spec", str(self.spec), "--manifest", str(self.manifest)]


def write_built_spec(root: pathlib.Path, tarballs: dict[str, pathlib.Path]) -> BuiltSpec:
    """The spec above with a manifest listing the test tarballs, as `tritonsm build` would write them."""
    (root / "model-sources").mkdir(parents=True)
    (root / "spec.yaml").write_text(SPEC)
    assets = root / "assets"
    assets.mkdir()

    def artifact(key: str, model: str) -> Artifact:
        data = tarballs[key].read_bytes()
        name = f"{model}-{hashlib.sha256(data).hexdigest()[:12]}.tar.gz"
        (assets / name).write_bytes(data)
        return Artifact(name, hashlib.sha256(data).hexdigest(), len(data), (model,))

    models = {"add": ModelEntry("add", "add", "python", 8, *ADD_IO, "0" * 64),
              "times2": ModelEntry("times2", "times2", "python", 8, *AFFINE_IO, "1" * 64)}
    add = artifact("add", "add")
    endpoints = {"add-sme": EndpointArtifacts("single-model", (add,)),
                 "add-mme": EndpointArtifacts("multi-model", (add, artifact("times2", "times2")))}
    (assets / "manifest.json").write_text(Manifest("25.09", models, endpoints).to_json())
    return BuiltSpec(root / "spec.yaml", assets / "manifest.json")


@dataclasses.dataclass(frozen=True)
class FakeDocker:
    bin_dir: pathlib.Path
    log: pathlib.Path

    def env(self, **extra: str) -> dict[str, str]:
        """os.environ with the fake first on PATH (and no AWS configuration of the user's)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        return {**env, "PATH": f"{self.bin_dir}{os.pathsep}{env['PATH']}", "FAKE_DOCKER_LOG": str(self.log),
                "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull, **extra}

    def calls(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []

    def commands(self) -> list[list[str]]:
        return [c["argv"] for c in self.calls() if "argv" in c]

    def run_argv(self) -> list[str]:
        return next(argv for argv in self.commands() if argv[0] == "run")


def install_fake_docker(root: pathlib.Path) -> FakeDocker:
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    docker = bin_dir / "docker"
    shutil.copyfile(HERE / "fake_docker.py", docker)
    docker.write_text(f"#!{sys.executable}\n" + docker.read_text())
    docker.chmod(0o755)
    return FakeDocker(bin_dir, root / "docker-calls.jsonl")

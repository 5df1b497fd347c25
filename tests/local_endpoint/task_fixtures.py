"""What the ``task:`` test modules share (raw text, images, audio): a spec built into a folder, its endpoint
served on the real Triton server behind the local SageMaker Runtime, and copies of an ensemble's built steps
for the build-time check (a test may plant a defect in a copy)."""
from __future__ import annotations

import contextlib
import dataclasses
import pathlib
import shutil
from typing import Callable, Iterator

from deployment_spec import load_spec
from deployment_spec.sections.endpoint import EndpointKind
from deployment_spec.builds.manifest import load_manifest
from deployment_spec.facts.serving_runtimes import DEFAULT_TRITON_VERSION
from local_endpoint.endpoints.multi_model import MultiModelEndpoint
from local_endpoint.runtime.local_runtime import LocalRuntime, NamedEndpoint
from model_build.backends.ensemble import task_check
from tritonsm.cli import main as tritonsm_main


@dataclasses.dataclass(frozen=True)
class Built:
    root: pathlib.Path
    endpoint: str  # the spec's multi-model endpoint of the task models

    @property
    def spec_path(self) -> pathlib.Path:
        return self.root / "spec.yaml"

    @property
    def work(self) -> pathlib.Path:
        return self.root / "work"

    def manifest(self):
        return load_manifest(self.root / "assets" / "manifest.json")

    def tarball(self, model: str) -> pathlib.Path:
        manifest = self.manifest()
        (artifact,) = [a for a in manifest.endpoints[self.endpoint].artifacts if model in a.models]
        return manifest.artifact_path(artifact)

    def target(self, model: str) -> str:
        """The model's TargetModel on the multi-model endpoint, without .tar.gz."""
        return self.tarball(model).name.removesuffix(".tar.gz")


def build(root: pathlib.Path, spec: str, endpoint: str, save: Callable[[pathlib.Path], None]) -> Built:
    """``save(root)`` writes the checkpoints, then `tritonsm build` builds ``spec`` in ``root``."""
    save(root)
    (root / "spec.yaml").write_text(spec)
    assert tritonsm_main(["build", "--spec", str(root / "spec.yaml"), "--out", str(root / "assets"),
                          "--work-dir", str(root / "work")]) == 0
    return Built(root, endpoint)


@contextlib.contextmanager
def served(built: Built, models: tuple[str, ...], runtime_name: str, logs: pathlib.Path,
           triton_version: str = DEFAULT_TRITON_VERSION) -> Iterator[LocalRuntime]:
    """The endpoint as `tritonsm serve` runs it: the real Triton server behind the local SageMaker Runtime; the CPU
    stand-ins run ``triton_version``'s runtimes (the spec's, as `tritonsm serve <endpoint>` passes it)."""
    mme = MultiModelEndpoint([built.tarball(m) for m in models], log_file=logs / "mme.log", cpu_stand_in=True,
                             triton_version=triton_version)
    with LocalRuntime([NamedEndpoint(runtime_name, EndpointKind.MULTI_MODEL, mme)]) as runtime:
        yield runtime


def chain(built: Built, name: str, tmp: pathlib.Path) -> task_check.Chain:
    """The ensemble ``name``'s chain over copies of its built steps."""
    spec = load_spec(built.spec_path)
    manifest = built.manifest()
    steps = [s.model for s in spec.models[name].ensemble.steps]
    dirs = []
    for step in steps:
        source = built.work / "models" / f"{step}-{manifest.models[step].build_hash[:16]}" / step
        dirs.append(pathlib.Path(shutil.copytree(source, tmp / step)))
    model_step = spec.models[steps[1]]
    return task_check.Chain(name, spec.models[name].task, model_step, manifest.models[steps[1]], dirs,
                            built.root / model_step.weights, spec.triton_version)

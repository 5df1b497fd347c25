"""Infrastructure tests: synthesize the real app wiring with fixture manifests (no AWS, torch or GPU).

Synthesized apps are shared per test module (jsii round trips dominate the run time).
"""
from __future__ import annotations

import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
SPECS = FIXTURES / "specs"
for path in (ROOT, FIXTURES):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import stacks  # noqa: E402,F401  (points jsii at the venv's pinned Node before aws_cdk loads)

from shared_assembly import Assembly, every_assembly as every_assembly_of  # noqa: E402
from synth_helpers import SPECS, Synth, synth_spec  # noqa: E402,F401


@pytest.fixture(scope="session")
def default_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The default spec (triton.yaml) with a fabricated build: the app as `cdk synth` builds it."""
    return synth_spec(ROOT / "triton.yaml", tmp_path_factory.mktemp("default"))


@pytest.fixture(scope="session")
def variety_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """A test spec with the features the default spec leaves out (multi-GPU, CPU, VPC, China, agnostic)."""
    return synth_spec(SPECS / "variety.yaml", tmp_path_factory.mktemp("variety"))


@pytest.fixture(scope="session")
def every_assembly(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> dict[str, Assembly]:
    """The default spec, every example and every test spec, synthesized once for the whole run (all xdist
    workers: the run's shared temporary folder), by name: what a guard that must find nothing runs over."""
    base = tmp_path_factory.getbasetemp()
    return every_assembly_of(base if worker_id == "master" else base.parent)

"""Infrastructure tests: synthesize the real app wiring with fixture manifests (no AWS, torch or GPU).

Synthesized apps are shared per test module (jsii round trips dominate the run time).
"""
from __future__ import annotations

import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
SPECS = FIXTURES / "specs"
# jsii runs aws-cdk-lib in Node: use the pinned Node of the venv (the system one is end-of-life).
_NODE = pathlib.Path(sys.executable).with_name("node")
if _NODE.exists():
    os.environ.setdefault("JSII_NODE", str(_NODE))
for path in (ROOT, FIXTURES):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from synth_helpers import SPECS, Synth, synth_spec  # noqa: E402,F401


@pytest.fixture(scope="session")
def default_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The default spec (triton.yaml) with a fabricated build: the app as `cdk synth` builds it."""
    return synth_spec(ROOT / "triton.yaml", tmp_path_factory.mktemp("default"))


@pytest.fixture(scope="session")
def example_synths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Synth]:
    """Every spec of examples/, each with a fabricated build, by file stem."""
    return {path.stem: synth_spec(path, tmp_path_factory.mktemp(path.stem))
            for path in sorted((ROOT / "examples").glob("*.yaml"))}


@pytest.fixture(scope="session")
def variety_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """A test spec with the features the default spec leaves out (multi-GPU, CPU, VPC, China, agnostic)."""
    return synth_spec(SPECS / "variety.yaml", tmp_path_factory.mktemp("variety"))


@pytest.fixture(scope="session")
def every_synth(default_synth: Synth, example_synths: dict[str, Synth], variety_synth: Synth,
                tmp_path_factory: pytest.TempPathFactory) -> dict[str, Synth]:
    """The default spec, every example and every test spec of fixtures/specs, by name: what a guard that must
    find nothing runs over (a new example or test spec is covered without a change here)."""
    specs = {f"specs/{path.stem}": variety_synth if path.stem == "variety" else
             synth_spec(path, tmp_path_factory.mktemp(path.stem)) for path in sorted(SPECS.glob("*.yaml"))}
    return {"triton.yaml": default_synth, **{f"examples/{k}": v for k, v in example_synths.items()}, **specs}

"""Helpers shared by the model_build tests (importable because conftest puts this folder on sys.path)."""
from __future__ import annotations

import pathlib
import textwrap

from deployment_spec import Spec, load_spec

HERE = pathlib.Path(__file__).resolve().parent
TINY_SPEC = HERE / "specs" / "tiny.yaml"

HEADER = """\
project: Test
triton_version: "{version}"
models:
{models}
endpoints:
{endpoints}
environments:
  dev: {{region: us-east-1}}
"""


def make_spec(folder: pathlib.Path, models: str, endpoints: str = "", version: str = "25.04") -> Spec:
    """Writes a spec into ``folder`` and loads it; default endpoint: an MME serving every model."""
    if not endpoints:
        names = [line.split(":")[0].strip() for line in textwrap.dedent(models).splitlines()
                 if line and not line.startswith(" ")]
        endpoints = f"""\
ep:
  kind: multi-model
  models: [{", ".join(names)}]
  instance_type: ml.g5.xlarge
"""
    text = HEADER.format(version=version, models=textwrap.indent(textwrap.dedent(models), "  "),
                         endpoints=textwrap.indent(textwrap.dedent(endpoints), "  "))
    path = folder / "spec.yaml"
    path.write_text(text)
    return load_spec(path)


def skip_on_a_plan_building_host() -> None:
    """For tests that run `tritonsm build` in a subprocess, where the real toolchain decides."""
    import pytest

    from model_build.backends.tensorrt import gpu

    if gpu.detect().usable:
        pytest.skip("this host builds TensorRT plans (GPU + Docker or trtexec): the no-GPU path is tested on CPU hosts")

"""Fixtures for model_build tests: tiny specs written on the fly, one shared tiny build."""
from __future__ import annotations

import pathlib
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
# mb_support (helpers) and user_recipes (spec recipes 'user_recipes:...') import from here.
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from mb_support import TINY_SPEC  # noqa: E402


NO_GPU = "no NVIDIA GPU (nvidia-smi not found)"


@pytest.fixture(scope="session")
def tiny_build(tmp_path_factory):
    """The tiny spec built once, as on a machine without GPU: (spec, out dir, work dir, report, log lines).

    The toolchain is pinned to "no GPU", so these tests hold on a GPU host too; tests/gpu/ builds real plans.
    """
    from deployment_spec import load_spec
    from model_build import build
    from model_build.backends.tensorrt import gpu

    root = tmp_path_factory.mktemp("tiny")
    spec = load_spec(TINY_SPEC)
    lines: list[str] = []
    with pytest.MonkeyPatch.context() as patch:
        if gpu.detect().usable:  # a CPU host already is what these tests describe
            patch.setattr(gpu, "detect", lambda: gpu.Toolchain(None, False, False, NO_GPU))
        report = build.run(spec, root / "assets", root / "work", log=lines.append)
    return spec, root / "assets", root / "work", report, lines



@pytest.fixture(scope="session")
def signed(tiny_build, tmp_path_factory):
    """The tiny build's cached models packed again, signed (nothing rebuilt: the work folder is shared)."""
    import dataclasses

    from deployment_spec.sections.signing import SigningSpec
    from model_build import build, signing
    from signed_support import Signed, key_pair

    spec, _, work, _, _ = tiny_build
    folder = tmp_path_factory.mktemp("signed")
    key, public = key_pair(folder, "team")
    other_key, other_public = key_pair(folder, "other")
    spec = dataclasses.replace(spec, signing=SigningSpec(public_key=str(public)))
    report = build.run(spec, folder / "assets", work, log=lambda line: None, signing_key=signing.SigningKey(key))
    assert report.exit_code() == 0 and not report.built  # every model came from the cache
    return Signed(spec, folder / "assets", work, key, public, other_key, other_public)

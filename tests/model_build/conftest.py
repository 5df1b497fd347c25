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


@pytest.fixture(scope="session")
def tiny_build(tmp_path_factory):
    """The tiny spec built once: (spec, out dir, work dir, report, log lines)."""
    from deployment_spec import load_spec
    from model_build import build

    root = tmp_path_factory.mktemp("tiny")
    spec = load_spec(TINY_SPEC)
    lines: list[str] = []
    report = build.run(spec, root / "assets", root / "work", log=lines.append)
    return spec, root / "assets", root / "work", report, lines

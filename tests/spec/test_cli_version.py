"""`tritonsm --version` names the installed distribution's version, the one pyproject.toml sets."""
from __future__ import annotations

import pathlib
import tomllib

import pytest

from tritonsm.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_version_is_the_projects(capsys) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"tritonsm {project['version']} ({project['name']})\n"

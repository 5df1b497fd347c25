"""Every example spec is whole on a fresh clone once `examples/make_checkpoints.py` made the checkpoints it names
(each example's header says so): `tritonsm validate` then notes no missing weights; without them it notes each
missing folder, which `tritonsm build` would refuse."""
from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest

from tritonsm.cli import main as tritonsm_main

ROOT = pathlib.Path(__file__).resolve().parents[1]
NAMING_A_CHECKPOINT = ("bert-classifier-candidate.yaml", "image-async-sme.yaml", "t5-streaming-sme.yaml")


@pytest.fixture(scope="module")
def examples(tmp_path_factory) -> pathlib.Path:
    folder = tmp_path_factory.mktemp("clone") / "examples"
    folder.mkdir()
    for spec in (ROOT / "examples").glob("*.yaml"):
        shutil.copy(spec, folder / spec.name)
    return folder


def _missing_weights(spec: pathlib.Path, capsys) -> list[str]:
    assert tritonsm_main(["validate", "--spec", str(spec)]) == 0
    return [line for line in capsys.readouterr().out.splitlines() if "does not exist; tritonsm build needs it" in line]


def test_without_the_checkpoints_validate_notes_each_missing_folder(examples, capsys):
    for name in NAMING_A_CHECKPOINT:
        notes = _missing_weights(examples / name, capsys)
        assert notes and all(f"{examples}/checkpoints/" in note for note in notes), name
        assert "examples/make_checkpoints.py" in (examples / name).read_text()   # the header says how to make it


def test_make_checkpoints_then_no_example_misses_its_weights(examples, capsys):
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "make_checkpoints.py"), "--out",
                           str(examples / "checkpoints")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    specs = sorted(examples.glob("*.yaml"))
    assert len(specs) >= 10
    for spec in specs:
        assert _missing_weights(spec, capsys) == [], spec.name
    again = subprocess.run([sys.executable, str(ROOT / "examples" / "make_checkpoints.py"), "--out",
                            str(examples / "checkpoints")], capture_output=True, text=True, timeout=600)
    assert again.stdout.count("exists, left as it is") == 4

"""Every example spec is whole on a fresh clone: `make examples` (scripts/build_examples.py) builds and synthesizes
each as its scenario page says, after `examples/make_checkpoints.py` made the checkpoints three of them name.

The whole run is ~16 minutes on 2 cores (RoBERTa-large and BERT-large at their real sizes; T5's execution
environment with torch for the image), too long for `make test`; its last result is recorded in
docs/howto/scenarios.md. Here, one run of the same script on a copy of examples/: the A/B-test example end to end
(its tiny checkpoints made, eight models built, every stage synthesized with cdk-nag and the account rules) and,
on a host without a GPU, the TensorRT example (built as far as this host can, its endpoint left out of the
synthesis: not a failure); then every example validated with the checkpoints made, and without them; and a planted
defect, which must fail the run and be named in the summary.
"""
from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest

from tritonsm.cli import main as tritonsm_main

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "build_examples.py"
MAKER = ROOT / "examples" / "make_checkpoints.py"
NAMING_A_CHECKPOINT = ("bert-classifier-candidate.yaml", "image-async-sme.yaml", "t5-streaming-sme.yaml")
GPU_HOST = shutil.which("nvidia-smi") is not None  # there tests/gpu builds the TensorRT plan; not here too


def _copy(into: pathlib.Path) -> pathlib.Path:
    into.mkdir(parents=True)
    for spec in (ROOT / "examples").glob("*.yaml"):
        shutil.copy(spec, into / spec.name)
    return into


def _run(examples: pathlib.Path, out: pathlib.Path, *names: str) -> subprocess.CompletedProcess:
    only = [arg for name in names for arg in ("--only", name)]
    return subprocess.run([sys.executable, str(SCRIPT), "--examples", str(examples), "--out", str(out), *only],
                          cwd=ROOT, capture_output=True, text=True, timeout=1200, stdin=subprocess.DEVNULL)


def _rows(out: pathlib.Path) -> dict[str, list[str]]:
    lines = (out / "summary.md").read_text().splitlines()[2:]
    return {cells[0]: cells[1:] for cells in ([c.strip() for c in line.strip("|").split("|")] for line in lines)}


@pytest.fixture(scope="module")
def made(module_tmp) -> tuple[pathlib.Path, pathlib.Path, subprocess.CompletedProcess]:
    """(the examples' copy with its checkpoints, the script's output folder, the run)."""
    root = module_tmp.mktemp("examples")
    examples = _copy(root / "examples")
    names = ["bert-classifier-candidate"] + ([] if GPU_HOST else ["tensorrt-bert-mme"])
    return examples, root / "out", _run(examples, root / "out", *names)


def test_an_example_builds_and_every_stage_synthesizes(made):
    _, out, done = made
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    row = _rows(out)["bert-classifier-candidate"]
    assert row[0] == "8" and row[2:5] == ["-", "-", "3"] and row[-1] == "ok", row
    assert sorted(p.name for p in (out / "bert-classifier-candidate" / "cdk.out").glob("assembly-*")) == [
        "assembly-SentimentDev", "assembly-SentimentProd", "assembly-SentimentStaging"]
    assert (out / "bert-classifier-candidate" / "assets" / "manifest.json").is_file()


@pytest.mark.skipif(GPU_HOST, reason="a GPU host builds the TensorRT plan: tests/gpu covers that build")
def test_a_tensorrt_example_is_built_as_far_as_this_host_can_and_its_endpoint_left_out(made):
    _, out, done = made
    row = _rows(out)["tensorrt-bert-mme"]
    assert row[2].startswith("model bert: a TensorRT plan needs an NVIDIA GPU and a Docker engine") and \
        row[3:5] == ["bert-mme", "0"] and row[-1] == "ok", row


def _missing_weights(spec: pathlib.Path, capsys) -> list[str]:
    assert tritonsm_main(["validate", "--spec", str(spec)]) == 0
    return [line for line in capsys.readouterr().out.splitlines() if "does not exist; tritonsm build needs it" in line]


def test_with_the_checkpoints_made_no_example_misses_its_weights(made, capsys):
    examples, _, _ = made
    specs = sorted(examples.glob("*.yaml"))
    assert len(specs) >= 10
    for spec in specs:
        assert _missing_weights(spec, capsys) == [], spec.name
    again = subprocess.run([sys.executable, str(MAKER), "--out", str(examples / "checkpoints")],
                           capture_output=True, text=True, timeout=600)
    assert again.stdout.count("exists, left as it is") == 4


def test_without_the_checkpoints_validate_notes_each_missing_folder(tmp_path, capsys):
    examples = _copy(tmp_path / "examples")
    for name in NAMING_A_CHECKPOINT:
        notes = _missing_weights(examples / name, capsys)
        assert notes and all(f"{examples}/checkpoints/" in note for note in notes), name
        assert "examples/make_checkpoints.py" in (examples / name).read_text()   # the header says how to make it


def test_a_planted_defect_fails_the_run_and_is_named(tmp_path):
    examples = _copy(tmp_path / "examples")
    spec = examples / "bert-classifier-candidate.yaml"
    spec.write_text(spec.read_text().replace("max_batch_size: 16", "max_batch_size: 0", 1))
    done = _run(examples, tmp_path / "out", "bert-classifier-candidate")
    assert done.returncode == 1
    row = _rows(tmp_path / "out")["bert-classifier-candidate"]
    assert row[-1] == (
        f"tritonsm build exited 2: error: {spec}: 1 problem // - models.sentiment.max_batch_size: got 0; allowed: 1 "
        "or more with task (the steps batch rows; a generating task decodes this many sequences together); fix: set "
        "max_batch_size to the largest batch you serve "
        f"(whole log: {tmp_path}/out/bert-classifier-candidate/build.log)")

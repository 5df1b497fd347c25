"""`make examples` (scripts/build_examples.py): every example spec built and synthesized as its scenario page says.

The whole run is ~20 minutes on 2 cores (RoBERTa-large and BERT-large at their real sizes; T5's execution
environment with torch for the image is 2.8 GB), too long for `make test`; its last result is recorded in
docs/howto/scenarios.md. Here, the same script on a copy of examples/: the A/B-test example end to end (its tiny
checkpoints made, eight models built, every stage synthesized with cdk-nag and the account rules), the TensorRT
example on a host without a GPU (built as far as this host can, its endpoint left out of the synthesis: not a
failure), and a planted defect, which must fail the run and be named in the summary.
"""
from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "build_examples.py"


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
def no_gpu() -> None:
    if shutil.which("nvidia-smi"):
        pytest.skip("a GPU host builds the TensorRT plan itself: tests/gpu covers that build")


def test_an_example_builds_and_every_stage_synthesizes(tmp_path):
    done = _run(_copy(tmp_path / "examples"), tmp_path / "out", "bert-classifier-candidate")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    row = _rows(tmp_path / "out")["bert-classifier-candidate"]
    assert row[0] == "8" and row[2:5] == ["-", "-", "3"] and row[-1] == "ok", row
    assembly = tmp_path / "out" / "bert-classifier-candidate" / "cdk.out"
    assert sorted(p.name for p in assembly.glob("assembly-*")) == [
        "assembly-SentimentDev", "assembly-SentimentProd", "assembly-SentimentStaging"]
    manifest = tmp_path / "out" / "bert-classifier-candidate" / "assets" / "manifest.json"
    assert manifest.is_file() and "make_checkpoints" not in done.stderr


def test_a_tensorrt_example_is_built_as_far_as_this_host_can_and_its_endpoint_left_out(tmp_path, no_gpu):
    done = _run(_copy(tmp_path / "examples"), tmp_path / "out", "tensorrt-bert-mme")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    row = _rows(tmp_path / "out")["tensorrt-bert-mme"]
    assert row[2].startswith("model bert: a TensorRT plan needs an NVIDIA GPU and a Docker engine") and \
        row[3:5] == ["bert-mme", "0"] and row[-1] == "ok", row


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

"""The documentation's pictures (scripts/draw_docs_figures.py) show what the code makes: the stage picture drawn
again from this run's synthesized default spec has the committed picture's labels (stack by stack, each resource type
and count), and a planted change of one count is told apart."""
from __future__ import annotations

import collections
import importlib.util
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]   # tests/infra: every_assembly is its fixture
STATIC = ROOT / "docs" / "_static"


def _script():
    spec = importlib.util.spec_from_file_location("draw_docs_figures", ROOT / "scripts" / "draw_docs_figures.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _labels(svg: pathlib.Path) -> list[str]:
    return re.findall(r"<text[^>]*>([^<]+)</text>", svg.read_text())


def test_the_stage_picture_is_the_synthesized_default_specs_prod_stage(every_assembly, tmp_path):
    draw = _script()
    default = every_assembly["triton.yaml"]
    stacks = draw.stage_resources(default.directory)
    draw.draw_stage(tmp_path / "stage.svg", stacks)
    labels = _labels(tmp_path / "stage.svg")
    assert len(labels) >= 30 and "1 × AWS::SageMaker::Endpoint" in labels
    assert labels == _labels(STATIC / "stage-resources.svg"), "run scripts/draw_docs_figures.py after `make`"


def test_a_changed_count_changes_the_labels(every_assembly, tmp_path):
    draw = _script()
    stacks = draw.stage_resources(every_assembly["triton.yaml"].directory)
    first = next(iter(stacks))
    stacks[first] = collections.Counter({**stacks[first], "AWS::SNS::Topic": 9})
    draw.draw_stage(tmp_path / "changed.svg", stacks)
    assert _labels(tmp_path / "changed.svg") != _labels(STATIC / "stage-resources.svg")


def test_the_data_flow_picture_names_each_stage_of_the_path():
    labels = _labels(STATIC / "data-flow.svg")
    for step in ("triton.yaml", "tritonsm build", "assets/", "cdk synth", "cdk deploy", "SageMaker endpoint",
                 "tritonsm serve"):
        assert step in labels, step

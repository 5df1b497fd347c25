"""What the variant tests share: a spec with an A/B endpoint and a shadowed one over two tiny Python-backend models
that answer differently (``times2`` doubles its input, ``times3`` triples it), built by `tritonsm build` (well under
a second: no recipe, no execution environment), and the capture files the variants write.
"""
from __future__ import annotations

import json
import pathlib
from typing import Iterable

import triton_model_fixtures as models
from tritonsm.cli import main as tritonsm_main

SPEC = """\
project: Tests
triton_version: "25.04"
models:
  times2: {backend: python, source: {python_dir: times2_model}, max_batch_size: 8}
  times3: {backend: python, source: {python_dir: times3_model}, max_batch_size: 8}
endpoints:
  ab:
    kind: single-model
    models: [times2]
    instance_type: ml.c5.xlarge
    variants:
      - {name: A, weight: 80}
      - {name: B, model: times3, weight: 20}
  shadowed:
    kind: single-model
    models: [times2]
    instance_type: ml.c5.xlarge
    variant_name: Prod
    shadow: {model: times3, sampling_percent: 50}
    data_capture: {sampling_percent: 20}
environments:
  dev: {region: eu-west-1, removal_policy: destroy}
"""
AB, SHADOWED = "Tests-dev-ab", "Tests-dev-shadowed"   # <project>-<environment>-<endpoint>
# The manifest entries `tritonsm build` writes: the variants with a model of their own are <endpoint>.<variant>.
BUILDS = ("ab", "ab.B", "shadowed", "shadowed.Shadow")


def variants_spec(root: pathlib.Path, builds: Iterable[str] = BUILDS) -> tuple[pathlib.Path, pathlib.Path]:
    """``SPEC`` built under ``root`` by `tritonsm build`; the manifest then keeps only the entries ``builds``."""
    (root / "spec.yaml").write_text(SPEC)
    for name, factor in (("times2", 2), ("times3", 3)):
        folder = root / f"{name}_model"
        folder.mkdir()
        (folder / "config.pbtxt").write_text(models.AFFINE_CONFIG.format(input="INPUT", output="OUTPUT",
                                                                         factor=factor, offset=0))
        (folder / "model.py").write_text(models.AFFINE_MODEL)
    assets = root / "assets"
    assert tritonsm_main(["build", "--spec", str(root / "spec.yaml"), "--out", str(assets)]) == 0
    manifest = assets / "manifest.json"
    raw = json.loads(manifest.read_text())
    assert sorted(raw["endpoints"]) == sorted(BUILDS)
    raw["endpoints"] = {name: entry for name, entry in raw["endpoints"].items() if name in builds}
    manifest.write_text(json.dumps(raw))
    return root / "spec.yaml", manifest


def body(values: list[float]) -> str:
    return json.dumps({"inputs": [{"name": "INPUT", "shape": [1, len(values)], "datatype": "FP32", "data": values}]})


def records(root: pathlib.Path, endpoint: str, variant: str) -> list[dict]:
    """Every capture record of one variant, from every file of every hour folder."""
    found = []
    for path in sorted((root / endpoint / variant).glob("*/*/*/*/*.jsonl")):
        found += [json.loads(line) for line in path.read_text().splitlines()]
    return found

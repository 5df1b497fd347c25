"""The memory a build needs, known before anything is built, and the refusal when the machine lacks it."""
from __future__ import annotations

import json
import re
import struct
import subprocess
import sys

from model_build import memory_budget
from model_build.memory_budget import Weights

from mb_support import HERE, make_spec

ROOT = HERE.parents[1]


def _header_only_safetensors(path, tensors: dict) -> None:
    """A safetensors file with only its JSON header: the budget reads the header, never the data."""
    header = json.dumps(tensors).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header)


def test_recipe_weights_are_the_architecture_parameter_count_times_four(tmp_path):
    spec = make_spec(tmp_path, """\
        text:
          backend: onnxruntime
          source: {recipe: bert-base}
          max_batch_size: 4
        vision:
          backend: onnxruntime
          source: {recipe: resnet50}
          max_batch_size: 4
        """)
    # BertForSequenceClassification (2 labels) and ResNet-50 (1000 classes): their published parameter counts.
    assert memory_budget.weights_of(spec, spec.models["text"]) == Weights(
        "text", 4 * 109_483_778, "recipe bert-base: 109,483,778 parameters from its architecture config")
    assert memory_budget.largest(spec, spec.models.values()).model == "text"
    assert memory_budget.weights_of(spec, spec.models["vision"]).bytes == 4 * 25_557_032


def test_a_weights_directory_counts_float_tensors_as_fp32_and_other_files_by_size(tmp_path):
    weights = tmp_path / "ckpt"
    weights.mkdir()
    # 1,000 fp16 elements count as 4,000 fp32 bytes; 10 int64 ids stay 80 bytes.
    _header_only_safetensors(weights / "model.safetensors", {
        "__metadata__": {"format": "pt"}, "w": {"dtype": "F16", "shape": [10, 100], "data_offsets": [0, 2000]},
        "ids": {"dtype": "I64", "shape": [10], "data_offsets": [2000, 2080]}})
    (weights / "extra.bin").write_bytes(b"\0" * 500)
    (weights / "config.json").write_text("{}")  # not a weights file
    spec = make_spec(tmp_path, """\
        text:
          backend: onnxruntime
          source: {recipe: bert-base}
          weights: ckpt
          max_batch_size: 4
        """)
    assert memory_budget.weights_of(spec, spec.models["text"]) == Weights(
        "text", 4_000 + 80 + 500, "weights directory ckpt: weight files")


def test_an_onnx_source_counts_its_file_and_external_data(tmp_path):
    (tmp_path / "m.onnx").write_bytes(b"\0" * 300)
    (tmp_path / "m.onnx.data").write_bytes(b"\0" * 700)
    spec = make_spec(tmp_path, """\
        plain:
          backend: onnxruntime
          source: {onnx: m.onnx}
          max_batch_size: 4
        tokenizer:
          backend: python
          source: {recipe: text-preprocess}
          max_batch_size: 4
        """)
    assert memory_budget.weights_of(spec, spec.models["plain"]) == Weights("plain", 1_000, "onnx file size")
    assert memory_budget.weights_of(spec, spec.models["tokenizer"]) is None


def test_refusal_names_the_model_and_the_memory_it_needs():
    weights = Weights("roberta", 1_421_447_176, "recipe roberta-large: 355,361,794 parameters from its architecture config")
    assert memory_budget.need_bytes(weights.bytes) == 5_764_341_528
    assert memory_budget.refusal(weights, 5_764_341_528) is None
    assert memory_budget.refusal(weights, 3_100_000_000) == (
        "model roberta: building it needs about 5.8 GB of memory (3 x its 1.42 GB of fp32 weights + 1.5 GB; recipe "
        "roberta-large: 355,361,794 parameters from its architecture config), but this machine has 3.1 GB "
        "available; stop other jobs or build on a machine with more memory, build the other models with --model "
        "NAME, or pass --no-memory-check to try anyway")


def test_build_refuses_before_anything_is_built(tmp_path):
    weights = tmp_path / "huge"
    weights.mkdir()
    # 10^13 fp32 elements (40 TB): more than any machine running this test has.
    _header_only_safetensors(weights / "model.safetensors",
                             {"w": {"dtype": "F32", "shape": [10_000_000, 1_000_000], "data_offsets": [0, 0]}})
    spec = make_spec(tmp_path, """\
        huge:
          backend: onnxruntime
          source: {recipe: bert-base}
          weights: huge
          max_batch_size: 4
        """)
    cmd = [sys.executable, "-m", "tritonsm", "build", "--spec", str(spec.path), "--out", str(tmp_path / "assets"),
           "--work-dir", str(tmp_path / "work")]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.fullmatch(re.escape(
        "error: model huge: building it needs about 120001.5 GB of memory (3 x its 40000.00 GB of fp32 weights + "
        "1.5 GB; weights directory huge: weight files), but this machine has ") + r"\d+\.\d" + re.escape(
        " GB available; stop other jobs or build on a machine with more memory, build the other models with "
        "--model NAME, or pass --no-memory-check to try anyway\n"), proc.stderr), proc.stderr
    assert not (tmp_path / "work" / "models").exists() and not (tmp_path / "assets" / "manifest.json").exists()

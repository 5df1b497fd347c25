"""A user's own ONNX and TorchScript files: run on the spec's sizes where they will be served, and
compared with the same file in this machine's runtime; refused, naming the file, the field, the
runtime and the case, when they cannot serve.

The files are written here the way a user writes them (torch.onnx.export, torch.jit.script +
torch.jit.save, onnx.helper), from tiny modules, so the module builds in seconds.
"""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
import torch

from deployment_spec.builds.manifest import TensorSpec, load_manifest
from model_build import build
from model_build.verification.file_check import this_machines
from mb_support import make_spec

THIS_MACHINE = this_machines("onnxruntime").version


class TwoHeads(torch.nn.Module):
    """A small CNN with two outputs (class logits and a box)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.classes = torch.nn.Linear(4, 5)
        self.box = torch.nn.Linear(4, 2)

    def forward(self, image: torch.Tensor):
        features = torch.relu(self.conv(image)).mean((2, 3))
        return self.classes(features), self.box(features)


class Pooled(torch.nn.Module):
    """Token embeddings averaged over the tokens the mask keeps (or, ``honour=False``, over all of them)."""

    def __init__(self, honour: bool) -> None:
        super().__init__()
        self.honour = honour
        self.embed = torch.nn.Embedding(100, 8)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        tokens = self.embed(input_ids)
        if not self.honour:
            return self.head(tokens.mean(1))
        keep = attention_mask.unsqueeze(-1).to(tokens.dtype)
        return self.head((tokens * keep).sum(1) / keep.sum(1).clamp(min=1.0))


class Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def _export(module, args, path, inputs, outputs, axes) -> None:
    torch.manual_seed(0)
    torch.onnx.export(module.eval(), args, str(path), input_names=inputs, output_names=outputs,
                      dynamic_axes=axes, opset_version=18, dynamo=True)


def _build(tmp_path, models: str, version: str = "25.09"):
    tmp_path.mkdir(parents=True, exist_ok=True)
    spec = make_spec(tmp_path, models, version=version)
    lines: list[str] = []
    report = build.run(spec, tmp_path / "assets", tmp_path / "work", log=lines.append)
    return report, lines


def _failure(tmp_path, models: str, version: str = "25.09") -> str:
    report, _ = _build(tmp_path, models, version)
    assert report.exit_code() == 1
    (message,) = report.failed.values()
    return message


def test_an_onnx_file_runs_in_the_images_runtime_and_this_machines(tmp_path):
    torch.manual_seed(0)
    _export(TwoHeads(), (torch.randn(2, 3, 16, 16),), tmp_path / "detector.onnx", ["image"], ["classes", "box"],
            {"image": {0: "batch"}, "classes": {0: "batch"}, "box": {0: "batch"}})
    report, lines = _build(tmp_path, """\
det: {backend: onnxruntime, source: {onnx: detector.onnx}, max_batch_size: 8,
      dynamic_batching: {preferred_batch_sizes: [4]}}
""")
    assert report.exit_code() == 0, report.failed
    entry = load_manifest(tmp_path / "assets" / "manifest.json").models["det"]
    check = entry.verification
    # Batch 1, the preferred size and max_batch_size, in Triton 25.09's ONNX Runtime and in this machine's.
    assert {k: getattr(check, k) for k in ("ran", "triton_version", "runtime", "version", "device", "cases", "graph")} == {
        "ran": True, "triton_version": "25.09", "runtime": "onnxruntime", "version": "1.23.0", "device": "cpu",
        "cases": 3, "graph": "file as given"}
    assert check.details["reference"] == {"runtime": "onnxruntime", "version": THIS_MACHINE, "device": "cpu",
                                  "what": "the same file in this machine's runtime"}
    assert entry.parity["max_abs_error"] == check.max_abs_error < 1e-5
    assert entry.outputs == (TensorSpec("classes", "TYPE_FP32", (5,)), TensorSpec("box", "TYPE_FP32", (2,)))
    assert (f"  det: detector.onnx answers in ONNX Runtime 1.23.0 (Triton 25.09's) as in ONNX Runtime {THIS_MACHINE} "
            f"(this machine's) on 3 cases (max abs error {check.max_abs_error:.2e})") in lines
    # torch.onnx.export kept the conv weights in detector.onnx.data; the build ships one self-contained file.
    assert (tmp_path / "detector.onnx.data").is_file()
    shipped = next((tmp_path / "work").rglob("det/1/model.onnx"))
    assert [p.name for p in shipped.parent.iterdir()] == ["model.onnx"]
    assert all(t.data_location == onnx.TensorProto.DEFAULT for t in onnx.load(str(shipped)).graph.initializer)


def test_an_onnx_file_newer_than_the_images_runtime_is_refused_with_its_reason(tmp_path):
    # Swish entered the ONNX standard at opset 24; ONNX Runtime 1.23.0 (Triton 25.09) reads up to opset 23.
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 4])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 4])
    graph = onnx.helper.make_graph([onnx.helper.make_node("Swish", ["x"], ["y"])], "swish", [x], [y])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 24)], ir_version=10)
    onnx.save(model, str(tmp_path / "swish.onnx"))
    message = _failure(tmp_path, "m: {backend: onnxruntime, source: {onnx: swish.onnx}}\n")
    file = tmp_path / "swish.onnx"
    assert message == (
        f"models.m.source.onnx: {file} does not run in ONNX Runtime 1.23.0 (Triton 25.09's): load failed: Fail: "
        f"[ONNXRuntimeError] : 1 : FAIL : Load model from {file} failed: ONNX Runtime only *guarantees* support for "
        "models stamped with official released onnx opset versions. Opset 24 is under development and support for "
        "this is limited. The operator schemas and or other functionality may change before next ONNX release and "
        "in this case ONNX Runtime will not guarantee backward compatibility. Current official support for domain "
        "ai.onnx is till opset 23.; export it with an opset and operators that release supports, or pick a newer "
        "triton_version")
    # The same file serves where the image's runtime reads opset 24 (Triton 26.05: ONNX Runtime 1.24.4).
    report, _ = _build(tmp_path / "newer", "m: {backend: onnxruntime, source: {onnx: ../swish.onnx}}\n", "26.05")
    assert report.exit_code() == 0, report.failed


def test_the_fused_bert_mask_defect_given_as_a_file_is_refused_for_triton_2504(tmp_path):
    # The graph of the serving-fidelity defect, brought as a user's file: fine in this machine's runtime,
    # it ignores the attention mask in ONNX Runtime 1.21.0 (Triton 25.04), which the invariance checks catch.
    from model_build.onnx_graph import export as onnx_export
    from model_build.backends.onnxruntime import optimize as ort_optimize
    from model_build.recipes import load_exportable

    spec = make_spec(tmp_path, "b: {backend: onnxruntime, source: {recipe: tiny-bert}, sequence_length: 32}\n")
    made = load_exportable(spec.models["b"], tmp_path)
    onnx_export.export("b", made, tmp_path / "exported.onnx")
    ort_optimize.optimize_for_ort(tmp_path / "exported.onnx", tmp_path / "fused.onnx",
                                  **ort_optimize.transformer_hints(made.module))
    models = "m: {backend: onnxruntime, source: {onnx: fused.onnx}, sequence_length: 32, max_batch_size: 4}\n"
    message = _failure(tmp_path / "old", models.replace("fused.onnx", "../fused.onnx"), "25.04")
    assert message.startswith(f"models.m.source.onnx: {tmp_path / 'fused.onnx'} in ONNX Runtime 1.21.0 (Triton "
                              "25.04's): it ignores the attention mask (changing only the token ids at masked "
                              "positions moves logits by ")
    assert message.endswith("); pick a triton_version whose runtime runs it right, or export the file without the "
                            "operators that release gets wrong (e.g. without ONNX Runtime's transformer fusions)")
    report, _ = _build(tmp_path / "new", models.replace("fused.onnx", "../fused.onnx"), "25.09")
    assert report.exit_code() == 0, report.failed
    check = load_manifest(tmp_path / "new" / "assets" / "manifest.json").models["m"].verification
    # batch 1 and 4, each full and short, masked tokens changed, two rows alone: all exact in 1.23.0.
    assert (check.cases, check.invariance_error) == (7, 0.0)


def test_an_attention_mask_input_gets_the_invariance_checks(tmp_path):
    ids, mask = torch.randint(0, 100, (2, 12)), torch.ones(2, 12, dtype=torch.int64)
    axes = {"input_ids": {0: "batch", 1: "tokens"}, "attention_mask": {0: "batch", 1: "tokens"}, "pooled": {0: "batch"}}
    for honour in (True, False):
        _export(Pooled(honour), (ids, mask), tmp_path / f"pooled-{honour}.onnx", ["input_ids", "attention_mask"],
                ["pooled"], axes)
    models = "m: {backend: onnxruntime, source: {onnx: pooled-True.onnx}, sequence_length: 16, max_batch_size: 2}\n"
    report, _ = _build(tmp_path / "honours", models.replace("pooled-", "../pooled-"))
    assert report.exit_code() == 0, report.failed
    check = load_manifest(tmp_path / "honours" / "assets" / "manifest.json").models["m"].verification
    # batch 1 and 2, each at 16 and 8 tokens, masked tokens changed, the padded row alone.
    assert check.cases == 6 and check.invariance_error < 1e-6
    message = _failure(tmp_path / "ignores", models.replace("pooled-True", "../pooled-False"))
    assert message.startswith(f"models.m.source.onnx: {tmp_path / 'pooled-False.onnx'} in ONNX Runtime 1.23.0 "
                              "(Triton 25.09's): it ignores the attention mask (changing only the token ids at "
                              "masked positions moves pooled by ")


def test_declared_tensors_are_checked_against_the_graph(tmp_path):
    _export(Mlp(), (torch.randn(2, 16),), tmp_path / "mlp.onnx", ["x"], ["y"], {"x": {0: "b"}, "y": {0: "b"}})
    message = _failure(tmp_path, """\
m: {backend: onnxruntime, source: {onnx: mlp.onnx},
    inputs: [{name: x, data_type: TYPE_FP16, dims: [16]}], outputs: [{name: y, data_type: TYPE_FP32, dims: [8]}]}
""")
    assert message == (f"models.m.inputs[0].data_type: TYPE_FP16, but {tmp_path / 'mlp.onnx'} has TYPE_FP32 for x; "
                       "declare TYPE_FP32")


SCRIPTED_IO = """\
    inputs: [{name: INPUT__0, data_type: TYPE_FP32, dims: [3, 16, 16]}]
    outputs: [{name: OUTPUT__0, data_type: TYPE_FP32, dims: [%s]}, {name: OUTPUT__1, data_type: TYPE_FP32, dims: [2]}]
"""


def test_a_scripted_file_with_spec_tensors_runs_on_the_spec_sizes(tmp_path):
    torch.jit.save(torch.jit.script(TwoHeads().eval()), str(tmp_path / "scored.pt"))
    report, _ = _build(tmp_path, "m:\n    backend: pytorch\n    source: {torchscript: scored.pt}\n"
                                 "    max_batch_size: 4\n" + SCRIPTED_IO % 5)
    assert report.exit_code() == 0, report.failed
    entry = load_manifest(tmp_path / "assets" / "manifest.json").models["m"]
    assert [t.name for t in entry.inputs + entry.outputs] == ["INPUT__0", "OUTPUT__0", "OUTPUT__1"]
    check = entry.verification
    assert (check.ran, check.cases, check.details["checked_in"]["runtime"], check.version) == (
        False, 2, "torch", "2.9.0")  # ran in this machine's torch; Triton 25.09's libtorch is opt-in


def test_a_wrongly_declared_output_names_the_field_and_the_shape_returned(tmp_path):
    torch.jit.save(torch.jit.script(TwoHeads().eval()), str(tmp_path / "scored.pt"))
    message = _failure(tmp_path, "m:\n    backend: pytorch\n    source: {torchscript: scored.pt}\n"
                                 "    max_batch_size: 4\n" + SCRIPTED_IO % 10)
    assert message.startswith(f"models.m.outputs[0] OUTPUT__0 is declared TYPE_FP32 with dims [10], but "
                              f"{tmp_path / 'scored.pt'} returns TYPE_FP32 of shape [1, 5] on case batch 1 in torch ")
    assert message.endswith("(this machine's, CPU); declare data_type TYPE_FP32 and dims [5] (-1 where the size "
                            "varies)")


def test_samples_drive_the_int8_gate(tmp_path):
    _export(Mlp(), (torch.randn(2, 16),), tmp_path / "mlp.onnx", ["x"], ["y"], {"x": {0: "b"}, "y": {0: "b"}})
    rows = np.random.default_rng(0).normal(size=(12, 16)).astype(np.float32)
    np.savez(tmp_path / "samples.npz", x=rows)
    report, lines = _build(tmp_path, """\
q: {backend: onnxruntime, source: {onnx: mlp.onnx}, samples: samples.npz, max_batch_size: 4, precision: int8}
strict: {backend: onnxruntime, source: {onnx: mlp.onnx}, samples: samples.npz, max_batch_size: 4, precision: int8,
         int8: {min_cosine_similarity: 0.9999999}}
""")
    assert report.exit_code() == 0, report.failed
    manifest = load_manifest(tmp_path / "assets" / "manifest.json")
    shipped, refused = manifest.models["q"].verification, manifest.models["strict"].verification
    # The gate measured int8 against fp32 on the user's 12 rows, in Triton 25.09's ONNX Runtime.
    assert shipped.details["int8"]["inputs"] == "the samples in samples.npz (12 rows)" and shipped.details["int8"]["rows"] == 12
    assert shipped.details["int8"]["shipped"] is True and shipped.details["int8"]["min_cosine_similarity"] >= 0.98
    graph = onnx.load(str(next((tmp_path / "work").rglob("q/1/model.onnx")))).graph
    assert {"DynamicQuantizeLinear", "MatMulInteger"} <= {node.op_type for node in graph.node}
    assert refused.details["int8"]["shipped"] is False
    assert refused.details["int8"]["refused"].startswith("on the samples in samples.npz (12 rows), against the fp32 graph, "
                                                 "its lowest cosine similarity ")
    # The samples are a parity case of their own too (the first max_batch_size rows).
    assert shipped.cases == 3  # batch 1, batch 4, the samples' first 4 rows


def test_samples_that_do_not_fit_the_inputs_are_named(tmp_path):
    _export(Mlp(), (torch.randn(2, 16),), tmp_path / "mlp.onnx", ["x"], ["y"], {"x": {0: "b"}, "y": {0: "b"}})
    np.savez(tmp_path / "samples.npz", features=np.zeros((3, 16), np.float32))
    message = _failure(tmp_path, "m: {backend: onnxruntime, source: {onnx: mlp.onnx}, samples: samples.npz}\n")
    assert message == (f"models.m.samples: {tmp_path / 'samples.npz'} holds arrays ['features'], the model's inputs are "
                       "['x'] (missing: ['x']; not an input: ['features']); name each array like the input it feeds")
    np.savez(tmp_path / "samples.npz", x=np.zeros((3, 16), np.float64))
    message = _failure(tmp_path / "again", "m: {backend: onnxruntime, source: {onnx: ../mlp.onnx}, "
                                           "samples: ../samples.npz}\n")
    assert message == (f"models.m.samples: {tmp_path / 'samples.npz'}'s array x is float64, the input is TYPE_FP32; "
                       "save it as float32 (array.astype(numpy.float32))")


def test_a_triton_io_json_file_still_needs_no_spec_tensors(tmp_path):
    io = {"inputs": [{"name": "INPUT__0", "data_type": "TYPE_FP32", "dims": [3, 16, 16]}],
          "outputs": [{"name": "OUTPUT__0", "data_type": "TYPE_FP32", "dims": [5]},
                      {"name": "OUTPUT__1", "data_type": "TYPE_FP32", "dims": [2]}]}
    torch.jit.save(torch.jit.script(TwoHeads().eval()), str(tmp_path / "scored.pt"),
                   _extra_files={"triton_io.json": json.dumps(io)})
    report, _ = _build(tmp_path, "m: {backend: pytorch, source: {torchscript: scored.pt}, max_batch_size: 2}\n")
    assert report.exit_code() == 0, report.failed


def test_other_samples_rebuild_the_model(tmp_path):
    # The samples decide the checks and the int8 verdict, so their bytes are part of the build hash.
    from model_build import hashing

    _export(Mlp(), (torch.randn(2, 16),), tmp_path / "mlp.onnx", ["x"], ["y"], {"x": {0: "b"}, "y": {0: "b"}})
    spec = make_spec(tmp_path, "m: {backend: onnxruntime, source: {onnx: mlp.onnx}, samples: samples.npz}\n")
    hashes = []
    for value in (0.0, 1.0):
        np.savez(tmp_path / "samples.npz", x=np.full((3, 16), value, np.float32))
        hasher = hashing.FileHasher(tmp_path / "file-hashes.json")
        hashes.append(build.build_hashes(spec, hasher, toolchain=lambda: None)["m"])
    assert hashes[0] != hashes[1]


def test_a_file_with_a_fixed_batch_is_named_with_the_fix(tmp_path):
    _export(Mlp(), (torch.randn(2, 16),), tmp_path / "fixed.onnx", ["x"], ["y"], None)
    message = _failure(tmp_path, "m: {backend: onnxruntime, source: {onnx: fixed.onnx}, max_batch_size: 8}\n")
    assert message == (f"models.m.source.onnx: {tmp_path / 'fixed.onnx'}: tensor x has shape [2, 16] with first "
                       "dimension 2, but max_batch_size 8 needs a variable batch axis first; export with a dynamic "
                       "axis 0, or set max_batch_size: 0")


class OneRow(torch.nn.Module):
    """Flattens the whole batch into one row: right for batch 1 only."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(16, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x.reshape(1, -1))


def test_a_run_failure_names_the_runtime_the_case_and_the_error(tmp_path):
    torch.jit.save(torch.jit.script(OneRow().eval()), str(tmp_path / "one_row.pt"))
    message = _failure(tmp_path, """\
m: {backend: pytorch, source: {torchscript: one_row.pt}, max_batch_size: 4,
    inputs: [{name: INPUT__0, data_type: TYPE_FP32, dims: [16]}], outputs: [{name: OUTPUT__0, data_type: TYPE_FP32, dims: [2]}]}
""")
    assert message.startswith(f"models.m.source.torchscript: {tmp_path / 'one_row.pt'} does not run in torch "
                              f"{this_machines('torch').version} (this machine's, CPU): run failed on case batch 4: "
                              "RuntimeError: ")
    assert message.endswith("; fix the file, or the declared tensors if they are not what forward() takes")

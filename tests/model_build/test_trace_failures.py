"""backend: pytorch models whose trace fails on a serving case: the build names the case, the error in one line
and the fix, never the tracer's stack frames."""
from __future__ import annotations

import re

import pytest
import torch

from model_build.backends.pytorch import trace_failures
from tritonsm.cli import main

from mb_support import make_spec

# Frames as the tracer prints them into its errors ("/x/torch/jit/_trace.py(1216): trace_module") and as
# Python prints a traceback.
FRAME = re.compile(r"\.py\(\d+\): |<frozen |Traceback \(most recent call last\)|File \".*\", line \d+")


def test_a_longformer_trace_that_froze_its_shapes_names_the_case_the_error_and_the_fix(tmp_path, capsys):
    # Before: the build printed the tracer's frames (".../torch/jit/_trace.py(1216): trace_module",
    # ".../trace_worker.py(54): main", ...) under "the TorchScript trace process failed (exit 1)".
    from transformers import LongformerConfig, LongformerForSequenceClassification

    torch.manual_seed(0)
    LongformerForSequenceClassification(LongformerConfig(
        vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        attention_window=[4, 4], max_position_embeddings=80, num_labels=2)).save_pretrained(tmp_path / "longformer")
    spec = make_spec(tmp_path, """\
lf: {backend: pytorch, source: {recipe: hf-sequence-classification}, weights: longformer, max_batch_size: 4,
     sequence_length: 32}
""", version="25.09")
    capsys.readouterr()  # save_pretrained's progress bar
    code = main(["build", "--spec", str(spec.path), "--out", str(tmp_path / "assets"), "--work-dir",
                 str(tmp_path / "work")])
    printed = capsys.readouterr()
    assert code == 1
    errors = [line for line in printed.err.splitlines() if line.startswith("error: ")]
    assert errors == [
        "error: model lf: the TorchScript trace fails at the serving case batch 1 x 32 tokens (input_ids [1, 32]; "
        "traced at [2, 32]), which eager PyTorch runs: RuntimeError: setStorage: sizes [2, 15, 4, 16], strides "
        "[16, 128, 64, 1], storage offset 0, and itemsize 4 requiring a storage size of 8064 are out of bounds for "
        "storage of size 4096 (it fails at 7 of the 7 serving cases). This model's forward() is shape-dependent: "
        "torch.jit.trace recorded the sizes it computes from its inputs' shapes (for view, as_strided, padding) as "
        "constants of the traced shape, so the trace does not run at that case's shape; serve it with backend: "
        "onnxruntime if it exports and verifies there (the build checks the same cases), or serve one fixed shape: "
        "a module:function recipe whose example inputs have the one shape you serve and no dynamic_axes, with "
        "max_batch_size: 0"]
    assert [line for line in (printed.out + printed.err).splitlines() if FRAME.search(line)] == []


def test_a_failure_at_the_traced_shape_itself_is_put_on_the_inputs_values():
    failure = trace_failures.CaseFailure("batch 2 x 16 tokens", (2, 16), "RuntimeError: shape '[2, 12]' is invalid "
                                                                          "for input of size 16")
    assert trace_failures.trace_fails("m", [failure], 9, "input_ids", (2, 16)) == (
        "model m: the TorchScript trace fails at the serving case batch 2 x 16 tokens (input_ids [2, 16]; traced at "
        "[2, 16]), which eager PyTorch runs: RuntimeError: shape '[2, 12]' is invalid for input of size 16 (it fails "
        "at 1 of the 9 serving cases). That case has the traced shape, so this model's forward() depends on its "
        "inputs' values there (e.g. the padding the mask says): torch.jit.trace recorded what it computed from the "
        "example's values as constants; compute that with tensor operations instead of Python numbers, or serve it "
        "with backend: onnxruntime if it exports and verifies there (the build checks the same cases)")


def test_a_recipe_whose_eager_model_fails_at_a_serving_case_is_told_so_not_blamed_on_the_trace():
    failure = trace_failures.CaseFailure("batch 4 x 512 tokens", (4, 512), "IndexError: index out of range in self")
    assert trace_failures.eager_fails("m", [failure, failure], 7, "input_ids") == (
        "model m: eager PyTorch itself fails at the serving case batch 4 x 512 tokens (input_ids [4, 512]): "
        "IndexError: index out of range in self (it fails at 2 of the 7 serving cases); the recipe's model does not "
        "run at the sizes the spec serves: give sizes it runs at (sequence_length, max_batch_size, "
        "dynamic_batching.preferred_batch_sizes), or fix the recipe")


TORCHSCRIPT_ERROR = """The following operation failed in the TorchScript interpreter.
Traceback of TorchScript (most recent call last):
/venv/lib/python3.11/site-packages/transformers/models/longformer/modeling_longformer.py(719): _chunk
/venv/lib/python3.11/site-packages/torch/jit/_trace.py(1216): trace_module
<frozen runpy>(88): _run_code
RuntimeError: setStorage: sizes [2, 15, 4, 16] are out of bounds for storage of size 4096
"""


@pytest.mark.parametrize("exc, line", [
    (RuntimeError(TORCHSCRIPT_ERROR), "RuntimeError: setStorage: sizes [2, 15, 4, 16] are out of bounds for storage "
                                      "of size 4096"),
    (ValueError("checkpoint has 3 labels\nexpected 2"), "ValueError: checkpoint has 3 labels"),
    (AssertionError(), "AssertionError"),
])
def test_an_error_in_one_line_is_the_tracer_s_own_last_line_or_the_message_s_first(exc, line):
    assert trace_failures.one_line(exc) == line


def test_a_crashed_trace_process_is_told_by_its_last_error_line_without_frames():
    stderr = ('Traceback (most recent call last):\n  File "<frozen runpy>", line 198, in _run_module_as_main\n'
              '  File "/x/trace_worker.py", line 59, in main\n    got = run(traced)\n          ^^^^^^^^^^^\n'
              f"RuntimeError: {TORCHSCRIPT_ERROR}")
    assert trace_failures.last_error_line(stderr) == ("RuntimeError: setStorage: sizes [2, 15, 4, 16] are out of "
                                                      "bounds for storage of size 4096")

"""A model whose own eager PyTorch fails at a serving case is refused naming the case, in one line.

The recipe is this module's ``one_row_fails`` (the tests folder is on sys.path, conftest.py): a model that cannot run
a batch of one row, as funnel-transformer's pooling could not at the coverage benchmark's tiny sizes.
"""
from __future__ import annotations

import torch

from model_build.recipes import ExportableModel
from tritonsm.cli import main as tritonsm_main

from mb_support import make_spec


class _OneRowFails(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] == 1:  # a data-independent but shape-dependent failure, in the model's own code
            raise RuntimeError("Traceback (most recent call last):\n  File 'model.py'\nthe pooling needs 2 rows")
        return self.linear(x)


def one_row_fails(model) -> ExportableModel:
    torch.manual_seed(0)
    module = _OneRowFails().eval()
    sample = lambda batch, seed: {"x": torch.randn(batch, 4, generator=torch.Generator().manual_seed(seed))}  # noqa: E731
    return ExportableModel(module, sample(2, 0), ("x",), ("y",), {"x": {0: "batch"}, "y": {0: "batch"}}, sample)


def test_eager_pytorch_failing_at_a_serving_case_is_named(tmp_path, capsys):
    make_spec(tmp_path, "pool: {backend: onnxruntime, source: {recipe: 'test_eager_failures:one_row_fails'}, "
                        "max_batch_size: 4}", version="25.09")
    assert tritonsm_main(["build", "--spec", str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "assets"),
                          "--work-dir", str(tmp_path / "work")]) == 1
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if line.startswith("error:")] == [
        "error: model pool: eager PyTorch itself fails at the serving case batch 1 (RuntimeError: the pooling needs "
        "2 rows), so nothing can be verified there and requests of that shape would fail when served (the cases are "
        "batch 1, the preferred batch sizes and max_batch_size, at the full and a short sequence length); fix: this "
        "architecture's own code refuses that shape, so serve another architecture, or a recipe of your own that "
        "handles it"]
    assert "Traceback" not in err

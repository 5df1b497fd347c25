"""The spec side of a user's own model: declared tensors, samples, and the checkpoint recipes' weights.

Each case is one model entry added to a minimal spec; the whole message is asserted.
"""
import pathlib

import pytest

from deployment_spec import SpecError
from deployment_spec.spec import parse_spec
from deployment_spec.sections.tensors import DataType, Tensor


def _spec(model: dict) -> dict:
    return {"project": "T", "triton_version": "25.09", "models": {"m": model},
            "endpoints": {"ep": {"kind": "single-model", "models": ["m"], "instance_type": "ml.c5.xlarge"}},
            "environments": {"dev": {"region": "us-east-1"}}}


def _problem(model: dict) -> str:
    with pytest.raises(SpecError) as caught:
        parse_spec(_spec(model), pathlib.Path("spec.yaml"))
    head, *problems = str(caught.value).splitlines()
    assert head == "spec.yaml: 1 problem", str(caught.value)
    return problems[0].removeprefix("  - ")


TS = {"backend": "pytorch", "source": {"torchscript": "scored.pt"}}
X = {"name": "INPUT__0", "data_type": "TYPE_FP32", "dims": [3, 32, 32]}
Y = {"name": "OUTPUT__0", "data_type": "TYPE_FP32", "dims": [10]}


def test_declared_tensors_are_read_in_tritons_terms():
    spec = parse_spec(_spec({**TS, "inputs": [X], "outputs": [Y, {**Y, "name": "OUTPUT__1", "dims": [-1]}]}),
                      pathlib.Path("spec.yaml"))
    model = spec.models["m"]
    assert model.inputs == (Tensor("INPUT__0", DataType.FP32, (3, 32, 32)),)
    assert [t.dims for t in model.outputs] == [(10,), (-1,)]


CASES = {
    "torchscript names follow <name>__<index>": (
        {**TS, "inputs": [{**X, "name": "pixels"}], "outputs": [Y]},
        "models.m.inputs[0].name: got 'pixels'; allowed: <name>__<index> (the pytorch backend's naming convention, "
        "e.g. INPUT__0, OUTPUT__1); fix: name it pixels__0 if it is the first argument of forward()"),
    "each index once": (
        {**TS, "inputs": [X], "outputs": [Y, {**Y, "name": "LOGITS__2"}]},
        "models.m.outputs: got indices [0, 2]; allowed: each of 0..1 once (one per position of forward()'s arguments "
        "or results); fix: number the names by position, from 0"),
    "an unknown data type suggests the Triton name": (
        {**TS, "inputs": [{**X, "data_type": "FP32"}], "outputs": [Y]},
        "models.m.inputs[0].data_type: got 'FP32'; allowed: TYPE_BOOL, TYPE_UINT8, TYPE_UINT16, TYPE_UINT32, "
        "TYPE_UINT64, TYPE_INT8, TYPE_INT16, TYPE_INT32, TYPE_INT64, TYPE_FP16, TYPE_FP32, TYPE_FP64, TYPE_BF16, "
        "TYPE_STRING; fix: did you mean 'TYPE_FP32'?"),
    "dims are sizes or -1": (
        {**TS, "inputs": [{**X, "dims": [3, 0, -2]}], "outputs": [Y]},
        "models.m.inputs[0].dims: got [3, 0, -2]; allowed: sizes >= 1, or -1 for a variable size; fix: replace 0"),
    "inputs without outputs": (
        {**TS, "inputs": [X]},
        "models.m.outputs: got nothing; allowed: every output when the other side is declared; fix: declare outputs "
        "too (name, data_type, dims)"),
    "a name twice": (
        {"backend": "onnxruntime", "source": {"onnx": "m.onnx"}, "inputs": [X, X], "outputs": [Y]},
        "models.m.inputs[1].name: got 'INPUT__0'; allowed: a name unique among the inputs; fix: rename one of them"),
    "no tensors for a recipe": (
        {"backend": "onnxruntime", "source": {"recipe": "tiny-bert"}, "inputs": [X], "outputs": [Y]},
        "models.m.inputs: got tensors with a recipe source; allowed: inputs / outputs only for an onnx or torchscript "
        "source (a recipe names its tensors, a python_dir has its config.pbtxt); fix: remove inputs and outputs"),
    "empty dims without batching": (
        {**TS, "max_batch_size": 0, "inputs": [{**X, "dims": []}], "outputs": [Y]},
        "models.m.inputs[0].dims: got []; allowed: at least one dimension when max_batch_size is 0 (the dims are then "
        "the full shape); fix: give the full shape, or set max_batch_size"),
    "samples are an .npz file": (
        {**TS, "inputs": [X], "outputs": [Y], "samples": "samples.csv"},
        "models.m.samples: got 'samples.csv'; allowed: an .npz file (numpy.savez); fix: save the inputs with "
        "numpy.savez('samples.npz', <input name>=array, ...)"),
    "samples need a batch axis": (
        {**TS, "max_batch_size": 0, "inputs": [X], "outputs": [Y], "samples": "s.npz"},
        "models.m.samples: got samples with backend pytorch, max_batch_size 0; allowed: samples for an onnxruntime, "
        "pytorch or tensorrt model with max_batch_size >= 1 (rows along the batch axis); fix: remove samples"),
    "a checkpoint recipe needs its checkpoint": (
        {"backend": "onnxruntime", "source": {"recipe": "hf-image-classification"}},
        "models.m.weights: got nothing; allowed: a checkpoint directory for recipe hf-image-classification "
        "(config.json and the weights, as save_pretrained writes them); fix: add weights: <directory>, relative to "
        "the spec's folder"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_bad_declaration_is_named_with_the_fix(name):
    model, expected = CASES[name]
    assert _problem(model) == expected

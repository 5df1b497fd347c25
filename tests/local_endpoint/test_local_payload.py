"""Request bodies, response decoding and input files, without a server."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from local_endpoint.client.payload import NamedTensor, decode_response, encode_request
from local_endpoint.client.request_inputs import read_input_file, text_tensor, tokenize_text
from local_endpoint.client.response_output import format_response, save_response
from local_endpoint.errors import InvokeError

A = NamedTensor("A", "FP32", np.array([[1.0, 2.0]], dtype=np.float32))


def test_json_request_is_plain_kserve_v2() -> None:
    request = encode_request([A], binary=False)
    assert request.content_type == "application/json"
    assert json.loads(request.body) == {"inputs": [{"name": "A", "shape": [1, 2], "datatype": "FP32", "data": [1.0, 2.0]}]}


def test_binary_request_carries_its_json_header_size() -> None:
    # SageMaker's binary+json: a JSON header of N bytes, then the raw tensor bytes.
    request = encode_request([A], binary=True)
    header = (
        b'{"inputs":[{"name":"A","shape":[1,2],"datatype":"FP32","parameters":{"binary_data_size":8}}],'
        b'"parameters":{"binary_data_output":true}}'
    )
    assert request.body == header + A.array.tobytes()
    assert request.content_type == f"application/vnd.sagemaker-triton.binary+json;json-header-size={len(header)}"


def test_binary_response_is_decoded() -> None:
    header = json.dumps({
        "model_name": "m",
        "outputs": [{"name": "Y", "datatype": "INT32", "shape": [1, 2], "parameters": {"binary_data_size": 8}}],
    }).encode()
    body = header + np.array([[7, 8]], dtype=np.int32).tobytes()
    response = decode_response(body, f"application/vnd.sagemaker-triton.binary+json;json-header-size={len(header)}")
    assert response.model_name == "m"
    assert [(o.name, o.datatype, o.array.tolist()) for o in response.outputs] == [("Y", "INT32", [[7, 8]])]


def test_json_response_is_decoded() -> None:
    body = b'{"model_name":"m","outputs":[{"name":"Y","datatype":"FP32","shape":[2],"data":[1.5,2.5]}]}'
    response = decode_response(body, "application/json")
    assert response.outputs[0].array.tolist() == [1.5, 2.5]


def test_a_body_that_is_no_inference_response_is_named() -> None:
    with pytest.raises(InvokeError, match=r"^the endpoint answered with a body that is not a KServe v2 inference response"):
        decode_response(b"<html>oops</html>", "text/html")


def test_json_input_file_becomes_typed_tensors(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "in.json"
    path.write_text(json.dumps({"inputs": [
        {"name": "A", "shape": [1, 2], "datatype": "INT64", "data": [[3, 4]]},
        {"name": "T", "shape": [1], "datatype": "BYTES", "data": ["hi"]},
    ]}))
    tensors = read_input_file(path)
    assert [(t.name, t.datatype, t.array.dtype, t.array.tolist()) for t in tensors] == [
        ("A", "INT64", np.dtype(np.int64), [[3, 4]]),
        ("T", "BYTES", np.dtype(object), [b"hi"]),
    ]


def test_npy_and_npz_inputs(tmp_path: pathlib.Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros((1, 3), dtype=np.float16))
    np.savez(tmp_path / "x.npz", A=np.ones((1, 2), dtype=np.float32), B=np.ones((1,), dtype=np.int8))
    assert [(t.name, t.datatype) for t in read_input_file(tmp_path / "x.npy", "X")] == [("X", "FP16")]
    assert [(t.name, t.datatype) for t in read_input_file(tmp_path / "x.npz")] == [("A", "FP32"), ("B", "INT8")]


@pytest.mark.parametrize(
    ("file_name", "content", "message"),
    [
        ("in.json", "{", "input file {path} is not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"),
        ("in.json", '{"A": [1]}', 'input file {path} needs a KServe v2 request: {{"inputs": [{{"name": ..., "shape": [...], "datatype": "FP32", "data": [...]}}]}}'),
        ("in.json", '{"inputs": [{"name": "A", "data": [1]}]}', "input file {path}, inputs[0] lacks shape, datatype; each input needs name, shape, datatype, data"),
        ("in.json", '{"inputs": [{"name": "A", "shape": [1], "datatype": "FLOAT", "data": [1]}]}',
         "input file {path}, inputs[0]: datatype 'FLOAT' is not a KServe v2 datatype; use one of BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, FP16, FP32, FP64, BYTES, BF16"),
        ("in.json", '{"inputs": [{"name": "A", "shape": [2, 2], "datatype": "FP32", "data": [1, 2, 3]}]}',
         "input file {path}, inputs[0] ('A'): data does not fit datatype FP32 and shape [2, 2] (cannot reshape array of size 3 into shape (2,2))"),
        ("x.npy", None, "input file {path} holds one unnamed array; name the model input it feeds with --input-name"),
        ("in.csv", "1,2", "input file {path} has suffix '.csv'; use one of .json, .npy, .npz"),
        ("absent.json", None, "input file {path} does not exist; pass a .json, .npy or .npz file"),
    ],
)
def test_bad_input_files_are_named(tmp_path: pathlib.Path, file_name: str, content: str | None, message: str) -> None:
    path = tmp_path / file_name
    if file_name.endswith(".npy"):
        np.save(path, np.zeros(2))
    elif content is not None:
        path.write_text(content)
    with pytest.raises(InvokeError) as caught:
        read_input_file(path)
    assert str(caught.value) == message.format(path=path)


@pytest.fixture(scope="module")
def tokenizer_dir(module_tmp) -> pathlib.Path:
    """A word-level tokenizer saved like any transformers tokenizer, ids known in advance."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.WordLevel({"[PAD]": 0, "[UNK]": 1, "hello": 2, "world": 3}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    directory = module_tmp.mktemp("tokenizer")
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="[PAD]", unk_token="[UNK]").save_pretrained(str(directory))
    return directory


def test_text_is_tokenized_into_the_tokenizers_inputs(tokenizer_dir: pathlib.Path) -> None:
    # Names from the tokenizer, batch of one, padded to a fixed length on request.
    tensors = tokenize_text("hello world", tokenizer_dir, max_length=4, datatype="INT32")
    assert [(t.name, t.datatype, t.array.tolist()) for t in tensors] == [
        ("input_ids", "INT32", [[2, 3, 0, 0]]),
        ("attention_mask", "INT32", [[1, 1, 0, 0]]),
    ]


def test_a_directory_without_tokenizer_is_named(tmp_path: pathlib.Path) -> None:
    with pytest.raises(InvokeError) as caught:
        tokenize_text("hi", tmp_path)
    assert str(caught.value) == (
        f"tokenizer directory {tmp_path} has no tokenizer_config.json or tokenizer.json; "
        "pass the directory the model's tokenizer was saved to (save_pretrained)"
    )


def test_raw_text_is_a_bytes_tensor() -> None:
    tensor = text_tensor("translate: hi", "TEXT")
    assert (tensor.datatype, tensor.array.shape, tensor.array[0, 0]) == ("BYTES", (1, 1), b"translate: hi")


def test_outputs_are_printed_and_saved(tmp_path: pathlib.Path) -> None:
    body = b'{"model_name":"m","outputs":[{"name":"Y","datatype":"FP32","shape":[1,2],"data":[1.5,2.5]}]}'
    response = decode_response(body, "application/json")
    assert format_response(response) == "model: m\nY FP32 [1, 2]\n[[1.5 2.5]]"
    save_response(response, tmp_path / "out.json")
    assert json.loads((tmp_path / "out.json").read_text())["outputs"][0]["data"] == [1.5, 2.5]
    save_response(response, tmp_path / "out.npz")
    assert np.load(tmp_path / "out.npz")["Y"].tolist() == [[1.5, 2.5]]

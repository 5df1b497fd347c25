"""The Python-backend model files, run in-process against a stand-in for triton_python_backend_utils."""
from __future__ import annotations

import importlib.util
import json
import sys
import types

import numpy as np
import pytest

from model_build import layout, model_config, tokenizer_files
from model_build.recipes import python_recipes

from mb_support import make_spec


class _Tensor:
    def __init__(self, name, array):
        self._name, self._array = name, array

    def name(self):
        return self._name

    def as_numpy(self):
        return self._array


class _Request:
    def __init__(self, **tensors):
        self._tensors = {k: _Tensor(k, v) for k, v in tensors.items()}


class _Response:
    def __init__(self, output_tensors):
        self.outputs = {t.name(): t.as_numpy() for t in output_tensors}


@pytest.fixture
def pb_utils(monkeypatch):
    """Only the calls our model.py files make, with the backend's semantics."""
    fake = types.ModuleType("triton_python_backend_utils")
    fake.Tensor = _Tensor
    fake.InferenceResponse = _Response
    fake.get_input_tensor_by_name = lambda request, name: request._tensors.get(name)
    fake.get_output_config_by_name = lambda config, name: next(o for o in config["output"] if o["name"] == name)
    fake.triton_string_to_numpy = lambda t: {"TYPE_INT64": np.int64, "TYPE_INT32": np.int32}[t]
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", fake)
    return fake


def _load(model_dir):
    spec = importlib.util.spec_from_file_location(f"model_{model_dir.name}", model_dir / "1" / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = model_config.parse((model_dir / "config.pbtxt").read_text())
    from google.protobuf import json_format
    args = {"model_config": json.dumps(json_format.MessageToDict(config, preserving_proto_field_name=True)),
            "model_repository": str(model_dir), "model_version": "1", "model_instance_kind": "CPU",
            "model_instance_device_id": "0"}
    instance = module.TritonPythonModel()
    instance.initialize(args)
    return instance


def _materialise(tmp_path, spec, name, int32=False):
    made = python_recipes.python_model(spec.models[name], spec.root, consumer_int32=int32)
    config = model_config.build_config(spec.models[name], name=name, inputs=made.inputs, outputs=made.outputs,
                                       triton_version="25.04", parameters=made.parameters)
    layout.write_model_dir(tmp_path / name, model_config.render(config), made.files)
    return tmp_path / name


@pytest.fixture(scope="module")
def spec(module_tmp):
    return make_spec(module_tmp.mktemp("py"), """\
pre: {backend: python, source: {recipe: text-preprocess}, sequence_length: 12, max_batch_size: 4}
t5: {backend: python, source: {recipe: tiny-t5}, max_batch_size: 4, dynamic_batching: {}}
""")


def test_preprocess_matches_the_reference_wordpiece_tokenizer(tmp_path, pb_utils, spec):
    # Our dependency-free WordPiece gives the ids the `tokenizers` BERT tokenizer gives.
    from tokenizers import BertWordPieceTokenizer
    model = _load(_materialise(tmp_path, spec, "pre"))
    texts = ["Hello, World!", "Deploy the model on SageMaker endpoints", "naïve Café"]
    response, = model.execute([_Request(TEXT=np.array([[t.encode()] for t in texts], dtype=object))])
    (tmp_path / "vocab.txt").write_text(tokenizer_files.bert_vocab_text())
    reference = BertWordPieceTokenizer(str(tmp_path / "vocab.txt"), lowercase=True)
    reference.enable_truncation(12)
    reference.enable_padding(length=12, pad_id=0)
    assert response.outputs["input_ids"].tolist() == [e.ids for e in reference.encode_batch(texts)]
    assert response.outputs["attention_mask"].tolist() == [e.attention_mask for e in reference.encode_batch(texts)]
    assert response.outputs["input_ids"].dtype == np.int64
    model.finalize()


def test_preprocess_emits_int32_for_a_tensorrt_classifier(tmp_path, pb_utils, spec):
    model = _load(_materialise(tmp_path, spec, "pre", int32=True))
    response, = model.execute([_Request(TEXT=np.array([[b"hi"]], dtype=object))])
    assert response.outputs["input_ids"].dtype == np.int32


def test_t5_answers_each_request_of_a_batch(tmp_path, pb_utils, spec):
    # One generate() call for the whole dynamic batch, split back per request.
    model_dir = _materialise(tmp_path, spec, "t5")
    assert {"model.py", "tokenizer.json", "t5"} <= {p.name for p in (model_dir / "1").iterdir()}
    model = _load(model_dir)
    first = _Request(TEXT=np.array([[b"translate English to German: hello world"]], dtype=object))
    second = _Request(TEXT=np.array([[b"summarize: the model is fast"], [b"question: what is triton"]], dtype=object))
    responses = model.execute([first, second])
    assert [r.outputs["OUTPUT_TEXT"].shape for r in responses] == [(1, 1), (2, 1)]
    assert [r.outputs["output_ids"].shape[0] for r in responses] == [1, 2]
    assert responses[0].outputs["output_ids"].dtype == np.int64
    model.finalize()


def test_t5_config_declares_text_in_and_out(tmp_path, spec):
    text = (_materialise(tmp_path, spec, "t5") / "config.pbtxt").read_text()
    config = model_config.parse(text)
    assert config.backend == "python"
    assert [(t.name, list(t.dims)) for t in config.input] == [("TEXT", [1])]
    assert [t.name for t in config.output] == ["OUTPUT_TEXT", "output_ids"]


def test_execution_env_is_shipped_and_referenced(tmp_path):
    import tarfile
    env = tmp_path / "t5_env.tar.gz"
    with tarfile.open(env, "w:gz"):
        pass
    spec = make_spec(tmp_path, """\
t5:
  backend: python
  source: {recipe: text-preprocess}
  python: {execution_env: t5_env.tar.gz}
""")
    from model_build import build
    report = build.run(spec, tmp_path / "assets", tmp_path / "work", log=lambda line: None)
    assert report.built == ["t5"]
    model_dir = next((tmp_path / "work" / "models").glob("t5-*/t5"))
    assert (model_dir / "t5_env.tar.gz").is_file()
    config = model_config.parse((model_dir / "config.pbtxt").read_text())
    assert config.parameters["EXECUTION_ENV_PATH"].string_value == "$$TRITON_MODEL_DIRECTORY/t5_env.tar.gz"

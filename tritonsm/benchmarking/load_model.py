"""The load test's model: a small torch Transformer encoder in Triton's Python backend, four configs.

The local Triton server has no onnxruntime or TensorRT backend, so the load test serves a
Python-backend model. It runs torch on the CPU: each call pays a large fixed cost (request
IPC, Python, per-op dispatch) next to a small per-row cost, which is what makes server-side
batching pay off, as on a GPU. ``execute`` runs one forward pass for all the requests the
dynamic batcher hands it.

The configurations mirror the tuned BERT-large scenario's (pt-base, pt-db, pt-ig, pt-ig-db).
"""
from __future__ import annotations

import dataclasses
import pathlib

MODEL_NAME = "encoder"
INPUT, OUTPUT = "INPUT", "OUTPUT"
SEQUENCE, WIDTH, LAYERS, CLASSES = 32, 128, 6, 2
MAX_BATCH = 16

MODEL_PY = '''\
"""Triton Python backend: a torch Transformer encoder classifier with random weights (seed 0)."""
import json

import numpy as np
import torch
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        # One thread per instance: two instances on two cores then use both, one instance one.
        torch.set_num_threads(int(params["torch_threads"]))
        torch.manual_seed(0)
        width = int(params["width"])
        layer = torch.nn.TransformerEncoderLayer(width, nhead=4, dim_feedforward=4 * width, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, int(params["layers"]), enable_nested_tensor=False).eval()
        self.head = torch.nn.Linear(width, int(params["classes"])).eval()

    def execute(self, requests):
        # Several requests arrive together when the dynamic batcher is on: one forward pass for all.
        arrays = [pb_utils.get_input_tensor_by_name(r, "INPUT").as_numpy() for r in requests]
        with torch.inference_mode():
            x = torch.from_numpy(np.concatenate(arrays))
            logits = self.head(self.encoder(x).mean(dim=1)).numpy()
        responses, start = [], 0
        for array in arrays:
            rows = logits[start:start + len(array)]
            start += len(array)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", rows)]))
        return responses
'''


@dataclasses.dataclass(frozen=True)
class LoadConfig:
    name: str
    dynamic_batching: bool
    instances: int

    def describe(self) -> str:
        return (f"{'dynamic batching' if self.dynamic_batching else 'no dynamic batching'}, "
                f"{self.instances} instance{'s' if self.instances > 1 else ''}")


CONFIGS = {c.name: c for c in (
    LoadConfig("pt-base", dynamic_batching=False, instances=1),
    LoadConfig("pt-db", dynamic_batching=True, instances=1),
    LoadConfig("pt-ig", dynamic_batching=False, instances=2),
    LoadConfig("pt-ig-db", dynamic_batching=True, instances=2),
)}


def config_pbtxt(config: LoadConfig) -> str:
    """Through Triton's ModelConfig protobuf, like model_build (misspelt fields fail here)."""
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2

    body = {
        "name": MODEL_NAME, "backend": "python", "max_batch_size": MAX_BATCH,
        "input": [{"name": INPUT, "data_type": "TYPE_FP32", "dims": [SEQUENCE, WIDTH]}],
        "output": [{"name": OUTPUT, "data_type": "TYPE_FP32", "dims": [CLASSES]}],
        "instance_group": [{"kind": "KIND_CPU", "count": config.instances}],
        "parameters": {k: {"string_value": str(v)} for k, v in
                       {"torch_threads": 1, "width": WIDTH, "layers": LAYERS, "classes": CLASSES}.items()},
    }
    if config.dynamic_batching:
        # As in the BERT-large scenario: preferred batch 16, 100 us queue delay.
        body["dynamic_batching"] = {"preferred_batch_size": [MAX_BATCH], "max_queue_delay_microseconds": 100}
    return text_format.MessageToString(json_format.ParseDict(body, model_config_pb2.ModelConfig()))


def write_tarball(config: LoadConfig, work: pathlib.Path) -> pathlib.Path:
    """``<work>/<config>/encoder.tar.gz`` laid out for a single-model endpoint."""
    from model_build.archive import write_tarball as pack

    repository = work / config.name / "repository"
    version = repository / MODEL_NAME / "1"
    version.mkdir(parents=True, exist_ok=True)
    (repository / MODEL_NAME / "config.pbtxt").write_text(config_pbtxt(config))
    (version / "model.py").write_text(MODEL_PY)
    target = work / config.name / f"{MODEL_NAME}.tar.gz"
    pack(target, {MODEL_NAME: repository / MODEL_NAME})
    return target


def request_tensor():
    """One request: a single row of fixed-seed activations."""
    import numpy as np

    from local_endpoint import NamedTensor

    rows = np.random.default_rng(0).standard_normal((1, SEQUENCE, WIDTH)).astype(np.float32)
    return NamedTensor(INPUT, "FP32", rows)

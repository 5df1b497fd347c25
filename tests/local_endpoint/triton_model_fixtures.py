"""Tiny Python-backend model repositories and a deterministic packer, for tests.

The models are written here, in the tests, so the local endpoint is tested on
the real server without torch, a GPU or the model_build stage.
"""

from __future__ import annotations

import gzip
import io
import pathlib
import tarfile

# y = a + b, batched: the dynamic batcher may merge concurrent requests.
ADD_CONFIG = """\
backend: "python"
max_batch_size: 8
input [
  { name: "A" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "B" data_type: TYPE_FP32 dims: [ 4 ] }
]
output [ { name: "SUM" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { max_queue_delay_microseconds: 100 }
instance_group [ { kind: KIND_CPU count: 1 } ]
"""

ADD_MODEL = """\
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "A").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "B").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SUM", a + b)]))
        return responses
"""

# y = x * factor + offset, unbatched dims [-1]; used for ensemble steps and MME models.
AFFINE_CONFIG = """\
backend: "python"
max_batch_size: 8
input [ {{ name: "{input}" data_type: TYPE_FP32 dims: [ -1 ] }} ]
output [ {{ name: "{output}" data_type: TYPE_FP32 dims: [ -1 ] }} ]
parameters {{ key: "factor" value: {{ string_value: "{factor}" }} }}
parameters {{ key: "offset" value: {{ string_value: "{offset}" }} }}
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
"""

AFFINE_MODEL = """\
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        parameters = config["parameters"]
        self.factor = np.float32(parameters["factor"]["string_value"])
        self.offset = np.float32(parameters["offset"]["string_value"])
        self.input_name = config["input"][0]["name"]
        self.output_name = config["output"][0]["name"]

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, self.input_name).as_numpy()
            y = (x * self.factor + self.offset).astype(np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor(self.output_name, y)]))
        return responses
"""

# OUTPUT = (INPUT * 2) + 1, through two Python-backend steps.
ENSEMBLE_CONFIG = """\
platform: "ensemble"
max_batch_size: 8
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
ensemble_scheduling {
  step [
    {
      model_name: "double"
      model_version: -1
      input_map { key: "X" value: "INPUT" }
      output_map { key: "Y" value: "doubled" }
    },
    {
      model_name: "plus_one"
      model_version: -1
      input_map { key: "X" value: "doubled" }
      output_map { key: "Y" value: "OUTPUT" }
    }
  ]
}
"""

# Reports where the model's numpy comes from: proves the stub runs in this virtualenv.
WHEREAMI_CONFIG = """\
backend: "python"
max_batch_size: 0
input [ { name: "ASK" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "NUMPY_FILE" data_type: TYPE_STRING dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""

WHEREAMI_MODEL = """\
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        answer = np.array([np.__file__.encode()], dtype=np.object_)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("NUMPY_FILE", answer)]) for _ in requests]
"""

ONNX_CONFIG = """\
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""


def write_model(repository: pathlib.Path, name: str, config: str, files: dict[str, str]) -> pathlib.Path:
    """Write `<repository>/<name>/config.pbtxt` and `<name>/1/<file>` for each file."""
    model_dir = repository / name
    (model_dir / "1").mkdir(parents=True, exist_ok=True)
    (model_dir / "config.pbtxt").write_text(config)
    for file_name, content in files.items():
        (model_dir / "1" / file_name).write_text(content)
    return model_dir


def write_add(repository: pathlib.Path, name: str = "add") -> pathlib.Path:
    return write_model(repository, name, ADD_CONFIG, {"model.py": ADD_MODEL})


def write_affine(
    repository: pathlib.Path, name: str, factor: float, offset: float, input_name: str = "X",
    output_name: str = "Y",
) -> pathlib.Path:
    config = AFFINE_CONFIG.format(input=input_name, output=output_name, factor=factor, offset=offset)
    return write_model(repository, name, config, {"model.py": AFFINE_MODEL})


def write_ensemble(repository: pathlib.Path, name: str = "pipeline") -> None:
    write_affine(repository, "double", factor=2, offset=0)
    write_affine(repository, "plus_one", factor=1, offset=1)
    write_model(repository, name, ENSEMBLE_CONFIG, {})


def write_whereami(repository: pathlib.Path, name: str = "whereami") -> pathlib.Path:
    return write_model(repository, name, WHEREAMI_CONFIG, {"model.py": WHEREAMI_MODEL})


def write_onnx_stub(repository: pathlib.Path, name: str = "resnet") -> None:
    # The file content is never read: the model is refused before start-up.
    write_model(repository, name, ONNX_CONFIG, {"model.onnx": "not a real model"})


def pack(source: pathlib.Path, tarball: pathlib.Path) -> pathlib.Path:
    """Tar `source`'s contents (not `source` itself) deterministically into `tarball`.

    Sorted entries, mtime 0, uid/gid 0, fixed modes and a gzip header without
    a timestamp: same inputs, same bytes (the tarball's sha256 is its CDK asset hash).
    """
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for path in sorted(source.rglob("*")):
            info = tarfile.TarInfo(path.relative_to(source).as_posix())
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if path.is_dir():
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                archive.addfile(info)
            else:
                data = path.read_bytes()
                info.size = len(data)
                info.mode = 0o644
                archive.addfile(info, io.BytesIO(data))
    tarball.parent.mkdir(parents=True, exist_ok=True)
    with tarball.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
        gz.write(buffer.getvalue())
    return tarball

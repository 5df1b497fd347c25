"""Tiny wheels made on the spot, served to pip through PIP_FIND_LINKS: packages no index and no
virtualenv of this machine has, so finding one imported proves where it came from."""
from __future__ import annotations

import base64
import hashlib
import pathlib
import zipfile

PROBE = "tritonsm-probe"
PROBE_VALUE = "from-the-execution-environment"


def make_wheel(folder: pathlib.Path, name: str = PROBE, version: str = "1.0", tag: str = "py3-none-any",
               value: str = PROBE_VALUE) -> pathlib.Path:
    """A wheel of one module (``name`` with underscores) whose VALUE is ``value``."""
    module = name.replace("-", "_")
    dist = f"{module}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": f"VALUE = {value!r}\n".encode(),
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{dist}/WHEEL": f"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: {tag}\n".encode(),
    }
    record = "".join(f"{path},sha256={_b64(body)},{len(body)}\n" for path, body in files.items())
    files[f"{dist}/RECORD"] = (record + f"{dist}/RECORD,,\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{module}-{version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, body in files.items():
            archive.writestr(zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0)), body)
    return wheel


def _b64(body: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=").decode()


PROBE_MODEL = '''\
import sys

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        import tritonsm_probe  # only the execution environment has it
        self.answer = f"{tritonsm_probe.VALUE} {tritonsm_probe.__file__} {sys.prefix}".encode()

    def execute(self, requests):
        out = []
        for request in requests:
            rows = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy().shape[0]
            where = np.array([[self.answer]] * rows, dtype=np.object_)
            out.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("WHERE", where)]))
        return out
'''
PROBE_CONFIG = '''\
backend: "python"
max_batch_size: 4
input [{ name: "IN", data_type: TYPE_FP32, dims: [1] }]
output [{ name: "WHERE", data_type: TYPE_STRING, dims: [1] }]
'''


def write_probe_model(folder: pathlib.Path) -> pathlib.Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.py").write_text(PROBE_MODEL)
    (folder / "config.pbtxt").write_text(PROBE_CONFIG)
    return folder


PROBE_SPEC = """\
project: {project}
triton_version: "25.09"
models:
  probe:
    backend: python
    source: {{python_dir: probe}}
    max_batch_size: 4
    python: {{requirements: ["tritonsm-probe==1.0", "numpy==1.26.4"]}}
endpoints:
  probe-sme: {{kind: single-model, models: [probe], instance_type: ml.g5.xlarge}}
environments:
  dev: {{region: us-east-1}}
"""


def write_probe_project(root: pathlib.Path, project: str) -> pathlib.Path:
    """The probe wheel under ``root/wheels``, the probe model and a spec serving it on a single-model endpoint
    (Triton 25.09); returns the spec's path. Build with PIP_FIND_LINKS set to ``root/wheels``."""
    make_wheel(root / "wheels")
    write_probe_model(root / "probe")
    spec = root / "spec.yaml"
    spec.write_text(PROBE_SPEC.format(project=project))
    return spec

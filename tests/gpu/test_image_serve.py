"""`tritonsm serve --image` and `tritonsm smoke --image` for real: Docker, an NVIDIA GPU, the NGC image.

Skipped, with the reason, where there is no Docker engine or no GPU. The first run pulls
nvcr.io/nvidia/tritonserver:25.09-py3 (several GB). The SageMaker image test also needs AWS
credentials that may pull from the SageMaker registry (ecr:GetAuthorizationToken, ecr:BatchGetImage).
"""
from __future__ import annotations

import pathlib
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest

from local_endpoint.client.invoke import invoke_url
from local_endpoint.client.payload import NamedTensor, encode_request
from local_endpoint.server.ports import free_port
from tritonsm.cli import main as tritonsm_main

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "local_endpoint"))
import triton_model_fixtures as models  # noqa: E402
from image_fixtures import write_built_spec  # noqa: E402

pytestmark = pytest.mark.gpu
ROOT = pathlib.Path(__file__).resolve().parents[2]


def _need_docker_and_gpu() -> None:
    if shutil.which("nvidia-smi") is None:
        pytest.skip("needs an NVIDIA GPU (nvidia-smi not found)")
    if shutil.which("docker") is None:
        pytest.skip("needs a Docker engine (docker not found)")
    info = subprocess.run(["docker", "info", "--format", "{{json .Runtimes}}"], capture_output=True, text=True)
    if info.returncode != 0:
        pytest.skip(f"needs a running Docker engine (docker info: {info.stderr.strip()[-200:]})")


@pytest.fixture(scope="module")
def built(module_tmp):
    _need_docker_and_gpu()
    root = module_tmp.mktemp("image-gpu")
    tarballs = {}
    for key, write in (("add", models.write_add),
                       ("times2", lambda r: models.write_affine(r, "times2", factor=2, offset=0, input_name="INPUT",
                                                                output_name="OUTPUT"))):
        write(root / "repos" / key)
        config = next((root / "repos" / key).rglob("config.pbtxt"))
        # On the GPU, as the endpoint runs it.
        config.write_text(config.read_text().replace("kind: KIND_CPU", "kind: KIND_GPU"))
        tarballs[key] = models.pack(root / "repos" / key, root / "tarballs" / f"{key}.tar.gz")
    return write_built_spec(root / "project", tarballs)


def _serve(built, endpoint: str, *flags: str):
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "tritonsm", "serve", endpoint, *built.flags(), "--port",
                                str(port), *flags], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    for line in process.stdout:
        lines.append(line.rstrip("\n"))
        if "press Ctrl-C to stop" in line:
            return process, port, lines
    raise AssertionError(f"serve did not start: {lines} {process.stderr.read()}")


def _container(lines: list[str]) -> str:
    return next(line for line in lines if line.startswith("image: ")).split(" in container ")[1].split(" ")[0]


def _stop_and_check_removed(process, name: str) -> None:
    process.send_signal(signal.SIGINT)
    stdout, _ = process.communicate(timeout=120)
    assert process.returncode == 0 and stdout.strip() == "stopped"
    left = subprocess.run(["docker", "ps", "-a", "-q", "--filter", f"name={name}"], capture_output=True, text=True)
    assert left.stdout.strip() == ""


def test_the_ngc_image_serves_a_single_model_endpoint_on_the_gpu(built):
    process, port, lines = _serve(built, "add-sme", "--image", "ngc")
    half = NamedTensor("A", "FP32", np.full((1, 4), 0.5, np.float32))
    answer = invoke_url(f"http://127.0.0.1:{port}", encode_request([half, NamedTensor("B", "FP32", half.array)]))
    assert answer.outputs[0].array.tolist() == [[1.0] * 4]
    _stop_and_check_removed(process, _container(lines))


def test_the_ngc_image_serves_a_multi_model_endpoint_through_sagemakers_load_calls(built):
    process, port, lines = _serve(built, "add-mme", "--image", "ngc", "--mme-capacity", "1")
    targets = lines[1].removeprefix("target models: ").split(", ")
    times2 = next(t for t in targets if t.startswith("times2-"))
    answer = invoke_url(f"http://127.0.0.1:{port}", encode_request(
        [NamedTensor("INPUT", "FP32", np.array([[1.0, 2.0, 3.0]], np.float32))]), target_model=times2)
    assert answer.outputs[0].array.tolist() == [[2.0, 4.0, 6.0]]
    _stop_and_check_removed(process, _container(lines))


def test_smoke_image_records_the_images_answers(built, tmp_path):
    assert tritonsm_main(["smoke", "add-sme", *built.flags(), "--image", "ngc", "--record-dir", str(tmp_path)]) == 0
    assert (tmp_path / "add-sme.json").is_file()


def test_the_sagemaker_image_after_an_ecr_login(built):
    import boto3
    if boto3.session.Session().get_credentials() is None:
        pytest.skip("needs AWS credentials that may pull sagemaker-tritonserver (none configured)")
    process, port, lines = _serve(built, "add-sme", "--image", "sagemaker", "--region", "us-east-1")
    assert any(".dkr.ecr.us-east-1.amazonaws.com/sagemaker-tritonserver:25.09-py3" in line for line in lines)
    _stop_and_check_removed(process, _container(lines))

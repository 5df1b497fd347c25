"""A multi-model endpoint on the real Triton server behind the emulated SageMaker front door."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import sys
import time

import numpy as np
import pytest

from local_endpoint.client.http_call import call
from local_endpoint.client.invoke import invoke_url
from local_endpoint.client.payload import NamedTensor, encode_request
from local_endpoint.endpoints.multi_model import MultiModelEndpoint
from local_endpoint.errors import InvokeError, ServerCrashedError, UnsupportedBackendError
from local_endpoint.server.supervision import RestartPolicy

pytestmark = pytest.mark.triton

VECTOR = np.array([[1.0, 2.0, 3.0]], dtype=np.float32)
MME_MODELS = ("times2", "times3", "times4", "ensemble", "bare", "whereami")


@pytest.fixture(scope="module")
def mme(tarballs: dict[str, pathlib.Path], module_tmp):
    log_file = module_tmp.mktemp("logs") / "mme.log"
    with MultiModelEndpoint([tarballs[k] for k in MME_MODELS], capacity=2, log_file=log_file) as endpoint:
        yield endpoint


def send(endpoint, target_model: str | None, tensors: list[NamedTensor], binary: bool = False):
    return invoke_url(endpoint.url, encode_request(tensors, binary=binary), target_model=target_model)


def loaded(endpoint) -> list[str]:
    return json.loads(call("127.0.0.1", endpoint.port, "GET", "/models").body)["models"]


def test_models_load_on_first_use_and_the_lru_one_is_unloaded(mme) -> None:
    # Capacity 2: times2, times3, times2 again, then times4 evicts times3,
    # the least recently used; every answer comes from the model named.
    assert send(mme, "times2.tar.gz", [NamedTensor("INPUT", "FP32", VECTOR)]).outputs[0].array.tolist() == [[2, 4, 6]]
    assert send(mme, "times3.tar.gz", [NamedTensor("INPUT", "FP32", VECTOR)]).outputs[0].array.tolist() == [[3, 6, 9]]
    assert loaded(mme) == ["times2.tar.gz", "times3.tar.gz"]
    send(mme, "times2.tar.gz", [NamedTensor("INPUT", "FP32", VECTOR)])
    response = send(mme, "times4.tar.gz", [NamedTensor("INPUT", "FP32", VECTOR)])
    assert (response.model_name, response.outputs[0].array.tolist()) == ("times4.tar.gz", [[4, 8, 12]])
    assert loaded(mme) == ["times2.tar.gz", "times4.tar.gz"]
    assert ("unload", "times3.tar.gz") in mme.cache.events


def test_an_unloaded_model_is_gone_from_triton(mme) -> None:
    # DELETE /models/<hash> really unloads: Triton no longer knows the hash.
    send(mme, "times3.tar.gz", [NamedTensor("INPUT", "FP32", VECTOR)])
    evicted = next(m for m in ("times2.tar.gz", "times4.tar.gz") if m not in loaded(mme))
    name_hash = mme.cache._prepare(evicted).name_hash
    assert call("127.0.0.1", mme.cache.triton_port, "GET", f"/models/{name_hash}").status == 404


def test_an_ensemble_tarball_serves_its_pipeline(mme) -> None:
    response = send(mme, "ensemble.tar.gz", [NamedTensor("INPUT", "FP32", VECTOR)])
    assert response.outputs[0].array.tolist() == [[3, 5, 7]]


def test_a_bare_layout_tarball_is_served(mme) -> None:
    # config.pbtxt at the archive's top: allowed for MME archives.
    a = np.ones((1, 4), dtype=np.float32)
    response = send(mme, "bare.tar.gz", [NamedTensor("A", "FP32", a), NamedTensor("B", "FP32", a * 2)])
    assert response.outputs[0].array.tolist() == [[3, 3, 3, 3]]


def test_json_and_binary_payloads_give_the_same_outputs(mme) -> None:
    tensors = [NamedTensor("INPUT", "FP32", VECTOR)]
    as_json = send(mme, "times2.tar.gz", tensors, binary=False)
    as_binary = send(mme, "times2.tar.gz", tensors, binary=True)
    assert np.array_equal(as_json.outputs[0].array, as_binary.outputs[0].array)


def test_an_unknown_target_model_is_a_404(mme) -> None:
    with pytest.raises(InvokeError) as caught:
        send(mme, "resnet.tar.gz", [NamedTensor("INPUT", "FP32", VECTOR)])
    assert str(caught.value) == (
        "the endpoint rejected the request (HTTP 404): target model 'resnet.tar.gz' is not one of this "
        "endpoint's models (bare.tar.gz, ensemble.tar.gz, times2.tar.gz, times3.tar.gz, times4.tar.gz, whereami.tar.gz); "
        "pass one of those names as the target model"
    )


def test_a_request_without_target_model_is_refused(mme) -> None:
    with pytest.raises(InvokeError) as caught:
        send(mme, None, [NamedTensor("INPUT", "FP32", VECTOR)])
    assert str(caught.value) == (
        "the endpoint rejected the request (HTTP 400): this is a multi-model endpoint: name the model with "
        "the X-Amzn-SageMaker-Target-Model header (TargetModel in InvokeEndpoint, --target-model in tritonsm "
        "invoke), one of: bare.tar.gz, ensemble.tar.gz, times2.tar.gz, times3.tar.gz, times4.tar.gz, whereami.tar.gz"
    )


def test_a_bad_request_surfaces_tritons_message(mme) -> None:
    with pytest.raises(InvokeError) as caught:
        send(mme, "times2.tar.gz", [NamedTensor("INPUT", "INT32", VECTOR.astype(np.int32))])
    assert str(caught.value) == (
        "the endpoint rejected the request (HTTP 400): [request id: <id_unknown>] inference input 'INPUT' "
        "data-type is 'INT32', but model 'times2.tar.gz' expects 'FP32'"
    )


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_python_models_run_in_this_virtualenv(mme, binary: bool) -> None:
    # The backend stub imports numpy from the interpreter that started the
    # server, not from whatever Python the system has.
    response = send(mme, "whereami.tar.gz", [NamedTensor("ASK", "FP32", np.zeros(1, np.float32))], binary=binary)
    numpy_file = response.outputs[0].array[0].decode()
    assert numpy_file.startswith(sys.prefix), numpy_file


def test_ping_is_passed_to_triton(mme) -> None:
    assert call("127.0.0.1", mme.port, "GET", "/ping").status == 200


def test_models_of_missing_backends_are_named_before_start(tarballs: dict[str, pathlib.Path]) -> None:
    with pytest.raises(UnsupportedBackendError) as caught:
        MultiModelEndpoint([tarballs["times2"], tarballs["onnx"]]).start()
    assert str(caught.value) == (
        "cannot serve locally, the Triton server of the nvidia-pytriton wheel lacks a backend:\n"
        f"  model 'resnet' in {tarballs['onnx']} needs the 'onnxruntime' backend\n"
        "it has only: ensemble, python; test these models on a deployed endpoint "
        "(tritonsm invoke --endpoint ENDPOINT --deployed), or exercise their payloads locally with --cpu-stand-in "
        "(onnxruntime models then run as labelled Python-backend stand-ins on the CPU; latency is not "
        "representative)"
    )


def test_a_triton_crash_behind_the_front_door_is_reported_and_supervision_restarts_it(
        tarballs: dict[str, pathlib.Path], tmp_path: pathlib.Path) -> None:
    # Clients get a 502 naming the log; the endpoint's check says what happened. Supervised (`tritonsm serve`), the
    # server starts again on its private port behind the same front door, and the model loads again on first use.
    log_file = tmp_path / "mme-crash.log"
    with MultiModelEndpoint([tarballs["times2"]], log_file=log_file) as endpoint:
        assert send(endpoint, "times2.tar.gz", [NamedTensor("INPUT", "FP32", VECTOR)]).outputs[0].array.tolist() == [
            [2, 4, 6]]
        os.kill(endpoint.server_pid, signal.SIGKILL)
        with pytest.raises(ServerCrashedError, match=r"^the Triton server exited unexpectedly with signal SIGKILL; "):
            for _ in range(50):  # until the kernel has reaped it
                endpoint.check_running()
                time.sleep(0.1)
        with pytest.raises(InvokeError) as caught:
            send(endpoint, "times2.tar.gz", [NamedTensor("INPUT", "FP32", VECTOR)])
        assert str(caught.value) == (
            "the endpoint rejected the request (HTTP 502): the Triton server behind this endpoint did not answer "
            f"([Errno 111] Connection refused); see its log: {log_file}"
        )
        endpoint.supervise(RestartPolicy(), "endpoint mme")
        assert endpoint.down() is None and loaded(endpoint) == []
        assert send(endpoint, "times2.tar.gz", [NamedTensor("INPUT", "FP32", VECTOR)]).outputs[0].array.tolist() == [
            [2, 4, 6]]
        assert endpoint.cache.events[-2:] == [("server restarted", ""), ("load", "times2.tar.gz")]

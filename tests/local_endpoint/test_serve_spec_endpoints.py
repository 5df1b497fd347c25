"""`tritonsm serve <endpoint>` on tarballs that `tritonsm build` really built, answering correct results.

One tiny spec is built once for the module: a T5 Python-backend model and a
text ensemble (tokenizer step + ONNX tiny-BERT) on a multi-model endpoint, the
same ensemble on a single-model endpoint, and a TensorRT endpoint this machine
cannot build. Every answer is compared with the same built model run directly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import pathlib
import shutil
import signal
import subprocess
import sys
import tarfile
from concurrent.futures import ThreadPoolExecutor

import boto3
import numpy as np
import pytest

from deployment_spec.builds.manifest import Manifest, load_manifest
from local_endpoint.client.http_call import call
from local_endpoint.client.invoke import invoke_url
from local_endpoint.client.payload import NamedTensor, encode_request
from local_endpoint.endpoints.single_model import SingleModelEndpoint
from local_endpoint.server.ports import free_port
from tritonsm.cli import main as tritonsm_main

REPOSITORY_ROOT = pathlib.Path(__file__).resolve().parents[2]
SEQUENCE = 16
SPEC = f"""\
project: LocalTest
triton_version: "25.04"
models:
  t5:
    backend: python
    source: {{recipe: tiny-t5}}
    sequence_length: {SEQUENCE}
    max_batch_size: 4
    dynamic_batching: {{max_queue_delay_us: 500}}
  preprocess:
    backend: python
    source: {{recipe: text-preprocess}}
    sequence_length: {SEQUENCE}
    max_batch_size: 8
  classifier:
    backend: onnxruntime
    source: {{recipe: tiny-bert}}
    sequence_length: {SEQUENCE}
    max_batch_size: 8
    dynamic_batching: {{preferred_batch_sizes: [4], max_queue_delay_us: 100}}
  text:
    backend: ensemble
    max_batch_size: 8
    ensemble:
      steps:
        - model: preprocess
          input_map: {{TEXT: TEXT}}
          output_map: {{input_ids: ids, attention_mask: mask}}
        - model: classifier
          input_map: {{input_ids: ids, attention_mask: mask}}
          output_map: {{logits: logits}}
      outputs: [logits]
  plan:
    backend: tensorrt
    source: {{recipe: tiny-bert}}
    sequence_length: {SEQUENCE}
    max_batch_size: 8
endpoints:
  t5-mme:
    kind: multi-model
    models: [t5, text]
    instance_type: ml.g5.2xlarge
    container: {{shm_default_bytes: 67108864, shm_growth_bytes: 16777216}}
  text-sme:
    kind: single-model
    models: [text]
    instance_type: ml.g5.xlarge
  gpu-only:
    kind: multi-model
    models: [plan]
    instance_type: ml.g5.xlarge
environments:
  dev: {{region: us-east-1, removal_policy: destroy}}
"""
TEXTS = ["Hello world, this is a GREAT movie review!", "translate english to german: the model is fast"]
STARTED = "press Ctrl-C to stop"


@dataclasses.dataclass(frozen=True)
class Built:
    spec: pathlib.Path
    manifest_path: pathlib.Path
    manifest: Manifest

    def tarball(self, endpoint: str, model: str) -> pathlib.Path:
        artifact = next(a for a in self.manifest.endpoints[endpoint].artifacts if model in a.models)
        return self.manifest.artifact_path(artifact)

    def target_model(self, endpoint: str, model: str) -> str:
        return self.tarball(endpoint, model).name


@dataclasses.dataclass(frozen=True)
class Served:
    url: str
    lines: list[str]  # what `tritonsm serve` printed up to "press Ctrl-C to stop"

    @property
    def log_path(self) -> pathlib.Path:
        return pathlib.Path(next(line for line in self.lines if line.startswith("server log: "))[12:])


@pytest.fixture(scope="module")
def built(module_tmp) -> Built:
    """The spec above, built once with `tritonsm build` (tiny models: about half a minute; T5's
    execution environment, built for this machine's Python so that no multi-GB CUDA torch for the
    image is fetched: a minute more the first time, then from the cache)."""
    root = module_tmp.mktemp("spec-endpoints")
    spec = root / "spec.yaml"
    spec.write_text(SPEC)
    assert tritonsm_main(["build", "--spec", str(spec), "--out", str(root / "assets"),
                          "--work-dir", str(root / "work"), "--python-env-for", "local"]) == 0
    shutil.rmtree(root / "work")  # the build cache (T5 once more, ~220 MB); these tests only serve the archives
    manifest_path = root / "assets" / "manifest.json"
    return Built(spec, manifest_path, load_manifest(manifest_path))


@contextlib.contextmanager
def tritonsm_serve(built: Built, endpoint: str, *flags: str):
    """`tritonsm serve <endpoint>` as a user runs it; stopped with Ctrl-C (SIGINT) on exit."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tritonsm", "serve", endpoint, "--spec", str(built.spec), "--manifest",
         str(built.manifest_path), "--port", str(port), "--startup-timeout", "90", *flags],
        cwd=REPOSITORY_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        lines = []
        for line in process.stdout:  # ends at the latest when the start-up timeout stops serve
            lines.append(line.rstrip("\n"))
            if STARTED in line:
                break
        else:
            raise AssertionError(f"tritonsm serve {endpoint} did not start: {lines} {process.stderr.read()}")
        yield Served(f"http://127.0.0.1:{port}", lines)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


@pytest.fixture(scope="module")
def t5_mme(built: Built):
    # Capacity 1: every switch of target model unloads the other one.
    with tritonsm_serve(built, "t5-mme", "--cpu-stand-in", "--mme-capacity", "1") as served:
        yield served


@pytest.fixture(scope="module")
def text_sme(built: Built):
    with tritonsm_serve(built, "text-sme", "--cpu-stand-in") as served:
        yield served


def text_request(texts: list[str], binary: bool = False):
    array = np.array([[text.encode()] for text in texts], dtype=np.object_)
    return encode_request([NamedTensor("TEXT", "BYTES", array)], binary=binary)


def unpack(tarball: pathlib.Path, destination: pathlib.Path) -> pathlib.Path:
    with tarfile.open(tarball) as archive:
        archive.extractall(destination, filter="data")
    return destination


def t5_directly(model_version_dir: pathlib.Path, texts: list[str]) -> tuple[np.ndarray, list[str]]:
    """Greedy generation with the built T5 weights and tokenizer, outside Triton."""
    import torch
    from tokenizers import Tokenizer
    from transformers import T5ForConditionalGeneration

    tokenizer = Tokenizer.from_file(str(model_version_dir / "tokenizer.json"))
    tokenizer.enable_truncation(SEQUENCE)
    tokenizer.enable_padding(pad_id=tokenizer.token_to_id("<pad>") or 0, pad_token="<pad>")
    model = T5ForConditionalGeneration.from_pretrained(model_version_dir / "t5").eval()
    encoded = tokenizer.encode_batch(texts)
    with torch.no_grad():
        generated = model.generate(input_ids=torch.tensor([e.ids for e in encoded]),
                                   attention_mask=torch.tensor([e.attention_mask for e in encoded]),
                                   max_new_tokens=32, do_sample=False).numpy()
    return generated, tokenizer.decode_batch(generated.tolist(), skip_special_tokens=True)


def classifier_directly(repository: pathlib.Path, texts: list[str]) -> np.ndarray:
    """The ensemble's answer without Triton: an independent WordPiece tokenizer, then ONNX Runtime."""
    import onnxruntime
    from tokenizers import BertWordPieceTokenizer

    tokenizer = BertWordPieceTokenizer(str(repository / "preprocess" / "1" / "vocab.txt"), lowercase=True)
    tokenizer.enable_truncation(SEQUENCE)
    tokenizer.enable_padding(length=SEQUENCE, pad_id=0)
    encoded = tokenizer.encode_batch(texts)
    session = onnxruntime.InferenceSession(str(repository / "classifier" / "1" / "model.onnx"),
                                           providers=["CPUExecutionProvider"])
    feed = {"input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64)}
    return session.run(["logits"], feed)[0]


def loaded_models(served: Served) -> list[str]:
    port = int(served.url.rsplit(":", 1)[1])
    return json.loads(call("127.0.0.1", port, "GET", "/models").body)["models"]


# --- the T5 Python-backend MME -------------------------------------------------------------------------------


@pytest.mark.triton
def test_t5_mme_generates_what_the_built_model_generates(built: Built, t5_mme: Served, tmp_path: pathlib.Path) -> None:
    target = built.target_model("t5-mme", "t5")
    response = invoke_url(t5_mme.url, text_request(TEXTS), target_model=target)
    expected_ids, expected_text = t5_directly(unpack(built.tarball("t5-mme", "t5"), tmp_path) / "t5" / "1", TEXTS)
    outputs = {tensor.name: tensor.array for tensor in response.outputs}
    assert response.model_name == target
    assert np.array_equal(outputs["output_ids"], expected_ids)
    assert [row[0].decode() for row in outputs["OUTPUT_TEXT"]] == expected_text


@pytest.mark.triton
def test_t5_runs_inside_the_execution_environment_the_build_made(built: Built, t5_mme: Served) -> None:
    # The recipe's torch, transformers and tokenizers come from the environment in the tarball: the
    # environment's pyvenv.cfg leaves every other site-packages (this virtualenv's too) off sys.path.
    env = built.manifest.models["t5"].execution_environment
    assert env.built_for == "local" and {"torch==2.13.0+cpu", "transformers==5.23.0"} <= set(env.packages)
    with tarfile.open(built.tarball("t5-mme", "t5")) as archive:
        assert f"t5/{env.file}" in archive.getnames()
    invoke_url(t5_mme.url, text_request(TEXTS[:1]), target_model=built.target_model("t5-mme", "t5"))
    log = t5_mme.log_path.read_text()
    assert f"Using Python execution env " in log and f"/t5/{env.file}" in log


def test_json_and_binary_payloads_give_the_same_generation(built: Built, t5_mme: Served) -> None:
    # Right after the test above, while T5 is still loaded: a reload costs seconds (torch in the stub).
    target = built.target_model("t5-mme", "t5")
    as_json = invoke_url(t5_mme.url, text_request(TEXTS), target_model=target).outputs
    as_binary = invoke_url(t5_mme.url, text_request(TEXTS, binary=True), target_model=target).outputs
    assert [(t.name, t.array.tolist()) for t in as_json] == [(t.name, t.array.tolist()) for t in as_binary]


@pytest.mark.triton
def test_mme_loads_on_first_use_and_evicts_the_least_recently_used(built: Built, t5_mme: Served) -> None:
    # Capacity 1, two built models: each switch unloads the other (SageMaker's DELETE /models/<name>),
    # and a reloaded model answers as before.
    t5, text = built.target_model("t5-mme", "t5"), built.target_model("t5-mme", "text")
    unloads_before = t5_mme.log_path.read_text().count("successfully unloaded")
    first = invoke_url(t5_mme.url, text_request(TEXTS[:1]), target_model=t5).outputs
    assert loaded_models(t5_mme) == [t5]
    logits = invoke_url(t5_mme.url, text_request(TEXTS[:1]), target_model=text).outputs[0].array
    assert loaded_models(t5_mme) == [text]
    again = invoke_url(t5_mme.url, text_request(TEXTS[:1]), target_model=t5).outputs
    assert loaded_models(t5_mme) == [t5]
    assert [t.array.tolist() for t in first] == [t.array.tolist() for t in again]
    assert logits.shape == (1, 2)
    # Triton itself unloaded each evicted model (the ensemble with its two steps, then T5).
    assert t5_mme.log_path.read_text().count("successfully unloaded") > unloads_before


@pytest.mark.triton
def test_mme_announces_its_stand_in(t5_mme: Served) -> None:
    # `tritonsm serve <endpoint>` passes the spec's release (25.04 here): its ONNX Runtime runs the model.
    assert ("model 'classifier' (onnxruntime) runs as a CPU stand-in: a Python-backend model running ONNX Runtime "
            "1.21.0 (Triton 25.04's release) on its model.onnx; latency and the backend's tuning parameters are not "
            "representative") in t5_mme.lines


# --- the ensemble SME with the ONNX classifier stood in ------------------------------------------------------


@pytest.mark.triton
def test_sme_start_up_labels_the_stand_in(built: Built, text_sme: Served) -> None:
    assert without_log_path(text_sme.lines) == [
        f"serving 1 model archive(s) (SME) at {text_sme.url}",
        "default model: text",
        "model 'classifier' (onnxruntime) runs as a CPU stand-in: a Python-backend model running ONNX Runtime 1.21.0 "
        "(Triton 25.04's release) on its model.onnx; latency and the backend's tuning parameters are not "
        "representative",
        f"SageMaker Runtime API: InvokeEndpoint at {text_sme.url}/endpoints/ENDPOINT_NAME/invocations for "
        "LocalTest-dev-text-sme",
        f"point boto3, the AWS CLI and the SageMaker SDK here: export AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME={text_sme.url}",
        STARTED,
    ]


def without_log_path(lines: list[str]) -> list[str]:
    return [line for line in lines if not line.startswith(("server log: ", METRICS_LINE))]


METRICS_LINE = "Triton metrics (Prometheus): "


@pytest.mark.triton
def test_serve_prints_tritons_metrics_url_and_its_counters_follow_requests(text_sme: Served) -> None:
    # The spec's container turns Triton's metrics on (port 23000 on SageMaker); the local server gets a free port.
    from local_endpoint.server.triton_metrics import scrape, since

    [url] = [line[len(METRICS_LINE):] for line in text_sme.lines if line.startswith(METRICS_LINE)]
    assert url.startswith("http://127.0.0.1:") and url.endswith("/metrics") and ":23000/" not in url
    before = scrape(url)
    invoke_url(text_sme.url, text_request(TEXTS[:1]))
    invoke_url(text_sme.url, text_request(TEXTS, binary=True))
    counted = since(scrape(url), before)
    # The ensemble and its steps each counted both requests.
    assert {model: c.requests for model, c in counted.items()} == {"classifier": 2, "preprocess": 2, "text": 2}


@pytest.mark.triton
def test_ensemble_logits_equal_onnx_runtime_on_the_built_model(built: Built, text_sme: Served,
                                                               tmp_path: pathlib.Path) -> None:
    response = invoke_url(text_sme.url, text_request(TEXTS))
    expected = classifier_directly(unpack(built.tarball("text-sme", "text"), tmp_path), TEXTS)
    assert response.model_name == "text"
    assert response.outputs[0].name == "logits"
    np.testing.assert_allclose(response.outputs[0].array, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.triton
def test_json_and_binary_payloads_give_the_same_logits(text_sme: Served) -> None:
    as_json = invoke_url(text_sme.url, text_request(TEXTS)).outputs[0].array
    as_binary = invoke_url(text_sme.url, text_request(TEXTS, binary=True)).outputs[0].array
    assert as_binary.dtype == np.float32 and np.array_equal(as_json, as_binary)


@pytest.mark.triton
def test_stand_in_answers_concurrent_requests_row_by_row(built: Built, tmp_path: pathlib.Path) -> None:
    # The ONNX model alone as the default model: concurrent one-row requests meet in the dynamic
    # batcher, run as one ONNX Runtime call and are split again; each must get its own row back.
    tarball = built.tarball("text-sme", "text")
    session_dir = unpack(tarball, tmp_path / "repository")
    import onnxruntime

    session = onnxruntime.InferenceSession(str(session_dir / "classifier" / "1" / "model.onnx"),
                                           providers=["CPUExecutionProvider"])
    rows = np.random.default_rng(0).integers(5, 250, size=(12, SEQUENCE), dtype=np.int64)
    mask = np.ones_like(rows)
    expected = session.run(["logits"], {"input_ids": rows, "attention_mask": mask})[0]
    env = {"SAGEMAKER_TRITON_LOG_VERBOSE": "0"}
    with SingleModelEndpoint(tarball, default_model="classifier", env=env, cpu_stand_in=True) as endpoint:
        def one(index: int) -> np.ndarray:
            request = encode_request([NamedTensor("input_ids", "INT64", rows[index:index + 1]),
                                      NamedTensor("attention_mask", "INT64", mask[index:index + 1])], binary=True)
            return invoke_url(endpoint.url, request).outputs[0].array[0]

        with ThreadPoolExecutor(6) as pool:
            answers = np.stack(list(pool.map(one, range(len(rows)))))
    np.testing.assert_allclose(answers, expected, rtol=1e-5, atol=1e-6)


# --- `tritonsm serve` refusals, each with its exact message --------------------------------------------------


def serve_error(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str]:
    code = tritonsm_main(["serve", *argv])
    return code, capsys.readouterr().err


def test_an_unknown_endpoint_is_named_with_a_suggestion(built: Built, capsys: pytest.CaptureFixture) -> None:
    assert serve_error(capsys, "text-smee", "--spec", str(built.spec), "--manifest", str(built.manifest_path)) == (
        2, "error: endpoint 'text-smee' is not in spec.yaml (endpoints: t5-mme, text-sme, gpu-only); "
           "did you mean 'text-sme'?\n")


def test_a_missing_manifest_says_to_build(built: Built, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture) -> None:
    manifest = tmp_path / "assets" / "manifest.json"
    assert serve_error(capsys, "text-sme", "--spec", str(built.spec), "--manifest", str(manifest)) == (
        2, f"error: {manifest}: no build manifest; run `tritonsm build` first (it writes {manifest})\n")


def test_an_endpoint_the_build_skipped_says_why(built: Built, tmp_path: pathlib.Path,
                                                capsys: pytest.CaptureFixture) -> None:
    # The real build skipped gpu-only (no GPU here); its reasons are machine-specific, so fix them.
    raw = json.loads(built.manifest_path.read_text())
    raw["not_built"] = {"endpoints.gpu-only": "models not built: plan",
                        "models.plan": "model plan: a TensorRT plan needs an NVIDIA GPU"}
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps(raw))
    assert serve_error(capsys, "gpu-only", "--spec", str(built.spec), "--manifest", str(manifest)) == (
        2, f"error: {manifest}: endpoint 'gpu-only' has not been built (models not built: plan): model plan: a "
           "TensorRT plan needs an NVIDIA GPU; run `tritonsm build` where the models can be built\n")


def test_an_endpoint_missing_from_the_manifest_says_to_build(built: Built, tmp_path: pathlib.Path,
                                                             capsys: pytest.CaptureFixture) -> None:
    # E.g. added to the spec after the last build.
    raw = json.loads(built.manifest_path.read_text())
    del raw["endpoints"]["text-sme"]
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps(raw))
    assert serve_error(capsys, "text-sme", "--spec", str(built.spec), "--manifest", str(manifest)) == (
        2, f"error: {manifest}: endpoint 'text-sme' has not been built; run `tritonsm build`\n")


def test_deleted_tarballs_are_named(built: Built, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture) -> None:
    manifest = tmp_path / "manifest.json"  # a copy whose tarballs are not beside it
    manifest.write_text(built.manifest_path.read_text())
    tarball = built.tarball("text-sme", "text").name
    assert serve_error(capsys, "text-sme", "--spec", str(built.spec), "--manifest", str(manifest)) == (
        2, f"error: {manifest}: {tarball} listed but missing on disk; run `tritonsm build`\n")


def test_an_onnx_model_without_the_stand_in_flag_names_the_flag(built: Built, capsys: pytest.CaptureFixture) -> None:
    tarball = built.tarball("text-sme", "text")
    assert serve_error(capsys, "text-sme", "--spec", str(built.spec), "--manifest", str(built.manifest_path)) == (
        1, "error: cannot serve locally, the Triton server of the nvidia-pytriton wheel lacks a backend:\n"
           f"  model 'classifier' in {tarball} needs the 'onnxruntime' backend\n"
           "it has only: ensemble, python; test these models on a deployed endpoint (tritonsm invoke "
           "--endpoint ENDPOINT --deployed), or exercise their payloads locally with --cpu-stand-in (onnxruntime models then "
           "run as labelled Python-backend stand-ins on the CPU; latency is not representative)\n")


def test_smoke_records_at_build_time_and_compares_later(built: Built, text_sme: Served, tmp_path: pathlib.Path,
                                                         capsys: pytest.CaptureFixture) -> None:
    # The pipeline's two smoke steps: --local --record-dir after the build (this starts its own
    # server), --expected-dir after the deploy (here: the endpoint `tritonsm serve` runs).
    common = ["--spec", str(built.spec), "--manifest", str(built.manifest_path)]
    assert tritonsm_main(["smoke", "text-sme", "t5-mme", *common, "--local", "--record-dir", str(tmp_path)]) == 0
    recorded = json.loads((tmp_path / "text-sme.json").read_text())["models"]
    assert list(recorded) == ["text"] and np.shape(recorded["text"]["logits"]) == (1, 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t5-mme.json", "text-sme.json"]
    capsys.readouterr()
    assert tritonsm_main(["smoke", "text-sme", *common, "--url", text_sme.url, "--expected-dir", str(tmp_path)]) == 0
    assert "  text: ok, values match the recording" in capsys.readouterr().out
    # The container path pasted after the address reaches the same runtime.
    assert tritonsm_main(["smoke", "text-sme", *common, "--url", f"{text_sme.url}/invocations",
                          "--expected-dir", str(tmp_path / "none")]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        f"smoke text-sme: no recording in {tmp_path / 'none'} (the build could not run it locally): outputs "
        "checked against the manifest only")


def test_smoke_skips_an_endpoint_the_local_server_cannot_run(built: Built, tmp_path: pathlib.Path,
                                                             capsys: pytest.CaptureFixture) -> None:
    # No stand-in exists for a TensorRT plan: such an endpoint is named and skipped, and nothing is recorded.
    plan_dir = tmp_path / "repo" / "text"
    (plan_dir / "1").mkdir(parents=True)
    (plan_dir / "config.pbtxt").write_text('platform: "tensorrt_plan"\nmax_batch_size: 8\n')
    (plan_dir / "1" / "model.plan").write_bytes(b"not a plan")
    tarball = tmp_path / "text-sme-0123456789ab.tar.gz"
    with tarfile.open(tarball, "w:gz") as archive:
        archive.add(plan_dir, arcname="text")
    manifest = json.loads(built.manifest_path.read_text())
    manifest["endpoints"]["text-sme"]["artifacts"][0].update(
        file=tarball.name, size=tarball.stat().st_size, sha256="0123456789ab" + "0" * 52)
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    assert tritonsm_main(["smoke", "text-sme", "--spec", str(built.spec), "--manifest", str(tmp_path / "manifest.json"),
                          "--local", "--record-dir", str(tmp_path / "expected")]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("smoke text-sme: skipped, the local server cannot run it: cannot serve locally, the "
                            "Triton server of the nvidia-pytriton wheel lacks a backend:")
    assert not (tmp_path / "expected").exists()


# --- the reference articles' client code, unchanged but for the endpoint URL (set by environment) -----------


@pytest.fixture
def runtime_environment(monkeypatch):
    """What an application's environment holds, plus AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME (set per test)."""
    for key, value in {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local",
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    return monkeypatch


@pytest.mark.triton
def test_the_t5_articles_mme_call_runs_against_the_local_endpoint(built: Built, t5_mme: Served,
                                                                  runtime_environment) -> None:
    runtime_environment.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", t5_mme.url)
    endpoint_name = "LocalTest-dev-t5-mme"   # the deployed name <project>-<environment>-<endpoint>
    t5_target = built.target_model("t5-mme", "t5")

    def get_text_payload(model_name, texts):  # the notebook's helper (not in the article), for this model:
        # the texts as its BYTES input, asking for the generated ids the article reads as outputs[0].
        return {"inputs": [{"name": "TEXT", "shape": [len(texts), 1], "datatype": "BYTES",
                            "data": [[text] for text in texts]}],
                "outputs": [{"name": "output_ids"}]}

    # The article's invocation (Python-backend T5 on an MME), as printed there.
    runtime_sm_client = boto3.client("sagemaker-runtime")
    texts_to_translate = ["translate English to German: The house is wonderful."]
    batch_size = len(texts_to_translate)
    t5_payload = get_text_payload("t5-small", texts_to_translate)
    response = runtime_sm_client.invoke_endpoint(
        EndpointName=endpoint_name, ContentType="application/octet-stream", Body=json.dumps(t5_payload),
        TargetModel=t5_target)
    response_body = json.loads(response["Body"].read().decode("utf8"))
    output_ids = np.array(response_body["outputs"][0]["data"]).reshape(batch_size, -1)
    # The same generated ids as the container-contract call gives.
    direct = invoke_url(t5_mme.url, text_request(texts_to_translate), target_model=t5_target).outputs
    expected = {tensor.name: tensor.array for tensor in direct}["output_ids"]
    assert np.array_equal(output_ids, expected.reshape(batch_size, -1))


@pytest.mark.triton
def test_the_ensembles_articles_binary_json_call_runs_against_the_local_endpoint(text_sme: Served,
                                                                                 runtime_environment) -> None:
    import tritonclient.http as httpclient
    runtime_environment.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", text_sme.url)
    endpoint_name = "LocalTest-dev-text-sme"
    runtime_sm_client = boto3.client("sagemaker-runtime")
    texts = np.array([[text.encode()] for text in TEXTS], dtype=np.object_)

    # The article's binary+json request, built and read by tritonclient's helpers (its notebook's code).
    inputs = [httpclient.InferInput("TEXT", list(texts.shape), "BYTES")]
    inputs[0].set_data_from_numpy(texts, binary_data=True)
    outputs = [httpclient.InferRequestedOutput("logits", binary_data=True)]
    request_body, header_length = httpclient.InferenceServerClient.generate_request_body(inputs, outputs=outputs)
    response = runtime_sm_client.invoke_endpoint(
        EndpointName=endpoint_name,
        ContentType="application/vnd.sagemaker-triton.binary+json;json-header-size={}".format(header_length),
        Body=request_body)
    header_length_prefix = "application/vnd.sagemaker-triton.binary+json;json-header-size="
    header_length_str = response["ContentType"][len(header_length_prefix):]
    result = httpclient.InferenceServerClient.parse_response_body(response["Body"].read(),
                                                                  header_length=int(header_length_str))
    logits = result.as_numpy("logits")
    # The same logits as the JSON call through the container contract.
    assert np.allclose(logits, invoke_url(text_sme.url, text_request(TEXTS)).outputs[0].array, atol=1e-5)


# --- tritonsm serve --all: every endpoint behind one local SageMaker Runtime -----------------------------------


@pytest.mark.triton
def test_serve_all_serves_each_endpoint_under_its_deployed_name(built: Built, runtime_environment) -> None:
    with tritonsm_serve(built, "--all", "--cpu-stand-in") as served:
        t5, text = built.target_model("t5-mme", "t5"), built.target_model("t5-mme", "text")
        endpoints = [line for line in served.lines if line.startswith("  ")]
        # What each endpoint serves and how a request names it; the TensorRT endpoint is left out and named.
        assert served.lines[0] == f"serving 2 endpoint(s) at {served.url}:"
        assert endpoints[0] == f"  LocalTest-dev-t5-mme: multi-model (TargetModel): {', '.join(sorted([t5, text]))}"
        assert "  LocalTest-dev-text-sme: single-model, default model text" in endpoints
        assert endpoints[-1].startswith("  LocalTest-dev-gpu-only: skipped, ")
        assert served.lines[-2:] == [
            f"point boto3, the AWS CLI and the SageMaker SDK here: export AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME={served.url}",
            STARTED]
        runtime_environment.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", served.url)
        client = boto3.client("sagemaker-runtime")   # the application's client, unchanged
        request = text_request(TEXTS[:1])
        from_sme = client.invoke_endpoint(EndpointName="LocalTest-dev-text-sme", ContentType=request.content_type,
                                          Body=request.body)
        from_mme = client.invoke_endpoint(EndpointName="LocalTest-dev-t5-mme", ContentType=request.content_type,
                                          Body=request.body, TargetModel=text)
        # One port, two endpoints: the same ensemble answers the same logits through both.
        sme_logits = json.loads(from_sme["Body"].read())["outputs"][0]["data"]
        assert np.allclose(sme_logits, json.loads(from_mme["Body"].read())["outputs"][0]["data"], atol=1e-5)


@pytest.mark.parametrize("argv, message", [
    (["--all", "text-sme"], "--all serves every endpoint of the spec; leave out the endpoint name 'text-sme', or drop "
                            "--all to serve that endpoint alone"),
    ([], "name the endpoint to serve (one of: t5-mme, text-sme, gpu-only) or pass --all to serve every endpoint"),
    (["--all", "--component", "t5"], "--component applies to one endpoint of inference components; --all serves "
                                     "every component of every endpoint: drop --component, or name that endpoint "
                                     "instead of --all"),
    (["--all", "--log-file", "x.log"], "--log-file applies to one endpoint; with --all each server logs to a file "
                                       "of its own under the temp directory (the start-up lines name them): drop "
                                       "--log-file"),
], ids=["all-and-a-name", "neither", "all-component", "all-log-file"])
def test_serve_all_argument_mistakes(built: Built, capsys: pytest.CaptureFixture, argv: list[str],
                                     message: str) -> None:
    assert serve_error(capsys, *argv, "--spec", str(built.spec), "--manifest", str(built.manifest_path)) == (
        2, f"error: {message}\n")

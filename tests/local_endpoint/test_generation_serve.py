"""Generating task entries served as users run them (issue #59): `tritonsm build` of a causal LM with a chat template
, of a Whisper and of an audio language model (Qwen3-ASR), `tritonsm serve --all`, boto3's own ``invoke_endpoint_with_response_stream`` reassembling the event
stream; the text equals transformers' greedy ``generate`` on the same prompt or clip; bad requests are answered 400
with the reason; a client that hangs up mid-stream leaves the server answering; `tritonsm invoke --stream` prints the
text. (The encoder-decoder text kind, text2text-generation, is served by benchmarks/hf_generation_coverage.py: T5,
BART, Marian, mBART, Pegasus; here the Whisper carries the engine's encoder-decoder path through a real Triton, and
tests/model_build/test_generation_engine.py checks T5 and BART token by token.)"""
from __future__ import annotations

import json
import pathlib
import re
import subprocess
import time
import urllib.request
import sys
import threading
from typing import Any, Iterator

import pytest
from botocore.exceptions import ClientError

from benchmarks.tooling import audio_llm_checkpoints, generation_checkpoints, speech_reference
from local_endpoint.client.local_clients import local_client
from local_endpoint.server.ports import free_port

ROOT = pathlib.Path(__file__).resolve().parents[2]
STARTED = "press Ctrl-C to stop"
NEW = 10
SPEC = """\
project: Gen
triton_version: "25.09"
signing: {unsigned_reason: "a test"}
models:
  writer:
    backend: python
    weights: ckpt/llama
    max_batch_size: 4
    task: {kind: text-generation, generation: {max_new_tokens: 24, default_max_new_tokens: 8, max_temperature: 1.5}}
  listener:
    backend: python
    weights: ckpt/whisper
    max_batch_size: 4
    task: {kind: automatic-speech-recognition, max_audio_seconds: 10, generation: {languages: [en, fr]}}
  hearer:
    backend: python
    weights: ckpt/qwen3_asr
    max_batch_size: 4
    task: {kind: automatic-speech-recognition, max_audio_seconds: 10}
  follower:
    backend: python
    weights: ckpt/kyutai
    max_batch_size: 4
    task: {kind: automatic-speech-recognition, max_audio_seconds: 10}
endpoints:
  chat: {kind: single-model, models: [writer], instance_type: ml.g5.2xlarge}
  listen: {kind: single-model, models: [listener], instance_type: ml.g5.2xlarge}
  hear: {kind: single-model, models: [hearer], instance_type: ml.g5.2xlarge}
  follow: {kind: single-model, models: [follower], instance_type: ml.g5.2xlarge}
environments:
  dev: {region: us-east-1}
"""


@pytest.fixture(scope="module")
def built(module_tmp) -> pathlib.Path:
    root = module_tmp.mktemp("generation")
    generation_checkpoints.save(root / "ckpt" / "llama", "llama", generation_checkpoints.CHAT_TEMPLATE)
    generation_checkpoints.save_whisper(root / "ckpt" / "whisper")
    audio_llm_checkpoints.save(root / "ckpt" / "qwen3_asr", "qwen3_asr")
    audio_llm_checkpoints.save(root / "ckpt" / "kyutai", "kyutai_speech_to_text")
    (root / "spec.yaml").write_text(SPEC)
    done = subprocess.run([sys.executable, "-m", "tritonsm", "build", "--spec", str(root / "spec.yaml"),
                           "--python-env-for", "local"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return root


@pytest.fixture(scope="module")
def served(built: pathlib.Path) -> Iterator[tuple[str, list[str]]]:
    """The runtime's URL and every Triton metrics URL the banner prints."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "tritonsm", "serve", "--all", "--spec", str(built / "spec.yaml"),
                                "--port", str(port)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    lines = []
    assert process.stdout is not None
    for line in process.stdout:
        lines.append(line)
        if STARTED in line:
            break
    else:
        raise AssertionError("tritonsm serve did not start:\n" + "".join(lines))
    threading.Thread(target=process.stdout.read, daemon=True).start()  # keep its pipe drained
    try:
        yield f"http://127.0.0.1:{port}", re.findall(r"http://127\.0\.0\.1:\d+/metrics", "".join(lines))
    finally:
        process.terminate()
        process.wait(timeout=60)


@pytest.fixture(scope="module")
def url(served: tuple[str, list[str]]) -> str:
    return served[0]


def _stream(client: Any, endpoint: str, body: dict) -> str:
    """The text of a streamed answer, reassembled as a client must: parts need not end on event boundaries."""
    response = client.invoke_endpoint_with_response_stream(EndpointName=endpoint, ContentType="application/json",
                                                           Body=json.dumps(body))
    raw = b"".join(event["PayloadPart"]["Bytes"] for event in response["Body"])
    events = [json.loads(line[len(b"data: "):]) for line in raw.split(b"\n") if line.startswith(b"data: ")]
    return "".join(event.get("text_output", "") for event in events)


def _refused(client: Any, endpoint: str, body: dict) -> str:
    """The reason a streamed request was answered 400 (SageMaker's ModelError around the model's JSON error)."""
    with pytest.raises(ClientError) as caught:
        _stream(client, endpoint, body)
    error = caught.value.response
    assert (error["Error"]["Code"], error["OriginalStatusCode"]) == ("ModelError", 400)
    return str(json.loads(error["OriginalMessage"])["error"])


def _reference(folder: pathlib.Path, prompt: str = "", messages: list | None = None) -> str:
    import torch
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) if messages else prompt
    ids = tokenizer(text, add_special_tokens=not messages, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=NEW)
    new = out[0][ids.shape[1]:]
    return str(tokenizer.decode(new, skip_special_tokens=True))


@pytest.mark.triton
def test_a_prompt_streams_back_the_text_of_greedy_generate(built: pathlib.Path, url: str) -> None:
    client = local_client("sagemaker-runtime", url)
    prompt = "a fine film truly moving"
    got = _stream(client, "Gen-dev-chat", {"text_input": prompt, "parameters": {"max_new_tokens": NEW}})
    assert got == _reference(built / "ckpt" / "llama", prompt)
    assert got  # the tiny model wanders: an empty answer would prove nothing


@pytest.mark.triton
def test_chat_messages_go_through_the_checkpoints_template_on_the_endpoint(built: pathlib.Path, url: str) -> None:
    messages = [{"role": "user", "content": "hello there"}]
    got = _stream(local_client("sagemaker-runtime", url), "Gen-dev-chat",
                  {"messages": json.dumps(messages), "parameters": {"max_new_tokens": NEW}})
    assert got == _reference(built / "ckpt" / "llama", messages=messages)


@pytest.mark.triton
def test_invoke_endpoint_answers_the_whole_text_in_one_event(built: pathlib.Path, url: str) -> None:
    body = {"text_input": "the weather in tokyo", "parameters": {"max_new_tokens": NEW, "stream": False}}
    answer = local_client("sagemaker-runtime", url).invoke_endpoint(
        EndpointName="Gen-dev-chat", ContentType="application/json", Body=json.dumps(body))["Body"].read()
    events = [line for line in answer.split(b"\n") if line.startswith(b"data: ")]
    assert len(events) == 1
    assert json.loads(events[0][len(b"data: "):])["text_output"] == _reference(
        built / "ckpt" / "llama", "the weather in tokyo")


@pytest.mark.triton
@pytest.mark.parametrize("parameters,message", [
    ({"max_new_tokens": 100}, "parameters.max_new_tokens: 100 is above this endpoint's bound 24 (the spec's "
                              "task.generation.max_new_tokens); send at most 24"),
    ({"do_sample": True, "temperature": 1.8}, "parameters.temperature: 1.8 is above this endpoint's bound 1.5 (the "
                                              "spec's task.generation.max_temperature); send at most 1.5"),
])
def test_a_request_outside_the_specs_bounds_is_a_400_naming_the_parameter_and_the_bound(url: str, parameters: dict,
                                                                                        message: str) -> None:
    client = local_client("sagemaker-runtime", url)
    assert _refused(client, "Gen-dev-chat", {"text_input": "hello", "parameters": parameters}) == message


@pytest.mark.triton
def test_the_hugging_face_convention_inputs_and_parameters_is_the_same_prompt(built: pathlib.Path, url: str) -> None:
    # What Hugging Face's inference toolkit and TGI clients send, unchanged: {"inputs": ..., "parameters": ...}.
    client = local_client("sagemaker-runtime", url)
    got = _stream(client, "Gen-dev-chat", {"inputs": "the weather in tokyo", "parameters": {"max_new_tokens": NEW}})
    assert got == _reference(built / "ckpt" / "llama", "the weather in tokyo")
    assert _refused(client, "Gen-dev-chat", {"inputs": "a", "text_input": "b"}) == (
        "text_input and inputs are both the prompt; send one of them")


@pytest.mark.triton
def test_a_client_that_hangs_up_mid_stream_leaves_the_server_answering(url: str) -> None:
    client = local_client("sagemaker-runtime", url)
    response = client.invoke_endpoint_with_response_stream(
        EndpointName="Gen-dev-chat", ContentType="application/json",
        Body=json.dumps({"text_input": "the weather in tokyo", "parameters": {"max_new_tokens": 24}}))
    next(iter(response["Body"]))  # the first part, then away
    response["Body"].close()
    assert _stream(client, "Gen-dev-chat", {"text_input": "hello", "parameters": {"max_new_tokens": 4}})


@pytest.mark.triton
def test_tritonsm_invoke_stream_prints_the_text(built: pathlib.Path, url: str) -> None:
    done = subprocess.run([sys.executable, "-m", "tritonsm", "invoke", "--spec", str(built / "spec.yaml"), "--endpoint", "chat",
                           "--url", url, "--stream", "--text", "the weather in tokyo",
                           "--parameter", f"max_new_tokens={NEW}"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == _reference(built / "ckpt" / "llama", "the weather in tokyo") + "\n"


def _writer_metrics(urls: list[str]) -> dict[str, float]:
    """The writer's generation series (name -> value, finish reasons summed), from Triton's Prometheus text."""
    found: dict[str, float] = {}
    for url in urls:
        for line in urllib.request.urlopen(url, timeout=10).read().decode().splitlines():
            match = re.match(r'(tritonsm_generation_\w+)\{([^}]*)\} (\S+)$', line)
            if match and 'model="writer"' in match.group(2) and "le=" not in match.group(2):
                found[match.group(1)] = found.get(match.group(1), 0.0) + float(match.group(3))
    return found


@pytest.mark.triton
def test_the_served_model_counts_its_requests_tokens_and_time_to_first_token(served: tuple[str, list[str]]) -> None:
    url, metrics = served
    before = _writer_metrics(metrics)
    client = local_client("sagemaker-runtime", url)
    for prompt in ("hello", "the weather in tokyo"):
        _stream(client, "Gen-dev-chat", {"text_input": prompt, "parameters": {"max_new_tokens": 5}})
    # The model records a finished request's series on a thread of its own (generation_metrics.py: a metric call never
    # holds up an answer), so the client may read the page before the last one is in: read until the series recorded
    # last (the inter-token gaps) has both requests', for at most 10 s.
    deadline = time.monotonic() + 10
    while True:
        after = _writer_metrics(metrics)
        moved = {name: after[name] - before.get(name, 0.0) for name in after}
        if moved.get("tritonsm_generation_inter_token_latency_seconds_count", 0) >= 8 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert moved["tritonsm_generation_time_to_first_token_seconds_count"] == 2
    assert moved["tritonsm_generation_requests_total"] == 2
    assert moved["tritonsm_generation_output_tokens_total"] == 10  # 5 each: the tiny model never ends early here
    assert moved["tritonsm_generation_inter_token_latency_seconds_count"] == 8  # 4 gaps each
    assert 0 < moved["tritonsm_generation_time_to_first_token_seconds_sum"] < 60


def _tone_wav(rate: int = 16000) -> bytes:
    """One second of a 440 Hz tone as a mono WAV at ``rate``, as a recorder writes it (the standard library's wave)."""
    import io
    import math
    import struct
    import wave

    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(rate)
        writer.writeframes(b"".join(struct.pack("<h", int(16000 * math.sin(2 * math.pi * 440 * i / rate)))
                                    for i in range(rate)))
    return out.getvalue()


@pytest.mark.triton
def test_a_clip_streams_back_whispers_transcript_in_the_language_asked(built: pathlib.Path, url: str) -> None:
    """A WAV, base64 in the generate route's JSON, through the served Whisper; its language and task per request as
    generate takes them; one the spec leaves out is a 400 naming the spec's bound."""
    import base64

    wav = _tone_wav()
    audio = base64.b64encode(wav).decode()
    client = local_client("sagemaker-runtime", url)
    folder = built / "ckpt" / "whisper"
    detected = _stream(client, "Gen-dev-listen", {"audio": audio, "parameters": {"max_new_tokens": NEW}})
    assert detected == speech_reference.transcript(folder, wav, NEW)
    asked = {"language": "french", "task": "translate"}
    translated = _stream(client, "Gen-dev-listen", {"audio": audio, "parameters": {"max_new_tokens": NEW, **asked}})
    assert translated == speech_reference.transcript(folder, wav, NEW, **asked) and translated != detected
    prompted = {"prompt": "Anna and Bob", "language": "french"}
    conditioned = _stream(client, "Gen-dev-listen", {"audio": audio, "parameters": {"max_new_tokens": NEW,
                                                                                    **prompted}})
    assert conditioned == speech_reference.transcript(folder, wav, NEW, **prompted)
    clip = built / "tone.wav"
    clip.write_bytes(wav)
    done = subprocess.run([sys.executable, "-m", "tritonsm", "invoke", "--spec", str(built / "spec.yaml"), "--endpoint",
                           "listen", "--url", url, "--stream", "--audio", str(clip), "--parameter", "language=french",
                           "--parameter", "task=translate", "--parameter", f"max_new_tokens={NEW}"], cwd=ROOT,
                          capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, translated + "\n"), done.stderr
    assert _refused(client, "Gen-dev-listen", {"audio": audio, "parameters": {"language": "de"}}) == (
        "parameters.language: 'de' is not allowed on this endpoint (the spec's task.generation.languages: en, fr); "
        "send one of en, fr")


@pytest.mark.triton
def test_a_clip_streams_back_the_transcript_of_an_audio_language_model(built: pathlib.Path, url: str) -> None:
    """A Qwen3-ASR: its processor's transcription request (the clip inside its chat prompt) on the endpoint, with the
    language and context prompt its processor takes; what it does not take is a 400 naming it."""
    import base64

    wav = _tone_wav()
    audio = base64.b64encode(wav).decode()
    client = local_client("sagemaker-runtime", url)
    folder = built / "ckpt" / "qwen3_asr"
    heard = _stream(client, "Gen-dev-hear", {"audio": audio, "parameters": {"max_new_tokens": NEW}})
    assert heard == speech_reference.transcript(folder, wav, NEW) and heard
    asked = {"language": "en", "prompt": "Anna and Bob"}
    told = _stream(client, "Gen-dev-hear", {"audio": audio, "parameters": {"max_new_tokens": NEW, **asked}})
    assert told == speech_reference.transcript(folder, wav, NEW, **asked) and told != heard
    for parameters, message in (
            ({"task": "translate"}, "parameters.task: this qwen3_asr checkpoint takes no task per request (its "
                                    "processor's transcription request takes language and prompt); remove task"),
            ({"language": "xx"}, "parameters.language: \"xx\" is not a language this qwen3_asr checkpoint "
                                 f"transcribes; send one of {_qwen3_languages()} (a code or its name)"),
            ({"prompt": "x" * 131073}, "parameters.prompt: 131073 characters, more than 2048 tokens can hold, is "
                                       "above this endpoint's bound 2048 (the spec's task.generation.max_prompt_tokens);"
                                       " send a shorter prompt")):
        assert _refused(client, "Gen-dev-hear", {"audio": audio, "parameters": parameters}) == message


@pytest.mark.triton
def test_a_clip_streams_back_the_transcript_of_kyutais_streaming_model(built: pathlib.Path, url: str) -> None:
    """Kyutai's speech-to-text model reads the next 80 ms of audio at every step: its own generate does the stepping
    on the endpoint, the engine each token; the text as generate's, to the clip's end or the request's length."""
    import base64

    wav = _tone_wav(24000)  # the rate its processor works at (the server resamples others; the reference does not)
    audio = base64.b64encode(wav).decode()
    client = local_client("sagemaker-runtime", url)
    folder = built / "ckpt" / "kyutai"
    whole = _stream(client, "Gen-dev-follow", {"audio": audio, "parameters": {"max_new_tokens": 40}})
    assert whole == speech_reference.transcript(folder, wav, 40) and whole  # 40 > its 25 frames: the clip ends it
    assert _stream(client, "Gen-dev-follow", {"audio": audio, "parameters": {"max_new_tokens": 4}}) == \
        speech_reference.transcript(folder, wav, 4)
    assert _refused(client, "Gen-dev-follow", {"audio": audio, "parameters": {"language": "en"}}) == (
        "parameters.language: this kyutai_speech_to_text checkpoint takes no language per request (a streaming model, "
        "it reads the clip alone); remove language")


def _qwen3_languages() -> str:
    from transformers.models.qwen3_asr import processing_qwen3_asr

    return ", ".join(sorted(processing_qwen3_asr.LANGUAGE_CODE_TO_NAME))

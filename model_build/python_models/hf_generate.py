"""Triton Python-backend model: prompts in, text streamed out (issue #59), on ``generation_engine.py`` beside it.

Decoupled (config.pbtxt ``model_transaction_policy { decoupled: true }``, ``max_batch_size: 0``): each request is
answered through its response sender, one response per text delta, then the final flag; Triton's generate-stream
route (SageMaker: ``SAGEMAKER_TRITON_INFERENCE_TYPE=generate_stream``) sends each as one ``data:`` event. Not
decoupled (``task.stream: false``, e.g. on a multi-model endpoint): ``execute`` returns one response per request
with the whole text, the requests of one call decoded together.

- inputs: ``text_input`` (TYPE_STRING, dims [1]: the prompt), ``inputs`` (the same, under the name Hugging Face's
  inference toolkit and TGI clients send it: ``{"inputs": "...", "parameters": {...}}``) or ``messages``
  (TYPE_STRING, dims [1]: a JSON-encoded array of {role, content}, through the checkpoint's chat template); all
  optional in config.pbtxt so a request may carry any one; output ``text_output`` (TYPE_STRING, dims [1]).
- request parameters (the generate route's ``parameters`` object): max_new_tokens, temperature, top_p, top_k,
  repetition_penalty, stop, seed, do_sample, stream (generation_engine.parse_request). With ``"stream": false`` one
  response holds the whole text (Triton's non-streaming generate route wants exactly one).
- config.pbtxt parameters: ``kind`` (text-generation | text2text-generation) and the bounds of
  generation_engine.Limits (max_new_tokens, default_max_new_tokens, max_temperature, max_top_k,
  max_repetition_penalty, max_stop_strings, max_prompt_tokens, max_concurrent).
- the checkpoint (weights, fast tokenizer, generation_config.json) in ``<version>/checkpoint``.
- speech recognition (``kind`` automatic-speech-recognition, a speech encoder-decoder): input ``audio`` (TYPE_STRING,
  dims [1]) instead: one audio file's bytes (what libsndfile reads), base64-encoded, because Triton's generate route
  turns JSON values into tensors and a JSON string cannot hold raw bytes. ``audio_decode.py`` beside this file
  decodes it (its rules: resampled to the feature extractor's sampling rate, mono, at most the
  ``max_audio_seconds`` parameter), the checkpoint's own feature extractor (``preprocessor_config.json``) makes what its encoder reads (input_features or input_values),
  and the engine decodes from them. A Whisper takes request parameters ``language`` and ``task`` as generate takes
  them (whisper_prompt.py beside this file), within the ``languages`` parameter (task.generation.languages). An
  audio language model (Qwen3-ASR, VibeVoice-ASR) gets its prompt and features from its own processor instead
  (transcription_request.py beside this file), with the ``language`` and ``prompt`` its processor takes; Kyutai's
  streaming model its generate inputs, which its own generate reads step by step (step_fed.py beside this file).

A client mistake is one error response (400, step_requests.client_error) and the final flag. A client that hangs up
is seen through ``response_sender.is_cancelled`` (python_backend r24.10 src/pb_stub.cc binds it), and its request
stops decoding. Each request's time to first token, the gaps between its tokens, its token counts and how it
finished are Prometheus metrics on Triton's metrics port (generation_metrics.py). Needs torch and transformers in
the backend's Python (an execution environment, as t5_generate.py).
"""
import base64
import binascii
import json
import os
import sys
import threading
from typing import Any, Callable, Optional

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the engine and step_requests.py ship beside this
from generation_engine import Engine, Limits, RequestError, parse_request  # noqa: E402
from generation_metrics import GenerationMetrics  # noqa: E402
from step_requests import client_error  # noqa: E402

try:  # absent when the build imports this file to check it
    import triton_python_backend_utils as pb_utils
except ImportError:
    pb_utils = None


def _device(args: dict[str, Any]) -> str:
    import torch

    if args.get("model_instance_kind") == "GPU" and torch.cuda.is_available():
        return f"cuda:{args['model_instance_device_id']}"
    return "cpu"


def _text(request: Any, name: str) -> Optional[str]:
    """The request's string input ``name``, or None when the request does not carry it."""
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        return None
    values = np.asarray(tensor.as_numpy(), dtype=object).reshape(-1)
    if values.size != 1:
        raise RequestError(f"{name}: {values.size} values; send exactly one string")
    value = values[0]
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def _messages(text: Optional[str]) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        raise RequestError('messages: not JSON; send a JSON-encoded array such as '
                           '"[{\\"role\\": \\"user\\", \\"content\\": \\"Hello\\"}]"') from None


def _parameters(request: Any) -> dict[str, Any]:
    text = request.parameters() or "{}"
    parameters: Any = json.loads(text)
    if not isinstance(parameters, dict):
        raise RequestError("parameters: not a JSON object; send e.g. \"parameters\": {\"max_new_tokens\": 32}")
    return parameters


class _Answer:
    """One request's response sender: text deltas out (or gathered when not streaming), then the final flag."""

    def __init__(self, sender: Any, stream: bool) -> None:
        self.sender = sender
        self.stream = stream
        self.gathered: list[str] = []

    def text(self, delta: str) -> None:
        if self.stream:
            self._send(delta)
        else:
            self.gathered.append(delta)

    def done(self, reason: Optional[str], usage: dict[str, Any]) -> None:
        if reason is None:  # the engine failed on this request: a server error, not the client's
            error = pb_utils.TritonError(usage.get("error", "generation failed"))
            self.sender.send(pb_utils.InferenceResponse(output_tensors=[], error=error))
        elif not self.stream:
            self._send("".join(self.gathered))
        self.sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def _send(self, text: str) -> None:
        tensor = pb_utils.Tensor("text_output", np.array([text.encode("utf-8")], dtype=np.object_))
        self.sender.send(pb_utils.InferenceResponse(output_tensors=[tensor]), flags=0)


class _Collected:
    """A request of a model that does not stream (not decoupled, ``task.stream: false``): it stands in for the
    response sender, keeping the one response the engine's answer sends, which ``execute`` then returns."""

    def __init__(self) -> None:
        self.response: Any = None
        self.finished = threading.Event()

    def send(self, response: Any = None, flags: int = 0) -> None:
        if response is not None:
            self.response = response
        if flags == pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL:
            self.finished.set()


def _cancelled(sender: Any) -> Callable[[], bool]:
    # ResponseSender.is_cancelled is bound from python_backend r23.10 on; an older stub cannot tell.
    check = getattr(sender, "is_cancelled", None)
    return check if callable(check) else (lambda: False)


class TritonPythonModel:
    def initialize(self, args: dict[str, Any]) -> None:
        config = json.loads(args["model_config"])
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(config)
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        folder = os.path.join(args["model_repository"], args["model_version"], "checkpoint")
        self.engine = Engine.from_checkpoint(folder, params["kind"], Limits.from_parameters(params), _device(args))
        self.metrics = GenerationMetrics.create(
            pb_utils, {"model": args["model_name"], "version": args["model_version"]}, pb_utils.Logger.log_warn)

        self.speech = params["kind"] == "automatic-speech-recognition"
        self.extractor: Any = None
        self.transcriber: Any = None
        if self.speech and self.engine.audio_llm:
            from transcription_request import TranscriptionRequests

            self.transcriber = TranscriptionRequests(folder, self.engine.model, self.engine.limits.max_prompt_tokens)
            self.sampling_rate = self.transcriber.sampling_rate
        elif self.speech:
            import transformers

            self.extractor = transformers.AutoFeatureExtractor.from_pretrained(folder)
            self.sampling_rate = int(self.extractor.sampling_rate)
        if self.speech:
            self.max_audio_seconds = float(params["max_audio_seconds"])

    def execute(self, requests: list[Any]) -> Optional[list[Any]]:
        if not self.decoupled:  # whole answers: the requests of this call decode together, then are returned
            collected = [_Collected() for _ in requests]
            for request, sender in zip(requests, collected):
                self._answer(request, sender)
            for sender in collected:
                sender.finished.wait()
            return [sender.response for sender in collected]
        for request in requests:
            self._answer(request, request.get_response_sender())
        return None  # decoupled: every answer goes through the senders

    def _answer(self, request: Any, sender: Any) -> None:
        try:
            self._submit(request, sender)
        except RequestError as exc:
            if self.metrics is not None:
                self.metrics.refused()
            sender.send(pb_utils.InferenceResponse(output_tensors=[], error=client_error(pb_utils, str(exc))),
                        flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def _submit(self, request: Any, sender: Any) -> None:
        timings = GenerationMetrics.timings()  # its clock starts as the request arrives, before tokenizing
        settings = parse_request(_parameters(request), self.engine.limits, speech=self.speech)
        if self.speech:
            self._submit_audio(request, sender, settings, timings)
            return
        text, alias = _text(request, "text_input"), _text(request, "inputs")
        if text is not None and alias is not None:
            raise RequestError("text_input and inputs are both the prompt; send one of them")
        text = alias if text is None else text
        messages = _messages(_text(request, "messages"))
        if messages is not None and text == "":
            text = None  # a generate-route client that must send text_input may send it empty beside messages
        ids = self.engine.encode(text=text, messages=messages)
        answer = _Answer(sender, settings.stream and self.decoupled)
        if self.metrics is None:
            self.engine.submit(ids, settings, answer.text, answer.done, _cancelled(sender))
            return
        metrics = self.metrics

        def done(reason: Optional[str], usage: dict[str, Any]) -> None:
            metrics.finished(reason, usage, timings)  # queued first: recorded even if answering fails
            answer.done(reason, usage)

        self.engine.submit(ids, settings, answer.text, done, _cancelled(sender), on_token=timings.token)

    def _submit_audio(self, request: Any, sender: Any, settings: Any, timings: Any) -> None:
        import audio_decode

        # The request's language, task and prompt are checked before the clip is decoded.
        if self.transcriber is not None:
            asked = self.transcriber.asked(settings.language, settings.prompt, settings.task)
        else:
            prompt = self.engine.prompt_for(settings)
        encoded = _text(request, "audio")
        if encoded is None:
            raise RequestError("audio: missing; send one audio file (WAV, FLAC, Ogg, MP3...), base64-encoded, as the "
                               "audio input")
        try:
            data = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise RequestError("audio: not base64; send the file's bytes base64-encoded (a JSON string cannot hold "
                               "raw bytes)") from None
        try:
            samples = audio_decode.decode(data, sampling_rate=self.sampling_rate, max_seconds=self.max_audio_seconds)
        except audio_decode.AudioRejected as exc:  # its messages name the ensembles' AUDIO input
            raise RequestError("audio:" + str(exc).removeprefix("AUDIO:")) from None
        answer_after = None
        if self.transcriber is not None:
            prompt, features, answer_after = self.transcriber.inputs(samples, asked)
        else:
            features = self.extractor(samples, sampling_rate=self.sampling_rate,
                                      return_tensors="pt")[self.engine.speech_input]
        answer = _Answer(sender, settings.stream and self.decoupled)
        metrics = self.metrics

        def done(reason: Optional[str], usage: dict[str, Any]) -> None:
            if metrics is not None:
                metrics.finished(reason, usage, timings)
            answer.done(reason, usage)

        self.engine.submit(prompt, settings, answer.text, done, _cancelled(sender),
                           on_token=timings.token if metrics is not None else None, features=features,
                           answer_after=answer_after)

    def finalize(self) -> None:
        self.engine.close()
        if self.metrics is not None:
            self.metrics.close()

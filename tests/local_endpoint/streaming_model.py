"""A tiny decoupled Python-backend model that streams, for the streaming tests (numpy only).

It answers the generate JSON of Triton's generate-stream route (``{"text_input": ..., "parameters": {...}}``) with
one response per word of ``text_input`` (after the first, with the space before it), ``STEP_S`` apart; the word ``FAIL`` sends an error response instead, in the
middle of the stream; a request parameter ``bad`` is refused before the first word with INVALID_ARG (HTTP 400). It
writes each request's end to the server log, so a test sees whether a hung-up request was cancelled.
"""
from __future__ import annotations

import pathlib

from triton_model_fixtures import write_model

STREAM_CONFIG = """\
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "text_input" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "text_output" data_type: TYPE_STRING dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""

STREAM_MODEL = '''\
import json
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def invalid(message):
    # TritonError takes a status code from release 23.xx on; INVALID_ARG -> HTTP 400.
    code = getattr(pb_utils.TritonError, "INVALID_ARG", None)
    return pb_utils.TritonError(message) if code is None else pb_utils.TritonError(message, code)


class TritonPythonModel:
    def execute(self, requests):
        # One thread per request, so a long stream does not hold back the next request.
        for request in requests:
            threading.Thread(target=self.stream, args=(request,), daemon=True).start()
        return None

    def stream(self, request):
        sender = request.get_response_sender()
        text = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy().reshape(-1)[0]
        text = text.decode() if isinstance(text, bytes) else str(text)
        parameters = json.loads(request.parameters() or "{}")
        if "bad" in parameters:
            message = f"parameter bad={parameters['bad']} is not one this model takes"
            sender.send(pb_utils.InferenceResponse(error=invalid(message)), flags=FINAL)
            return
        step = float(parameters.get("step_s", %(step)r))
        for count, word in enumerate(text.split()):
            if sender.is_cancelled():
                pb_utils.Logger.log_info(f"stream cancelled after {count} words")
                sender.send(flags=FINAL)
                return
            if word == "FAIL":
                error = pb_utils.TritonError(f"the model failed after {count} words")
                sender.send(pb_utils.InferenceResponse(error=error), flags=FINAL)
                return
            piece = word if count == 0 else " " + word   # as a tokenizer's pieces: the space goes with the word
            output = pb_utils.Tensor("text_output", np.array([piece.encode()], dtype=np.object_))
            sender.send(pb_utils.InferenceResponse([output]))
            time.sleep(step)
        pb_utils.Logger.log_info(f"stream finished after {len(text.split())} words")
        sender.send(flags=FINAL)
'''

STEP_S = 0.2   # between two words


def write_stream(repository: pathlib.Path, name: str = "stream", step_s: float = STEP_S) -> pathlib.Path:
    return write_model(repository, name, STREAM_CONFIG, {"model.py": STREAM_MODEL % {"step": step_s}})

"""Triton Python-backend model: the model's raw outputs -> what transformers' pipeline answers.

The last step of a ``task:`` ensemble (deployment_spec/sections/tasks.py). config.pbtxt parameters: ``task``
and ``answer_params`` (JSON: id2label, top_k, the function to apply, aggregation...). numpy and the
standard library only: it runs on the image's own Python.

- text-classification, image-classification, audio-classification: inputs ``logits`` [rows, labels]; outputs ``labels`` (BYTES) and
  ``scores`` (FP32), [rows, top_k], best first, as ``pipeline("text-classification", top_k=k)`` (and
  ``pipeline("image-classification")``, whose rule for the function is the same).
- token-classification: inputs ``TEXT``, ``logits`` [rows, tokens, labels], ``offsets``, ``word_ids``, ``input_ids``;
  output ``entities``, one JSON list per row (``answer_token_classification.py``).
- object-detection: inputs ``logits`` [rows, queries, classes], ``pred_boxes`` [rows, queries, 4], ``image_size``
  [rows, 2]; output ``detections``, one JSON list per row: score, label, box in the image's pixels
  (``answer_object_detection.py``), as ``pipeline("object-detection", threshold=...)``; the threshold is the
  spec's unless the request's KServe v2 ``parameters`` carry ``threshold`` (Triton forwards an ensemble request's
  parameters to each step from release 23.10 on: triton-inference-server/core pull 261).
- automatic-speech-recognition: input ``logits`` [rows, frames, vocabulary] of a CTC model; output ``text``,
  one string per row, greedy CTC decoding as the pipeline's (``answer_ctc.py``).
- question-answering: inputs ``TEXT`` (question), ``TEXT_PAIR`` (context), ``start_logits``,
  ``end_logits``, ``offsets``, ``sequence_ids``, ``word_ids``, ``attention_mask`` of each row's first window, and
  the tokenizer step's ``window_*`` tensors of the others (hf_tokenize.py); output ``answers``, one JSON list per
  row (``answer_question_answering.py``). The model step runs on the other windows through a BLS request
  (python_backend's ``pb_utils.InferenceRequest``), in batches of at most its ``max_batch_size``: config.pbtxt's
  ``window_model`` parameter names it, its input tensors (name and type) and its two outputs.
"""
import importlib
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # step_requests.py ships beside this file
from step_requests import RequestError, answer_requests, parameter_number  # noqa: E402

try:  # absent when the build imports this file to verify the ensemble (model_build/backends/ensemble)
    import triton_python_backend_utils as pb_utils
except ImportError:
    pb_utils = None


def classify(logits, params):
    """Labels and scores, best first: softmax over labels, or sigmoid for one label or multi-label
    checkpoints (transformers' TextClassificationPipeline, ClassificationFunction)."""
    logits = np.asarray(logits, dtype=np.float64)
    if params["function"] == "sigmoid":
        scores = 1.0 / (1.0 + np.exp(-logits))
    elif params["function"] == "softmax":
        shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
        scores = shifted / shifted.sum(axis=-1, keepdims=True)
    else:
        scores = logits
    k = min(int(params["top_k"]), scores.shape[-1])
    # A stable sort keeps the pipeline's order for equal scores (the lower label id first).
    order = np.argsort(-scores, axis=-1, kind="stable")[:, :k]
    names = params["id2label"]
    labels = np.array([[names[int(i)].encode() for i in row] for row in order], dtype=np.object_)
    return {"labels": labels, "scores": np.take_along_axis(scores, order, axis=-1).astype(np.float32)}


def _refused(name, value, allowed, default, example):
    return RequestError(f"request parameter {name!r} is {value!r}; allowed: {allowed} (this model's default: "
                        f"{default}); send e.g. \"parameters\": {{\"{name}\": {example}}} beside \"inputs\"")


def _spec_bound(params, name):
    """The spec's bound of one option (task.requests, deployment_spec/sections/request_options.py), or None."""
    return params.get("requests", {}).get("bounds", {}).get(name)


def _integer(low, high_of, meaning):
    def read(name, value, params, key):
        number = parameter_number(value)
        high, spec = high_of(params), _spec_bound(params, name)
        said = ""
        if spec is not None and spec < high:
            high, said = spec, " (this endpoint's task.requests bound)"
        if number is None or not number.is_integer() or not low <= number <= high:
            raise _refused(name, value, f"an integer from {low} to {high}{said}, {meaning}", params.get(key), low)
        return int(number)
    return read


def _choice(choices, meaning):
    def read(name, value, params, key):
        spec = _spec_bound(params, name)
        allowed = [c for c in choices if spec is None or c in spec]
        said = "" if spec is None else " (this endpoint's task.requests bound)"
        if not isinstance(value, str) or value.lower() not in allowed:
            raise _refused(name, value, f"one of {', '.join(allowed)}{said}, {meaning}", params.get(key),
                           f"\"{allowed[0]}\"")
        return value.lower()
    return read


def _flag(meaning):
    def read(name, value, params, key):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise _refused(name, value, f"true or false, {meaning}", params.get(key), "true")
    return read


def _threshold(name, value, params, key):
    number = parameter_number(value)
    low = _spec_bound(params, name)
    said = "" if low is None else " (this endpoint's task.requests bound)"
    low = 0 if low is None else low
    if number is None or not low <= number <= 1:
        raise _refused(name, value, f"a number from {low:g} to 1{said}, the lowest score a detection is answered "
                       "with", params.get(key), max(low, 0.3))
    return number


_LABELS = _integer(1, lambda params: len(params["id2label"]), "the labels answered per row, best first")
_FUNCTION = _choice(("softmax", "sigmoid", "none"), "the function applied to the logits")
# A request's options, as pipeline() takes them per call, per task: the option's name (pipeline's keyword) ->
# (the answer parameter it sets, its reader: the value or a RequestError naming the option, the value and the bound).
REQUEST_OPTIONS = {
    **{task: {"top_k": ("top_k", _LABELS), "function_to_apply": ("function", _FUNCTION)}
       for task in ("text-classification", "image-classification", "audio-classification")},
    "token-classification": {"aggregation_strategy": ("aggregation_strategy", _choice(
        ("none", "simple", "first", "average", "max"), "how tokens are grouped into entities"))},
    "question-answering": {
        "top_k": ("top_k", _integer(1, lambda params: 20, "the answers per row, best first")),
        "max_answer_len": ("max_answer_len", _integer(1, lambda params: int(params.get("sequence_length", 512)),
                                                      "the longest answer in tokens")),
        "handle_impossible_answer": ("handle_impossible_answer", _flag("whether an empty answer may win")),
        # Applied by the tokenizer step (hf_tokenize.py), which leaves a value outside this bound to be refused here.
        "doc_stride": ("doc_stride", _integer(0, lambda params: int(params.get("max_doc_stride", 0)),
                                              "the context tokens each window repeats from the one before"))},
    "object-detection": {"threshold": ("threshold", _threshold)},
}


def with_request_parameters(task, params, parameters):
    """The spec's answer params, with what one request's KServe v2 ``parameters`` change (``REQUEST_OPTIONS``: the
    options pipeline() takes per call), within the spec's ``task.requests``. An option of another task is refused
    naming this model's own, an option the spec leaves out naming the ones it allows; any other parameter is not
    this step's (``binary_data_output`` and the like are Triton's front end's): left alone."""
    options = REQUEST_OPTIONS.get(task, {})
    allowed = params.get("requests", {}).get("options", list(options))
    changed = None
    for name, value in parameters.items():
        if name in options and name not in allowed:
            raise RequestError(f"request parameter {name!r} is not allowed on this endpoint (its spec's "
                               f"task.requests.options: {', '.join(allowed) or 'none'}); remove {name!r}")
        if name in options:
            key, read = options[name]
            changed = changed if changed is not None else dict(params)
            changed[key] = read(name, value, params, key)
        elif any(name in other for other in REQUEST_OPTIONS.values()):
            own = ", ".join(options) or "none"
            raise RequestError(f"request parameter {name!r} does not apply to this model ({task}); its options: "
                               f"{own}; remove {name!r}")
    return params if changed is None else changed


def applied_options(task, params):
    """Each option of the task with the value this answer used (the request's, else the model's default): what
    the response says it applied (its ``parameters``)."""
    return {name: params[key] for name, (key, _) in REQUEST_OPTIONS.get(task, {}).items() if key in params}


def answer(task, params, inputs, run_model=None):
    """{input name: array} -> {output name: array} for one request (``run_model``: question_answers')."""
    if task in ("text-classification", "image-classification", "audio-classification"):
        return classify(inputs["logits"], params)
    if task == "object-detection":
        rows = _task_module("answer_object_detection").answer(
            inputs["logits"], inputs["pred_boxes"], inputs["image_size"], params, threshold=float(params["threshold"]))
        return {"detections": _json_rows(rows)}
    if task == "automatic-speech-recognition":
        # One clip length per request (the preprocessing step refuses others): every frame is the clip's.
        texts = _task_module("answer_ctc").answer(inputs["logits"], None, params)
        return {"text": np.array([[t.encode()] for t in texts], dtype=np.object_)}
    if task == "token-classification":
        rows = _task_module("answer_token_classification").answer(
            _texts(inputs["TEXT"]), inputs["logits"], inputs["offsets"], inputs["word_ids"], params,
            input_ids=inputs["input_ids"])
        return {"entities": _json_rows(rows)}
    return {"answers": _json_rows(question_answers(inputs, params, run_model))}


def question_answers(inputs, params, run_model=None):
    """Each row's answers from all its windows: the first window's logits came through the ensemble; the others'
    (``window_count`` of them) from ``run_model`` ({token tensor: [windows, tokens]} -> {"start_logits",
    "end_logits"}), called once for all the rows' other windows."""
    qa = _task_module("answer_question_answering")
    contexts = _texts(inputs["TEXT_PAIR"])
    others, arrays = other_windows(inputs)
    logits = run_model(arrays) if others else None
    out = []
    for row, context in enumerate(contexts):
        windows = [qa.window(inputs["start_logits"][row], inputs["end_logits"][row], inputs["offsets"][row],
                             inputs["sequence_ids"][row], inputs["word_ids"][row], inputs["attention_mask"][row])]
        windows += [qa.window(logits["start_logits"][i], logits["end_logits"][i], inputs["window_offsets"][r, k],
                              inputs["window_sequence_ids"][r, k], inputs["window_word_ids"][r, k],
                              inputs["window_attention_mask"][r, k])
                    for i, (r, k) in enumerate(others) if r == row]
        out.append(qa.answer_windows(context, windows, params))
    return out


def other_windows(inputs):
    """(row, window) of each row's windows after its first, in row order, and their token tensors as one batch
    ({name: [windows, tokens]}; empty where there are none)."""
    counts = np.asarray(inputs["window_count"]).reshape(-1)
    others = [(row, k) for row, count in enumerate(counts) for k in range(int(count))]
    if not others:
        return others, {}
    return others, {name: np.stack([inputs["window_" + name][row, k] for row, k in others])
                    for name in ("input_ids", "attention_mask", "token_type_ids")}


def qa_module():
    """answer_question_answering (the build's reference reuses its span rules)."""
    return _task_module("answer_question_answering")


def _task_module(name):
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:  # the task's module ships beside this file
        sys.path.insert(0, here)
    return importlib.import_module(name)


def load_params(text):
    """``answer_params`` of config.pbtxt; JSON keys are strings, label ids are not."""
    params = json.loads(text)
    if "id2label" in params:  # a CTC decoder's vocabulary keeps its string keys (answer_ctc.py)
        params["id2label"] = {int(k): v for k, v in params["id2label"].items()}
    return params


def _texts(array):
    return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in np.asarray(array).reshape(-1)]


def _json_rows(rows):
    return np.array([[json.dumps(row, ensure_ascii=False).encode()] for row in rows], dtype=np.object_)


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        self.task = params["task"]
        self.params = load_params(params["answer_params"])
        self.window_model = json.loads(params["window_model"]) if "window_model" in params else None
        self.inputs = [i["name"] for i in config["input"]]
        self.outputs = {o["name"]: o["data_type"] for o in config["output"]}

    def execute(self, requests):
        return answer_requests(pb_utils, requests, self._answer)

    def _answer(self, request):
        inputs = {name: pb_utils.get_input_tensor_by_name(request, name).as_numpy() for name in self.inputs}
        params = with_request_parameters(self.task, self.params, json.loads(request.parameters() or "{}"))
        made = answer(self.task, params, inputs, self._run_window_model)
        if "options" in self.outputs:  # the options applied, on each row (task_steps.answer declares it)
            rows = len(next(iter(made.values())))
            made["options"] = _json_rows([applied_options(self.task, params)] * rows)
        return [pb_utils.Tensor(name, made[name] if dtype == "TYPE_STRING" else
                                made[name].astype(pb_utils.triton_string_to_numpy(dtype)))
                for name, dtype in self.outputs.items()]

    def _run_window_model(self, arrays):
        """The model step on question answering's other windows, through BLS, in batches it accepts."""
        model = self.window_model
        rows = len(arrays["input_ids"])
        got = {"start_logits": [], "end_logits": []}
        for low in range(0, rows, model["max_batch_size"]):
            part = slice(low, low + model["max_batch_size"])
            request = pb_utils.InferenceRequest(
                model_name=model["name"], requested_output_names=list(model["outputs"].values()),
                inputs=[pb_utils.Tensor(name, arrays[plain][part].astype(pb_utils.triton_string_to_numpy(dtype)))
                        for plain, (name, dtype) in model["inputs"].items()])
            response = request.exec()
            if response.has_error():  # the model step's fault, not the client's: a 500 with its message
                raise RuntimeError(f"{model['name']} on a context's other windows: {response.error().message()}")
            for key, name in model["outputs"].items():
                got[key].append(pb_utils.get_output_tensor_by_name(response, name).as_numpy())
        return {key: np.concatenate(parts) for key, parts in got.items()}

"""``task.requests``: how far one request's options may move an answer task's settings.

A request of a ``task:`` endpoint may send, as KServe v2 ``parameters`` beside ``inputs``, the options
``pipeline()`` takes per call (``OPTIONS``, by kind): ``top_k``, ``function_to_apply``, ``aggregation_strategy``,
``max_answer_len``, ``handle_impossible_answer``, ``doc_stride``, ``threshold``. Without this block every option is allowed within
what the model itself bounds (its labels, its sequence length). Here the spec narrows that: which options a request
may send at all, and the bound of each. The answer step (model_build/python_models/hf_answer.py) refuses a request
beyond them with a 400 naming the option, the value and the bound, and says in its response which options it applied.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from deployment_spec.parsing.errors import Problem
from deployment_spec.parsing.parse import meta

_CLASSIFYING = ("top_k", "function_to_apply")
# The options pipeline() takes per call, by task kind: the ones a request may send (hf_answer.REQUEST_OPTIONS reads
# them; tests/model_build/test_answer_request_parameters.py holds the two tables equal).
OPTIONS: dict[str, tuple[str, ...]] = {
    "text-classification": _CLASSIFYING,
    "image-classification": _CLASSIFYING,
    "audio-classification": _CLASSIFYING,
    "token-classification": ("aggregation_strategy",),
    "question-answering": ("top_k", "max_answer_len", "handle_impossible_answer", "doc_stride"),
    "object-detection": ("threshold",),
}
# The answer's output naming the options it applied, one JSON object per row ({"top_k": 2, "function_to_apply":
# "softmax"}). Not response parameters: the Python backend takes them only since triton-inference-server/python_backend
# pull 394 (January 2025; the local Triton 24.10 refuses the keyword, tried), so an output tensor is what reaches the
# client on every release the spec allows.
APPLIED_OPTIONS = "options"
FUNCTIONS = ("softmax", "sigmoid", "none")
AGGREGATIONS = ("none", "simple", "first", "average", "max")


@dataclasses.dataclass(frozen=True)
class RequestOptions:
    """What one request may change; a bound not set leaves the model's own (every label, its sequence length)."""

    options: Optional[tuple[str, ...]] = dataclasses.field(default=None, metadata=meta(
        help="the options a request may send (default: every one pipeline() takes per call for the task; [] for "
             "none)"))
    max_top_k: Optional[int] = dataclasses.field(default=None, metadata=meta(
        minimum=1, maximum=1000, help="the most labels or answers a request may ask for (parameters.top_k)"))
    max_answer_len: Optional[int] = dataclasses.field(default=None, metadata=meta(
        minimum=1, maximum=512, help="question-answering: the longest answer a request may ask for, in tokens "
                                     "(parameters.max_answer_len)"))
    min_threshold: Optional[float] = dataclasses.field(default=None, metadata=meta(
        minimum=0, maximum=1, help="object-detection: the lowest parameters.threshold a request may send"))
    function_to_apply: Optional[tuple[str, ...]] = dataclasses.field(default=None, metadata=meta(
        help="classification: the functions a request may ask for (of " + ", ".join(FUNCTIONS) + ")"))
    aggregation_strategy: Optional[tuple[str, ...]] = dataclasses.field(default=None, metadata=meta(
        help="token-classification: the strategies a request may ask for (of " + ", ".join(AGGREGATIONS) + ")"))

    def allowed(self, kind: str) -> tuple[str, ...]:
        return OPTIONS.get(kind, ()) if self.options is None else self.options

    def task_problems(self, path: str, kind: str, settings: dict[str, Any]) -> list[Problem]:
        """``settings``: the task's own value of each bounded option (its top_k...), which a bound must admit."""
        own = OPTIONS.get(kind, ())
        if self != RequestOptions() and not own:
            given = ", ".join(f"{f.name}: {_shown(getattr(self, f.name))}" for f in dataclasses.fields(self)
                              if getattr(self, f.name) is not None)
            return [Problem(path, "{" + given + "}", "only with " + ", ".join(OPTIONS) + f" ({kind} takes none)",
                            "remove requests")]
        out = [Problem(f"{path}.options", repr(name), "one of " + ", ".join(own), f"remove {name!r}")
               for name in self.options or () if name not in own]
        allowed = self.allowed(kind)
        for field, option in (("max_top_k", "top_k"), ("max_answer_len", "max_answer_len"),
                              ("min_threshold", "threshold"), ("function_to_apply", "function_to_apply"),
                              ("aggregation_strategy", "aggregation_strategy")):
            value = getattr(self, field)
            if value is None:
                continue
            if option not in allowed:
                why = f"{kind} takes no {option}" if option not in own else f"requests.options leaves {option} out"
                out.append(Problem(f"{path}.{field}", _shown(value), f"a bound of an option a request may send ({why})",
                                   f"remove {field}"))
                continue
            out += self._admits(path, field, value, settings.get(option))
        return out

    def _admits(self, path: str, field: str, bound: Any, setting: Any) -> list[Problem]:
        if field in ("function_to_apply", "aggregation_strategy"):
            choices = FUNCTIONS if field == "function_to_apply" else AGGREGATIONS
            out = [Problem(f"{path}.{field}", repr(v), "one of " + ", ".join(choices), f"remove {v!r}")
                   for v in bound if v not in choices]
            if not out and setting is not None and setting not in bound:
                out.append(Problem(f"{path}.{field}", _shown(bound), f"a list holding the task's own {setting!r}",
                                   f"add {setting!r}"))
            return out
        low = field == "min_threshold"
        if setting is None or (setting >= bound if low else setting <= bound):
            return []
        side = "at most" if low else "at least"
        return [Problem(f"{path}.{field}", _shown(bound), f"{side} the task's own {setting} (a request that sends "
                        "nothing gets it)", f"set {field} to {setting} or {'lower' if low else 'raise'} it")]

    def answer_bounds(self, kind: str) -> dict[str, Any]:
        """What the answer step reads (``answer_params["requests"]``): the options a request may send, and the
        spec's bound of each that has one."""
        bounds = {name: value for name, value in (
            ("top_k", self.max_top_k), ("max_answer_len", self.max_answer_len), ("threshold", self.min_threshold),
            ("function_to_apply", self.function_to_apply), ("aggregation_strategy", self.aggregation_strategy))
            if value is not None}
        return {"options": list(self.allowed(kind)),
                "bounds": {k: list(v) if isinstance(v, tuple) else v for k, v in bounds.items()}}


def _shown(value: Any) -> str:
    return "[" + ", ".join(map(str, value)) + "]" if isinstance(value, tuple) else str(value)

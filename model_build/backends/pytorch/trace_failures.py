"""Why a traced model fails on a serving case, in one line, without the tracer's stack frames.

A traced graph that raises prints, in the exception's own text, the Python frames tracing passed through
("The following operation failed in the TorchScript interpreter. Traceback of TorchScript (most recent
call last): .../torch/jit/_trace.py(1216): trace_module ..."), then the error itself as its last line
("RuntimeError: setStorage: sizes [...] are out of bounds ..."). The build says instead which serving case
(verification/cases.py) failed, that one line, and what to do.

Imports torch only in the functions that run models (the trace process).
"""
from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:  # build.py reads the worker's stderr with this module: it needs no recipes, no torch
    from model_build.verification.cases import Plan

# The last line of a Python traceback, or of a TorchScript interpreter error: "RuntimeError: ...",
# "torch.jit.Error: ...", "AssertionError".
_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)(: .*)?$")
# A frame as the tracer prints it ("/x/modeling_longformer.py(719): _chunk", "<frozen runpy>(88): _run_code")
# or as Python does ('File "/x/y.py", line 3, in f').
_FRAME = re.compile(r"^(.+\(\d+\): \S+|\s*File \".*\", line \d+.*)$")


@dataclasses.dataclass(frozen=True)
class CaseFailure:
    case: str                # the serving case's name, as cases.py gives it ("batch 1 x 32 tokens")
    shape: tuple[int, ...]   # the first input's shape there: the batch size and the sequence length
    reason: str              # one line: "RuntimeError: setStorage: ..."


def one_line(exc: BaseException) -> str:
    """``Type: message`` of ``exc`` in one line: a TorchScript error's own last line (the error under its frames),
    else the first line of the message."""
    text = str(exc)
    errors = [line.strip() for line in text.splitlines() if _ERROR_LINE.match(line.strip())]
    if errors and any(_FRAME.match(line) for line in text.splitlines()):
        return errors[-1]
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def last_error_line(stderr: str) -> str:
    """The error a process died of, from its stderr: the last ``Type: message`` line, else the last line that is
    not a stack frame."""
    lines = [line.rstrip() for line in stderr.splitlines() if line.strip()]
    errors = [line.strip() for line in lines if _ERROR_LINE.match(line.strip())]
    if errors:
        return errors[-1]
    plain = [line.strip() for line in lines if not _FRAME.match(line)]
    return plain[-1] if plain else "(no message)"


def run(module: Any, plan: Plan, input_names: Sequence[str]) -> tuple[dict[str, list[Any]], list[CaseFailure]]:
    """Outputs (numpy) of every case ``module`` runs, and a CaseFailure for every case it raises on: all cases
    run, so the message can say how many fail."""
    import torch

    outputs: dict[str, list[Any]] = {}
    failures: list[CaseFailure] = []
    with torch.no_grad():
        for case in plan.cases:
            try:
                result = module(**{k: case.inputs[k] for k in input_names})
            except Exception as exc:  # any error of the model's code: reported per case, in one line
                failures.append(CaseFailure(case.name, tuple(case.inputs[input_names[0]].shape), one_line(exc)))
                continue
            result = result if isinstance(result, (tuple, list)) else (result,)
            outputs[case.name] = [r.detach().cpu().numpy() for r in result]
    return outputs, failures


def trace_fails(model_name: str, failures: Sequence[CaseFailure], cases: int, first_input: str,
                traced_at: tuple[int, ...]) -> str:
    """The traced graph raises where eager PyTorch runs (``traced_at``: ``first_input``'s shape in the example
    the trace was made with)."""
    first = failures[0]
    where = (f"the TorchScript trace fails at the serving case {first.case} ({first_input} {list(first.shape)}; "
             f"traced at {list(traced_at)}), which eager PyTorch runs: {first.reason} (it fails at {len(failures)} "
             f"of the {cases} serving cases)")
    if first.shape != traced_at:
        why = ("this model's forward() is shape-dependent: torch.jit.trace recorded the sizes it computes from its "
               "inputs' shapes (for view, as_strided, padding) as constants of the traced shape, so the trace does "
               "not run at that case's shape; serve it with backend: onnxruntime if it exports and verifies there "
               "(the build checks the same cases), or serve one fixed shape: a module:function recipe whose example "
               "inputs have the one shape you serve and no dynamic_axes, with max_batch_size: 0")
    else:
        why = ("that case has the traced shape, so this model's forward() depends on its inputs' values there (e.g. "
               "the padding the mask says): torch.jit.trace recorded what it computed from the example's values as "
               "constants; compute that with tensor operations instead of Python numbers, or serve it with "
               "backend: onnxruntime if it exports and verifies there (the build checks the same cases)")
    return f"model {model_name}: {where}. {why[0].upper()}{why[1:]}"


def eager_fails(model_name: str, failures: Sequence[CaseFailure], cases: int, first_input: str) -> str:
    """The recipe's own model raises on a serving case: nothing to do with tracing."""
    first = failures[0]
    return (f"model {model_name}: eager PyTorch itself fails at the serving case {first.case} ({first_input} "
            f"{list(first.shape)}): "
            f"{first.reason} (it fails at {len(failures)} of the {cases} serving cases); the recipe's model does not "
            "run at the sizes the spec serves: give sizes it runs at (sequence_length, max_batch_size, "
            "dynamic_batching.preferred_batch_sizes), or fix the recipe")

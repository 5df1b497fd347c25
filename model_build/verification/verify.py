"""Proves artifacts in the runtime release that will serve them, and picks the one to ship.

The build hands over candidate files, best first (for ONNX: transformer-fused, then plain graph
optimizations, then the graph as exported). Each runs in a side environment holding the
target image's runtime (side_env.py, worker.py) on the cases of cases.py; its outputs are compared
with eager PyTorch and with themselves (mask invariance, padded vs unpadded). The first candidate
that passes is shipped; the others' failures are reported. If none passes, the build fails
with the model, the runtime, the measured errors and the fix.
"""
from __future__ import annotations

import dataclasses
import json
import pathlib
import subprocess
import tempfile
from typing import Any, Callable, Mapping, Optional, Sequence

from deployment_spec.sections.model import Tolerance
from deployment_spec.facts.serving_runtimes import ServingRuntime
from model_build.errors import BuildError
from model_build.verification import side_env
from model_build.verification.cases import Invariance, Plan

# Masked positions add exp(-large) = 0 to a correct softmax, so a runtime that honours the mask gives
# the same numbers up to float rounding whatever the masked ids or the padding: far tighter than the
# spec's tolerance against eager PyTorch (which covers export differences). Relative to the output's size.
INVARIANCE_RTOL = 1e-4
INVARIANCE_FLOOR = 1e-6


@dataclasses.dataclass(frozen=True)
class Candidate:
    label: str          # short, used in messages: "transformer-fused graph"
    path: pathlib.Path
    report: Any = None  # ort_optimize.OptimizeReport of the rewrite that made it, if any
    fallback: str = ""  # why it stands where a better candidate could not be made ("" when none failed)


@dataclasses.dataclass(frozen=True)
class Finding:
    """One thing wrong with a candidate: a number-free reason (kept in the manifest) and its measurement."""

    reason: str
    detail: str

    def __str__(self) -> str:
        return f"{self.reason} ({self.detail})"


@dataclasses.dataclass(frozen=True)
class Verdict:
    label: str
    problems: tuple[Finding, ...]
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    invariance_error: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems


def reference(module: Any, plan: Plan, input_names: Sequence[str]) -> dict[str, list]:
    """Eager PyTorch outputs for every case (numpy), computed once per model."""
    import torch

    out = {}
    with torch.no_grad():
        for case in plan.cases:
            try:
                result = module(**{k: case.inputs[k] for k in input_names})
            except Exception as exc:  # the model's own code at this shape: the caller says it in spec terms
                raise EagerFailed(case.name, last_line(exc)) from None
            result = result if isinstance(result, (tuple, list)) else (result,)
            out[case.name] = [r.detach().cpu().numpy() for r in result]
    return out


class EagerFailed(Exception):
    """Eager PyTorch raised at a serving case: which case, and the error's last line."""

    def __init__(self, case: str, reason: str) -> None:
        super().__init__(f"{case}: {reason}")
        self.case, self.reason = case, reason


def last_line(exc: BaseException) -> str:
    """The error's type and its last line: the reason, without the frames some libraries put into the text."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[-1] if lines else ''}"


def run_candidates(env: side_env.SideEnv, kind: str, candidates: Sequence[Candidate], plan: Plan,
                   input_names: Sequence[str], output_names: Sequence[str], scratch: pathlib.Path,
                   graph_level: str = "all") -> dict[str, Any]:
    """Runs every candidate in the side environment; label -> {case: [outputs]} or an error string."""
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="serving-check-", dir=scratch) as folder:
        work = pathlib.Path(folder)
        feeds = {}
        for case in plan.cases:
            for index, name in enumerate(input_names):
                key = f"{index}:{name}" if kind == "torchscript" else name
                feeds[f"{case.name}::{key}"] = case.inputs[name].detach().cpu().numpy()
        np.savez(work / "cases.npz", **feeds)
        request = {"models": {c.label: str(c.path) for c in candidates}, "cases": str(work / "cases.npz"),
                   "outputs": list(output_names), "out": str(work), "graph_level": graph_level}
        (work / "request.json").write_text(json.dumps(request))
        proc = subprocess.run(env.command(kind, str(work / "request.json")), capture_output=True, text=True,
                              stdin=subprocess.DEVNULL)
        if proc.returncode != 0 or not (work / "result.json").is_file():
            tail = " | ".join(proc.stderr.strip().splitlines()[-3:]) or f"exit {proc.returncode}"
            raise side_env.ServingEnvError(f"the {env.package} {env.version} check process failed ({tail})")
        result = json.loads((work / "result.json").read_text())
        out: dict[str, Any] = {}
        for candidate in candidates:
            status = result.get(candidate.label, {"error": "not run"})
            if status.get("error"):
                out[candidate.label] = status["error"]
                continue
            with np.load(work / f"{candidate.label}.npz") as data:
                out[candidate.label] = {case.name: [data[f"{case.name}::{n}"] for n in output_names]
                                        for case in plan.cases}
        return out


def judge(label: str, got: Any, want: Mapping[str, list], plan: Plan, output_names: Sequence[str],
          tolerance: Tolerance, against: str = "eager PyTorch", model_reference: bool = False) -> Verdict:
    """Every case against the reference (``against``: eager PyTorch, or the same file in another
    runtime), then the runtime against itself (mask invariance, padding).

    ``model_reference``: ``want`` are the eager model's own answers, so an invariance the model itself does
    not keep is not asked of the graph (it is held to those answers case by case). A reference that is the
    same file elsewhere shares the file's defects: then every invariance is asked."""
    if isinstance(got, str):
        reason, _, detail = got.partition(": ")
        return Verdict(label, (Finding({"load failed": "does not load"}.get(reason, "fails to run"), detail),))
    problems: list[Finding] = []
    worst_abs = worst_rel = worst_inv = 0.0
    for case in plan.cases:
        for name, a, b in zip(output_names, got[case.name], want[case.name]):
            if a.shape != b.shape:
                problems.append(Finding(f"gives another output shape than {against}",
                                        f"case {case.name}: {name} {list(a.shape)}, reference {list(b.shape)}"))
                continue
            ok, abs_err, rel_err = close(a, b, tolerance)
            worst_abs, worst_rel = max(worst_abs, abs_err), max(worst_rel, rel_err)
            if not ok:
                problems.append(Finding(f"differs from {against} beyond the tolerance",
                                        f"case {case.name}: {name} off by {abs_err:.3g}, max rel {rel_err:.3g}"))
    for inv in plan.invariances:
        for index, name in enumerate(output_names):
            if model_reference and not _invariant(want, inv, index, name in plan.seq_outputs)[1]:
                # The reference itself answers differently (a decoder classifier reads the last token that is not
                # the pad id, whatever the mask): the graph is held to its answers case by case, above.
                continue
            error, ok = _invariant(got, inv, index, name in plan.seq_outputs)
            worst_inv = max(worst_inv, error)
            if not ok:
                problems.append(_invariance_problem(inv, name, error))
    # The mask checks explain the eager mismatches they cause, so they come first.
    problems.sort(key=lambda p: p.reason.startswith("differs"))
    return Verdict(label, tuple(problems), worst_abs, worst_rel, worst_inv)


def _invariant(outputs: Mapping[str, list], inv: Invariance, index: int, per_token: bool) -> tuple[float, bool]:
    """(largest difference, within bounds) between ``inv``'s two cases in output ``index`` of ``outputs``."""
    error, ok = 0.0, True
    base, other = outputs[inv.base][index], outputs[inv.other][index]
    for position, (row, length) in enumerate(zip(inv.rows, inv.lengths)):
        want_row, got_row = base[row], other[position]
        if per_token:  # past a row's own length lies padding, on one side only
            want_row, got_row = want_row[:length], got_row[:length]
        row_error = _max_diff(got_row, want_row)
        scale = float(abs(want_row).max()) if want_row.size else 0.0
        ok = ok and row_error <= INVARIANCE_RTOL * scale + INVARIANCE_FLOOR
        error = max(error, row_error)
    return error, ok


def _max_diff(a, b) -> float:
    import numpy as np

    return float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max()) if a.size else 0.0


def close(a, b, tolerance: Tolerance) -> tuple[bool, float, float]:
    """numpy.allclose's rule, plus the max abs error and the max rel error where ``|b| > atol``."""
    import numpy as np

    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    diff = np.abs(a64 - b64)
    worst = float(diff.max()) if diff.size else 0.0
    meaningful = np.abs(b64) > tolerance.atol
    rel = float((diff[meaningful] / np.abs(b64[meaningful])).max()) if meaningful.any() else 0.0
    return bool(np.all(diff <= tolerance.atol + tolerance.rtol * np.abs(b64))), worst, rel


def _invariance_problem(inv: Invariance, output: str, error: float) -> Finding:
    if inv.what == "masked tokens changed":
        return Finding("ignores the attention mask",
                       f"changing only the token ids at masked positions moves {output} by {error:.3g}")
    return Finding("gives a padded row another answer than the same row unpadded", f"{output} off by {error:.3g}")


def choose(model_name: str, runtime: ServingRuntime, runtime_label: str, verdicts: Sequence[Verdict],
           candidates: Sequence[Candidate], tolerance: Tolerance, log: Callable[[str], None]) -> Candidate:
    """The first candidate that verified; BuildError with every candidate's failure if none did."""
    by_label = {c.label: c for c in candidates}
    for verdict in verdicts:
        if verdict.ok:
            rejected = [v for v in verdicts if v is not verdict and verdicts.index(v) < verdicts.index(verdict)]
            for bad in rejected:
                log(f"  {model_name}: the {bad.label} is wrong in {runtime_label}: it {bad.problems[0]}; "
                    f"shipping the {verdict.label} instead, which verifies")
            return by_label[verdict.label]
    details = "; ".join(f"the {v.label} {v.problems[0]}" for v in verdicts)
    raise BuildError(
        f"model {model_name}: no graph of it serves the eager PyTorch answers in {runtime_label} (the runtime "
        f"of Triton {runtime.triton_version}; atol {tolerance.atol:g}, rtol {tolerance.rtol:g}): {details}. If "
        "even the graph as exported differs, the export froze a data-dependent branch or a shape: serve the "
        f"model with models.{model_name}.backend: pytorch (the build traces it with torch.jit.trace and checks "
        "the trace on the same serving cases; a model that does not trace is refused there with the tracer's "
        "error), or change the recipe's forward(); else pick a triton_version whose runtime runs it. Raise "
        f"models.{model_name}.tolerance only if you accept the measured difference as the model's answer")


def record(runtime: ServingRuntime, package: str, version: str, device: str, shipped: Optional[Verdict],
           verdicts: Sequence[Verdict], cases: int) -> dict[str, Any]:
    """What the manifest keeps about the check (``ModelEntry.verification``, typed by record.py)."""
    out: dict[str, Any] = {"ran": True, "triton_version": runtime.triton_version, "runtime": package,
                           "version": version, "device": device, "cases": cases}
    if shipped is not None:
        out.update({"graph": shipped.label, "max_abs_error": shipped.max_abs_error,
                    "max_rel_error": shipped.max_rel_error, "invariance_error": shipped.invariance_error})
    rejected = {v.label: v.problems[0].reason for v in verdicts if not v.ok}
    if rejected:
        out["rejected"] = rejected
    return out

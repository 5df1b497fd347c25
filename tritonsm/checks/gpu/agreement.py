"""Whether the run under test answers as the reference run did, batch by batch, within the model's tolerance.

One home for the comparison every GPU check makes (ONNX Runtime's CUDA provider against its CPU provider,
TorchScript on cuda:0 against the CPU): the largest absolute difference seen, the batch sizes sent, and the
sentence that reports them.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from tritonsm.checks.gpu.report import FAILED, PASSED
from tritonsm.checks.smoke_requests import SmokeCase


class Agreement:
    def __init__(self, case: SmokeCase, reference: str, facts: dict) -> None:
        self.case = case
        self.reference = reference    # e.g. "the CPU provider"
        self.facts = facts
        self.worst = 0.0
        self.batches: list[int] = []

    def differs(self, output: str, want: np.ndarray, got: np.ndarray) -> Optional[tuple[str, str, dict]]:
        """Record one output of the latest batch; the failed verdict when it is outside the tolerance."""
        want, got = np.asarray(want, float), np.asarray(got, float)
        error = float(np.max(np.abs(got - want))) if want.size else 0.0
        self.worst = max(self.worst, error)
        if np.allclose(got, want, atol=self.case.atol, rtol=self.case.rtol):
            return None
        return self._verdict(FAILED, f"output {output} at batch {self.batches[-1]} differs from {self.reference} by "
                                     f"up to {error:.3g} (tolerance atol {self.case.atol:g}, rtol {self.case.rtol:g})")

    def passed(self) -> tuple[str, str, dict]:
        return self._verdict(PASSED, f"batches {self.batches}: {self.reference}'s answers within atol "
                                     f"{self.case.atol:g}, rtol {self.case.rtol:g} (max abs error {self.worst:.3g})")

    def _verdict(self, status: str, detail: str) -> tuple[str, str, dict]:
        self.facts.update(max_abs_error=self.worst, batches=self.batches)
        return status, detail, self.facts

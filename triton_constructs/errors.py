"""Synth-time refusals: what SageMaker or CloudFormation would reject many minutes into a deploy."""
from __future__ import annotations

from typing import Sequence


class SynthError(ValueError):
    """Raised once per subject, listing every problem found.

    Rendered as ``<subject>:`` followed by one ``  - <problem>`` line per
    problem; each problem says what is wrong and what to do. ``app.py`` prints
    it without a traceback.
    """

    def __init__(self, subject: str, problems: Sequence[str]) -> None:
        self.subject = subject
        self.problems = list(problems)
        super().__init__(f"{subject}:\n" + "\n".join(f"  - {p}" for p in self.problems))


"""Problems found in a deployment spec, collected and raised once."""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Problem:
    """One thing wrong with the spec, in the user's terms.

    Rendered as ``<path>: got <got>; allowed: <allowed>; fix: <fix>`` so every
    message names the field, the value, what is allowed and what to do.
    """

    path: str
    got: str
    allowed: str
    fix: str

    def __str__(self) -> str:
        return f"{self.path}: got {self.got}; allowed: {self.allowed}; fix: {self.fix}"


class SpecError(ValueError):
    """Raised once per spec file, listing every problem found."""

    def __init__(self, source: str, problems: list[Problem]) -> None:
        self.source = source
        self.problems = list(problems)
        count = len(self.problems)
        noun = "problem" if count == 1 else "problems"
        lines = [f"{source}: {count} {noun}"] + [f"  - {p}" for p in self.problems]
        super().__init__("\n".join(lines))


def describe(value: object) -> str:
    """A short, unambiguous rendering of a spec value for an error message."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, (int, float)):
        return repr(value)
    return repr(str(value))


class UserError(Exception):
    """A mistake the user can fix (a wrong flag, a missing build); printed without a traceback, exit code 2.

    Lives here, at the bottom of the package graph, so every layer may raise it without importing the CLI.
    """

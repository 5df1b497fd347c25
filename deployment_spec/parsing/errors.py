"""Problems found in a deployment spec, collected and raised once."""
from __future__ import annotations

import dataclasses
from typing import Sequence


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


class ProblemsError(ValueError):
    """Every problem found in one subject (a spec file, a props object, a construct), raised once.

    Rendered as ``<subject>: <n> problem(s)`` and one ``  - <problem>`` line per problem. The base of
    the project's user-facing errors: entry points print it without a traceback.
    """

    def __init__(self, source: str, problems: Sequence[Problem]) -> None:
        self.source = source
        self.problems = list(problems)
        count = len(self.problems)
        noun = "problem" if count == 1 else "problems"
        lines = [f"{source}: {count} {noun}"] + [f"  - {p}" for p in self.problems]
        super().__init__("\n".join(lines))


class SpecError(ProblemsError):
    """Raised once per spec file; problem paths are spec paths (``endpoints.classifier.scaling``)."""


class PropsError(ProblemsError):
    """Raised once per props object or construct built in code; problem paths are prop names."""


def prefixed(prefix: str, problems: Sequence[Problem]) -> list[Problem]:
    """The same problems with ``prefix`` (a spec path) in front of each relative path (none: unchanged)."""
    if not prefix:
        return list(problems)
    return [Problem(f"{prefix}.{p.path}" if p.path else prefix, p.got, p.allowed, p.fix) for p in problems]


def raise_problems(subject: str, problems: Sequence[Problem]) -> None:
    """Raises PropsError for ``subject`` when there are problems (typed so a checker knows it may raise)."""
    if problems:
        raise PropsError(subject, problems)


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

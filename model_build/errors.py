"""Build failures, each with a message that names the model, what went wrong and the fix."""
from __future__ import annotations


class BuildError(Exception):
    """A model could not be built; printed without a traceback (exit code 1)."""


class ToolUnavailable(BuildError):
    """A build step needs something this machine lacks (an NVIDIA GPU, a Docker engine).

    The other models still build; the command fails only if this model was asked for by name.
    """


class NotEnoughMemory(BuildError):
    """The largest model to build needs more memory than this machine has available; nothing was built."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type's name if it has none): what a refusal quotes of a
    library's error, whose later lines are its own advice or a traceback of its internals."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__

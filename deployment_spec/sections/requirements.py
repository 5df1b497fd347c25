"""Pinned requirement lines for a Python-backend execution environment (``python.requirements``).

Only ``name==version`` (with optional extras and an environment marker) is accepted: the
environment is built once and shipped, so a range would make two builds of the same spec ship
different packages. The grammar is the subset of PEP 508 that pins one release
(https://peps.python.org/pep-0508/, https://packaging.python.org/en/latest/specifications/version-specifiers/).
"""
from __future__ import annotations

import re

_PIN = re.compile(
    r"(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)"
    r"\s*(?P<extras>\[\s*[A-Za-z0-9._-]+(?:\s*,\s*[A-Za-z0-9._-]+)*\s*\])?"
    r"\s*==\s*(?P<version>[0-9][A-Za-z0-9.+!_-]*)"
    r"\s*(?:;\s*(?P<marker>\S.*))?")
PIN_HELP = "name==version (optionally name[extra]==version ; marker), one release per line"
# A line of a recipe's own requirements (not the spec's): the pins are the whole environment, each installed without
# the packages it declares (pip --no-deps). For a step that imports less than its packages require: the tokenizer
# step imports tokenizers, whose huggingface_hub (and its 14 packages) only from_pretrained needs.
NO_DEPS = "--no-deps"


def normalize(name: str) -> str:
    """The project name as PEP 503 compares names (case, '-', '_' and '.' runs alike)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(lines: list[str]) -> dict[str, str]:
    """The release each pinned line names, by normalized project name (other lines, e.g. --no-deps, left out)."""
    out = {}
    for line in lines:
        match = _PIN.fullmatch(line.split(" #", 1)[0].strip())
        if match:
            out[normalize(match["name"])] = match["version"]
    return out


def is_pinned(line: str) -> bool:
    """Whether one requirement line pins exactly one release (a trailing ' # comment' allowed)."""
    return _PIN.fullmatch(line.split(" #", 1)[0].strip()) is not None


def requirement_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of a requirements file, without blank lines and comments."""
    out = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line and not line.startswith("#"):
            out.append((number, line))
    return out

"""Pinned requirement lines for a Python-backend execution environment (``python.requirements``).

Only ``name==version`` (with optional extras and an environment marker) is accepted: the
environment is built once and shipped, so a range would make two builds of the same spec ship
different packages. The grammar is the subset of PEP 508 that pins one release
(https://peps.python.org/pep-0508/, https://packaging.python.org/en/latest/specifications/version-specifiers/).
"""
from __future__ import annotations

import dataclasses
import re

_PIN = re.compile(
    r"(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)"
    r"\s*(?P<extras>\[\s*[A-Za-z0-9._-]+(?:\s*,\s*[A-Za-z0-9._-]+)*\s*\])?"
    r"\s*==\s*(?P<version>[0-9][A-Za-z0-9.+!_-]*)"
    r"\s*(?:;\s*(?P<marker>\S.*))?")
PIN_HELP = "name==version (optionally name[extra]==version ; marker), one release per line"


@dataclasses.dataclass(frozen=True)
class Pin:
    name: str
    version: str
    line: str

    @property
    def key(self) -> str:
        """The normalized project name (PEP 503), for comparing names across spellings."""
        return normalize(self.name)


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_pin(line: str) -> Pin | None:
    """The pin on one requirement line, or None when the line does not pin exactly one release."""
    text = line.split(" #", 1)[0].strip()
    found = _PIN.fullmatch(text)
    if not found or "*" in found["version"]:
        return None
    return Pin(found["name"], found["version"], text)


def requirement_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of a requirements file, without blank lines and comments."""
    out = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line and not line.startswith("#"):
            out.append((number, line))
    return out

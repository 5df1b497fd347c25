"""Generated Markdown whose ``<placeholders>`` show.

MyST passes ``<project>`` outside a code span through as raw HTML, an unknown tag the browser hides: "the first part
of each stage ID (<project><environment>)" read "()". Outside code spans both brackets become entities; inside
one they are literal already.
"""
from __future__ import annotations

import re

PLACEHOLDER = re.compile(r"<[A-Za-z][A-Za-z0-9_.-]*>")


def visible(text: str) -> str:
    """``text`` with ``<`` and ``>`` outside code spans written as entities."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):   # the even parts lie outside code spans
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def placeholders(text: str) -> set[str]:
    """The ``<placeholders>`` a text holds (to look for in the page a reader sees)."""
    return set(PLACEHOLDER.findall(text))

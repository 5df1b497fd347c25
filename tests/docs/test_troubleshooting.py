"""docs/troubleshooting.md is indexed by messages the tool prints: each heading's words occur in the product's source
(so a reworded message cannot leave the page pointing at nothing); its twin plants a heading no code prints."""
from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "troubleshooting.md"
PRODUCT = ("app.py", "deployment_spec", "local_endpoint", "model_build", "scripts", "stacks", "triton_constructs",
           "tritonsm")


def _headings(text: str) -> list[str]:
    return re.findall(r"^### `([^`]+)`", text, re.M)


def _source() -> str:
    files = [ROOT / "app.py"] + [p for d in PRODUCT[1:] for p in (ROOT / d).rglob("*") if p.suffix in (".py", ".sh")]
    return "\n".join(p.read_text(errors="replace") for p in files)


def _not_printed(headings: list[str], source: str) -> list[str]:
    return [h for h in headings if h not in source]


def test_every_heading_is_a_message_the_tool_prints():
    headings = _headings(PAGE.read_text())
    assert len(headings) >= 15   # a floor: the page's entries on 2026-11-29
    assert _not_printed(headings, _source()) == []


def test_a_heading_no_code_prints_is_reported():
    planted = _headings("### `did not answer /ping with 200`\n### `the flux capacitor is unaligned`\n")
    assert _not_printed(planted, _source()) == ["the flux capacitor is unaligned"]

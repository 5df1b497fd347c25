"""The `tritonsm` reference, generated when Sphinx reads docs/reference/cli.md: every subcommand from the
argparse parsers the command line runs (``tritonsm.cli.build_parser``, and the request options `tritonsm
invoke` hands to ``local_endpoint.cli``), so a new option or changed help shows here without an edit."""
from __future__ import annotations

import argparse
import os
from typing import Any

from visible_text import visible

MARKER = "<!-- generated: command line reference -->"
WIDTH = "100"  # argparse wraps usage lines to $COLUMNS: fixed, so the page does not depend on the terminal


def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    out = []
    for action in parser._actions:  # argparse has no public walk over subcommands
        if isinstance(action, argparse._SubParsersAction):
            out += list(action.choices.items())
    return out


def _arguments(parser: argparse.ArgumentParser) -> list[str]:
    rows = ["| argument | default | choices | what it does |", "|---|---|---|---|"]
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.help == argparse.SUPPRESS:
            continue
        name = ", ".join(action.option_strings) or action.dest
        if action.nargs != 0 and action.option_strings:
            name += f" {action.metavar or action.dest.upper()}"
        unset = action.default in (None, argparse.SUPPRESS, False) or action.nargs == 0  # flags show no default
        default = "" if unset else f"`{action.default}`"
        choices = ", ".join(f"`{c}`" for c in action.choices) if action.choices else ""
        help_ = (action.help or "") % {"default": action.default, "prog": parser.prog} if action.help else ""
        rows.append("| " + " | ".join(visible(c.replace("|", "\\|").replace("\n", " ")) for c in (
            f"`{name}`", default, choices, help_)) + " |")
    return rows if len(rows) > 2 else []


def _command(parser: argparse.ArgumentParser, depth: int, title: str = "") -> list[str]:
    lines = [f"{'#' * depth} {title or f'`{parser.prog}`'}", ""]
    if parser.description:
        lines += [visible(parser.description), ""]
    lines += ["```text", parser.format_usage().strip(), "```", ""]
    table = _arguments(parser)
    if table:
        lines += [*table, ""]
    for _, sub in _subparsers(parser):
        lines += _command(sub, min(depth + 1, 4))
    return lines


def render() -> str:
    from local_endpoint.cli import _invoke_parser
    from tritonsm.cli import build_parser

    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        root = build_parser()
        lines = ["## Every command", ""]
        for _, sub in _subparsers(root):
            lines += _command(sub, 3)
        request = _invoke_parser()
        lines += _command(request, 3, "`tritonsm invoke`: the request options")
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous
    return "\n".join(lines)


def fill(_app: Any, _docname: str, source: list[str]) -> None:
    if MARKER in source[0]:
        source[0] = source[0].replace(MARKER, render())


def setup(app: Any) -> dict[str, Any]:
    app.connect("source-read", fill)
    return {"parallel_read_safe": True, "version": "1"}

"""The deployment spec's reference, generated when Sphinx reads docs/reference/spec.md.

Types, defaults, bounds, patterns and allowed values come from ``deployment_spec.json_schema.spec_schema()``,
the schema generated from the dataclasses the loader parses (so `tritonsm schema`, editors and this page say
the same). The "checked by" column adds what a schema cannot say: for each field, the ``Problem`` each class's
own checks report on it, read from the class's source (``Problem(join(path, "field"), got, allowed, fix)``).
"""
from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import textwrap
import typing
from typing import Any

from visible_text import visible



def spec_classes() -> dict[str, type]:
    """Every dataclass reachable from the spec's sections, by class name (the schema's ``$defs`` keys)."""
    from deployment_spec.sections.endpoint import EndpointSpec
    from deployment_spec.sections.environment import EnvironmentSpec
    from deployment_spec.sections.model import ModelSpec
    from deployment_spec.parsing.parse import yaml_fields
    from deployment_spec.sections.pipeline import PipelineSpec

    found: dict[str, type] = {}

    def walk(tp: Any) -> None:
        for arg in typing.get_args(tp):
            walk(arg)
        if isinstance(tp, type) and dataclasses.is_dataclass(tp) and tp.__name__ not in found:
            found[tp.__name__] = tp
            hints = typing.get_type_hints(tp)
            for f in yaml_fields(tp):
                walk(hints[f.name])

    for cls in (ModelSpec, EndpointSpec, EnvironmentSpec, PipelineSpec):
        walk(cls)
    return found


def field_checks(cls: type) -> dict[str, list[str]]:
    """field -> the 'allowed' text of each Problem the class's own code reports on that field."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    out: dict[str, list[str]] = {}
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Problem" and len(node.args) >= 3):
            continue
        where = node.args[0]
        if not (isinstance(where, ast.Call) and getattr(where.func, "id", None) == "join" and len(where.args) == 2
                and isinstance(where.args[1], ast.Constant) and isinstance(where.args[1].value, str)):
            continue
        field = where.args[1].value.split(".")[0].split("[")[0]
        text = _text(node.args[2])
        if text and text not in out.setdefault(field, []):
            out[field].append(text)
    return out


def _text(node: ast.expr) -> str:
    """A message argument as a reader sees it: f-string holes shown as ``{expression}``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value).replace("self.", "") + "}"
                       for v in node.values)
    return ast.unparse(node).replace("self.", "")


def _type(body: dict[str, Any]) -> str:
    if "$ref" in body:
        name = body["$ref"].rsplit("/", 1)[1]
        return f"[{name}](#spec-{name.lower()})"
    if "anyOf" in body:
        return " or ".join(_type(b) for b in body["anyOf"])
    kind = body.get("type")
    if kind == "array":
        return "list of " + _type(body.get("items", {}))
    if kind == "object" and isinstance(body.get("additionalProperties"), dict):
        return "mapping of name to " + _type(body["additionalProperties"])
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind is None and "enum" in body:
        return "one of the values"
    return kind or "any"


def _allowed(body: dict[str, Any]) -> str:
    parts = []
    if "enum" in body:
        parts.append(", ".join(f"`{json.dumps(v)}`" for v in body["enum"]))
    if "minimum" in body:
        parts.append(f"≥ {body['minimum']}")
    if "maximum" in body:
        parts.append(f"≤ {body['maximum']}")
    if "pattern" in body:
        parts.append(f"matches `{body['pattern']}`")
    items = body.get("items")
    if isinstance(items, dict) and "$ref" not in items:
        inner = _allowed(items)
        if inner:
            parts.append("each: " + inner)
    return "; ".join(parts)


def _cell(text: str) -> str:
    return visible(text.replace("|", "\\|").replace("\n", " "))


def render() -> str:
    """The page body as MyST Markdown."""
    from deployment_spec.json_schema import spec_schema

    schema = spec_schema()
    classes = spec_classes()
    lines = ["## Top-level keys", "", _table(schema["properties"], set(schema.get("required", [])), {}), ""]
    for name, body in schema["$defs"].items():
        if name.endswith("Patch") and name[:-5] in schema["$defs"]:
            continue  # an environment override's view of a class: the same keys, none required
        cls = classes.get(name)
        lines += [f"(spec-{name.lower()})=", f"## {name}", ""]
        if body.get("description"):
            lines += [visible(body["description"]), ""]
        if cls is not None:
            lines += [f"Defined by `{cls.__module__}.{cls.__qualname__}`.", ""]
        checks = field_checks(cls) if cls is not None else {}
        lines += [_table(body.get("properties", {}), set(body.get("required", [])), checks), ""]
    return "\n".join(lines)


def _table(properties: dict[str, Any], required: set[str], checks: dict[str, list[str]]) -> str:
    rows = ["| key | type | default | allowed | checked by the class | description |", "|---|---|---|---|---|---|"]
    for key, body in properties.items():
        default = "required" if key in required else (
            f"`{json.dumps(body['default'], ensure_ascii=False)}`" if "default" in body else "")
        rule = "; ".join(checks.get(key, []))
        rows.append("| " + " | ".join(_cell(c) for c in (
            f"`{key}`", _type(body), default, _allowed(body), rule, body.get("description", ""))) + " |")
    return "\n".join(rows)


MARKER = "<!-- generated: spec reference -->"


def fill(_app: Any, _docname: str, source: list[str]) -> None:
    """Replaces the marker with the generated tables when Sphinx reads the page (headings and targets stay
    the page's own Markdown, so they appear in the table of contents and can be linked)."""
    if MARKER in source[0]:
        source[0] = source[0].replace(MARKER, render())


def setup(app: Any) -> dict[str, Any]:
    app.connect("source-read", fill)
    return {"parallel_read_safe": True, "version": "1"}

"""The deployment spec as a JSON Schema (draft 2020-12), generated from the dataclasses the loader parses.

Editors that read a ``# yaml-language-server: $schema=...`` line (and ``check-jsonschema``) then flag an
unknown key, a wrong type, a value out of bounds or a name that misses its pattern while the spec is
written. The schema mirrors how ``deployment_spec.parsing.parse`` and ``deployment_spec.spec`` read each value;
the cross-field rules (a class's ``problems``, ``deployment_spec.rules.cross_section``) stay in ``tritonsm validate``,
which remains the authority. ``schemas/triton.schema.json`` is this module's output, committed;
tests/spec/test_json_schema.py fails when the two drift apart.

Mirrored, rule by rule (parse.py):
- every dataclass rejects keys it does not have (``check_keys``): ``additionalProperties: false``;
- a field without a default is required (``parse_dataclass``);
- a Union is read as its first member, and ``null`` is accepted for any Union (``parse_value``);
- a tuple is a YAML list (never a scalar), a Mapping a mapping; a field's bounds and pattern apply to each
  item or value (``parse_value`` hands the field's metadata down);
- an Enum takes one of its values; bool, int and float are JSON types of their own (a bool is no number);
- a pattern must match the whole string (``re.fullmatch``): anchored as ``^(?:...)$``.

What JSON Schema cannot say, and the loader still refuses: an integer written as ``5.0`` (JSON Schema's
``integer`` accepts a float with no fraction), ``.nan`` and ``.inf`` (``value_problems``), and a trailing
newline after a value that matches a pattern (``$`` in ``pattern`` tolerates one, ``re.fullmatch`` does not).
"""
from __future__ import annotations

import collections.abc
import dataclasses
import enum
import json
import re
import types
import typing
from typing import Any

from deployment_spec import spec
from deployment_spec.sections.endpoint import EndpointSpec
from deployment_spec.sections.environment import EnvironmentSpec
from deployment_spec.sections.model import NAME_HELP, NAME_PATTERN, ModelSpec
from deployment_spec.parsing.parse import yaml_fields
from deployment_spec.sections.pipeline import PipelineSpec
from deployment_spec.sections.signing import SigningSpec

DRAFT = "https://json-schema.org/draft/2020-12/schema"
# Where the committed schema lives, relative to the repository root (`tritonsm schema --output`, `make schema`).
SCHEMA_PATH = "schemas/triton.schema.json"
REGENERATE = f"tritonsm schema --output {SCHEMA_PATH}"


def anchored(pattern: str) -> str:
    """A parser pattern (matched with ``re.fullmatch``) as a JSON Schema ``pattern``, which matches anywhere."""
    return f"^(?:{pattern})$"


def spec_schema() -> dict[str, Any]:
    """The whole spec's schema: the top-level keys of ``deployment_spec.spec`` and the dataclasses below them."""
    builder = _Builder()
    # As spec.parse_spec reads them: project and triton_version as strings (triton_version's fallback is
    # no default to advertise: a missing one is reported), the named sections through spec._named and
    # spec._environments (a mapping with at least one environment).
    properties: dict[str, dict[str, Any]] = {
        "project": _described(_field_help(spec.PROJECT_META), _scalar(str, spec.PROJECT_META))
        | {"default": spec.DEFAULT_PROJECT},
        "triton_version": _scalar(str, {}),
        "models": _named_section(NAME_PATTERN, NAME_HELP, builder.ref(ModelSpec)),
        "endpoints": _named_section(NAME_PATTERN, NAME_HELP, builder.ref(EndpointSpec)),
        "environments": _named_section(spec.ENV_NAME, spec.ENV_NAME_HELP, builder.environment())
        | {"minProperties": 1},
        "pipeline": builder.ref(PipelineSpec),
        "signing": builder.ref(SigningSpec),
    }
    if list(properties) != spec.TOP_KEYS:  # a top-level key the loader reads and this module does not describe
        raise TypeError(f"schema error: the generator describes the top-level keys {list(properties)}, the loader "
                        f"reads {spec.TOP_KEYS}; teach deployment_spec/json_schema.py the new key")
    for key, help_ in spec.REQUIRED_TOP.items():
        properties[key] = _described(help_, properties[key])
    return {
        "$schema": DRAFT,
        "title": "Deployment spec (triton.yaml) of triton-sagemaker-cdk",
        "description": "Models, endpoints and environments of Triton on SageMaker. Keys, types, bounds and "
                       "patterns only: `tritonsm validate` checks the rules between fields too and is the "
                       "authority.",
        "$comment": f"Generated from deployment_spec's dataclasses; do not edit by hand. Regenerate: {REGENERATE}",
        "type": "object",
        "properties": properties,
        "required": list(spec.REQUIRED_TOP),
        "additionalProperties": False,
        "$defs": dict(sorted(builder.defs.items())),
    }


def render(schema: dict[str, Any]) -> str:
    """The schema as the committed file's text: two-space JSON, keys in the order built (fields in class order)."""
    return json.dumps(schema, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


class _Builder:
    """Walks dataclasses into ``$defs``; ``partial`` defs are an environment override's view of a class."""

    def __init__(self) -> None:
        self.defs: dict[str, dict[str, Any]] = {}
        self._classes: dict[str, type] = {}

    def ref(self, cls: type, partial: bool = False) -> dict[str, Any]:
        name = cls.__name__ + ("Patch" if partial else "")
        known = self._classes.setdefault(name, cls)
        if known is not cls:
            raise TypeError(f"schema error: two spec classes named {cls.__name__} ({known.__module__}, "
                            f"{cls.__module__}); rename one, $defs are keyed by class name")
        if name not in self.defs:
            self.defs[name] = {}  # reserved first: a class may (indirectly) contain itself
            self.defs[name] = self._object(cls, partial)
        return {"$ref": f"#/$defs/{name}"}

    def environment(self) -> dict[str, Any]:
        """An environment: EnvironmentSpec's keys plus ``overrides`` (spec._environments pops it first)."""
        extra = {spec.OVERRIDES: self._overrides()}
        body = self._object(EnvironmentSpec, partial=False, extra=extra)
        self.defs[EnvironmentSpec.__name__] = body
        self._classes[EnvironmentSpec.__name__] = EnvironmentSpec
        return {"$ref": f"#/$defs/{EnvironmentSpec.__name__}"}

    def _overrides(self) -> dict[str, Any]:
        if spec.OVERRIDE_KEYS != ("endpoints",):
            raise TypeError(f"schema error: environment overrides take {spec.OVERRIDE_KEYS}, the generator knows "
                            "only endpoints; teach deployment_spec/json_schema.py the new key")
        # Endpoint names are checked against endpoints: by the loader; any valid one matches NAME_PATTERN, so
        # a name that misses it can never name an endpoint.
        per_endpoint = _named_section(NAME_PATTERN, NAME_HELP, self.ref(EndpointSpec, partial=True))
        return {
            "description": "this environment's changes to endpoints: {<endpoint>: {<any endpoint key>: ...}}; "
                           "mappings merge into the endpoint's own key by key, lists and values replace",
            "type": "object",
            "properties": {"endpoints": {"anyOf": [
                per_endpoint,
                # spec._apply_overrides reads `overrides.get("endpoints", {}) or {}`: any empty value means
                # no overrides, so these are accepted as the loader accepts them.
                {"enum": [None, False, 0, "", []]},
            ]}},
            "additionalProperties": False,
        }

    def _object(self, cls: type, partial: bool, extra: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
        hints = typing.get_type_hints(cls)  # as parse_dataclass resolves them
        fields = yaml_fields(cls)
        properties: dict[str, Any] = {}
        for f in fields:
            body = self._value(hints[f.name], f.metadata, partial)
            if not partial and _has_default(f):
                body["default"] = _plain(_default(f))
            properties[f.name] = _described(_field_help(f.metadata), body)
        for key, body in (extra or {}).items():
            if key in properties:
                raise TypeError(f"schema error: {cls.__name__} has a field '{key}', which the loader takes out "
                                "of the mapping before parsing it")
            properties[key] = body
        out: dict[str, Any] = {}
        doc = _class_doc(cls)
        if partial:
            # spec._deep_merge merges an override's mapping into the endpoint's own key by key, so a key the
            # endpoint already sets need not be repeated: no key is required here. Whether a nested mapping
            # ends up complete depends on the endpoint it patches, which a schema cannot see; the loader
            # reports what is still missing after the merge.
            doc = (doc + " " if doc else "") + (f"As an environment override of {cls.__name__}: any of its keys; "
                                                "mappings merge into the endpoint's own, lists and values replace.")
        if doc:
            out["description"] = doc
        out["type"] = "object"
        out["properties"] = properties
        required = [f.name for f in fields if not _has_default(f)]
        if required and not partial:
            out["required"] = required
        out["additionalProperties"] = False  # parse_dataclass -> check_keys: every other key is a problem
        return out

    def _value(self, tp: Any, md: typing.Mapping[str, Any], partial: bool) -> dict[str, Any]:
        """One value of type ``tp``, read as parse.parse_value reads it (the same branches, in order)."""
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin in (typing.Union, types.UnionType):
            # parse_value returns None for a null before looking at the members, then reads the first
            # non-None member only.
            inner = [a for a in args if a is not type(None)]
            return _nullable(self._value(inner[0], md, partial))
        if origin is tuple:
            # Each item with the field's metadata; a list replaces the endpoint's list in an override
            # (spec._deep_merge), so its items are whole, never partial.
            return {"type": "array", "items": self._value(args[0], md, partial=False)}
        if origin in (dict, collections.abc.Mapping) and len(args) == 2:
            # Keys are taken as str(key); values merge key by key in an override.
            return {"type": "object", "additionalProperties": self._value(args[1], md, partial)}
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            return self.ref(tp, partial)
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            values = [m.value for m in tp]
            out: dict[str, Any] = {"enum": values}
            if all(isinstance(v, str) for v in values):
                out = {"type": "string", **out}
            doc = _class_doc(tp)
            return {"description": doc, **out} if doc else out
        return _scalar(tp, md)


def _scalar(tp: Any, md: typing.Mapping[str, Any]) -> dict[str, Any]:
    """bool, int, float or str with the metadata's bounds or pattern (parse.parse_scalar, value_problems)."""
    if tp is bool:
        return {"type": "boolean"}
    if tp in (int, float):
        out: dict[str, Any] = {"type": "integer" if tp is int else "number"}
        if md.get("minimum") is not None:
            out["minimum"] = md["minimum"]
        if md.get("maximum") is not None:
            out["maximum"] = md["maximum"]
        return out
    if tp is str:
        out = {"type": "string"}
        if md.get("pattern"):
            out["pattern"] = anchored(md["pattern"])
        return out
    # parse_scalar raises the same for a type it cannot read: a mistake in the spec classes, not in a spec.
    raise TypeError(f"schema error: unsupported field type {tp!r}")


def _named_section(pattern: str, help_: str, body: dict[str, Any]) -> dict[str, Any]:
    """A mapping of name: settings whose names the loader checks (spec._named, spec._environments)."""
    return {"type": "object", "propertyNames": {"description": help_, "type": "string", "pattern": anchored(pattern)},
            "additionalProperties": body}


def _nullable(body: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in body:
        return {"anyOf": [body, {"type": "null"}]}
    out = dict(body)
    if "enum" in out:
        out["enum"] = [*out["enum"], None]
    if "type" in out:
        out["type"] = [out["type"], "null"]
    return out


def _described(help_: str, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with ``help_`` as its description, first (where an editor shows it); the field's help wins
    over its class's or enum's own text."""
    if not help_:
        return body
    return {"description": help_, **{k: v for k, v in body.items() if k != "description"}}


def _field_help(md: typing.Mapping[str, Any]) -> str:
    parts = [md.get("help") or "", md.get("pattern_help") or ""]
    return "; ".join(p for p in parts if p)


def _class_doc(cls: type) -> str:
    """The first paragraph of a class's own docstring, on one line (none: dataclass's generated signature)."""
    doc = cls.__dict__.get("__doc__") or ""
    if not doc or doc.startswith(f"{cls.__name__}("):
        return ""
    first = doc.strip().split("\n\n", 1)[0]
    return re.sub(r"\s+", " ", first).replace("``", "`")


def _has_default(f: dataclasses.Field[Any]) -> bool:
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    factory = f.default_factory
    if not callable(factory):
        raise TypeError(f"schema error: {f.name} has no default")
    return factory()


def _plain(value: Any) -> Any:
    """A default as the YAML a user would write for it: enums as their values, a dataclass as its keys."""
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in yaml_fields(type(value))}
    if isinstance(value, collections.abc.Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value

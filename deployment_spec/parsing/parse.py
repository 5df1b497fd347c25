"""Generic, schema-driven parsing of plain YAML data into frozen dataclasses.

The dataclasses are the schema: each field's type says what is allowed, its
``metadata`` adds bounds and a help text. Every problem is collected (never
raised on the first one) so a user sees the whole list at once.
"""
from __future__ import annotations

import collections.abc
import dataclasses
import difflib
import enum
import re
import types
import typing
from typing import Any, Mapping

from deployment_spec.parsing.errors import Problem, PropsError, describe, raise_problems
from deployment_spec.parsing.type_checks import hints_of, type_problems

_MISSING = object()


def meta(*, help: str = "", minimum: float | None = None, maximum: float | None = None,
         pattern: str | None = None, pattern_help: str = "", pattern_fix: str = "rename it to match",
         yaml: bool = True) -> dict[str, Any]:
    """Field metadata: a help text for missing keys, numeric bounds, a regex for strings (with what it means
    and what to do when a value misses it).

    ``yaml=False`` marks a field the loader fills in (never read from the file).
    """
    return {"help": help, "minimum": minimum, "maximum": maximum, "pattern": pattern,
            "pattern_help": pattern_help, "pattern_fix": pattern_fix, "yaml": yaml}


def yaml_fields(cls: type) -> list[dataclasses.Field[Any]]:
    return [f for f in dataclasses.fields(cls) if f.metadata.get("yaml", True)]


# How alike a misspelt word must be to a choice for "did you mean" (difflib's ratio). A value is held to more than a
# key: a value can be a real word of its own that is simply not allowed (backend 'tensorflow' is no typo of 'tensorrt',
# ratio 0.67), while 'onnxrt' (0.71) and 'pytroch' (0.86) are meant as 'onnxruntime' and 'pytorch'.
KEY_CUTOFF, VALUE_CUTOFF = 0.6, 0.7


def suggest(word: str, choices: typing.Iterable[str], cutoff: float = KEY_CUTOFF) -> str | None:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=cutoff)
    return close[0] if close else None


def suggest_value(word: str, choices: typing.Iterable[str]) -> str | None:
    """The allowed value meant by ``word``: the one choice that holds it whole ('FP32' → 'TYPE_FP32', 'torch' →
    'pytorch'), else one alike by VALUE_CUTOFF."""
    choices = list(choices)
    holding = [c for c in choices if word and word.lower() in c.lower()]
    return holding[0] if len(holding) == 1 else suggest(word, choices, VALUE_CUTOFF)


def check_keys(raw: Mapping[str, Any], allowed: list[str], path: str, problems: list[Problem]) -> None:
    """Reports every key not in ``allowed``, with the closest valid key when there is one."""
    for key in raw:
        if key in allowed:
            continue
        near = suggest(str(key), allowed)
        fix = f"did you mean '{near}'?" if near else "remove it or fix its spelling"
        problems.append(Problem(f"{join(path, str(key))}", f"unknown key '{key}'",
                                ", ".join(allowed), fix))


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def parse_dataclass(cls: type, raw: Any, path: str, problems: list[Problem]) -> Any:
    """Parses ``raw`` into ``cls``; returns None (and records problems) when it can't."""
    if not isinstance(raw, dict):
        # A class may say what it is instead (a ClassVar NOT_A_MAPPING = (allowed, fix)): e.g. one shadow per endpoint.
        allowed, fix = getattr(cls, "NOT_A_MAPPING", (f"a mapping of {cls.__name__} settings",
                                                      "write the settings as 'key: value' lines under this key"))
        problems.append(Problem(path or "(top level)", describe(raw), allowed, fix))
        return None
    fields = yaml_fields(cls)
    names = [f.name for f in fields]
    check_keys(raw, names, path, problems)
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    before = len(problems)
    for f in fields:
        fpath = join(path, f.name)
        if f.name not in raw:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                problems.append(Problem(fpath, "nothing (the key is missing)", f.metadata.get("help") or "a value",
                                        f"add '{f.name}:' under {path or 'the top level'}"))
            continue
        value = parse_value(hints[f.name], raw[f.name], fpath, problems, f.metadata)
        if value is not _MISSING:
            values[f.name] = value
    if len(problems) != before:
        return None
    try:
        obj = cls(**values)
    except TypeError:  # a required field was missing: already reported above
        return None
    except PropsError as caught:
        # Field values were checked above, so these are the class's cross-field rules: the same
        # problems, with this spec path in front of each prop name.
        problems.extend(dataclasses.replace(p, path=join(path, p.path) if p.path else path or "(top level)")
                        for p in caught.problems)
        return None
    check = getattr(obj, "problems", None)
    if check is not None and not isinstance(obj, Validated):  # a Validated class ran it on construction
        problems.extend(check(path))
    return obj


def parse_value(tp: Any, raw: Any, path: str, problems: list[Problem], md: Mapping[str, Any] | None = None) -> Any:
    md = md or {}
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if raw is None:
            return None
        return parse_value(inner[0], raw, path, problems, md)
    if origin is tuple:
        if not isinstance(raw, list):
            problems.append(Problem(path, describe(raw), "a list", f"write {path.rsplit('.', 1)[-1]} as a YAML list, e.g. [a, b]"))
            return _MISSING
        items = [parse_value(args[0], item, f"{path}[{i}]", problems, md) for i, item in enumerate(raw)]
        return _MISSING if any(i is _MISSING for i in items) else tuple(items)
    if origin in (dict, collections.abc.Mapping) or tp is dict:
        if not isinstance(raw, dict):
            problems.append(Problem(path, describe(raw), "a mapping", "write it as 'name: value' lines"))
            return _MISSING
        out = {}
        for key, item in raw.items():
            value = parse_value(args[1], item, join(path, str(key)), problems, md)
            if value is not _MISSING:
                out[str(key)] = value
        return types.MappingProxyType(out)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        obj = parse_dataclass(tp, raw, path, problems)
        return _MISSING if obj is None else obj
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        allowed = [m.value for m in tp]
        if raw in allowed:
            return tp(raw)
        near = suggest_value(str(raw), allowed) if isinstance(raw, str) else None
        fix = f"did you mean '{near}'?" if near else f"use one of {', '.join(allowed)}"
        problems.append(Problem(path, describe(raw), ", ".join(allowed), fix))
        return _MISSING
    return parse_scalar(tp, raw, path, problems, md)


def parse_scalar(tp: type, raw: Any, path: str, problems: list[Problem], md: Mapping[str, Any]) -> Any:
    lo, hi = md.get("minimum"), md.get("maximum")
    if tp is bool:
        if isinstance(raw, bool):
            return raw
        problems.append(Problem(path, describe(raw), "true or false", "write true or false without quotes"))
        return _MISSING
    if tp in (int, float):
        ok = isinstance(raw, int) and not isinstance(raw, bool) or (tp is float and isinstance(raw, float))
        if not ok:
            kind = "an integer" if tp is int else "a number"
            problems.append(Problem(path, describe(raw), bounds_text(kind, lo, hi), _number_fix(kind, raw)))
            return _MISSING
        found = value_problems(path, raw, md, integer=tp is int)
        problems.extend(found)
        return _MISSING if found else tp(raw)
    if tp is str:
        if not isinstance(raw, str):
            problems.append(Problem(path, f"{describe(raw)} (not a string)", "a string",
                                    f"quote the value: \"{raw}\"" if isinstance(raw, (int, float)) else "write a string"))
            return _MISSING
        found = value_problems(path, raw, md)
        problems.extend(found)
        return _MISSING if found else raw
    raise TypeError(f"schema error: unsupported field type {tp!r} at {path}")  # a bug in the schema, not user input


def _number_fix(kind: str, raw: Any) -> str:
    """What to write instead of ``raw`` where ``kind`` ("an integer", "a number") is wanted."""
    if isinstance(raw, str):
        return f"write {kind} without quotes"
    if isinstance(raw, float) and raw.is_integer():
        return f"write {int(raw)}: an integer has no decimal point"
    if isinstance(raw, float):
        return f"write a whole number, e.g. {round(raw)}"
    return f"write {kind}"


def value_problems(path: str, value: Any, md: Mapping[str, Any], *, integer: bool = False) -> list[Problem]:
    """The rules a field's metadata sets on one value (bounds, pattern): the one home of those checks,
    used by the YAML loader and by every dataclass built in code (``Validated``)."""
    if isinstance(value, bool) or value is None:
        return []
    lo, hi = md.get("minimum"), md.get("maximum")
    if isinstance(value, (int, float)):
        if value != value or value in (float("inf"), float("-inf")):  # YAML .nan / .inf, or float("nan")
            return [Problem(path, describe(value), bounds_text("a finite number", lo, hi), "write a finite number")]
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            kind = "an integer" if integer else "a number"
            return [Problem(path, describe(value), bounds_text(kind, lo, hi),
                            f"set it within {fmt_bound(lo)}..{fmt_bound(hi)}")]
        return []
    pattern = md.get("pattern")
    if isinstance(value, str) and pattern and not re.fullmatch(pattern, value):
        return [Problem(path, describe(value), md.get("pattern_help") or f"text matching {pattern}",
                        md.get("pattern_fix") or "rename it to match")]
    return []


def field_problems(obj: Any, path: str = "") -> list[Problem]:
    """``value_problems`` for every field of a dataclass instance."""
    return values_problems(type(obj), {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}, path)


def values_problems(cls: type, values: Mapping[str, Any], path: str = "") -> list[Problem]:
    """``value_problems`` for values named like fields of ``cls`` (list items one by one), checked by that
    field's metadata: how a construct checks its own scalar props against the spec's bounds."""
    out: list[Problem] = []
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for name, value in values.items():
        integer = hints[name] is int or int in typing.get_args(hints[name])
        items = enumerate(value) if isinstance(value, tuple) else [(None, value)]
        for i, item in items:
            where = join(path, name) + ("" if i is None else f"[{i}]")
            out += value_problems(where, item, fields[name].metadata, integer=integer)
    return out


class Validated:
    """Base of the spec's frozen dataclasses, which are also the construct library's props.

    Construction refuses what the YAML loader refuses, with the same wording: the bounds and patterns
    of each field's metadata, then the class's own cross-field ``problems(path)``. Raises PropsError
    naming the class and every problem at once.
    """

    def __post_init__(self) -> None:
        found = typed_fields_problems(self)
        if not found:
            found = field_problems(self)
        check = getattr(self, "problems", None)
        if not found and check is not None:
            found = check("")
        raise_problems(type(self).__name__, found)


def typed_fields_problems(obj: Any) -> list[Problem]:
    """Each field of a dataclass built in code against its type hint (a list given for a tuple is kept, as
    a tuple: the object stays frozen and hashable)."""
    hints = hints_of(typing.cast(Any, type(obj)))
    out: list[Problem] = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        hint = hints[f.name]
        if isinstance(value, list) and tuple in (typing.get_origin(hint), *map(typing.get_origin, typing.get_args(hint))):
            value = tuple(value)
            object.__setattr__(obj, f.name, value)
        scalar = next((t for t in (int, float) if t in (hint, *typing.get_args(hint))), None)
        allowed = None
        if scalar is not None:
            lo, hi = f.metadata.get("minimum"), f.metadata.get("maximum")
            allowed = bounds_text("an integer" if scalar is int else "a number", lo, hi)
            allowed += " or None" if type(None) in typing.get_args(hint) else ""
        out += type_problems(f.name, value, hint, allowed)
    return out


def bounds_text(kind: str, lo: float | None, hi: float | None) -> str:
    if lo is not None and hi is not None:
        return f"{kind} from {fmt_bound(lo)} to {fmt_bound(hi)}"
    if lo is not None:
        return f"{kind} >= {fmt_bound(lo)}"
    if hi is not None:
        return f"{kind} <= {fmt_bound(hi)}"
    return kind


def fmt_bound(v: float | None) -> str:
    if v is None:
        return "any"
    return str(int(v)) if float(v).is_integer() else str(v)

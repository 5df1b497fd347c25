"""Every prop of a public construct checked against its type hint before anything is built.

A wrong type otherwise surfaces deep inside the construct or the CDK (``AttributeError: 'str' object has
no attribute 'encryption_key'``, a jsii deserialization error) without naming the prop.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Iterable, Sequence, TypeVar

from constructs import Construct

from deployment_spec.parsing.errors import Problem, raise_problems
from deployment_spec.parsing.parse import suggest
from deployment_spec.parsing.type_checks import hints_of, shown, type_problems

Init = TypeVar("Init", bound=Callable[..., None])


def checked_props(init: Init) -> Init:
    """Decorates a construct's ``__init__(self, scope, id_, *, props...)``: a prop of the wrong type, or an
    unknown one, raises ``PropsError`` naming it, the value, what is allowed and the fix."""
    signature = inspect.signature(init)
    names = [name for name in signature.parameters if name not in ("self", "scope", "id_")]

    @functools.wraps(init)
    def checked(self: Any, scope: Any, id_: Any, *args: Any, **kwargs: Any) -> None:
        subject = f"{type(self).__name__} {_path(scope, id_)}"
        problems = unknown_arguments([name for name in kwargs if name not in signature.parameters], names, "prop")
        if not problems:
            bound = signature.bind(self, scope, id_, *args, **kwargs)
            hints = hints_of(init)
            problems = [p for name, value in bound.arguments.items() if name != "self" and name in hints
                        for p in type_problems(name, value, hints[name])]
        raise_problems(subject, problems)
        init(self, scope, id_, *args, **kwargs)

    return checked  # type: ignore[return-value]


def unknown_arguments(unknown: Iterable[str], names: Sequence[str], noun: str) -> list[Problem]:
    """One problem per keyword the callee lacks (``noun``: what it calls them), with the nearest name it has."""
    return [Problem(name, f"an unknown {noun}", ", ".join(names),
                    f"did you mean '{near}'?" if (near := suggest(name, names)) else "remove it")
            for name in unknown]


def _path(scope: Any, id_: Any) -> str:
    parent = scope.node.path if isinstance(scope, Construct) else ""
    return f"{parent}/{id_}" if parent else str(id_) if isinstance(id_, str) else shown(id_)

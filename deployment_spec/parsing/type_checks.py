"""Props built in code checked against their type hints, so a mistake of type names the prop that has it.

Python does not check annotations; without this, ``Scaling(max_instances="4")`` fails later inside a
comparison (``'>' not supported between 'int' and 'str'``) and ``bucket="my-bucket"`` inside the CDK,
in words that name neither the prop nor the fix. The hints are the schema, as for the YAML loader
(``deployment_spec.parsing.parse``), which checks the same fields from YAML values.

AWS CDK interfaces (``s3.IBucket``, ``kms.IKey``...) are jsii protocols that ``isinstance`` cannot
test; a jsii class lists the interfaces it implements in ``__jsii_ifaces__``, and an interface's proxy
class (what ``from_*`` imports return) is named by ``__jsii_proxy_class__``.
"""
from __future__ import annotations

import collections.abc
import dataclasses
import enum
import functools
import pathlib
import types
import typing
from typing import Any, Mapping

from deployment_spec.parsing.errors import Problem

_SHOWN_CHARS = 60
# How the common CDK interfaces are brought in, for the fix of a prop given a name or an ARN string.
_IMPORTS = {
    "IBucket": "s3.Bucket.from_bucket_name(self, 'Models', NAME)",
    "IKey": "kms.Key.from_key_arn(self, 'Key', ARN)",
    "IVpc": "ec2.Vpc.from_lookup(self, 'Vpc', vpc_id=ID)",
    "ISecurityGroup": "ec2.SecurityGroup.from_security_group_id(self, 'Group', ID)",
    "ITopic": "sns.Topic.from_topic_arn(self, 'Topic', ARN)",
    "IRole": "iam.Role.from_role_arn(self, 'Role', ARN)",
    "ISubnet": "ec2.Subnet.from_subnet_id(self, 'Subnet', ID)",
    "IRepository": "ecr.Repository.from_repository_name(self, 'Triton', NAME)",
}


def shown(value: object) -> str:
    """The value as a message shows it: its repr and its type, e.g. ``'4' (str)``; an object by its type."""
    text = repr(value)
    if " object at 0x" in text:
        return f"a {type(value).__name__}"
    if len(text) > _SHOWN_CHARS and not isinstance(value, str):  # a name or an ARN is shown whole
        text = text[:_SHOWN_CHARS] + "..."
    return f"{text} ({type(value).__name__})"


def type_problems(path: str, value: Any, hint: Any, allowed_scalar: str | None = None) -> list[Problem]:
    """Whether ``value`` has the type ``hint`` says; one problem naming ``path`` when not.

    ``allowed_scalar`` words what a number or string field allows (its bounds), from the field's metadata.
    """
    if _matches(value, hint):
        return _inner_problems(path, value, hint)
    return [Problem(path, shown(value), allowed_scalar or allowed_text(hint), _fix(value, hint))]


def _matches(value: Any, hint: Any) -> bool:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any or hint is object:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, arg) for arg in args)
    if hint is type(None):
        return value is None
    if origin is typing.Literal:
        return value in args
    if origin is not None:
        hint = origin
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint in (tuple, list, collections.abc.Sequence):
        return isinstance(value, (tuple, list))
    if hint in (dict, collections.abc.Mapping):
        return isinstance(value, collections.abc.Mapping)
    if hint in (collections.abc.Callable,):
        return callable(value)
    if _is_jsii_interface(hint):
        return _implements(value, hint)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True  # a hint this check does not understand (a TypeVar...): leave it to the code


def _inner_problems(path: str, value: Any, hint: Any) -> list[Problem]:
    """The items of a list, tuple or mapping, each against its own hint."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return next((_inner_problems(path, value, arg) for arg in args if _matches(value, arg)), [])
    if origin in (tuple, list, collections.abc.Sequence) and args and isinstance(value, (tuple, list)):
        item = args[0]
        return [p for i, each in enumerate(value) for p in type_problems(f"{path}[{i}]", each, item)]
    if origin in (dict, collections.abc.Mapping) and len(args) == 2 and isinstance(value, collections.abc.Mapping):
        return [p for key, each in value.items()
                for p in type_problems(f"{path}.{key}", key, args[0]) + type_problems(f"{path}.{key}", each, args[1])]
    return []


def allowed_text(hint: Any) -> str:
    """What a hint allows, in words: ``an integer``, ``a Scaling``, ``an s3.IBucket``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        words = [allowed_text(a) for a in args if a is not type(None)]
        return " or ".join(words) + (" or None" if type(None) in args else "")
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (tuple, list, collections.abc.Sequence):
        return f"a list of {_plural(args[0])}" if args else "a list"
    if origin in (dict, collections.abc.Mapping):
        return f"a mapping of {_plural(args[0])} to {_plural(args[1])}" if args else "a mapping"
    simple = {bool: "True or False", int: "an integer", float: "a number", str: "a string",
              pathlib.Path: "a path"}
    if hint in simple:
        return simple[hint]
    name = _qualified(hint)
    # The article as the name is read out: "an s3.IBucket" (ess-three), "a kms.IKey", "an ec2.IVpc".
    article = "an" if name[:1].lower() in "aeio" or name.startswith(("s3.", "sns.", "Instance")) else "a"
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return f"{article} {name} ({', '.join(f'{name}.{m.name}' for m in hint)})"
    return f"{article} {name}"


def _plural(hint: Any) -> str:
    text = allowed_text(hint)
    for article in ("an ", "a "):
        if text.startswith(article):
            return text[len(article):] + "s"
    return text


def _fix(value: Any, hint: Any) -> str:
    """What to write instead, as specific as the mistake allows."""
    wanted = _non_none(hint)
    if len(wanted) == 1:
        target = typing.get_origin(wanted[0]) or wanted[0]
        # A class may say how its values are built from what people pass by mistake (a path, a name).
        built = getattr(target, "built_from", None)
        if callable(built) and built(value):
            return f"build it: {built(value)}"
        item = (typing.get_args(wanted[0]) or (None,))[0]
        built_item = getattr(item, "built_from", None)
        if target in (tuple, list, collections.abc.Sequence) and callable(built_item) and built_item(value):
            return f"wrap it in a list: [{built_item(value)}]"
        if target in (int, float) and isinstance(value, str):
            try:
                number = int(value) if target is int else float(value)
                return f"pass {number!r} without quotes"
            except ValueError:
                pass
        if target is bool and isinstance(value, str):
            return "pass True or False without quotes"
        if isinstance(target, type) and issubclass(target, enum.Enum):
            member = next((m for m in target if m.value == value or m.name == value), None)
            name = _qualified(target)
            return f"pass {name}.{member.name}" if member else f"pass one of the {name} members"
        if isinstance(target, type) and dataclasses.is_dataclass(target) and isinstance(value, Mapping):
            arguments = ", ".join(f"{k}={v!r}" for k, v in value.items())
            return f"build it: {target.__name__}({arguments})"
        if target in (tuple, list, collections.abc.Sequence) and isinstance(value, str):
            return f"wrap it in a list: [{value!r}]"
        if _is_jsii_interface(target) and isinstance(value, str):
            short = target.__name__
            how = _IMPORTS.get(short)
            return f"import it: {how.replace('NAME', repr(value)).replace('ARN', repr(value)).replace('ID', repr(value))}" \
                if how else f"pass an {_qualified(target)} construct, not its name"
    return f"pass {allowed_text(hint)}"


def _non_none(hint: Any) -> list[Any]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return [a for a in typing.get_args(hint) if a is not type(None)]
    return [hint]


def _qualified(hint: Any) -> str:
    """``s3.IBucket`` for ``aws_cdk.aws_s3.IBucket``, ``cdk.Duration`` for ``aws_cdk.Duration``, else the name."""
    module = getattr(hint, "__module__", "")
    name = getattr(hint, "__name__", str(hint))
    if module.startswith("aws_cdk.aws_"):
        return f"{module.split('.aws_', 1)[1]}.{name}"
    if module == "aws_cdk":
        return f"cdk.{name}"
    return name


def _is_jsii_interface(hint: Any) -> bool:
    return isinstance(hint, type) and hasattr(hint, "__jsii_proxy_class__") and hasattr(hint, "__jsii_type__") \
        and getattr(hint, "_is_protocol", False)


def _implements(value: Any, interface: type) -> bool:
    # jsii returns an object implementing several interfaces as one proxy delegating to one per interface.
    delegates = value.__dict__.get("_delegates") if hasattr(value, "__dict__") else None
    if isinstance(delegates, list):
        return any(_implements(each, interface) for each in delegates)
    for cls in type(value).__mro__:
        if cls is interface:
            return True
        if any(interface in getattr(each, "__mro__", ()) for each in getattr(cls, "__jsii_ifaces__", ())):
            return True
    proxy = interface.__jsii_proxy_class__()  # type: ignore[attr-defined]
    return isinstance(value, proxy)


@functools.lru_cache(maxsize=None)
def hints_of(target: Any) -> Mapping[str, Any]:
    """The resolved type hints of a function or class (cached: props are built often, hints never change)."""
    return typing.get_type_hints(target)

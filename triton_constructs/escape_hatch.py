"""Typed access to a construct's CloudFormation resource, for the escape hatches this library needs.

``node.default_child`` is typed ``IConstruct | None``; each escape hatch here states the L1 class it
expects, and a different one (an aws-cdk-lib upgrade that changed the construct tree) fails loudly.
"""
from __future__ import annotations

from typing import TypeVar

from constructs import IConstruct

T = TypeVar("T")


def default_child(scope: IConstruct, kind: type[T]) -> T:
    """``scope.node.default_child`` as a ``kind`` (an L1 class such as ``aws_s3.CfnBucket``)."""
    child = scope.node.default_child
    if not isinstance(child, kind):
        raise TypeError(f"{scope.node.path} holds {type(child).__name__}, not the {kind.__name__} this library edits")
    return child


def find(scope: IConstruct, path: str, kind: type[T]) -> T:
    """The construct at ``path`` (``a/b/c``) below ``scope``, as a ``kind``."""
    found: IConstruct = scope
    for part in path.split("/"):
        child = found.node.try_find_child(part)
        if child is None:
            raise TypeError(f"{scope.node.path} has no {path}")
        found = child
    if not isinstance(found, kind):
        raise TypeError(f"{scope.node.path}/{path} is {type(found).__name__}, not {kind.__name__}")
    return found

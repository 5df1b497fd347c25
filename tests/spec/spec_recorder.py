"""A pytest plugin (``-p spec_recorder``) that records every raw spec the tests feed to the loader.

tests/spec/test_json_schema.py runs the other spec tests in a child pytest with it, then checks the JSON
Schema against what the loader did with each spec: every spec it accepted must validate, and a spec it
refused for a key, type, bound or pattern must be refused by the schema too. Test outcomes do not matter
here (the child's assertions are not this run's), only the loader's verdict on each spec.

Each record is ``(raw, None)`` for an accepted spec, or ``(raw, problems)`` with one
``(path, got, allowed, structural)`` per problem: ``structural`` marks a problem found by the generic
reader (deployment_spec.parsing.parse: unknown keys, types, bounds, patterns, missing keys), as opposed to a
class's or a rule's cross-field check, which a schema cannot express.
"""
from __future__ import annotations

import copy
import os
import pickle
import pathlib
from typing import Any

RECORDS_ENV = "SPEC_RECORDS_FILE"
_records: list[tuple[Any, Any]] = []


def pytest_configure(config: Any) -> None:
    # Patched before the test modules are collected, so their `from deployment_spec.spec import parse_spec`
    # (and load_spec's own call) find the recording one.
    import deployment_spec.parsing.parse as parse_module
    import deployment_spec.spec as spec_module
    from deployment_spec.parsing.errors import Problem, SpecError

    class Structural(Problem):
        """A problem deployment_spec.parsing.parse found (it creates every problem through this name)."""

    parse_module.Problem = Structural  # type: ignore[misc]
    original = spec_module.parse_spec

    def recording(raw: Any, path: pathlib.Path) -> Any:
        snapshot = copy.deepcopy(raw)  # tests mutate their dicts after the call
        try:
            result = original(raw, path)
        except SpecError as caught:
            _records.append((snapshot, [(p.path, p.got, p.allowed, isinstance(p, Structural))
                                        for p in caught.problems]))
            raise
        _records.append((snapshot, None))
        return result

    spec_module.parse_spec = recording


def pytest_unconfigure(config: Any) -> None:
    target = os.environ.get(RECORDS_ENV)
    if target:
        pathlib.Path(target).write_bytes(pickle.dumps(_records))

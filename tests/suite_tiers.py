"""The suite's two tiers (pytest hooks, imported by tests/conftest.py).

``make test`` runs every test and records how long each test module took, fixtures included
(``--record-durations FILE``: seconds per module, from pytest's own setup/call/teardown reports).
``make check`` (``--tier check``) runs the modules whose recorded time is at most ``FAST_MODULE_S``, and the
modules no run has recorded yet (a new module is most often a unit test being written): the spec and its
refusals, the answer steps, the parsers, the unit tests of the build, within a few minutes on 2 cores. The
cut is by module, not by test: a module's expensive fixture (a build, a server) runs for its first test, so
keeping some of its tests would pay for the fixture anyway.

The recorded times: ``.tritonsm/module-durations.json`` after a local ``make test`` (this machine's own), else
``tests/module_durations.json``, committed from a full run in CI's conditions (2 cores).

``make test`` runs on three pytest-xdist workers (on 2 cores: the tests wait on servers and subprocesses), each test module whole on one of them (``--dist loadfile``, so a
module's fixtures are made once), and hands out the modules slowest first (``--no-loadscope-reorder`` keeps the
order made here): the longest modules then overlap instead of one of them running alone at the end.
"""
from __future__ import annotations

import collections
import json
import pathlib
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "tests" / "module_durations.json"
LOCAL = ROOT / ".tritonsm" / "module-durations.json"
FAST_MODULE_S = 6.0  # below every module that builds a model or starts a server in the recorded runs

_spent: collections.Counter[str] = collections.Counter()


def add_options(parser: pytest.Parser) -> None:
    parser.addoption("--tier", choices=("all", "check"), default="all",
                     help="check: only the modules recorded as fast (make check); all: every test (make test)")
    parser.addoption("--record-durations", type=pathlib.Path, metavar="FILE",
                     help="write the seconds each test module took (fixtures included) to FILE as JSON")


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def recorded() -> dict[str, float]:
    for path in (LOCAL, COMMITTED):
        if path.is_file():
            data: dict[str, float] = json.loads(path.read_text())
            return data
    return {}


def fast_modules(durations: dict[str, float], modules: list[str]) -> set[str]:
    """The modules of the check tier: recorded at most FAST_MODULE_S seconds, or not recorded at all."""
    return {m for m in modules if durations.get(m, 0.0) <= FAST_MODULE_S}


def slowest_first(durations: dict[str, float], items: list[pytest.Item]) -> list[pytest.Item]:
    """The items by module, the modules by recorded time, longest first (not recorded: last, in their order).

    Every process of an xdist run sorts the same way (same record, same collection), as xdist requires."""
    first_seen = {module: n for n, module in reversed(list(enumerate(module_of(i.nodeid) for i in items)))}
    return sorted(items, key=lambda item: (-durations.get(module_of(item.nodeid), -1.0),
                                           first_seen[module_of(item.nodeid)]))


def select(config: pytest.Config, items: list[pytest.Item]) -> None:
    durations = recorded()
    items[:] = slowest_first(durations, items)
    if config.getoption("--tier") != "check":
        return
    keep = fast_modules(durations, sorted({module_of(item.nodeid) for item in items}))
    chosen = [item for item in items if module_of(item.nodeid) in keep]
    left = [item for item in items if module_of(item.nodeid) not in keep]
    if left:
        config.hook.pytest_deselected(items=left)
    items[:] = chosen


def count(report: pytest.TestReport) -> None:
    _spent[module_of(report.nodeid)] += report.duration


def is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def write(config: pytest.Config) -> None:
    path = config.getoption("--record-durations")
    # xdist forwards every worker's reports to the controller, which alone writes the whole run's figures.
    if path is None or not _spent or is_xdist_worker(config):
        return
    # Modules this run did not reach keep their earlier figures (a run of one file updates that file's time).
    known: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    known.update({module: round(seconds, 2) for module, seconds in _spent.items()})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(sorted(known.items())), indent=1) + "\n")

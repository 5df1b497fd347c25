"""The suite's two tiers (pytest hooks, imported by tests/conftest.py).

``make test`` runs every test and records how long each test module took, fixtures included
(``--record-durations FILE``: seconds per module, from pytest's own setup/call/teardown reports).
``make check`` (``--tier check``) runs the modules whose recorded time is at most ``FAST_MODULE_S``, and the
modules no run has recorded yet (a new module is most often a unit test being written): the spec and its
refusals, the answer steps, the parsers, the unit tests of the build, within a few minutes on 2 cores. The
cut is by module, not by test: a module's expensive fixture (a build, a server) runs for its first test, so
keeping some of its tests would pay for the fixture anyway. The slow modules are not even collected: every
xdist worker collects on its own, and importing (and assertion-rewriting, uncached where
PYTHONDONTWRITEBYTECODE is set) the 70 slow modules cost each worker about 5 s.

The recorded times: ``.tritonsm/module-durations.json`` after a local ``make test`` (this machine's own), else
``tests/module_durations.json``, committed from a full run in CI's conditions (2 cores).

A session fixture (one synthesis of every spec, one tiny build) is paid by the first module that asks for it; the
others record almost nothing, yet each of them alone pays it whole, and in ``make check`` every worker waited
on it. So the same run records each session fixture's setup time and the modules whose tests use it
(``shared-fixtures.json`` beside the durations; committed: ``tests/shared_fixtures.json``), and the check tier
counts a module's time as its own plus its shared fixtures'. The order of ``make test`` keeps the modules' own
times: charged there, every user of the one synthesis would start first, on every worker at once.

``make test`` runs on three pytest-xdist workers (on 2 cores: the tests wait on servers and subprocesses), each test module whole on one of them (``--dist loadfile``, so a
module's fixtures are made once), and hands out the modules slowest first (``--no-loadscope-reorder`` keeps the
order made here): the longest modules then overlap instead of one of them running alone at the end.
"""
from __future__ import annotations

import collections
import json
import pathlib
import time
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "tests" / "module_durations.json"
LOCAL = ROOT / ".tritonsm" / "module-durations.json"
SHARED_NAME = "shared-fixtures.json"  # beside the durations it was recorded with
COMMITTED_SHARED = ROOT / "tests" / "shared_fixtures.json"
FAST_MODULE_S = 6.0  # below every module that builds a model or starts a server in the recorded runs
SHARED_FIXTURE_S = 1.0  # a session fixture cheaper than this is not worth charging

_spent: collections.Counter[str] = collections.Counter()
_fixture_s: dict[str, float] = {}  # session fixture -> its setup seconds in this process
_users: dict[str, set[str]] = collections.defaultdict(set)  # session fixture -> modules whose tests use it


def add_options(parser: pytest.Parser) -> None:
    parser.addoption("--tier", choices=("all", "check"), default="all",
                     help="check: only the modules recorded as fast (make check); all: every test (make test)")
    parser.addoption("--record-durations", type=pathlib.Path, metavar="FILE",
                     help="write the seconds each test module took (fixtures included) to FILE as JSON")


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _record_path() -> pathlib.Path | None:
    """This machine's record after a local `make test`, else the committed one."""
    return next((path for path in (LOCAL, COMMITTED) if path.is_file()), None)


def own_times() -> dict[str, float]:
    path = _record_path()
    data: dict[str, float] = json.loads(path.read_text()) if path else {}
    return data


def recorded() -> dict[str, float]:
    """Each module's recorded seconds for the check tier: its own, plus every shared fixture it uses."""
    path = _record_path()
    shared_path = COMMITTED_SHARED if path == COMMITTED else LOCAL.with_name(SHARED_NAME)
    shared = json.loads(shared_path.read_text()) if path and shared_path.is_file() else {}
    return charged(own_times(), shared)


def charged(own: dict[str, float], shared: dict[str, dict[str, Any]]) -> dict[str, float]:
    total = dict(own)
    for fixture in shared.values():
        for module in fixture["modules"]:
            total[module] = total.get(module, 0.0) + fixture["seconds"]
    return total


def fast_modules(durations: dict[str, float], modules: list[str]) -> set[str]:
    """The modules of the check tier: recorded at most FAST_MODULE_S seconds, or not recorded at all."""
    return {m for m in modules if durations.get(m, 0.0) <= FAST_MODULE_S}


def is_left_out(config: pytest.Config, path: pathlib.Path) -> bool:
    """Whether the check tier leaves this test module out (not collected)."""
    if config.getoption("--tier") != "check" or path.suffix != ".py" or not path.name.startswith("test_"):
        return False
    try:
        module = path.resolve().relative_to(ROOT).as_posix()
    except ValueError:  # a module outside the repository (pytest's own tests of a plugin): not ours to tier
        return False
    return module not in fast_modules(_recorded_once(), [module])


def _recorded_once() -> dict[str, float]:
    global _durations
    if _durations is None:
        _durations = recorded()
    return _durations


_durations: dict[str, float] | None = None


def slowest_first(durations: dict[str, float], items: list[pytest.Item]) -> list[pytest.Item]:
    """The items by module, the modules by recorded time, longest first (not recorded: last, in their order).

    Every process of an xdist run sorts the same way (same record, same collection), as xdist requires."""
    first_seen = {module: n for n, module in reversed(list(enumerate(module_of(i.nodeid) for i in items)))}
    return sorted(items, key=lambda item: (-durations.get(module_of(item.nodeid), -1.0),
                                           first_seen[module_of(item.nodeid)]))


def select(items: list[pytest.Item]) -> None:
    """The collected items, slowest module first by their own times (the check tier's slow modules were never
    collected), and which module uses which fixture, for charging the shared ones."""
    items[:] = slowest_first(own_times(), items)
    for item in items:
        for name in getattr(item, "fixturenames", ()):
            _users[name].add(module_of(item.nodeid))


class FixtureClock:
    """Times each session fixture's setup (its own: the fixtures it asks for are set up before it)."""

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: Any) -> Any:
        started = time.monotonic()
        yield
        if fixturedef.scope == "session":
            seconds = time.monotonic() - started
            _fixture_s[fixturedef.argname] = max(seconds, _fixture_s.get(fixturedef.argname, 0.0))


def shared_fixtures() -> dict[str, dict[str, Any]]:
    """This process's session fixtures worth charging: {name: {"seconds", "modules"}}."""
    return {name: {"seconds": round(seconds, 2), "modules": sorted(_users[name])}
            for name, seconds in sorted(_fixture_s.items()) if seconds >= SHARED_FIXTURE_S and _users[name]}


def hand_to_controller(config: pytest.Config) -> None:
    """A worker's shared fixtures, for the controller that writes the record (pytest-xdist's workeroutput)."""
    if is_xdist_worker(config):
        config.workeroutput["shared_fixtures"] = json.dumps(shared_fixtures())  # type: ignore[attr-defined]


def take_from_worker(node: Any) -> None:
    for name, fixture in json.loads(getattr(node, "workeroutput", {}).get("shared_fixtures", "{}")).items():
        _fixture_s[name] = max(fixture["seconds"], _fixture_s.get(name, 0.0))
        _users[name].update(fixture["modules"])


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
    # Likewise the shared fixtures: the ones this run set up replace their earlier figures.
    shared_path = path.with_name(SHARED_NAME)
    shared: dict[str, Any] = json.loads(shared_path.read_text()) if shared_path.is_file() else {}
    shared.update(shared_fixtures())
    shared_path.write_text(json.dumps(dict(sorted(shared.items())), indent=1) + "\n")

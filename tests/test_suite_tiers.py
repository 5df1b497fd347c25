"""`make check` keeps the modules recorded as fast and the ones not recorded yet; `make test` records them."""
import json
import pathlib
import sys

sys.path.append(str(pathlib.Path(__file__).resolve().parent))
import suite_tiers  # noqa: E402


def test_the_check_tier_keeps_fast_and_new_modules_and_drops_a_slow_one():
    durations = {"tests/spec/test_a.py": 0.4, "tests/local_endpoint/test_served.py": 180.0,
                 "tests/test_edge.py": suite_tiers.FAST_MODULE_S}
    modules = [*durations, "tests/spec/test_new.py"]
    assert suite_tiers.fast_modules(durations, modules) == {
        "tests/spec/test_a.py", "tests/test_edge.py", "tests/spec/test_new.py"}


def test_recording_merges_with_the_modules_the_run_did_not_reach(tmp_path, monkeypatch):
    path = tmp_path / "durations.json"
    path.write_text(json.dumps({"tests/old.py": 3.0, "tests/spec/test_a.py": 9.0}))
    monkeypatch.setattr(suite_tiers, "_spent", suite_tiers.collections.Counter({"tests/spec/test_a.py": 0.5}))

    class Config:
        @staticmethod
        def getoption(name):
            return path

    suite_tiers.write(Config())
    assert json.loads(path.read_text()) == {"tests/old.py": 3.0, "tests/spec/test_a.py": 0.5}


def test_a_shared_fixture_is_charged_whole_to_every_module_that_uses_it(tmp_path, monkeypatch):
    # One synthesis of every spec, paid by the first module to ask: the others recorded ~0 s of their own, yet in
    # `make check` each of them waited for it. Recorded beside the durations, the check tier charges them all.
    path = tmp_path / "module-durations.json"
    (tmp_path / suite_tiers.SHARED_NAME).write_text(json.dumps(
        {"tiny_build": {"seconds": 20.0, "modules": ["tests/model_build/test_cli.py"]}}))
    monkeypatch.setattr(suite_tiers, "_spent", suite_tiers.collections.Counter(
        {"tests/infra/test_first.py": 70.5, "tests/infra/test_second.py": 0.3, "tests/spec/test_a.py": 0.4}))
    monkeypatch.setattr(suite_tiers, "_fixture_s", {"every_assembly": 70.0, "tmp_path_factory": 0.001})
    monkeypatch.setattr(suite_tiers, "_users", suite_tiers.collections.defaultdict(set, {
        "every_assembly": {"tests/infra/test_first.py", "tests/infra/test_second.py"},
        "tmp_path_factory": {"tests/spec/test_a.py"}}))

    class Config:
        @staticmethod
        def getoption(name):
            return path

    suite_tiers.write(Config())
    shared = json.loads((tmp_path / suite_tiers.SHARED_NAME).read_text())
    assert shared == {  # the cheap one is not worth charging; the earlier record's fixture is kept
        "every_assembly": {"seconds": 70.0, "modules": ["tests/infra/test_first.py", "tests/infra/test_second.py"]},
        "tiny_build": {"seconds": 20.0, "modules": ["tests/model_build/test_cli.py"]}}
    charged = suite_tiers.charged(json.loads(path.read_text()), shared)
    assert charged == {"tests/infra/test_first.py": 140.5, "tests/infra/test_second.py": 70.3,
                       "tests/spec/test_a.py": 0.4, "tests/model_build/test_cli.py": 20.0}
    modules = sorted(charged)
    assert suite_tiers.fast_modules(charged, modules) == {"tests/spec/test_a.py"}



def test_the_committed_record_covers_the_suite_and_the_check_tier_leaves_the_slow_modules_out():
    # The record a `make check` falls back on: from a full run, so it names the expensive modules and fixtures.
    shared = json.loads(suite_tiers.COMMITTED_SHARED.read_text())
    assert {"every_assembly", "tiny_build"} <= set(shared), sorted(shared)
    durations = suite_tiers.charged(json.loads(suite_tiers.COMMITTED.read_text()), shared)
    modules = sorted(str(p.relative_to(suite_tiers.ROOT)) for p in (suite_tiers.ROOT / "tests").rglob("test_*.py"))
    recorded = [m for m in modules if m in durations]
    assert len(recorded) >= 0.9 * len(modules), set(modules) - set(durations)
    slow = [m for m in recorded if m not in suite_tiers.fast_modules(durations, [m])]
    assert "tests/local_endpoint/test_raw_image_tasks.py" in slow and "tests/spec/test_capacity.py" not in slow
    assert "tests/infra/test_model_store_policy.py" in slow  # its own time is small: the shared synthesis is not
    # What the tier runs, by the record: within 3 minutes on 2 cores (156 s of recorded module time ran in 1 min 20 s
    # of `make check` on 2026-11-29, three workers).
    assert sum(durations[m] for m in recorded if m not in slow) < 240


def test_the_modules_run_slowest_first_each_kept_whole_and_in_its_own_order():
    # What xdist hands out under --no-loadscope-reorder: the longest modules start first, so none of them runs
    # alone at the end; a module not recorded yet goes last; the tests of a module stay together, in order.
    class Item:
        def __init__(self, nodeid: str) -> None:
            self.nodeid = nodeid

    items = [Item(n) for n in ("tests/a.py::one", "tests/slow.py::one", "tests/new.py::one", "tests/a.py::two",
                               "tests/slow.py::two", "tests/mid.py::one")]
    durations = {"tests/a.py": 0.5, "tests/slow.py": 90.0, "tests/mid.py": 12.0}
    ordered = [item.nodeid for item in suite_tiers.slowest_first(durations, items)]  # type: ignore[arg-type]
    assert ordered == ["tests/slow.py::one", "tests/slow.py::two", "tests/mid.py::one", "tests/a.py::one",
                       "tests/a.py::two", "tests/new.py::one"]


def test_the_check_tier_does_not_collect_a_slow_module_and_make_test_collects_every_one(monkeypatch):
    # Left out at collection, so no xdist worker imports (or rewrites the asserts of) a module it will not run.
    monkeypatch.setattr(suite_tiers, "_durations", {"tests/local_endpoint/test_served.py": 180.0,
                                                    "tests/spec/test_a.py": 0.4})

    class Config:
        def __init__(self, tier: str) -> None:
            self.tier = tier

        def getoption(self, name):
            return self.tier

    tests = suite_tiers.ROOT / "tests"
    slow, fast, new = (tests / "local_endpoint/test_served.py", tests / "spec/test_a.py", tests / "spec/test_new.py")
    check, every = Config("check"), Config("all")
    assert [suite_tiers.is_left_out(check, p) for p in (slow, fast, new)] == [True, False, False]  # type: ignore[arg-type]
    assert not any(suite_tiers.is_left_out(every, p) for p in (slow, fast, new))  # type: ignore[arg-type]
    # Folders, helpers and conftest files are always collected: only test modules are tiered.
    assert not suite_tiers.is_left_out(check, tests / "local_endpoint")  # type: ignore[arg-type]
    assert not suite_tiers.is_left_out(check, tests / "conftest.py")  # type: ignore[arg-type]

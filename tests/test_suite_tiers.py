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


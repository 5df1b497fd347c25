"""The spec's JSON Schema (schemas/triton.schema.json) against the loader it is generated from.

The committed file is what deployment_spec/json_schema.py generates now (and a changed definition changes
it); every spec the loader accepts validates against it, whether shipped (examples/, triton.yaml, the test
fixtures) or built by the spec tests; a key, type, bound, pattern or name the loader refuses is refused by
the schema at the same path, except where JSON Schema cannot say it (NaN, listed below).
"""
from __future__ import annotations

import copy
import dataclasses
import json
import os
import pathlib
import pickle
import re
import shutil
import subprocess
import sys
import types
from typing import Any, Iterator

import jsonschema
import pytest
import yaml

from deployment_spec import SpecError, load_spec, spec
from deployment_spec.sections import model
from deployment_spec import json_schema
from deployment_spec.json_schema import SCHEMA_PATH, render, spec_schema
from deployment_spec.spec import parse_spec
from spec_recorder import RECORDS_ENV
from tritonsm.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCHEMA_FILE = ROOT / SCHEMA_PATH
HERE = pathlib.Path(__file__).parent
EXAMPLES = sorted((ROOT / "examples").rglob("*.yaml")) + [ROOT / "triton.yaml"]
FIXTURE_SPECS = sorted((ROOT / "tests").rglob("*.yaml"))
BASE = yaml.safe_load((ROOT / "triton.yaml").read_text())
SCHEMA_LINE = re.compile(r"# yaml-language-server: \$schema=(\S+)")


def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text()))


def _dotted(path: Any) -> str:
    """A jsonschema error path in the loader's notation: models.bert.inputs[0].dims."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _all_errors(errors: Any) -> Iterator[jsonschema.ValidationError]:
    """Every error, also those under an anyOf (an Optional section: its own errors are its context's)."""
    for error in errors:
        yield error
        yield from _all_errors(error.context or [])


def _schema_errors(raw: Any) -> list[tuple[str, str]]:
    return [(_dotted(e.absolute_path), e.message) for e in _all_errors(_validator().iter_errors(raw))]


def _reported_at(problem_path: str, errors: list[tuple[str, str]]) -> bool:
    """The schema names the problem's field, or the mapping that holds it (an unknown or missing key)."""
    path = "" if problem_path == "(top level)" else problem_path
    parent = re.sub(r"(\[\d+\]|\.?[^.\[]+)$", "", path)
    return any(where in (path, parent) for where, _ in errors)


# --- the committed file and the code ---------------------------------------------------------------------

def test_the_committed_schema_is_what_the_code_generates():
    assert SCHEMA_FILE.read_text() == render(spec_schema()), (
        f"{SCHEMA_PATH} is out of date with deployment_spec; regenerate it: make schema "
        f"(or {json_schema.REGENERATE})")


def test_the_schema_is_a_valid_draft_2020_12_schema():
    schema = json.loads(SCHEMA_FILE.read_text())
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


def test_a_new_field_changes_the_generated_schema(monkeypatch):
    # The drift test's twin: a field added to a spec class is a key the schema must now allow.
    @dataclasses.dataclass(frozen=True)
    class ModelSpec(model.ModelSpec):
        max_batch_sise: int = 0

    monkeypatch.setattr(json_schema, "ModelSpec", ModelSpec)
    generated = spec_schema()
    assert "max_batch_sise" in generated["$defs"]["ModelSpec"]["properties"]
    assert render(generated) != SCHEMA_FILE.read_text()


def test_a_changed_bound_changes_the_generated_schema_as_it_changes_the_loader(monkeypatch):
    field = model.ModelSpec.__dataclass_fields__["max_batch_size"]
    monkeypatch.setattr(field, "metadata", types.MappingProxyType({**field.metadata, "maximum": 1024}))
    raw = copy.deepcopy(BASE)
    raw["models"]["bert"]["max_batch_size"] = 2048
    with pytest.raises(SpecError, match=r"models\.bert\.max_batch_size: got 2048; allowed: an integer from 0 to 1024"):
        parse_spec(raw, pathlib.Path("spec.yaml"))
    generated = spec_schema()
    assert generated["$defs"]["ModelSpec"]["properties"]["max_batch_size"]["maximum"] == 1024
    assert render(generated) != SCHEMA_FILE.read_text()


def test_a_top_level_key_the_generator_does_not_know_stops_it(monkeypatch):
    monkeypatch.setattr(spec, "TOP_KEYS", [*spec.TOP_KEYS, "monitoring"])
    with pytest.raises(TypeError, match="the loader reads .*'monitoring'.*teach deployment_spec/json_schema.py"):
        spec_schema()


def test_tritonsm_schema_prints_it_and_writes_it(tmp_path, capsys):
    assert main(["schema"]) == 0
    assert capsys.readouterr().out == SCHEMA_FILE.read_text()
    target = tmp_path / "schemas" / "triton.schema.json"
    assert main(["schema", "--output", str(target)]) == 0
    assert target.read_text() == SCHEMA_FILE.read_text()
    assert main(["schema", "--output", str(tmp_path)]) == 2
    assert "a folder; pass the file to write" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("node") is None, reason="node (the CDK's runtime) is not installed")
def test_every_pattern_is_an_ecmascript_regex_as_editors_read_them():
    # yaml-language-server compiles `pattern` with JavaScript's RegExp (unicode mode); the loader's patterns
    # are Python's. Each one must compile there too.
    patterns = sorted(set(re.findall(r'"pattern": ("(?:[^"\\]|\\.)*")', SCHEMA_FILE.read_text())))
    assert len(patterns) >= 10
    script = "for (const p of JSON.parse(process.argv[1])) new RegExp(JSON.parse(p), 'u'); console.log('ok')"
    done = subprocess.run(["node", "-e", script, json.dumps(patterns)], capture_output=True, text=True)
    assert done.stdout.strip() == "ok", done.stderr


# --- the shipped specs ----------------------------------------------------------------------------------

@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_example_names_the_schema_on_its_first_line(path):
    first = path.read_text().splitlines()[0]
    found = SCHEMA_LINE.fullmatch(first)
    assert found, f"{path.relative_to(ROOT)}: first line {first!r}; add '# yaml-language-server: $schema=...'"
    # Relative to the spec's own folder, as yaml-language-server resolves it.
    assert (path.parent / found.group(1)).resolve() == SCHEMA_FILE


@pytest.mark.parametrize("path", sorted({*EXAMPLES, *FIXTURE_SPECS}), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_and_fixture_spec_validates(path):
    load_spec(path)  # the loader accepts it ...
    assert _schema_errors(yaml.safe_load(path.read_text())) == []  # ... and so does the schema


def test_the_shipped_specs_checked_are_all_of_them():
    # Floor: 8 example specs (7 scenarios and your-own-model), triton.yaml and the 4 test fixture specs.
    assert len(EXAMPLES) >= 9 and len(FIXTURE_SPECS) >= 4


# --- the specs the spec tests feed to the loader --------------------------------------------------------

@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> list[tuple[Any, Any]]:
    """Every raw spec the other spec tests hand to parse_spec, and the loader's verdict (spec_recorder.py).

    The spec tests run again in a child pytest (about 7 s); test_triton_images.py parses no spec.
    """
    target = tmp_path_factory.mktemp("records") / "records.pkl"
    env = {**os.environ, RECORDS_ENV: str(target),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(HERE), "-p", "spec_recorder", "-q", "-p", "no:cacheprovider",
         f"--ignore={HERE / 'test_json_schema.py'}", f"--ignore={HERE / 'test_triton_images.py'}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    # 0 or 1: the child's own failures (another change in progress) do not change what the loader did.
    assert done.returncode in (0, 1) and target.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    records: list[tuple[Any, Any]] = pickle.loads(target.read_bytes())
    return records


def _distinct(records: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    seen: dict[str, tuple[Any, Any]] = {}
    for raw, problems in records:
        seen.setdefault(repr(raw), (raw, problems))
    return list(seen.values())


def test_every_spec_the_loader_accepted_in_the_tests_validates(recorded):
    accepted = [raw for raw, problems in _distinct(recorded) if problems is None]
    failures = {i: errors for i, raw in enumerate(accepted) if (errors := _schema_errors(raw))}
    assert failures == {}
    assert len(accepted) >= 16  # floor: the distinct valid specs tests/spec builds (16 when this was written)


def _expressible(problem: tuple[str, str, str, bool]) -> bool:
    """A problem of the generic reader that a JSON Schema can state."""
    path, got, allowed, structural = problem
    if not structural:
        return False  # a class's or a rule's cross-field check: tritonsm validate's alone
    if allowed.startswith("a finite number"):
        return False  # .nan / .inf: JSON has neither, and a NaN passes every bound
    if allowed.startswith("an integer") and re.fullmatch(r"-?\d+\.0", got):
        return False  # 5.0 for an integer: JSON Schema's integer accepts it
    # A key missing after an override merged into its endpoint: whether the endpoint had it, the schema
    # cannot see (an override lists only what changes).
    return not (got.startswith("nothing") and ".overrides." in path)


def test_every_key_type_bound_and_pattern_the_loader_refused_the_schema_refuses_at_that_path(recorded):
    refused = [(raw, problems) for raw, problems in _distinct(recorded) if problems]
    checked, missed = 0, []
    for raw, problems in refused:
        expressible = [p for p in problems if _expressible(p)]
        if not expressible:
            continue
        checked += 1
        errors = _schema_errors(raw)
        missed += [p[:3] for p in expressible if not _reported_at(p[0], errors)]
    assert missed == []
    assert checked >= 16  # floor: specs tests/spec has refused for a key, type, bound or pattern (16 when written)


# --- planted mistakes: the user's story -----------------------------------------------------------------

def _spec_text_with(old: str, new: str) -> Any:
    text = (ROOT / "triton.yaml").read_text()
    assert old in text
    return yaml.safe_load(text.replace(old, new, 1))


def test_a_typo_in_a_key_is_reported_with_its_path_before_tritonsm_validate():
    raw = _spec_text_with("max_batch_size: 16", "max_batch_sise: 16")
    errors = _schema_errors(raw)
    assert ("models.bert", "Additional properties are not allowed ('max_batch_sise' was unexpected)") in errors
    with pytest.raises(SpecError, match=r"models\.bert\.max_batch_sise: got unknown key 'max_batch_sise'"):
        parse_spec(raw, pathlib.Path("spec.yaml"))


def test_a_wrong_type_is_reported_with_its_path():
    raw = _spec_text_with("max_batch_size: 16", 'max_batch_size: "16"')
    assert _schema_errors(raw) == [("models.bert.max_batch_size", "'16' is not of type 'integer'")]
    raw = _spec_text_with('triton_version: "25.09"', "triton_version: 25.09")
    assert _schema_errors(raw) == [("triton_version", "25.09 is not of type 'string'")]


_REMOVE = object()


CHECKER = ROOT / ".venv" / "bin" / "check-jsonschema"


def test_check_jsonschema_catches_the_typo_in_a_file_and_passes_the_examples(tmp_path):
    # The user's story as a user runs it: check-jsonschema (pinned in requirements-checkov.lock, installed by
    # `make setup`) on a spec file, before `tritonsm validate`.
    if not CHECKER.exists():
        pytest.fail(f"{CHECKER} is missing: run `make setup` (scripts/bootstrap.sh installs it from "
                    "requirements-checkov.lock)")
    bad = tmp_path / "bad.yaml"
    bad.write_text((ROOT / "triton.yaml").read_text().replace("max_batch_size: 16", "max_batch_sise: 16", 1))
    done = subprocess.run([str(CHECKER), "--schemafile", str(SCHEMA_FILE), str(bad)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1
    assert f"{bad}::$.models.bert: Additional properties are not allowed ('max_batch_sise' was unexpected)" \
        in done.stdout
    done = subprocess.run([str(CHECKER), "--schemafile", str(SCHEMA_FILE), *map(str, EXAMPLES)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def _set(path: str, value: Any) -> Any:
    """triton.yaml with the dotted ``path`` set to ``value`` (or removed)."""
    raw = copy.deepcopy(BASE)
    *parents, leaf = path.split(".")
    here = raw
    for key in parents:
        here = here[key]
    if value is _REMOVE:
        del here[leaf]
    else:
        here[leaf] = value
    return raw


def _with_int_model_name() -> Any:
    raw = copy.deepcopy(BASE)
    raw["models"][7] = {"backend": "python"}  # YAML `7:` is an int key, which no model name is
    return raw


# Refusals of the loader's own top-level code (deployment_spec/spec.py, not the generic reader the recorded
# specs cover): names, the sections' shapes, overrides. (raw, the loader's problem path)
TOP_LEVEL_REFUSALS = {
    "model name with a slash": (_set("models.bert/v2", copy.deepcopy(BASE["models"]["bert"])), "models.bert/v2"),
    "model name that is a number": (_with_int_model_name(), "models.7"),
    "environment name with a dash": (_set("environments.prod-eu", {"region": "eu-west-1"}), "environments.prod-eu"),
    "no environments": (_set("environments", {}), "environments"),
    "models missing": (_set("models", _REMOVE), "models"),
    "models left empty (null)": (_set("models", None), "models"),
    "an environment without settings (null)": (_set("environments.dev", None), "environments.dev"),
    "an unknown top-level key": (_set("monitoring", {"enabled": True}), "monitoring"),
    "project with a dash": (_set("project", "my-project"), "project"),
    "overrides as a list": (_set("environments.prod.overrides", []), "environments.prod.overrides"),
    "an unknown key under overrides": (_set("environments.prod.overrides.models", {}),
                                       "environments.prod.overrides.models"),
    "an override with a wrong type": (_set("environments.prod.overrides.endpoints.classifier",
                                           {"initial_instances": "2"}),
                                      "environments.prod.overrides.endpoints.classifier.initial_instances"),
    "an override with a typo": (_set("environments.prod.overrides.endpoints.classifier", {"scalling": {}}),
                                "environments.prod.overrides.endpoints.classifier.scalling"),
}


@pytest.mark.parametrize("name", list(TOP_LEVEL_REFUSALS))
def test_top_level_refusals_of_the_loader_are_refusals_of_the_schema(name):
    raw, path = TOP_LEVEL_REFUSALS[name]
    with pytest.raises(SpecError) as caught:
        parse_spec(copy.deepcopy(raw), pathlib.Path("spec.yaml"))
    assert path in [p.path for p in caught.value.problems]
    assert _reported_at(path, _schema_errors(raw)), _schema_errors(raw)


def test_an_override_need_not_repeat_the_endpoint_s_keys_nor_an_empty_one_its_endpoints():
    # Overrides merge into the endpoint (spec._deep_merge): one nested key of scaling is a whole override,
    # and `endpoints:` left empty means none (the loader reads it as {}).
    raw = _set("environments.prod.overrides.endpoints.classifier", {"scaling": {"max_instances": 6},
                                                                     "single_instance_reason": "batch tool"})
    parse_spec(copy.deepcopy(raw), pathlib.Path("spec.yaml"))
    assert _schema_errors(raw) == []
    raw = _set("environments.dev.overrides", {"endpoints": None})
    parse_spec(copy.deepcopy(raw), pathlib.Path("spec.yaml"))
    assert _schema_errors(raw) == []

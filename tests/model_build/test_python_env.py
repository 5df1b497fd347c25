"""Execution environments for Python-backend models: target, layout, determinism, cache, refusals.

Wheels come from pip's index and from tiny wheels made here (PIP_FIND_LINKS); the environment is
built for the Triton 25.09 image (CPython 3.12, manylinux x86_64) unless a test says otherwise.
"""
from __future__ import annotations

import hashlib
import json
import pathlib
import sys
import tarfile

import pytest

from deployment_spec.builds.manifest import ExecutionEnvironment, ModelEntry, load_manifest
from model_build import build, model_config
from model_build.backends.python import execution_env as python_env_build
from model_build.errors import BuildError
from model_build.python_env import environment, target
from model_build.recipes import python_recipes

from mb_support import make_spec

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import probe_wheels  # noqa: E402

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]
IMAGE = target.for_image("25.09")
LINES = ["tritonsm-probe==1.0", "numpy==1.26.4"]


@pytest.fixture()
def find_links(tmp_path_factory, monkeypatch):
    folder = tmp_path_factory.mktemp("find-links")
    probe_wheels.make_wheel(folder)
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    return folder


@pytest.fixture(scope="module")
def shared_wheels(module_tmp):
    return module_tmp.mktemp("wheel-cache")


def _cache(tmp_path, shared_wheels, name="cache") -> pathlib.Path:
    """A fresh environment cache whose wheel folder is shared: downloads happen once per module."""
    cache = tmp_path / name
    (cache / "python-envs").mkdir(parents=True)
    (cache / "python-envs" / "wheels").symlink_to(shared_wheels)
    return cache


def _sha256(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_image_target_follows_the_runtime_table():
    assert (IMAGE.python, IMAGE.interpreter, IMAGE.abi) == ("3.12", "/usr/bin/python3", "cp312")
    assert IMAGE.platforms[0] == "manylinux_2_39_x86_64"  # Ubuntu 24.04's glibc
    assert {"manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64"} <= set(IMAGE.platforms)
    older = target.for_image("24.05")
    assert (older.python, older.platforms[0]) == ("3.10", "manylinux_2_35_x86_64")  # Ubuntu 22.04
    flags = IMAGE.pip_flags()
    assert flags[:8] == ["--python-version", "3.12", "--implementation", "cp", "--abi", "cp312", "--abi", "abi3"]
    assert flags.count("--platform") == len(IMAGE.platforms)
    assert target.for_this_machine().pip_flags() == []


def test_the_archive_is_a_virtual_environment_the_stub_can_activate(tmp_path, find_links, shared_wheels):
    built = environment.build(LINES, IMAGE, _cache(tmp_path, shared_wheels), lambda line: None, "test")
    with tarfile.open(built.archive) as archive:
        members = archive.getmembers()
        by_name = {m.name: m for m in members}
        assert members[0].name == environment.RECORD  # read first by `tritonsm serve`
        record = json.loads(archive.extractfile(environment.RECORD).read())
        assert by_name["bin/python3"].issym() and by_name["bin/python3"].linkname == "/usr/bin/python3"
        assert by_name["bin/python3.12"].linkname == "python3"
        assert by_name["bin/activate"].isfile()
        assert archive.extractfile("pyvenv.cfg").read().decode() == (
            "home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.12\n")
        site = "lib/python3.12/site-packages"
        assert f"{site}/tritonsm_probe/__init__.py" in by_name
        assert any(n.startswith(f"{site}/numpy/") and n.endswith(".cpython-312-x86_64-linux-gnu.so") for n in by_name)
        assert not [n for n in by_name if n.endswith(".pyc")]
        assert {(m.mtime, m.uid, m.gid, m.uname) for m in members} == {(0, 0, 0, "")}
    assert record["requirements"] == sorted(LINES)
    assert [(p["name"], p["version"]) for p in record["packages"]] == [("numpy", "1.26.4"), ("tritonsm-probe", "1.0")]
    assert built.file_name == built.archive.name and built.file_name.startswith("python-env-")
    assert built.archive_bytes == built.archive.stat().st_size


def test_same_inputs_give_the_same_bytes_and_an_unchanged_rebuild_does_nothing(tmp_path, find_links, shared_wheels):
    first = environment.build(LINES, IMAGE, _cache(tmp_path, shared_wheels, "a"), lambda line: None, "test")
    second = environment.build(list(reversed(LINES)), IMAGE, _cache(tmp_path, shared_wheels, "b"),
                               lambda line: None, "test")
    assert (first.reused, second.reused) == (False, False)
    assert first.file_name == second.file_name
    assert _sha256(first.archive) == _sha256(second.archive)
    stamp = first.archive.stat().st_mtime_ns
    lines: list[str] = []
    again = environment.build(LINES, IMAGE, tmp_path / "a", lines.append, "test")
    assert again.reused and again.archive.stat().st_mtime_ns == stamp and lines == []


def test_a_package_without_a_wheel_for_the_image_is_refused(tmp_path, find_links, shared_wheels):
    probe_wheels.make_wheel(find_links, "tritonsm-native", tag="cp311-cp311-manylinux_2_17_x86_64")
    with pytest.raises(BuildError) as failure:
        environment.build(["tritonsm-native==1.0", "numpy==1.26.4"], IMAGE, _cache(tmp_path, shared_wheels),
                          lambda line: None, "models.m.python.requirements")
    assert str(failure.value) == (
        "models.m.python.requirements: no wheel of tritonsm-native==1.0 for the Triton 25.09 image (CPython 3.12, "
        "glibc 2.39, x86_64): tried CPython 3.12 (ABI cp312, abi3, none) on manylinux_2_39_x86_64 ... "
        "manylinux1_x86_64 (38 platform tags); no release of it has a wheel there. Pick a version with a binary "
        "wheel for that Python and platform (the environment takes wheels only: nothing is compiled at build or "
        "load time)")
    assert not list((tmp_path / "cache" / "python-envs").glob("*/python-env-*"))


def test_an_environment_without_numpy_is_refused(tmp_path, find_links, shared_wheels):
    with pytest.raises(BuildError) as failure:
        environment.build(["tritonsm-probe==1.0"], IMAGE, _cache(tmp_path, shared_wheels), lambda line: None,
                          "models.m.python.requirements")
    assert str(failure.value) == (
        "models.m.python.requirements: the environment would have no numpy, which the Python backend's "
        "triton_python_backend_utils imports inside it; add a pinned numpy (e.g. numpy==1.26.4)")


def test_an_environment_larger_than_the_instance_store_allows_is_refused(tmp_path):
    spec = make_spec(tmp_path, "m: {backend: python, source: {recipe: text-preprocess}}\n")
    huge = environment.BuiltEnv(tmp_path / "env.tar.gz", "python-env-0.tar.gz", IMAGE, (), 40 * 10**9,
                                60 * 10**9, False)
    with pytest.raises(BuildError) as failure:
        python_env_build.check_storage(spec, "m", huge)
    assert str(failure.value) == (
        "models.m.python: the execution environment needs 140.0 GB on each instance (archive 40.0 GB twice + "
        "60.0 GB unpacked), more than half of the 250 GB instance store of ml.g5.xlarge (endpoint ep); allowed: "
        "up to 125 GB; fix: drop packages model.py does not import, or serve it on a larger size")
    python_env_build.check_storage(spec, "m", environment.BuiltEnv(
        tmp_path / "env.tar.gz", "python-env-0.tar.gz", IMAGE, (), 10**9, 3 * 10**9, False))


def test_an_unpinned_line_in_a_requirements_file_is_refused(tmp_path):
    (tmp_path / "req.txt").write_text("# what model.py imports\nnumpy==1.26.4\ntransformers>=4\n")
    spec = make_spec(tmp_path, "m: {backend: python, source: {recipe: text-preprocess}, "
                               "python: {requirements_file: req.txt}}\n")
    report = build.run(spec, tmp_path / "assets", tmp_path / "work", log=lambda line: None)
    assert report.failed == {"m": f"{tmp_path / 'req.txt'}:3: 'transformers>=4' is not pinned; allowed: name==version "
                                  "(optionally name[extra]==version ; marker), one release per line; fix: pin one "
                                  "release, e.g. 'transformers==4.46.3'"}
    assert not (tmp_path / "assets" / "manifest.json").exists() or "m" not in load_manifest(
        tmp_path / "assets" / "manifest.json").models


def test_a_requirements_file_that_is_missing_or_empty_is_refused(tmp_path):
    (tmp_path / "empty.txt").write_text("# nothing yet\n\n")
    spec = make_spec(tmp_path, """\
missing: {backend: python, source: {recipe: text-preprocess}, python: {requirements_file: nope.txt}}
empty: {backend: python, source: {recipe: text-preprocess}, python: {requirements_file: empty.txt}}
""")
    report = build.run(spec, tmp_path / "assets", tmp_path / "work", log=lambda line: None)
    assert report.failed == {
        "missing": f"models.missing.python.requirements_file: cannot read {tmp_path / 'nope.txt'} (No such file or "
                   "directory); give a requirements file next to the spec, one name==version per line",
        "empty": f"models.empty.python.requirements_file: {tmp_path / 'empty.txt'} lists no requirement; add the "
                 "packages model.py imports (name==version), or remove requirements_file"}


def test_the_model_directory_ships_the_environment_and_points_the_backend_at_it(tmp_path, find_links, monkeypatch):
    monkeypatch.setenv("TRITONSM_CACHE_DIR", str(tmp_path / "cache"))
    probe_wheels.write_probe_model(tmp_path / "probe")
    spec = make_spec(tmp_path, f"""\
probe: {{backend: python, source: {{python_dir: probe}}, max_batch_size: 4,
        python: {{requirements: {json.dumps(LINES)}}}}}
""", version="25.09")
    report = build.run(spec, tmp_path / "assets", tmp_path / "work", log=lambda line: None)
    assert report.built == ["probe"]
    model_dir = next((tmp_path / "work" / "models").glob("probe-*/probe"))
    (env_file,) = model_dir.glob("python-env-*.tar.gz")
    config = model_config.parse((model_dir / "config.pbtxt").read_text())
    assert config.parameters["EXECUTION_ENV_PATH"].string_value == f"$$TRITON_MODEL_DIRECTORY/{env_file.name}"
    entry = load_manifest(tmp_path / "assets" / "manifest.json").models["probe"]
    env = entry.execution_environment
    assert env.built_for == "image" and env.python == "3.12"
    assert env.packages == ("numpy==1.26.4", "tritonsm-probe==1.0")
    assert env.file == env_file.name


def test_the_t5_recipe_pins_the_releases_the_build_saves_its_weights_with():
    lock = {line.split("==")[0]: line.split()[0] for line in (REPOSITORY / "requirements.lock").read_text().splitlines()
            if "==" in line and not line.startswith(" ")}
    assert [lock[line.split("==")[0]] for line in python_recipes.T5_REQUIREMENTS] == list(python_recipes.T5_REQUIREMENTS)


def test_synthesis_refuses_an_environment_built_for_the_local_endpoint():
    from triton_constructs.model_repositories import ModelFacts, environment_for_image
    entry = ModelEntry("t5", "t5", "python", 4, (), (), "h", execution_environment=ExecutionEnvironment(
        "python-env-x.tar.gz", "local", "3.11", "the local endpoint (CPython 3.11, linux-x86_64)", 1, 1, ()))
    assert [str(p) for p in environment_for_image("t5", ModelFacts.from_entry(entry))] == [
        "models.t5: got a Python execution environment built for the local endpoint (CPython 3.11, linux-x86_64) "
        "(`tritonsm build --python-env-for local`); allowed: an environment built for the endpoint's image; fix: "
        "run `tritonsm build` without --python-env-for local"]

"""The synth path is type-checked: mypy --strict (pyproject.toml [tool.mypy]) over deployment_spec/,
triton_constructs/, stacks/ and app.py finds nothing, and the same check finds a planted error."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _mypy(*args: str, cwd: pathlib.Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=900)


def test_mypy_strict_finds_nothing_on_the_synth_path():
    done = _mypy()
    assert done.returncode == 0, done.stdout[-4000:]
    # The configured files were really checked (floor: the modules of the four trees).
    checked = int(done.stdout.rsplit("in ", 1)[1].split()[0])
    assert checked >= 55, done.stdout


def test_the_same_check_reports_a_planted_error(tmp_path):
    # A spec helper that may return None where a str is promised: the narrowing mistake raise_if hid.
    planted = tmp_path / "planted.py"
    planted.write_text("from deployment_spec.builds.manifest import Manifest\n\n\n"
                       "def default_of(manifest: Manifest, name: str) -> str:\n"
                       "    return manifest.endpoints[name].default_model\n")
    done = _mypy("--config-file", str(ROOT / "pyproject.toml"), str(planted))
    assert done.returncode == 1
    assert [line.split(": ", 1)[1] for line in done.stdout.splitlines() if ": error:" in line] == [
        'error: Incompatible return value type (got "str | None", expected "str")  [return-value]']

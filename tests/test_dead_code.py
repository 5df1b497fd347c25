"""No dead code: vulture (pinned in requirements.lock, configured in pyproject.toml [tool.vulture]) reports
nothing over the product code with 80 % confidence or more (unused imports, unused arguments, unreachable
code), and the same check reports a planted unused import."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
VULTURE = pathlib.Path(sys.executable).with_name("vulture")


def _vulture(*paths: str) -> tuple[list[str], int]:
    """vulture's findings with the project's configuration, and how many files it scanned."""
    done = subprocess.run([str(VULTURE), "--verbose", *paths], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 3), done.stderr[-3000:]  # 3: dead code found
    lines = done.stdout.splitlines()
    findings = [line for line in lines if "% confidence)" in line and not line.startswith(" ")]
    return findings, sum(line.startswith("Scanning: ") for line in lines)


def test_vulture_finds_no_dead_code_in_the_product():
    findings, scanned = _vulture()
    assert findings == []
    # Every package of the product was read (160 files when this was written).
    assert scanned >= 150, scanned


def test_vulture_reports_a_planted_unused_import(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text('"""A module with one unused import."""\nimport os\n\n\ndef used() -> int:\n    return 1\n')
    assert _vulture(str(planted)) == ([f"{planted}:2: unused import 'os' (90% confidence)"], 1)

"""benchmarks/long_text_tokenize.py runs and reports the cut's tokens equal to tokenizing whole (a small text)."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_benchmark_prints_and_writes_both_timings(tmp_path):
    done = subprocess.run([sys.executable, "benchmarks/long_text_tokenize.py", "--megabytes", "0.2", "--runs", "1",
                           "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "long_text_tokenize.json").read_text())
    assert [row["tokenizer"] for row in report["rows"]] == ["bert", "roberta", "xlm-roberta"]
    assert all(row["same_tokens"] and row["whole_s"] > 0 and row["cut_s"] > 0 for row in report["rows"])
    assert "| bert |" in (tmp_path / "long_text_tokenize.md").read_text()

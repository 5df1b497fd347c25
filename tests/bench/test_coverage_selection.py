"""What a coverage benchmark runs (benchmarks/tooling/coverage_runs.py): --only's model types, checked against
transformers' mapping with the exact refusal, and the rows not run before, at most --limit of them."""
import argparse
import pathlib

import pytest

from benchmarks.tooling import coverage_runs


def _args(only: str, limit=None) -> argparse.Namespace:
    return argparse.Namespace(only=only, limit=limit)


def test_an_unmapped_model_type_in_only_is_refused_naming_it(capsys):
    parser = argparse.ArgumentParser(prog="hf_audio_coverage.py")
    with pytest.raises(SystemExit):
        coverage_runs.parse_only(parser, _args("wavlm,nosuch,other"), ["wavlm", "hubert"], "audio-classification")
    assert capsys.readouterr().err.splitlines()[-1] == (
        "hf_audio_coverage.py: error: --only nosuch, other: not a model type transformers maps for "
        "audio-classification")


def test_the_rows_to_run_are_those_not_run_yet_of_only_at_most_limit(tmp_path: pathlib.Path):
    rows = [{"key": k, "model_type": t} for k, t in (("a", "vit"), ("b", "deit"), ("c", "vit"), ("d", "vit"))]
    progress = coverage_runs.Progress(tmp_path / "results.json", {"a": {}}, [], "now")
    args = _args("vit,deit")
    coverage_runs.parse_only(argparse.ArgumentParser(), args, ["vit", "deit", "beit"], "image-classification")
    assert [r["key"] for r in coverage_runs.pending(rows, progress, args)] == ["b", "c", "d"]
    args.only, args.limit = {"vit"}, 1
    assert [r["key"] for r in coverage_runs.pending(rows, progress, args)] == ["c"]

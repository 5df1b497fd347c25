"""`tritonsm bench stream --url` against the local runtime `tritonsm serve` runs (LocalRuntime, in front of the real
Triton server) streaming the decoupled test model of the streaming tests (tests/local_endpoint/streaming_model.py:
one event per word of the prompt, ``step_s`` apart)."""
from __future__ import annotations

import json
import pathlib
import sys

import pytest

from deployment_spec.sections.endpoint import EndpointKind
from local_endpoint.endpoints.single_model import SingleModelEndpoint
from local_endpoint.runtime.local_runtime import LocalRuntime, NamedEndpoint
from tritonsm.cli import main as tritonsm_main

sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "local_endpoint"))
import streaming_model  # noqa: E402
import triton_model_fixtures as models  # noqa: E402

NAME = "Tests-dev-stream"
STEP_S = 0.1


@pytest.fixture(scope="module")
def runtime(module_tmp):
    root = module_tmp.mktemp("bench-stream")
    streaming_model.write_stream(root / "repository")
    tarball = models.pack(root / "repository", root / "stream.tar.gz")
    named = NamedEndpoint(NAME, EndpointKind.SINGLE_MODEL, SingleModelEndpoint(tarball, log_file=root / "server.log"))
    with LocalRuntime([named], container_contract=True) as served:
        yield served


@pytest.mark.triton
def test_bench_stream_measures_the_words_the_decoupled_model_streams_through_the_local_runtime(runtime, tmp_path,
                                                                                              capsys) -> None:
    code = tritonsm_main(["bench", "stream", "--endpoint-name", NAME, "--url", runtime.url, "--concurrency", "1,2",
                          "--requests", "2", "--text", "one two three four", "--max-new-tokens", "4",
                          "--parameter", f"step_s={STEP_S}", "--out", str(tmp_path)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    levels = json.loads((tmp_path / "stream.json").read_text())["levels"]
    assert [(lv["concurrency"], lv["requests"], lv["errors"], lv["output_tokens"]) for lv in levels] == [
        (1, 2, 0, 8), (2, 2, 0, 8)]
    for level in levels:
        # The model sends its first word at once and sleeps STEP_S after each: TTFT well under a step, ITL about one.
        assert level["ttft_ms"]["p50"] < 1000 * STEP_S
        assert 0.7 * STEP_S <= level["itl_ms"]["p50"] / 1000 <= STEP_S + 0.08
        assert level["e2el_ms"]["p50"] / 1000 >= 3 * STEP_S
    assert "| concurrency | requests | errors |" in printed

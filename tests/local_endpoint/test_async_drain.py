"""`tritonsm bench drain`: an asynchronous endpoint's drain rate per concurrency, measured through boto3 against the
real Triton server and the local queue, and what --record writes into capacity.json (the backlog target's source);
each refusal with its exact message."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest

from async_fixtures import adder_spec
from deployment_spec import load_spec
from deployment_spec.cost.capacity import backlog_target, load_drains
from tritonsm.cli import main


@pytest.fixture(scope="module")
def spec(tarballs: dict[str, pathlib.Path], module_tmp) -> tuple[pathlib.Path, pathlib.Path, pathlib.Path]:
    root = module_tmp.mktemp("drain")
    spec_path, manifest = adder_spec(root, tarballs["add"])
    np.savez(root / "request.npz", A=np.ones((1, 4), np.float32), B=np.arange(4, dtype=np.float32).reshape(1, 4))
    return spec_path, manifest, root / "request.npz"


def _drain(spec, tmp_path: pathlib.Path, *flags: str) -> int:
    spec_path, manifest, request = spec
    return main(["bench", "--spec", str(spec_path), "drain", "--endpoint", "adder", "--manifest", str(manifest),
                 "--input", str(request), "--out", str(tmp_path / "out"), *flags])


@pytest.mark.triton
def test_drain_measures_each_concurrency_and_records_the_spec_s_own(spec, tmp_path, capsys) -> None:
    capacity = tmp_path / "capacity.json"
    assert _drain(spec, tmp_path, "--concurrency", "1,2", "--requests", "20", "--record",
                  "--capacity", str(capacity)) == 0
    table = (tmp_path / "out" / "drain.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| 1 |") or line.startswith("| 2 |")]
    assert [row.split(" | ")[1:4] for row in rows] == [["20", "20", "0"], ["20", "20", "0"]]  # all answered
    assert (tmp_path / "out" / "drain.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    recorded = load_drains(capacity)["adder"]
    assert (recorded.concurrency, recorded.requests) == (2, 20)   # the spec's max_concurrent_invocations_per_instance
    assert recorded.drain_rps_per_instance > 0
    assert recorded.measured_on.startswith("local CPU (") and recorded.measured_on.endswith("own model add")
    target = backlog_target(load_spec(spec[0]).endpoints["adder"], {"adder": recorded})
    assert target is not None and target.measured
    assert f"recorded in {capacity}: backlog target {target.value:g} requests per instance" in capsys.readouterr().out


def test_record_needs_the_spec_s_own_concurrency(spec, tmp_path, capsys) -> None:
    assert _drain(spec, tmp_path, "--concurrency", "1", "--record") == 2
    assert capsys.readouterr().err == (
        "error: --record with --concurrency 1: the spec's own concurrency (2) is what deploys, and it is not among "
        "them; add 2\n")


def test_a_real_time_endpoint_is_refused_and_pointed_to_bench_load(tmp_path, capsys) -> None:
    root = pathlib.Path(__file__).resolve().parents[2]
    assert main(["bench", "--spec", str(root / "triton.yaml"), "drain", "--endpoint", "classifier"]) == 2
    assert capsys.readouterr().err == (
        f"error: --endpoint classifier: a real-time endpoint of {root / 'triton.yaml'}; bench drain measures an "
        "asynchronous endpoint's queue (an asynchronous: block); bench load measures this one\n")


def test_requests_out_of_range_are_refused(spec, tmp_path, capsys) -> None:
    assert _drain(spec, tmp_path, "--requests", "0") == 2
    assert capsys.readouterr().err == "error: --requests 0: use 1 to 10000\n"

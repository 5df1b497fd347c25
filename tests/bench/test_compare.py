"""`tritonsm compare` on synthetic local capture trees in SageMaker Data Capture's layout: the candidate's scores are
the incumbent's + 0.01 for 90 % of the requests and have their top label flipped for 10 %; the agreement, the
latency percentiles, the pairing (eventId, then identical request), the errors, the PNG and JSON, every refusal;
which variant is the incumbent, read from the spec that deploys the endpoint."""
from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import json
import pathlib
import struct
import sys

import numpy as np
import pytest

from tritonsm.cli import build_parser, main
from tritonsm.commands.compare import run

T0 = dt.datetime(2026, 11, 28, 5, 10, tzinfo=dt.timezone.utc)
WINDOW = ["--since", "2026-11-28T05:00:00Z", "--until", "2026-11-28T05:59:59Z"]
BASE = [0.6, 0.2, 0.1, 0.05, 0.05]
FLIPPED = [0.2, 0.6, 0.1, 0.05, 0.05]
BINARY = "application/vnd.sagemaker-triton.binary+json;json-header-size="
# The endpoints the captures come from, as a spec deploys them (<project>-<environment>-<endpoint>): "ep" with a shadow
# (AllTraffic and Shadow, as tree() captures them), "ab" with weighted variants whose first declared is not the
# alphabetical first, "renamed" with a production variant named after its shadow in the alphabet, "quiet" alone.
EP = "Demo-dev-ep"
SPEC = """\
project: Demo
triton_version: "25.04"
models:
  incumbent: {backend: python, source: {python_dir: incumbent}, max_batch_size: 4}
  candidate: {backend: python, source: {python_dir: candidate}, max_batch_size: 4}
endpoints:
  ep: {kind: single-model, models: [incumbent], instance_type: ml.c5.xlarge, shadow: {model: candidate}}
  ab:
    kind: single-model
    models: [incumbent]
    instance_type: ml.c5.xlarge
    variants: [{name: Green, weight: 90}, {name: Blue, model: candidate, weight: 10}, {name: Amber, weight: 0}]
  renamed:
    kind: single-model
    models: [incumbent]
    instance_type: ml.c5.xlarge
    variant_name: Production
    shadow: {model: candidate, name: Candidate}
  quiet: {kind: single-model, models: [incumbent], instance_type: ml.c5.xlarge}
environments:
  dev: {region: us-east-1}
"""


def spec_file(tmp_path: pathlib.Path) -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC)
    return str(path)


def request(i: int) -> str:
    return json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1], "data": [float(i)]}]})


def answer(scores: list[float], label: str, binary: bool = False) -> tuple[str, str, str]:
    """(data, encoding, content type): KServe v2 JSON, or binary+json (base64 in the capture)."""
    if not binary:
        return json.dumps({"outputs": [
            {"name": "scores", "datatype": "FP32", "shape": [1, 5], "data": scores},
            {"name": "labels", "datatype": "BYTES", "shape": [1], "data": [label]}]}), "JSON", "application/json"
    raw_scores = np.asarray(scores, dtype=np.float32).tobytes()
    raw_label = struct.pack("<I", len(label)) + label.encode()  # BYTES: 4-byte little-endian length, then the bytes
    header = json.dumps({"outputs": [
        {"name": "scores", "datatype": "FP32", "shape": [1, 5], "parameters": {"binary_data_size": len(raw_scores)}},
        {"name": "labels", "datatype": "BYTES", "shape": [1], "parameters": {"binary_data_size": len(raw_label)}}]})
    body = header.encode() + raw_scores + raw_label
    return base64.b64encode(body).decode(), "BASE64", f"{BINARY}{len(header)}"


def record(event_id: str, time: dt.datetime, data_in: str, out: tuple[str, str, str] | None,
           latency_ms: float | None = None, error: str | None = None) -> str:
    capture = {"endpointInput": {"observedContentType": "application/json", "mode": "INPUT", "data": data_in,
                                 "encoding": "JSON"}}
    if out is not None:
        capture["endpointOutput"] = {"observedContentType": out[2], "mode": "OUTPUT", "data": out[0],
                                     "encoding": out[1]}
    metadata: dict = {"eventId": event_id, "inferenceTime": time.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"}
    if latency_ms is not None:
        metadata["tritonsmLatencyMs"] = latency_ms
    if error is not None:
        metadata["tritonsmError"] = error
    return json.dumps({"captureData": capture, "eventMetadata": metadata, "eventVersion": "0"})


def write(root: pathlib.Path, variant: str, name: str, lines: list[str], hour: str = "2026/11/28/05",
          endpoint: str = EP) -> None:
    folder = root / endpoint / variant / hour
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(line + "\n" for line in lines))


INCUMBENT_LATENCY = [float(i + 1) for i in range(100)] + [150.0, 3.0]
CANDIDATE_LATENCY = [2.0 * (i + 1) for i in range(100)] + [7.0, 400.0, 9.0]


def tree(root: pathlib.Path) -> pathlib.Path:
    """100 requests both variants answered: 80 share their eventId, 20 pair by their identical request 0.5 s apart.
    Left unpaired: 2 of the incumbent's (one failed), 3 of the candidate's (one failed, one a repeat of request 85
    30 s later: beyond the 5 s tolerance). One record of the incumbent's lies after the window."""
    incumbent, candidate = [], []
    for i in range(100):
        t = T0 + dt.timedelta(seconds=i)
        flipped = i % 10 == 9
        incumbent.append(record(f"e{i}", t, request(i), answer(BASE, "cat"), INCUMBENT_LATENCY[i]))
        out = answer(FLIPPED if flipped else [s + 0.01 for s in BASE], "dog" if flipped else "cat", binary=i % 2 == 0)
        if i < 80:
            candidate.append(record(f"e{i}", t, request(i), out, CANDIDATE_LATENCY[i]))
        else:  # another eventId: paired by the request
            candidate.append(record(f"s{i}", t + dt.timedelta(seconds=0.5), request(i), out, CANDIDATE_LATENCY[i]))
    t = T0 + dt.timedelta(minutes=5)
    incumbent += [record("e100", t, request(100), answer(BASE, "cat"), INCUMBENT_LATENCY[100]),
                  record("e101", t, request(101), ('{"error": "request for unknown model"}', "JSON",
                                                   "application/json"), INCUMBENT_LATENCY[101]),
                  record("late", dt.datetime(2026, 11, 28, 6, 0, 30, tzinfo=dt.timezone.utc), request(102),
                         answer(BASE, "cat"), 1.0)]
    candidate += [record("s200", t, request(200), None, CANDIDATE_LATENCY[100], error="model failed: out of memory"),
                  record("s201", t, request(201), answer(BASE, "cat"), CANDIDATE_LATENCY[101]),
                  record("s202", T0 + dt.timedelta(seconds=85 + 30), request(85), answer(BASE, "cat"),
                         CANDIDATE_LATENCY[102])]
    write(root, "AllTraffic", "a.jsonl", incumbent)
    write(root, "Shadow", "b.jsonl", candidate[:50])
    write(root, "Shadow", "c.jsonl", candidate[50:])
    # Outside the window's hour folders: never read (it would not even parse).
    write(root, "Shadow", "old.jsonl", ["not json"], hour="2026/11/28/04")
    return root


def _cosine(a: list[float], b: list[float]) -> float:
    x, y = np.asarray(a, np.float32).astype(np.float64), np.asarray(b, np.float32).astype(np.float64)
    return float(x @ y / np.linalg.norm(x) / np.linalg.norm(y))


def test_the_report_pairs_the_variants_and_measures_agreement_latency_and_errors(tmp_path, capsys):
    root = tree(tmp_path / "captures")
    png, numbers = tmp_path / "out" / "cmp.png", tmp_path / "out" / "cmp.json"
    spec = spec_file(tmp_path)
    assert main(["compare", "--spec", spec, "--captures", str(root), "--endpoint", EP, *WINDOW, "--plot", str(png),
                 "--json", str(numbers)]) == 0
    result = json.loads(numbers.read_text())
    assert (result["incumbent"], result["candidate"]) == ("AllTraffic", "Shadow")
    roles = (f"the spec, endpoints.ep of {spec}, environment dev: the production variant is the incumbent, the shadow "
             "the candidate")
    assert result["roles_from"] == roles
    assert result["records"] == {"AllTraffic": 102, "Shadow": 103}
    assert result["pairing"] == {"by_event_id": 80, "by_input": 20, "tolerance_s": 5.0,
                                 "unpaired": {"AllTraffic": 2, "Shadow": 3}}
    agreement = result["agreement"]
    assert (agreement["compared"], agreement["with_error"], agreement["without_answer"]) == (100, 0, 0)
    scores, labels = agreement["outputs"]["scores"], agreement["outputs"]["labels"]
    assert scores["kind"] == "FP32 [1, 5]" and scores["compared"] == 100
    assert scores["same_top_label_share"] == 0.9
    assert scores["max_abs_diff"] == pytest.approx(0.4, rel=1e-6)
    expected_cosine = (90 * _cosine(BASE, [s + 0.01 for s in BASE]) + 10 * _cosine(BASE, FLIPPED)) / 100
    assert scores["mean_cosine"] == pytest.approx(expected_cosine, rel=1e-9)
    assert scores["equal_share"] == 0.0
    assert labels == {"kind": "BYTES [1]", "compared": 100, "shape_or_presence_differs": 0, "equal_share": 0.9,
                      "same_top_label_share": None, "max_abs_diff": None, "mean_cosine": None}
    latency = result["latency"]
    assert latency["source"] == "the captures' tritonsmLatencyMs, per request"
    for variant, values in (("AllTraffic", INCUMBENT_LATENCY), ("Shadow", CANDIDATE_LATENCY)):
        p50, p90, p99 = np.percentile(values, [50, 90, 99])
        assert latency["variants"][variant] == pytest.approx(
            {"count": len(values), "p50_ms": p50, "p90_ms": p90, "p99_ms": p99, "max_ms": max(values)})
    assert result["errors"] == {
        "AllTraffic": {"records": 102, "errors": 1, "share": 1 / 102, "examples": ["request for unknown model"]},
        "Shadow": {"records": 103, "errors": 1, "share": 1 / 103, "examples": ["model failed: out of memory"]}}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    out = capsys.readouterr().out
    assert (f"incumbent AllTraffic, candidate Shadow ({roles})\n"
            "records: AllTraffic 102, Shadow 103; paired 100 (80 by eventId, 20 by identical request within 5 s); "
            "unpaired: AllTraffic 2, Shadow 3\n") in out
    assert "| scores | FP32 [1, 5] | 100 | 90.0 % | 0.4 | " in out
    assert "| labels | BYTES [1] | 100 | - | - | - | 90.0 % | 0 |" in out
    assert "| AllTraffic | incumbent | 102 | 50.5 | 90.9 | 99.99 | 150 |" in out
    assert "| Shadow | 103 | 1 | 1.0 % | model failed: out of memory |" in out
    assert out.endswith(f"wrote {png}, {numbers}\n")


def test_the_candidate_flag_makes_the_other_variant_the_incumbent_and_the_default_window_is_the_last_hour(
        tmp_path, capsys):
    root = tree(tmp_path / "captures")
    args = build_parser().parse_args(["compare", "--captures", str(root), "--endpoint", EP, "--candidate",
                                      "AllTraffic", "--plot", str(tmp_path / "p.png")])
    # Now 05:40: the last hour reads the hour folders 04 and 05 (04's file is unreadable: it would fail).
    write(root, "Shadow", "old.jsonl", [], hour="2026/11/28/04")
    assert run(args, now=T0 + dt.timedelta(minutes=30)) == 0
    out = capsys.readouterr().out
    assert f"Endpoint {EP}, captures " + str(root) + ", 2026-11-28T04:40:00Z to 2026-11-28T05:40:00Z\n" in out
    assert "incumbent Shadow, candidate AllTraffic (--candidate given, the incumbent is the other variant)" in out


def test_a_window_in_the_future_of_the_captures_has_no_records(tmp_path, capsys):
    root = tree(tmp_path / "captures")
    assert main(["compare", "--spec", spec_file(tmp_path), "--captures", str(root), "--endpoint", EP, "--since",
                 "2026-11-28T07:00:00Z",
                 "--until", "2026-11-28T07:30:00", "--plot", str(tmp_path / "p.png")]) == 2
    assert capsys.readouterr().err == (
        f"error: no records of variant AllTraffic or Shadow in 2026-11-28T07:00:00Z to 2026-11-28T07:30:00Z under "
        f"{root}/{EP}/ (hour folders 2026/11/28/07 to 2026/11/28/07); widen the window (--since, --until), and "
        "check that the endpoint captures data and that requests reached the variant\n")


def _error(tmp_path, capsys, *argv: str) -> str:
    assert main(["compare", *argv, "--plot", str(tmp_path / "p.png")]) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return captured.err


def test_refusals_of_flags_folders_and_variants(tmp_path, capsys):
    root = tree(tmp_path / "captures")
    r = str(root)
    assert _error(tmp_path, capsys, "--captures", str(tmp_path / "none"), "--endpoint", EP) == (
        f"error: --captures {tmp_path / 'none'}: no such folder; give the data-capture root (it holds "
        "<endpoint>/<variant>/yyyy/mm/dd/hh/*.jsonl) or s3://BUCKET/PREFIX/\n")
    assert _error(tmp_path, capsys, "--captures", r, "--endpoint", "other") == (
        f"error: --endpoint other: no folder {root / 'other'}; endpoints captured under {root}: {EP} (give the "
        "endpoint's name as its data capture files it)\n")
    assert _error(tmp_path, capsys, "--captures", r, "--endpoint", EP, "--incumbent", "Blue") == (
        f"error: --incumbent Blue: no captures of that variant under {root}/{EP}/; variants captured there: "
        "AllTraffic, Shadow\n")
    assert _error(tmp_path, capsys, "--captures", r, "--endpoint", EP, "--incumbent", "Shadow", "--candidate",
                  "Shadow") == ("error: --incumbent and --candidate both name Shadow; name two different variants "
                                "(AllTraffic, Shadow)\n")
    assert _error(tmp_path, capsys, "--captures", r, "--endpoint", EP, "--since", "yesterday") == (
        "error: --since 'yesterday': not a time; give an ISO 8601 time (e.g. 2026-11-28T05:00:00Z; one without a "
        "zone is UTC) or a duration back from now (90s, 30m, 1h, 2d)\n")
    assert _error(tmp_path, capsys, "--captures", r, "--endpoint", EP, "--since", "2026-11-28T06:00:00Z",
                  "--until", "2026-11-28T05:00:00Z") == (
        "error: --since 2026-11-28T06:00:00Z (2026-11-28T06:00:00Z) is not before --until 2026-11-28T05:00:00Z "
        "(2026-11-28T05:00:00Z); give an earlier --since or a later --until\n")
    assert _error(tmp_path, capsys, "--captures", r, "--endpoint", EP, "--pair-tolerance-s", "0") == (
        "error: --pair-tolerance-s 0: use a number of seconds in (0, 3600]\n")
    (root / EP / "Canary").mkdir()
    assert _error(tmp_path, capsys, "--captures", r, "--endpoint", EP, "--incumbent", "Shadow") == (
        f"error: --endpoint: captures of 3 variants under {root}/{EP}/ (AllTraffic, Canary, Shadow); name the two "
        "to compare: --incumbent VARIANT --candidate VARIANT\n")
    write(root, "Blue", "a.jsonl", [], endpoint="lonely")
    assert _error(tmp_path, capsys, "--captures", r, "--endpoint", "lonely") == (
        f"error: --endpoint: captures of 1 variant under {root}/lonely/ (Blue); a comparison needs two: give the "
        "endpoint a second variant or a shadow (variants:, shadow: in the spec) and capture its traffic\n")


def test_unreadable_records_and_answers_name_the_file_and_line(tmp_path, capsys):
    root = tmp_path / "captures"
    good = record("e1", T0, request(1), answer(BASE, "cat"), 1.0)
    write(root, "A", "a.jsonl", [good])
    write(root, "B", "b.jsonl", [good, "", '{"captureData": {}}'])
    bad = root / EP / "B" / "2026" / "11" / "28" / "05" / "b.jsonl"
    argv = ["--captures", str(root), "--endpoint", EP, "--incumbent", "A", *WINDOW]
    assert _error(tmp_path, capsys, *argv) == (
        f"error: {bad}:3: not a readable data-capture record (no 'eventMetadata'); each line of a capture file is "
        "one JSON record with captureData and eventMetadata (eventId, inferenceTime), as SageMaker Data Capture "
        "writes them; remove the line, or point --captures at the capture root\n")
    broken = json.loads(good)
    broken["captureData"]["endpointOutput"].update(encoding="BASE64", data="not base64!")
    write(root, "B", "b.jsonl", [json.dumps(broken)])
    assert _error(tmp_path, capsys, *argv).startswith(
        f"error: {bad}:1: not a readable data-capture record (endpointOutput.data is not base64 (")
    write(root, "B", "b.jsonl", [record("e1", T0, request(1), ("<html>busy</html>", "JSON", "text/html"))])
    message = _error(tmp_path, capsys, *argv)
    assert message.startswith(f"error: {bad}:1: the captured answer (text/html) is not a KServe v2 inference "
                              "response: the endpoint answered with a body that is not a KServe v2 inference response")
    assert message.endswith("; tritonsm compare reads Triton's JSON and binary+json answers\n")


def test_a_weighted_ab_test_without_repeated_requests_reports_latency_and_says_why_nothing_paired(tmp_path, capsys):
    # The spec declares Green first: Green is the incumbent, though Blue comes first in the alphabet.
    root = tmp_path / "captures"
    write(root, "Blue", "a.jsonl", [record(f"a{i}", T0, request(i), answer(BASE, "cat"), 10.0) for i in range(3)],
          endpoint="Demo-dev-ab")
    write(root, "Green", "a.jsonl", [record(f"b{i}", T0, request(10 + i), None) for i in range(2)],
          endpoint="Demo-dev-ab")
    spec = spec_file(tmp_path)
    assert main(["compare", "--spec", spec, "--captures", str(root), "--endpoint", "Demo-dev-ab", *WINDOW, "--plot",
                 str(tmp_path / "p.png")]) == 0
    out = capsys.readouterr().out
    assert (f"incumbent Green, candidate Blue (the spec, endpoints.ab of {spec}, environment dev: the first variant "
            "is the incumbent)\nrecords: Green 2, Blue 3; paired 0 (0 by eventId, 0 by identical request within 5 s); "
            "unpaired: Green 2, Blue 3\n") in out
    assert ("no output compared: no pair of answers (a weighted A/B test sends each request to one variant; a "
            "shadow variant sees the same requests)") in out
    assert "| Green | incumbent | 0 | - | - | - | - |" in out
    assert "| Blue | candidate | 3 | 10 | 10 | 10 | 10 |" in out
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"


def test_pairs_with_a_failed_side_or_no_captured_answer_are_counted_not_compared(tmp_path):
    from tritonsm.comparing.agreement import compare_answers
    from tritonsm.comparing.records import parse_record

    def rec(out, error=None):
        return parse_record(record("e", T0, request(1), out, error=error), "f:1")

    ok = answer(BASE, "cat")
    result = compare_answers([(rec(ok), rec(None, error="boom")), (rec(ok), rec(None)), (rec(ok), rec(ok))])
    assert (result.compared, result.with_error, result.without_answer) == (1, 1, 1)
    assert result.outputs["scores"].summary()["mean_cosine"] == pytest.approx(1.0)


def test_it_reads_what_the_local_servers_capture_log_writes(tmp_path, capsys):
    """The local server's writer (local_endpoint.variants.capture) and this reader agree on the format: a shadow's
    record carries its production record's eventId; a failed call has tritonsmError and no endpointOutput."""
    from local_endpoint.variants.capture import CaptureLog, Exchange

    log = CaptureLog(tmp_path / "capture").start()
    for i in range(3):
        body, out = request(i).encode(), answer(BASE, "cat")[0].encode()
        t = T0 + dt.timedelta(seconds=i)
        log.write(Exchange(EP, "AllTraffic", f"e{i}", t, "application/json", body, "application/json", out, 5.0))
        shadow = Exchange(EP, "Shadow", f"e{i}", t, "application/json", body, "application/json", out, 7.0)
        log.write(shadow if i else dataclasses.replace(shadow, output=None, error="unknown model"))
    log.stop()
    assert main(["compare", "--spec", spec_file(tmp_path), "--captures", str(tmp_path / "capture"), "--endpoint",
                 EP, *WINDOW, "--json",
                 str(tmp_path / "r.json"), "--plot", str(tmp_path / "p.png")]) == 0
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["pairing"]["by_event_id"] == 3
    assert (result["agreement"]["compared"], result["agreement"]["with_error"]) == (2, 1)
    assert result["agreement"]["outputs"]["scores"]["same_top_label_share"] == 1.0
    assert result["errors"]["Shadow"]["examples"] == ["unknown model"]
    assert result["latency"]["variants"]["Shadow"]["p50_ms"] == 7.0


def test_a_shadow_is_the_candidate_though_its_name_sorts_before_the_production_variant_s(tmp_path, capsys):
    root = tmp_path / "captures"
    for variant in ("Production", "Candidate"):
        write(root, variant, "a.jsonl", [record(f"e{i}", T0, request(i), answer(BASE, "cat"), 5.0) for i in range(2)],
              endpoint="Demo-dev-renamed")
    spec = spec_file(tmp_path)
    assert main(["compare", "--spec", spec, "--captures", str(root), "--endpoint", "Demo-dev-renamed", *WINDOW,
                 "--json", str(tmp_path / "r.json")]) == 0
    result = json.loads((tmp_path / "r.json").read_text())
    assert (result["incumbent"], result["candidate"]) == ("Production", "Candidate")
    assert result["roles_from"] == (f"the spec, endpoints.renamed of {spec}, environment dev: the production variant "
                                    "is the incumbent, the shadow the candidate")


def test_refusals_of_the_spec_s_roles(tmp_path, capsys):
    root = tmp_path / "captures"
    spec = spec_file(tmp_path)
    for endpoint, variants in (("ep", ("A", "B")), ("Demo-dev-quiet", ("AllTraffic", "Other")),
                               ("Demo-dev-ab", ("Blue", "Amber")), ("Demo-dev-renamed", ("Production", "Other"))):
        for variant in variants:
            (root / endpoint / variant).mkdir(parents=True)
    r = str(root)
    missing = tmp_path / "none.yaml"
    assert _error(tmp_path, capsys, "--spec", str(missing), "--captures", r, "--endpoint", "ep") == (
        f"error: --spec {missing}: no such file; without --incumbent and --candidate the roles come from the spec "
        "that deploys endpoint ep (the incumbent is the endpoint's first variant of variants:, or with a shadow its "
        "production variant; the candidate is the other variant or the shadow): pass --spec PATH, or name the "
        "roles: --incumbent VARIANT --candidate VARIANT\n")
    assert _error(tmp_path, capsys, "--spec", spec, "--captures", r, "--endpoint", "ep") == (
        f"error: --endpoint ep: no endpoint of {spec} deploys under that name (its endpoints deploy as Demo-dev-ep, "
        "Demo-dev-ab, Demo-dev-renamed, Demo-dev-quiet); without --incumbent and --candidate the roles come from the "
        "spec: pass --spec with the spec that deploys ep, or name the roles: --incumbent VARIANT --candidate "
        "VARIANT\n")
    assert _error(tmp_path, capsys, "--spec", spec, "--captures", r, "--endpoint", "Demo-dev-quiet") == (
        f"error: --endpoint Demo-dev-quiet: endpoints.quiet of {spec}, environment dev has one variant (AllTraffic) "
        "and no shadow, so the spec names no candidate; name the roles: --incumbent VARIANT --candidate VARIANT\n")
    assert _error(tmp_path, capsys, "--spec", spec, "--captures", r, "--endpoint", "Demo-dev-ab") == (
        f"error: --endpoint: no captures of the incumbent Green (the spec, endpoints.ab of {spec}, environment dev: "
        f"the first variant is the incumbent) under {root}/Demo-dev-ab/; variants captured there: Amber, Blue; check "
        "that the endpoint captures the incumbent's traffic, or name the roles: --incumbent VARIANT --candidate "
        "VARIANT\n")
    assert _error(tmp_path, capsys, "--spec", spec, "--captures", r, "--endpoint", "Demo-dev-renamed") == (
        f"error: --endpoint: no captures of the candidate Candidate (the spec, endpoints.renamed of {spec}, "
        "environment dev: the production variant is the incumbent, the shadow the candidate) under "
        f"{root}/Demo-dev-renamed/; variants captured there: Other, Production; check that the endpoint captures the "
        "candidate's traffic, or name the roles: --incumbent VARIANT --candidate VARIANT\n")
    (root / "Demo-dev-ab" / "Green").mkdir()
    assert _error(tmp_path, capsys, "--spec", spec, "--captures", r, "--endpoint", "Demo-dev-ab") == (
        f"error: --endpoint: captures of 2 candidates (Blue, Amber) under {root}/Demo-dev-ab/ (the spec, "
        f"endpoints.ab of {spec}, environment dev: the first variant is the incumbent); name the one to compare "
        "with the incumbent Green: --candidate VARIANT\n")
    # The flags alone need no spec: both given, or one with two variants captured.
    assert _error(tmp_path, capsys, "--spec", str(missing), "--captures", r, "--endpoint", "ep", "--candidate",
                  "B", *WINDOW).startswith("error: no records of variant A or B in ")


def test_without_plot_the_comparison_needs_no_matplotlib(tmp_path, capsys, monkeypatch):
    root = tree(tmp_path / "captures")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # an install without the bench extra: import fails
    argv = ["compare", "--spec", spec_file(tmp_path), "--captures", str(root), "--endpoint", EP, *WINDOW]
    assert main([*argv, "--json", "r.json"]) == 0
    captured = capsys.readouterr()
    assert captured.out.endswith("\nwrote r.json\n") and captured.err == ""
    assert main(argv) == 0
    assert "wrote" not in capsys.readouterr().out
    assert not (tmp_path / "build").exists()
    # The twin: asked for the PNG, the missing package is named with the extra that brings it.
    assert main([*argv, "--plot"]) == 2
    assert capsys.readouterr().err == (
        "error: tritonsm compare needs the Python package 'matplotlib', which is not installed (the base install, "
        "the construct library, leaves it out); install the bench extra: pip install 'triton-sagemaker-cdk[bench]' "
        "(in a checkout of the repository, `make` installs everything)\n")


def test_plot_without_a_file_writes_the_default_png(tmp_path, capsys, monkeypatch):
    root = tree(tmp_path / "captures")
    monkeypatch.chdir(tmp_path)
    assert main(["compare", "--spec", spec_file(tmp_path), "--captures", str(root), "--endpoint", EP, *WINDOW,
                 "--plot"]) == 0
    png = pathlib.Path("build") / "compare" / f"{EP}.png"
    assert capsys.readouterr().out.endswith(f"\nwrote {png}\n")
    assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

"""`tritonsm bench stream`: the measuring core and the command against a stand-in of SageMaker Runtime's
InvokeEndpointWithResponseStream, a real HTTP server in a thread writing AWS event-stream messages (framed here, as
botocore's decoder reads them) with tokens at known delays, so TTFT and ITL can be checked; and the argument
mistakes, each with its message."""
from __future__ import annotations

import binascii
import http.server
import json
import pathlib
import re
import struct
import subprocess
import sys
import threading
import time

import pytest

from tritonsm.benchmarking import stream_load
from tritonsm.cli import main as tritonsm_main

NAME = "Gen-dev-writer"
FIRST_S = 0.15   # the stand-in waits this long before the first token
STEP_S = 0.05    # and this long between two tokens
STREAM_PATH = re.compile(r"/endpoints/([^/]+)/invocations-response-stream")
PROMPT = "one two three four five six seven eight"


def message(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message: prelude (total length, headers length, CRC32 of those 8 bytes), string headers
    (name length, name, type 7, value length, value), payload, CRC32 of all before it (botocore/eventstream.py)."""
    encoded = b"".join(struct.pack(">B", len(k)) + k.encode() + struct.pack(">BH", 7, len(v)) + v.encode()
                       for k, v in headers.items())
    prelude = struct.pack(">II", 12 + len(encoded) + len(payload) + 4, len(encoded))
    prelude += struct.pack(">I", binascii.crc32(prelude))
    body = prelude + encoded + payload
    return body + struct.pack(">I", binascii.crc32(body))


def payload_part(data: bytes) -> bytes:
    return message({":event-type": "PayloadPart", ":message-type": "event",
                    ":content-type": "application/octet-stream"}, data)


def model_stream_error(text: str) -> bytes:
    return message({":exception-type": "ModelStreamError", ":message-type": "exception",
                    ":content-type": "application/json"}, json.dumps({"Message": text, "ErrorCode": "StreamBroken"}).encode())


class StandIn(http.server.ThreadingHTTPServer):
    """Streams the prompt's words (at most max_new_tokens), FIRST_S then STEP_S apart; the word FAIL ends the stream
    with a ModelStreamError, the word ERROR with the container's error event; an endpoint named ``missing`` is
    refused (ValidationError, HTTP 400)."""
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.in_flight = self.most_in_flight = 0
        self.requests: list[tuple[str, dict]] = []   # (endpoint name, generate JSON)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"   # chunked, one message per chunk, as SageMaker's runtime streams
    server: StandIn

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        match = STREAM_PATH.fullmatch(self.path)
        name = match[1] if match else ""
        with self.server.lock:
            self.server.requests.append((name, request))
        if name == "missing":
            body = json.dumps({"Message": f"Endpoint {name} of account 123456789012 not found."}).encode()
            self.send_response(400)
            for key, value in (("Content-Type", "application/json"), ("x-amzn-ErrorType", "ValidationError"),
                               ("Content-Length", str(len(body)))):
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.amazon.eventstream")
        self.send_header("X-Amzn-SageMaker-Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        with self.server.lock:
            self.server.in_flight += 1
            self.server.most_in_flight = max(self.server.most_in_flight, self.server.in_flight)
        try:
            self._stream(request["text_input"].split()[:request["parameters"]["max_new_tokens"]])
        finally:
            with self.server.lock:
                self.server.in_flight -= 1

    def _stream(self, words: list[str]) -> None:
        time.sleep(FIRST_S)
        for count, word in enumerate(words):
            if word == "FAIL":
                self._chunk(model_stream_error(f"the model failed after {count} tokens"))
                break
            if word == "ERROR":   # deployed, SageMaker passes the container's error event on as a payload part
                self._chunk(payload_part(b'data: {"error": "CUDA out of memory"}\n\n'))
                break
            event = f"data: {json.dumps({'text_output': word, 'model_name': 'gen'})}\n\n".encode()
            # Cut in the middle of the line: the reader has to put the parts together again.
            self._chunk(payload_part(event[:9]))
            self._chunk(payload_part(event[9:]))
            if count < len(words) - 1:
                time.sleep(STEP_S)
        self.wfile.write(b"0\r\n\r\n")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))


@pytest.fixture
def stand_in():
    server = StandIn()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _send(server: StandIn, name: str = NAME) -> stream_load.Send:
    return stream_load.sender(name, stream_load.runtime_client(server.url, None, 10.0, 8), server.url)


def test_ttft_itl_tpot_and_e2el_follow_the_delays_of_the_tokens_at_each_concurrency(stand_in) -> None:
    plan = stream_load.StreamPlan(concurrencies=(1, 4), requests=4, seconds=None, warmup=1)
    lines: list[str] = []
    levels = stream_load.measure(_send(stand_in), stream_load.bodies([PROMPT], {"max_new_tokens": 5}), plan,
                                 lines.append, progress_s=0.0)
    assert [(lv.concurrency, lv.requests, lv.errors, lv.output_tokens) for lv in levels] == [(1, 4, 0, 20),
                                                                                             (4, 4, 0, 20)]
    for lv in levels:
        assert FIRST_S <= lv.ttft_ms["p50"] / 1000 <= FIRST_S + 0.1
        assert lv.ttft_ms["p50"] <= lv.ttft_ms["p90"] <= lv.ttft_ms["p99"]
        assert 0.6 * STEP_S <= lv.itl_ms["p50"] / 1000 <= STEP_S + 0.04
        assert 0.6 * STEP_S <= lv.tpot_ms["p50"] / 1000 <= STEP_S + 0.04
        assert FIRST_S + 4 * STEP_S <= lv.e2el_ms["p50"] / 1000 <= FIRST_S + 4 * STEP_S + 0.15
        assert lv.output_tokens_per_s == pytest.approx(lv.output_tokens / lv.seconds)
        assert lv.requests_per_s == pytest.approx(lv.requests / lv.seconds)
    # Four streams at once: the level took about a quarter of the first's time for the same tokens.
    assert stand_in.most_in_flight == 4
    assert levels[1].output_tokens_per_s > 2.5 * levels[0].output_tokens_per_s
    assert len(stand_in.requests) == 1 + 8   # the warm-up request, untimed, then the levels'
    assert any(re.fullmatch(r"    concurrency   4: \d/4 requests done, 0 failed, \d s", line) for line in lines)
    assert any(line.startswith("    concurrency   1:") and line.endswith("errors 0/4") for line in lines)


def test_broken_errored_silent_and_refused_streams_are_counted_with_their_first_message(stand_in) -> None:
    plan = stream_load.StreamPlan(concurrencies=(2,), requests=4, seconds=None, warmup=0)
    broken = stream_load.measure(_send(stand_in), stream_load.bodies(["one two FAIL three"], {"max_new_tokens": 9}),
                                 plan, lambda line: None)[0]
    assert (broken.requests, broken.errors, broken.output_tokens) == (4, 4, 0)
    assert broken.first_error == ("the response stream of endpoint 'Gen-dev-writer' failed (ModelStreamError): the "
                                  "model failed after 2 tokens")
    errored = stream_load.measure(_send(stand_in), stream_load.bodies(["one ERROR"], {"max_new_tokens": 9}), plan,
                                  lambda line: None)[0]
    assert (errored.errors, errored.first_error) == (
        4, "the response stream of endpoint 'Gen-dev-writer' failed: CUDA out of memory")
    # A stream that ends without text has no first token: a failed request, not one with an undefined TTFT.
    silent = stream_load.measure(_send(stand_in), stream_load.bodies([""], {"max_new_tokens": 9}), plan,
                                 lambda line: None)[0]
    assert (silent.errors, silent.first_error) == (4, "the stream ended without any text_output")
    refused = stream_load.measure(_send(stand_in, "missing"), stream_load.bodies(["one"], {"max_new_tokens": 1}),
                                  plan, lambda line: None)[0]
    assert refused.errors == 4
    assert refused.first_error.startswith("endpoint 'missing' rejected the request (ValidationError, HTTP 400): "
                                          "Endpoint missing of account 123456789012 not found.")


def test_the_command_sends_the_prompts_in_turn_and_writes_the_table_json_and_plot(stand_in, tmp_path, capsys) -> None:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("alpha beta gamma delta\n\nred green blue\n")
    out, png = tmp_path / "out", tmp_path / "stream.png"
    code = tritonsm_main(["bench", "stream", "--endpoint-name", NAME, "--url", stand_in.url, "--concurrency", "1,2",
                          "--requests", "4", "--prompts", str(prompts), "--max-new-tokens", "3", "--parameter",
                          "temperature=0.5", "--parameter", "stop=x", "--warmup", "0", "--out", str(out),
                          "--plot", str(png)])
    printed = capsys.readouterr().out
    assert code == 0
    sent = [r["text_input"] for _, r in stand_in.requests]
    # In turn: in order at concurrency 1; at 2 the two users' requests reach the server in either order.
    assert sent[:4] == ["alpha beta gamma delta", "red green blue"] * 2
    assert sorted(sent[4:]) == ["alpha beta gamma delta"] * 2 + ["red green blue"] * 2
    assert stand_in.requests[0] == (NAME, {"text_input": "alpha beta gamma delta",
                                           "parameters": {"max_new_tokens": 3, "temperature": 0.5, "stop": "x"}})
    data = json.loads((out / "stream.json").read_text())
    assert [(lv["concurrency"], lv["requests"], lv["output_tokens"]) for lv in data["levels"]] == [(1, 4, 12),
                                                                                                  (2, 4, 12)]
    assert set(data["levels"][0]["ttft_ms"]) == {"p50", "p90", "p99", "mean"}
    assert data["endpoint"] == NAME and data["target"] == f"local runtime at {stand_in.url}"
    assert data["command"].startswith(f"tritonsm bench --spec ")
    assert "--concurrency 1,2" in data["command"] and "--parameter temperature=0.5" in data["command"]
    assert (out / "stream.md").read_text() in printed
    assert "| concurrency | requests | errors | req/s | output tok/s | tokens/request | TTFT p50 / p90 / p99 ms |" \
        in printed
    assert printed.startswith(f"bench stream: {NAME} (local runtime at {stand_in.url}); 2 prompt(s), "
                              "max_new_tokens 3; concurrency 1, 2, 4 requests each, 0 warm-up request(s)\n")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_run_whose_every_request_fails_prints_the_first_message_and_exits_1(stand_in, tmp_path, capsys) -> None:
    code = tritonsm_main(["bench", "stream", "--endpoint-name", "missing", "--url", stand_in.url, "--concurrency",
                          "1", "--requests", "2", "--text", "hello", "--out", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 1
    assert "Traceback" not in captured.out + captured.err
    assert "      first error: endpoint 'missing' rejected the request (ValidationError, HTTP 400): Endpoint " \
           "missing of account 123456789012 not found." in captured.out
    assert json.loads((tmp_path / "stream.json").read_text())["levels"][0]["ttft_ms"]["p50"] is None


def test_a_deployed_spec_endpoint_is_named_and_measured_for_a_duration(stand_in, tmp_path, monkeypatch) -> None:
    # boto3 sends a service's calls to AWS_ENDPOINT_URL_<SERVICE> when set: the deployed path, through the stand-in.
    for key, value in (("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", stand_in.url), ("AWS_ACCESS_KEY_ID", "test"),
                       ("AWS_SECRET_ACCESS_KEY", "test")):
        monkeypatch.setenv(key, value)
    spec = pathlib.Path(__file__).with_name("tiny_bench.yaml")
    code = tritonsm_main(["bench", "--spec", str(spec), "stream", "--endpoint", "tiny-sme", "--deployed",
                          "--concurrency", "2", "--duration", "0.4", "--text", "a b", "--warmup", "0",
                          "--out", str(tmp_path)])
    assert code == 0
    data = json.loads((tmp_path / "stream.json").read_text())
    assert {name for name, _ in stand_in.requests} == {"TinyBench-dev-tiny-sme"}
    assert data["target"] == "deployed, region us-east-1"
    # Two users for 0.4 s, each request 0.2 s: the requests in flight at the end finish and count.
    assert data["levels"][0]["requests"] >= 4 and data["levels"][0]["errors"] == 0
    assert (data["requests_per_level"], data["seconds_per_level"]) == (None, 0.4)
    assert "--requests" not in data["command"]


@pytest.mark.parametrize("flags, message", [
    (["--concurrency", "0,4"], "--concurrency '0,4': give rising positive integers separated by commas, e.g. "
                               "1,2,4,8,16"),
    (["--concurrency", "4,1"], "--concurrency '4,1': give rising positive integers separated by commas, e.g. "
                               "1,2,4,8,16"),
    (["--requests", "0"], "--requests 0: use 1 or more"),
    (["--requests", "8", "--concurrency", "1,16"],
     "--requests 8 is below --concurrency 16: that level would never have 16 requests in flight; use --requests 16 "
     "or more (a few times the concurrency gives steadier figures)"),
    (["--duration", "0"], "--duration 0: use a number of seconds in (0, 3600]"),
    (["--prompts", "/nonexistent/prompts.txt"],
     "--prompts /nonexistent/prompts.txt: cannot read it (No such file or directory)"),
    (["--max-new-tokens", "0"], "--max-new-tokens 0: use 1 or more"),
    (["--parameter", "temperature"], "--parameter 'temperature': write KEY=VALUE, e.g. --parameter temperature=0.7"),
    (["--parameter", "max_new_tokens=5"], "--parameter 'max_new_tokens=5': give it as --max-new-tokens N"),
    (["--warmup", "-1"], "--warmup -1: use 0 or more"),
    (["--timeout", "0"], "--timeout 0: use a positive number of seconds"),
    (["--deployed"], "bench stream needs one of --url URL (the local runtime of `tritonsm serve`) and --deployed (the "
                     "SageMaker endpoint, through boto3)"),
    (["--endpoint", "tiny-sme"], "bench stream needs one of --endpoint NAME (a spec endpoint) and --endpoint-name "
                                 "NAME (a SageMaker endpoint name)"),
    (["--url", "127.0.0.1:8080"], "--url '127.0.0.1:8080' must look like http://127.0.0.1:8080 (host and port of "
                                  "`tritonsm serve`)"),
])
def test_argument_mistakes_are_told_before_any_request(flags, message, capsys) -> None:
    base = {"--endpoint-name": NAME, "--url": "http://127.0.0.1:9"}
    for flag in flags:
        base.pop(flag, None)
    argv = ["bench", "stream", *[x for pair in base.items() for x in pair], *flags]
    assert tritonsm_main(argv) == 2
    assert capsys.readouterr().err == f"error: {message}\n"


def test_an_empty_prompts_file_is_told(tmp_path, capsys) -> None:
    empty = tmp_path / "prompts.txt"
    empty.write_text("\n  \n")
    assert tritonsm_main(["bench", "stream", "--endpoint-name", NAME, "--url", "http://127.0.0.1:9", "--prompts",
                          str(empty)]) == 2
    assert capsys.readouterr().err == (f"error: --prompts {empty}: no prompt in it (one prompt per line; blank lines "
                                       "are skipped)\n")


def test_the_measuring_code_loads_neither_torch_nor_matplotlib_until_a_plot_is_asked() -> None:
    check = ("import sys\nfrom tritonsm.cli import main\n"
             "main(['bench', 'stream', '--endpoint-name', 'x', '--url', 'http://127.0.0.1:9', '--requests', '0'])\n"
             "from tritonsm.benchmarking import stream_command, stream_load, stream_report\n"
             "print('torch' in sys.modules, 'matplotlib' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                          cwd=pathlib.Path(__file__).parents[2])
    assert done.stdout.strip() == "False False", done.stderr

"""The event-stream framing of InvokeEndpointWithResponseStream, decoded by botocore itself, and the streaming
pieces that need no server: reassembling Server-Sent Events from payload parts cut anywhere, the refusal of an
endpoint with nothing to stream, reading `decoupled` from a config, and `invoke --stream`'s flag mistakes."""
from __future__ import annotations

import json

import botocore.session
import pytest
from botocore.eventstream import EventStream, EventStreamBuffer
from botocore.exceptions import EventStreamError
from botocore.parsers import EventStreamJSONParser

from deployment_spec.sections.endpoint import EndpointKind
from local_endpoint.cli import invoke_main
from local_endpoint.client.invoke_stream import EventReader
from local_endpoint.runtime.event_stream import model_stream_error, payload_part
from local_endpoint.runtime.routes import RuntimeTarget, sse_error
from local_endpoint.runtime.streaming import event_error, open_stream
from local_endpoint.server.generate_route import GenerateRoute, is_decoupled

OPERATION = "InvokeEndpointWithResponseStream"
EVENTS = [b'data: {"text_output":"one"}\n\n', b'data: {"text_output":" two"}\n\n']


class RawStream:
    """What botocore's EventStream reads: the HTTP body in chunks."""

    def __init__(self, data: bytes, chunk: int) -> None:
        self._chunks = [data[i:i + chunk] for i in range(0, len(data), chunk)]

    def stream(self):
        return iter(self._chunks)

    def close(self) -> None:
        pass


def botocore_events(data: bytes, chunk: int) -> EventStream:
    """``data`` parsed as boto3 parses InvokeEndpointWithResponseStream's Body (its service model's shape)."""
    model = botocore.session.get_session().get_service_model("sagemaker-runtime")
    shape = model.operation_model(OPERATION).output_shape.members["Body"]
    return EventStream(RawStream(data, chunk), shape, EventStreamJSONParser(), OPERATION)


def test_a_payload_part_decodes_with_botocores_buffer() -> None:
    buffer = EventStreamBuffer()
    buffer.add_data(payload_part(EVENTS[0]))
    (message,) = list(buffer)
    assert message.to_response_dict() == {
        "status_code": 200, "body": EVENTS[0],
        "headers": {":event-type": "PayloadPart", ":content-type": "application/octet-stream", ":message-type": "event"}}


@pytest.mark.parametrize("chunk", [1, 7, 1 << 16])
def test_boto3_reads_payload_parts_then_raises_the_model_stream_error(chunk: int) -> None:
    data = b"".join(map(payload_part, EVENTS)) + model_stream_error("the model stopped")
    events = botocore_events(data, chunk)
    parts = []
    with pytest.raises(EventStreamError) as caught:
        for event in events:
            parts.append(event)
    assert parts == [{"PayloadPart": {"Bytes": EVENTS[0]}}, {"PayloadPart": {"Bytes": EVENTS[1]}}]
    assert caught.value.response == {"Error": {"Code": "ModelStreamError", "Message": "the model stopped"}}
    assert str(caught.value) == ("An error occurred (ModelStreamError) when calling the InvokeEndpointWithResponseStream "
                                 "operation: the model stopped")


def test_the_model_stream_errors_payload_has_the_shapes_members() -> None:
    buffer = EventStreamBuffer()
    buffer.add_data(model_stream_error("late", "ModelInvocationTimeExceeded"))
    (message,) = list(buffer)
    assert message.headers == {":exception-type": "ModelStreamError", ":content-type": "application/json",
                               ":message-type": "exception"}
    assert json.loads(message.payload) == {"Message": "late", "ErrorCode": "ModelInvocationTimeExceeded"}


def test_events_are_put_together_from_parts_cut_anywhere() -> None:
    data = b"".join(EVENTS) + b'data: {"error":"boom"}\n\n'
    for cut in range(1, len(data)):
        reader = EventReader()
        assert reader.feed(data[:cut]) + reader.feed(data[cut:]) == [
            {"text_output": "one"}, {"text_output": " two"}, {"error": "boom"}]


def test_an_error_event_is_told_from_an_answer() -> None:
    assert (event_error(b'data: {"error":"boom"}'), event_error(EVENTS[0]), event_error(b"data: [1]")) == (
        "boom", None, None)
    assert sse_error(b'data: {"error":"bad"}\n\n') == b'{"error":"bad"}'


@pytest.mark.parametrize(("kind", "generate", "why"), [
    (EndpointKind.SINGLE_MODEL, None,
     "its model does not declare model_transaction_policy { decoupled: true } in its config.pbtxt"),
    (EndpointKind.MULTI_MODEL, None, "it is a multi-model endpoint"),
])
def test_an_endpoint_with_nothing_to_stream_is_a_validation_error(kind, generate, why) -> None:
    target = RuntimeTarget("Tests-dev-e", kind, 1, target_models=("m.tar.gz",), generate=generate)
    headers = {"X-Amzn-SageMaker-Target-Model": "m.tar.gz"} if kind is EndpointKind.MULTI_MODEL else {}
    reply = open_stream({"Tests-dev-e": target}, "Tests-dev-e", headers, b"{}", 5.0)
    assert (reply.status, reply.headers["x-amzn-ErrorType"], json.loads(reply.body)) == (400, "ValidationError", {
        "ErrorCode": "VALIDATION_ERROR",
        "Message": "Endpoint Tests-dev-e does not stream responses: InvokeEndpointWithResponseStream streams here "
                   "from a single-model endpoint or an inference component whose model is decoupled (Triton's "
                   "generate-stream route), and "
                   f"{why}. Call InvokeEndpoint for the whole answer"})


def test_decoupled_is_read_from_the_config() -> None:
    config = 'backend: "python"\nmodel_transaction_policy { decoupled: true }\n'
    assert [is_decoupled(config), is_decoupled('backend: "python"'), is_decoupled(None)] == [True, False, False]
    assert GenerateRoute(1, "hf generate").path == "/v2/models/hf%20generate/generate_stream"


NEITHER = ('--stream sends --text as the generate JSON {"text_input": TEXT, "parameters": {...}} of a decoupled model, '
           'or --audio FILE as {"audio": <its bytes, base64>, "parameters": {...}} of a speech model; give one of them '
           "(and --parameter KEY=VALUE for its parameters)")


@pytest.mark.parametrize(("argv", "message"), [
    (["--input", "in.json"], NEITHER),
    (["--text", "hi", "--binary", "--output", "o.json"],
     "--stream sends only --text or --audio, and --parameter; leave out --binary, --output"),
    (["--audio", "a.wav", "b.wav"], "--stream --audio takes one file (one clip per request); got 2"),
])
def test_invoke_stream_flag_mistakes(argv: list[str], message: str, capsys) -> None:
    assert invoke_main(["--url", "http://127.0.0.1:9", "--stream", *argv]) == 2
    assert capsys.readouterr().err.endswith(f"tritonsm invoke: error: {message}\n")


def test_invoke_stream_tells_an_unreadable_clip(tmp_path, capsys) -> None:
    missing = tmp_path / "missing.wav"
    assert invoke_main(["--url", "http://127.0.0.1:9", "--stream", "--audio", str(missing)]) == 1
    assert capsys.readouterr().err == f"error: --audio {missing}: cannot be read (No such file or directory); pass an audio file\n"


def test_an_inference_component_that_answers_whole_is_refused_a_stream_naming_the_ones_that_stream() -> None:
    target = RuntimeTarget("Tests-dev-shared", EndpointKind.INFERENCE_COMPONENTS, 1,
                           components=("Tests-dev-shared-writer", "Tests-dev-shared-adder"),
                           component_routes={"Tests-dev-shared-writer": GenerateRoute(2, "writer")})
    headers = {"X-Amzn-SageMaker-Inference-Component": "Tests-dev-shared-adder"}
    reply = open_stream({"Tests-dev-shared": target}, "Tests-dev-shared", headers, b"{}", 5.0)
    assert (reply.status, json.loads(reply.body)["Message"]) == (400, (
        "Inference component Tests-dev-shared-adder of endpoint Tests-dev-shared does not stream responses: its model "
        "does not declare model_transaction_policy { decoupled: true } in its config.pbtxt. Call InvokeEndpoint for "
        "the whole answer, or name a streaming component (Tests-dev-shared-writer)"))
    writer = target.stream_route({"x-amzn-sagemaker-inference-component": "Tests-dev-shared-writer"})
    assert writer == GenerateRoute(2, "writer")


class _EventServer:
    """A generate-stream route answering two events that name it (``text_output``), on a port of its own."""

    def __init__(self, said: str) -> None:
        import http.server
        import threading

        events = b"".join(f'data: {{"text_output":"{said} {i}"}}\n\n'.encode() for i in range(2))

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(events)))
                self.end_headers()
                self.wfile.write(events)

            def log_message(self, *_: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_stream_is_answered_by_the_variant_the_weights_or_target_variant_pick() -> None:
    # An endpoint with production variants streams from the variant chosen as InvokeEndpoint's is (weights, or the
    # TargetVariant header); a variant whose model answers whole, or an unknown one, is refused with the reason.
    from local_endpoint.runtime.routes import INVOKED_VARIANT, TARGET_VARIANT
    from local_endpoint.variants.traffic import Route, Traffic

    a, b = _EventServer("from A"), _EventServer("from B")
    try:
        routes = [Route("A", a.port, 1.0, "a.log", GenerateRoute(a.port, "writer")),
                  Route("B", b.port, 0.0, "b.log", GenerateRoute(b.port, "writer")), Route("C", 1, 0.0, "c.log")]
        target = RuntimeTarget("Tests-dev-e", EndpointKind.SINGLE_MODEL, a.port, traffic=Traffic("Tests-dev-e", routes))
        assert target.streams
        targets = {"Tests-dev-e": target}
        for headers, variant in (({}, "A"), ({TARGET_VARIANT: "B"}, "B")):
            stream = open_stream(targets, "Tests-dev-e", headers, b"{}", 5.0)
            assert stream.headers[INVOKED_VARIANT] == variant
            buffer = EventStreamBuffer()
            for message in stream.messages():
                buffer.add_data(message)
            stream.close()
            assert [json.loads(m.payload.decode().removeprefix("data: "))["text_output"] for m in buffer] == [
                f"from {variant} 0", f"from {variant} 1"]
        reply = open_stream(targets, "Tests-dev-e", {TARGET_VARIANT: "C"}, b"{}", 5.0)
        assert (reply.status, json.loads(reply.body)["Message"]) == (400, (
            "Endpoint Tests-dev-e does not stream responses: InvokeEndpointWithResponseStream streams here from a "
            "single-model endpoint or an inference component whose model is decoupled (Triton's generate-stream "
            "route), and the model of its variant C does not declare model_transaction_policy { decoupled: true } "
            "in its config.pbtxt. Call InvokeEndpoint for the whole answer"))
        unknown = open_stream(targets, "Tests-dev-e", {TARGET_VARIANT: "D"}, b"{}", 5.0)
        assert unknown.status == 400 and "D" in json.loads(unknown.body)["Message"]
    finally:
        a.close()
        b.close()

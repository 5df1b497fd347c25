"""Triton's metrics drawn on the dashboards: the custom widgets and their function in the templates, and the
function's handler run against a local HTTP server answering as CloudWatch's Prometheus-compatible API does
(its requests checked for the form fields and a SigV4 signature for CloudWatch; no AWS)."""
import http.server
import importlib.util
import json
import threading
import urllib.parse

import pytest
from aws_cdk.assertions import Template
import botocore.credentials
import botocore.session
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

from synth_helpers import ROOT
from user_app import model_archive, user_stack
from triton_constructs import (Container, ModelArchive, ModelRepositories, Observability, PropsError,
                               TritonComponentsEndpoint, TritonSageMakerEndpoint)

_spec = importlib.util.spec_from_file_location("promql_graph", ROOT / "triton_constructs" / "handlers" / "promql_graph.py")
graph = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(graph)

KEY, SECRET, REGION = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "eu-west-1"
START_MS, END_MS = 1_764_000_000_000, 1_764_003_600_000   # one hour


def _models(tmp_path, *names: str) -> ModelRepositories:
    return ModelRepositories.from_archives([ModelArchive.from_file(model_archive(tmp_path, n)) for n in names])


def _dashboard_text(dashboard: dict) -> str:
    return "".join(part if isinstance(part, str) else "<token>" for part in dashboard["Properties"]["DashboardBody"][
        "Fn::Join"][1])


def _custom_widgets(text: str) -> list[dict]:
    widgets = json.loads(text.replace('"<token>"', '"T"').replace("<token>", "T"))["widgets"]
    return [w for w in widgets if w["type"] == "custom"]


def test_graphs_draw_each_query_on_the_single_model_dashboard(tmp_path):
    stack = user_stack()
    single = TritonSageMakerEndpoint(stack, "Single", models=_models(tmp_path, "resnet50"), instance_type="ml.g5.xlarge",
                                     endpoint_name="single", observability=Observability(graphs=True))
    template = Template.from_stack(stack)
    [dashboard] = template.find_resources("AWS::CloudWatch::Dashboard").values()
    widgets = _custom_widgets(_dashboard_text(dashboard))
    assert {w["properties"]["title"]: w["properties"]["params"]["query"] for w in widgets} == {
        "Triton: queue ms per request": single.promql_queue_ms(),
        "Triton: compute ms per request": single.promql_compute_ms(),
        "Triton: average batch formed": single.promql_average_batch(),
        "Triton: pending requests": single.promql_pending_requests()}
    assert "Query Studio)" not in _dashboard_text(dashboard)  # drawn, not listed
    function_id = template.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": "promql_graph.handler"}})
    assert len(function_id) == 1
    statements = [s for p in template.find_resources("AWS::IAM::Policy").values()
                  for s in p["Properties"]["PolicyDocument"]["Statement"]]
    assert {"Action": ["cloudwatch:GetMetricData", "cloudwatch:ListMetrics"], "Effect": "Allow",
            "Resource": "*"} in statements


def test_one_function_draws_every_component_dashboard(tmp_path):
    stack = user_stack()
    shared = TritonComponentsEndpoint(stack, "Shared", models=_models(tmp_path, "bert", "resnet50"),
                                      instance_type="ml.g5.12xlarge", endpoint_name="shared",
                                      observability=Observability(graphs=True))
    template = Template.from_stack(stack)
    assert len(template.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": "promql_graph.handler"}})) == 1
    for model in ("bert", "resnet50"):
        [dashboard] = [d for d in template.find_resources("AWS::CloudWatch::Dashboard").values()
                       if d["Properties"]["DashboardName"] == shared.component_name(model)]
        queries = [w["properties"]["params"]["query"] for w in _custom_widgets(_dashboard_text(dashboard))]
        assert queries[0] == shared.promql_queue_ms(model) and len(queries) == 4


def test_without_graphs_the_queries_stay_listed_and_no_function_is_added(tmp_path):
    stack = user_stack()
    TritonSageMakerEndpoint(stack, "Single", models=_models(tmp_path, "resnet50"), instance_type="ml.g5.xlarge")
    template = Template.from_stack(stack)
    [dashboard] = template.find_resources("AWS::CloudWatch::Dashboard").values()
    assert _custom_widgets(_dashboard_text(dashboard)) == []
    assert not template.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": "promql_graph.handler"}})


@pytest.mark.parametrize(("container", "observability", "message"), [
    (Container(), Observability(graphs=True, detailed=False),
     "observability.graphs: got true with detailed: false; allowed: graphs with detailed: true (SageMaker publishes "
     "Triton's metrics only with detailed observability); fix: set detailed: true or remove graphs"),
    (Container(metrics=False), Observability(graphs=True),
     "observability.graphs: got true with container.metrics: false; allowed: graphs with container.metrics: true "
     "(Triton's metrics are what they draw); fix: set container.metrics: true or remove graphs"),
])
@pytest.mark.parametrize("kind", ["TritonSageMakerEndpoint", "TritonComponentsEndpoint"])
def test_graphs_without_the_metrics_are_refused(tmp_path, kind, container, observability, message):
    construct = {"TritonSageMakerEndpoint": TritonSageMakerEndpoint, "TritonComponentsEndpoint": TritonComponentsEndpoint}
    with pytest.raises(PropsError) as caught:
        construct[kind](user_stack(), "Ep", models=_models(tmp_path, "resnet50"), instance_type="ml.g5.12xlarge",
                        container=container, observability=observability)
    assert str(caught.value) == f"{kind} UserApp/Ep: 1 problem\n  - {message}"


class CloudWatchPromQL(http.server.BaseHTTPRequestHandler):
    """Answers POST /api/v1/query_range with the server's ``answer`` (status, JSON) and keeps each request."""

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.requests.append((self.path, dict(self.headers.items()), body))
        status, answer = self.server.answer
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture()
def cloudwatch(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.setenv("AWS_REGION", REGION)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), CloudWatchPromQL)
    server.requests, server.answer = [], (200, {"status": "success", "data": {"resultType": "matrix", "result": []}})
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _call(server, query="sum by (model) (x)", width=600, **widget):
    event = {"query": query, "unit": "ms", "widgetContext": {
        "timeRange": {"mode": "relative", "start": START_MS, "end": END_MS}, "width": width, "height": 300,
        "timezone": {"offsetInMinutes": 60}, **widget}}
    return graph.handler(event, None, endpoint=f"http://127.0.0.1:{server.server_port}")


def _series(model, values):
    return {"metric": {"model": model}, "values": [[START_MS / 1000 + 60 * i, v] for i, v in values]}


def test_the_handler_sends_a_signed_range_query_for_the_dashboards_time_range(cloudwatch):
    _call(cloudwatch, query='{"nv_inference_count"}', width=600)
    [(path, headers, body)] = cloudwatch.requests
    assert path == "/api/v1/query_range"
    # 3600 s over 300 points (one per 2 px of 600) is 12 s: raised to the one-minute floor.
    assert urllib.parse.parse_qs(body.decode()) == {"query": ['{"nv_inference_count"}'], "start": ["1764000000.000"],
                                                    "end": ["1764003600.000"], "step": ["60"]}
    # The signature is CloudWatch's (botocore signs it with the endpoint prefix, having no signingName) over
    # exactly what arrived.
    metadata = botocore.session.get_session().get_service_model("cloudwatch").metadata
    signing_name = metadata.get("signingName", metadata["endpointPrefix"])
    signed = AWSRequest(method="POST", url=f"http://127.0.0.1:{cloudwatch.server_port}{path}", data=body,
                        headers={"Content-Type": headers["Content-Type"], "X-Amz-Date": headers["X-Amz-Date"]})
    signed.context["timestamp"] = headers["X-Amz-Date"]
    auth = SigV4Auth(botocore.credentials.Credentials(KEY, SECRET), signing_name, REGION)
    expected = auth.signature(auth.string_to_sign(signed, auth.canonical_request(signed)), signed)
    assert headers["Authorization"] == (
        f"AWS4-HMAC-SHA256 Credential={KEY}/{headers['X-Amz-Date'][:8]}/{REGION}/{signing_name}/aws4_request, "
        f"SignedHeaders=content-type;host;x-amz-date, Signature={expected}")


def test_a_zoomed_dashboard_queries_the_zoomed_range(cloudwatch):
    _call(cloudwatch, timeRange={"start": START_MS, "end": END_MS,
                                 "zoom": {"start": START_MS + 600_000, "end": START_MS + 1_200_000}})
    form = urllib.parse.parse_qs(cloudwatch.requests[0][2].decode())
    assert (form["start"], form["end"]) == (["1764000600.000"], ["1764001200.000"])


def test_the_handler_draws_a_line_per_model_broken_at_gaps_and_nan(cloudwatch):
    cloudwatch.answer = (200, {"status": "success", "data": {"resultType": "matrix", "result": [
        _series("bert", [(0, "2"), (1, "4"), (2, "NaN"), (3, "3"), (4, "3.5")]),
        _series("resnet50", [(0, "1"), (1, "1.5"), (5, "8")])]}})
    html = _call(cloudwatch, query='a < b & "c"')
    # bert: NaN splits it in two lines; resnet50: the missing minutes 2-4 split it into a line and a point.
    assert html.count("<polyline") == 3 and html.count("<circle") == 1
    assert "bert (last 3.5)" in html and "resnet50 (last 8)" in html
    # The y axis runs to 10 (8 rounded up), labelled in the widget's unit; times in the dashboard's time zone.
    assert ">10</text>" in html and ">ms</text>" in html and ">17:00</text>" in html and ">18:00</text>" in html  # 16:00 UTC + 60 min
    assert "<code>a &lt; b &amp; &quot;c&quot;</code>" in html


@pytest.mark.parametrize(("answer", "message"), [
    ((200, {"status": "success", "data": {"resultType": "matrix", "result": []}}),
     "<p>No series in this time range: the endpoint had no requests, or SageMaker published none of Triton&#x27;s "
     "metrics (detailed observability on, and SAGEMAKER_TRITON_ALLOW_METRICS=true).</p>"),
    ((400, {"status": "error", "errorType": "bad_data", "error": "1:5: parse error: unexpected character"}),
     "<p>CloudWatch answered HTTP 400: 1:5: parse error: unexpected character</p>"),
    ((403, {"message": "User is not authorized to perform: cloudwatch:GetMetricData"}),
     "<p>CloudWatch answered HTTP 403: {&quot;message&quot;: &quot;User is not authorized to perform: "
     "cloudwatch:GetMetricData&quot;}</p>"),
])
def test_what_the_widget_says_when_there_is_nothing_to_draw(cloudwatch, answer, message):
    cloudwatch.answer = answer
    assert _call(cloudwatch).startswith(message)


def test_an_unreachable_api_is_said_not_raised(cloudwatch):
    port = cloudwatch.server_port
    cloudwatch.shutdown()
    cloudwatch.server_close()
    event = {"query": "q", "widgetContext": {"timeRange": {"start": START_MS, "end": END_MS}}}
    said = graph.handler(event, None, endpoint=f"http://127.0.0.1:{port}")
    assert said.startswith("<p>The query did not reach CloudWatch: [Errno ") and "] Connection refused</p>" in said


def test_a_widget_without_a_query_says_which_parameter_is_missing(cloudwatch):
    assert _call(cloudwatch, query="") == "<p>This widget needs a PromQL query: set params.query on the widget.</p>"
    assert cloudwatch.requests == []


def test_no_credentials_is_said_not_raised(cloudwatch, monkeypatch, tmp_path):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    assert _call(cloudwatch).startswith(
        "<p>The query did not reach CloudWatch: the function found no AWS credentials to sign the query with</p>")


@pytest.mark.parametrize(("value", "ceiling"), [(0, 1), (0.07, 0.1), (1.2, 2), (2.2, 2.5), (3, 5), (8, 10), (10, 10),
                                                (7200, 10000)])
def test_the_y_axis_rounds_up_to_a_readable_maximum(value, ceiling):
    assert graph.nice_ceiling(value) == pytest.approx(ceiling)

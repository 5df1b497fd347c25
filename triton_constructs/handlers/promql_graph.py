"""CloudWatch dashboard custom widget: draws one PromQL query as a line graph (HTML with inline SVG).

Runs in AWS Lambda (Python runtime, botocore included); synth never imports it.

CloudWatch dashboards have no widget that graphs PromQL (aws-cdk-lib's ``aws_cloudwatch`` has ``PromQLAlarm``
only; the dashboard body reference documents no PromQL metric). A custom widget is a Lambda function the
dashboard calls with the widget's parameters and a ``widgetContext`` (time range in epoch ms, widget size in
pixels) and whose returned HTML it shows; JavaScript is stripped, SVG is kept (CloudWatch user guide,
add_custom_widget_dashboard_about.html). The data come from CloudWatch's Prometheus-compatible
``QueryMetrics`` API: ``POST https://monitoring.<region>.amazonaws.com/api/v1/query_range`` with
form fields ``query``, ``start``, ``end``, ``step``, signed with Signature Version 4, needing
``cloudwatch:GetMetricData`` and ``cloudwatch:ListMetrics`` (CloudWatch-PromQL-API-QueryMetrics.html; the
``cloudwatch:QueryMetrics`` SageMaker's monitoring-detailed-observability-promql.html also lists is no IAM action:
``promql_graphs.QUERY_ACTIONS``);
its answer is Prometheus's ``{"status", "data": {"resultType": "matrix", "result": [...]}}``.
"""
from __future__ import annotations

import datetime
import html
import json
import math
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Optional, Sequence

# CloudWatch's SigV4 name: botocore's cloudwatch model has no signingName, so its endpointPrefix signs.
SIGNING_NAME = "monitoring"
MAX_POINTS = 500             # points per series asked for: about one per 2 px of a wide widget
MIN_STEP_S = 60              # SageMaker publishes at most every 10 s; a minute keeps queries cheap
TIMEOUT_S = 20.0
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
NO_DATA = ("No series in this time range: the endpoint had no requests, or SageMaker published none of "
           "Triton's metrics (detailed observability on, and SAGEMAKER_TRITON_ALLOW_METRICS=true).")

Series = tuple[str, list[tuple[float, float]]]


def handler(event: dict[str, Any], context: Any, endpoint: Optional[str] = None) -> str:
    """The widget's HTML for ``event["query"]`` over the dashboard's time range; errors become a message.
    ``endpoint``: another base URL than the region's CloudWatch (tests)."""
    query = event.get("query")
    if not isinstance(query, str) or not query.strip():
        return _message("This widget needs a PromQL query: set params.query on the widget.", "")
    widget = event.get("widgetContext") or {}
    start_s, end_s = _time_range(widget)
    width, height = int(widget.get("width") or 600), int(widget.get("height") or 300)
    step_s = max(MIN_STEP_S, math.ceil((end_s - start_s) / min(MAX_POINTS, max(10, width // 2))))
    region = os.environ.get("AWS_REGION", "us-east-1")
    url = (endpoint or _endpoint(region)) + "/api/v1/query_range"
    form = urllib.parse.urlencode({"query": query, "start": f"{start_s:.3f}", "end": f"{end_s:.3f}",
                                   "step": str(step_s)}).encode()
    status, body = _signed_post(region, url, form)
    answer = _json(body)
    if status != 200 or answer.get("status") != "success":
        reason = answer.get("error") or body.decode(errors="replace")[:500]
        said = f"CloudWatch answered HTTP {status}" if status else "The query did not reach CloudWatch"
        return _message(f"{said}: {reason}", query)
    series = parse_matrix(answer.get("data", {}).get("result", []))
    if not series:
        return _message(NO_DATA, query)
    unit = str(event.get("unit") or "")
    offset_min = int((widget.get("timezone") or {}).get("offsetInMinutes") or 0)
    return render(series, width=width, height=height, start_s=start_s, end_s=end_s, step_s=step_s, unit=unit,
                  offset_min=offset_min) + _footer(query, step_s)


def parse_matrix(result: Sequence[dict[str, Any]]) -> list[Series]:
    """Prometheus's range-vector result as (legend label, [(epoch s, value)]); NaN and infinite points dropped
    (a ratio with no requests in the window is NaN: a gap, not zero)."""
    out: list[Series] = []
    for item in result:
        labels = {k: v for k, v in (item.get("metric") or {}).items() if k != "__name__"}
        label = labels.get("model") or ", ".join(f"{k}={v}" for k, v in sorted(labels.items())) or "value"
        points = [(float(t), float(v)) for t, v in item.get("values") or []]
        out.append((label, [(t, v) for t, v in points if math.isfinite(v)]))
    return [s for s in out if s[1]]


def render(series: Sequence[Series], *, width: int, height: int, start_s: float, end_s: float, step_s: int,
           unit: str = "", offset_min: int = 0) -> str:
    """A line graph: y from 0 to a rounded maximum with four grid lines, x over the time range, a line per
    series broken where points are missing, and a legend."""
    left, right, top, bottom = 56, 12, 8, 22
    legend_h = 18 * math.ceil(len(series) / 3)
    plot_w = max(50, width - left - right)
    plot_h = max(40, height - top - bottom - legend_h - 40)  # 40: the footer with the query
    y_max = nice_ceiling(max(v for _, points in series for _, v in points))
    span = max(end_s - start_s, 1.0)

    def x(t: float) -> float:
        return left + (t - start_s) / span * plot_w

    def y(v: float) -> float:
        return top + plot_h - v / y_max * plot_h

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{plot_w + left + right}" '
             f'height="{plot_h + top + bottom}" font-family="sans-serif" font-size="11">']
    for i in range(5):
        value = y_max * i / 4
        parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y(value):.1f}" y2="{y(value):.1f}" '
                     'stroke="#ddd"/>')
        parts.append(f'<text x="{left - 4}" y="{y(value) + 4:.1f}" text-anchor="end">{_number(value)}</text>')
    for t, anchor in ((start_s, "start"), ((start_s + end_s) / 2, "middle"), (end_s, "end")):
        parts.append(f'<text x="{x(t):.1f}" y="{top + plot_h + 16}" text-anchor="{anchor}">'
                     f'{_clock(t, offset_min, span)}</text>')
    if unit:
        parts.append(f'<text x="4" y="{top + 10}">{html.escape(unit)}</text>')
    for n, (label, points) in enumerate(series):
        colour = COLOURS[n % len(COLOURS)]
        for run in _runs(points, step_s):
            coords = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in run)
            if len(run) == 1:
                parts.append(f'<circle cx="{x(run[0][0]):.1f}" cy="{y(run[0][1]):.1f}" r="2" fill="{colour}"/>')
            else:
                parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{coords}"/>')
    parts.append("</svg>")
    legend = "".join(
        f'<span style="margin-right:14px"><span style="color:{COLOURS[n % len(COLOURS)]}">&#9644;</span> '
        f'{html.escape(label)} (last {_number(points[-1][1])})</span>' for n, (label, points) in enumerate(series))
    return "".join(parts) + f'<div style="font-size:11px">{legend}</div>'


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 x 10^k at or above ``value`` (1 for zero or less): round grid labels."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return float(next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= value))


def _runs(points: list[tuple[float, float]], step_s: int) -> list[list[tuple[float, float]]]:
    runs: list[list[tuple[float, float]]] = [[points[0]]]
    for previous, point in zip(points, points[1:]):
        if point[0] - previous[0] > 1.5 * step_s:
            runs.append([])
        runs[-1].append(point)
    return runs


def _time_range(widget: dict[str, Any]) -> tuple[float, float]:
    """The dashboard's time range in epoch seconds: its zoom when the user zoomed, else the whole range."""
    time_range = widget.get("timeRange") or {}
    chosen = time_range.get("zoom") or time_range
    end_ms = chosen.get("end") or datetime.datetime.now(datetime.timezone.utc).timestamp() * 1000
    start_ms = chosen.get("start") or end_ms - 3 * 3600 * 1000
    return float(start_ms) / 1000, float(end_ms) / 1000


def _clock(t: float, offset_min: int, span: float) -> str:
    moment = datetime.datetime.fromtimestamp(t, datetime.timezone.utc) + datetime.timedelta(minutes=offset_min)
    return moment.strftime("%m-%d %H:%M" if span > 86400 else "%H:%M")


def _number(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def _footer(query: str, step_s: int) -> str:
    return (f'<div style="font-size:10px;color:#777">PromQL, one point per {step_s} s (CloudWatch Query Studio '
            f'takes the same query): <code>{html.escape(query)}</code></div>')


def _message(text: str, query: str) -> str:
    return f"<p>{html.escape(text)}</p>" + (_footer(query, MIN_STEP_S) if query else "")


def _json(body: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(body)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _endpoint(region: str) -> str:
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"https://monitoring.{region}.{suffix}"


def _signed_post(region: str, url: str, body: bytes) -> tuple[int, bytes]:
    """POST a form signed with the function's credentials (SigV4, CloudWatch's signing name): (HTTP status,
    body), status 0 when the request never got an answer."""
    import botocore.session
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    credentials = botocore.session.get_session().get_credentials()
    if credentials is None:
        return 0, b"the function found no AWS credentials to sign the query with"
    request = AWSRequest(method="POST", url=url, data=body,
                         headers={"Content-Type": "application/x-www-form-urlencoded"})
    SigV4Auth(credentials, SIGNING_NAME, region).add_auth(request)
    prepared = request.prepare()
    sent = urllib.request.Request(prepared.url, data=body, headers=dict(prepared.headers.items()), method="POST")
    try:
        with urllib.request.urlopen(sent, timeout=TIMEOUT_S) as reply:  # noqa: S310 (https URL built above)
            return reply.status, reply.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except (urllib.error.URLError, TimeoutError) as error:
        return 0, str(getattr(error, "reason", error)).encode()

"""`tritonsm bench runtime | load | drain | stream | recommender`: the numbers the reference articles measure by hand.

Only argparse here; each subcommand runs from tritonsm.benchmarking.runners, which imports its heavy
code (torch, onnxruntime, the Triton server, botocore) when it runs.
"""
from __future__ import annotations

import argparse
import pathlib
from typing import Callable

from tritonsm.commands.options import add_request_flags

DEFAULT_OUT = pathlib.Path("bench-results")


def register(add: Callable[..., argparse.ArgumentParser]) -> None:
    parser = add("bench", "benchmark models and endpoints: runtime comparison, local load test, asynchronous "
                          "drain rate, generation (streamed text) at rising concurrency, Inference Recommender "
                          "job request", _dispatch)
    sub = parser.add_subparsers(dest="bench_command", metavar="BENCH", required=True)
    _register_runtime(sub)
    _register_load(sub)
    _register_drain(sub)
    _register_stream(sub)
    _register_recommender(sub)


def _subcommand(sub, name: str, help_: str, run: Callable[[argparse.Namespace], int]) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help=help_, description=help_)
    # Also accepted after the subcommand; SUPPRESS keeps the value given before it.
    p.add_argument("--spec", default=argparse.SUPPRESS, help="deployment spec (default: the bench command's)")
    p.set_defaults(bench_run=run)
    return p


def _register_runtime(sub) -> None:
    p = _subcommand(sub, "runtime", "eager PyTorch vs ONNX Runtime (fp32 optimized, int8 if asked) on this CPU, "
                                    "side by side: median/p50/p99 latency, throughput, peak RSS; JSON, markdown, PNG",
                    _run("run_runtime"))
    p.add_argument("models", nargs="*", metavar="MODEL",
                   help="spec models to compare (default: every model built from a built-in exportable recipe)")
    p.add_argument("--int8", action="append", default=[], metavar="MODEL",
                   help="also measure int8 dynamic quantization for MODEL ('all' for every model); models with "
                        "precision: int8 in the spec always get it")
    p.add_argument("--batch-sizes", default="1,8,32", help="comma-separated; sizes above the model's "
                                                           "max_batch_size are skipped (default: 1,8,32)")
    p.add_argument("--repeats", type=int, default=5, help="timed repeats per engine and batch size, >= 5")
    p.add_argument("--warmup", type=int, default=3, help="untimed calls per engine and batch size first")
    p.add_argument("--threads", type=int, default=None, help="intra-op threads for every engine "
                                                             "(default: the number of logical cores)")
    p.add_argument("--block-seconds", type=float, default=1.0, help="about how long one timed block lasts")
    p.add_argument("--unoptimized", action="store_true", help="also time the ONNX file as exported")
    p.add_argument("--build-ort", action="store_true",
                   help="also time the shipped graph in this machine's ONNX Runtime (every other ONNX Runtime "
                        "engine runs the release of the spec's triton_version)")
    _output_flags(p, "runtime", "runtime.json, runtime.md, runtime.png", scratch="the ONNX files")


def _register_load(sub) -> None:
    p = _subcommand(sub, "load", "load-test the local endpoint (real Triton server) in phases of rising concurrency, "
                                 "comparing dynamic batching and instance counts; --record writes capacity.json",
                    _run("run_load"))
    p.add_argument("--configs", default="pt-base,pt-db,pt-ig,pt-ig-db",
                   help="configurations to compare (default: all four, as in the tuned BERT-large scenario)")
    p.add_argument("--concurrency", default="1,2,4,8,16,32", help="users per phase, rising (default: 1,2,4,8,16,32)")
    p.add_argument("--phase-seconds", type=float, default=10.0, help="duration of each phase (default: 10)")
    p.add_argument("--repeats", type=int, default=3,
                   help="interleaved rounds per concurrency: the configurations take turns, in a rotated order "
                        "(default: 3; figures are medians over the rounds)")
    p.add_argument("--max-requests", type=int, default=5000, help="request cap per phase (default: 5000)")
    p.add_argument("--latency-threshold-ms", type=float, default=None,
                   help="stop after a phase whose p99 is above this (default: the recorded endpoint's "
                        "alarms.latency_sla_ms, else 500)")
    p.add_argument("--max-error-rate", type=float, default=0.01, help="stop above this error rate (default: 0.01)")
    p.add_argument("--record", metavar="ENDPOINT", help="write the best configuration's max RPS within the "
                                                        "threshold into the capacity file for this spec endpoint")
    p.add_argument("--record-config", help="record this configuration instead of the best one")
    p.add_argument("--endpoint", help="load-test this single-model endpoint's own built model (tritonsm build) "
                                      "instead of the synthetic configurations; --record then records it")
    p.add_argument("--deployed", action="store_true",
                   help="with --endpoint: load-test the deployed endpoint <project>-<environment>-<endpoint> through "
                        "boto3 InvokeEndpoint (its best req/s per instance is what --record writes)")
    p.add_argument("--region", help="with --deployed: the endpoint's region (default: the environment's)")
    p.add_argument("--component", metavar="MODEL",
                   help="with --deployed on an endpoint of inference components: the model whose component is "
                        "load-tested (default: the first); its req/s are divided by its copies")
    add_request_flags(p, when="with --endpoint: ")
    _output_flags(p, "load", "load.json and load.md", scratch="the model archives")


def _register_drain(sub) -> None:
    p = _subcommand(sub, "drain", "how fast one instance empties an asynchronous endpoint's full queue (real Triton "
                                  "server, local queue and S3), per concurrency; --record writes capacity.json's "
                                  "drain, which sets the backlog target", _run("run_drain"))
    p.add_argument("--endpoint", required=True, help="an asynchronous single-model endpoint of the spec, built")
    p.add_argument("--concurrency", default=None,
                   help="MaxConcurrentInvocationsPerInstance values to try, comma-separated (default: 1, 2, 4, 8 and "
                        "the spec's own)")
    p.add_argument("--requests", type=int, default=100, help="requests queued at once per round (default: 100)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds a round may take (default: 600)")
    p.add_argument("--record", action="store_true",
                   help="write the drain rate at the spec's own concurrency into the capacity file")
    add_request_flags(p)
    _output_flags(p, "drain", "drain.md and drain.png")


def _register_stream(sub) -> None:
    p = _subcommand(sub, "stream", "a generating endpoint through InvokeEndpointWithResponseStream at rising "
                                   "concurrency: TTFT, ITL, TPOT and E2EL at p50/p90/p99, output tokens/s, req/s",
                    _run("run_stream"))
    p.add_argument("--endpoint", help="a spec endpoint: names the endpoint <project>-<environment>-<endpoint>")
    p.add_argument("--endpoint-name", help="instead of --endpoint: the SageMaker endpoint's own name")
    p.add_argument("--environment", help="with --endpoint: whose endpoint name and region (default: the spec's "
                                         "first environment)")
    p.add_argument("--url", help="the local runtime of `tritonsm serve` serving the endpoint, e.g. "
                                 "http://127.0.0.1:8080")
    p.add_argument("--deployed", action="store_true",
                   help="instead of --url: the deployed SageMaker endpoint, through boto3")
    p.add_argument("--region", help="with --deployed: the endpoint's region (default: the environment's with "
                                    "--endpoint, else your AWS configuration's)")
    p.add_argument("--concurrency", default="1,4,16", help="streams in flight per level, rising (default: 1,4,16)")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--requests", type=int, default=None, help="requests per level (default: 32)")
    budget.add_argument("--duration", type=float, default=None, metavar="SECONDS",
                        help="instead of --requests: keep sending for this long per level (the requests in flight "
                             "at the end finish and count)")
    prompts = p.add_mutually_exclusive_group()
    prompts.add_argument("--text", help="the prompt every request sends (default: a sample prompt)")
    prompts.add_argument("--prompts", type=pathlib.Path, metavar="FILE",
                         help="one prompt per line, sent in turn (blank lines skipped)")
    p.add_argument("--max-new-tokens", type=int, default=128, help="the requests' max_new_tokens (default: 128)")
    p.add_argument("--parameter", action="append", default=[], metavar="KEY=VALUE",
                   help="another generation parameter, repeatable; VALUE is read as JSON where it is one, e.g. "
                        "--parameter temperature=0.7")
    p.add_argument("--warmup", type=int, default=1, help="untimed requests before the first level (default: 1)")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds a stream may stay silent before its request fails (default: 60)")
    p.add_argument("--plot", type=pathlib.Path, metavar="FILE.png",
                   help="also draw TTFT and output tokens/s against concurrency (needs matplotlib)")
    _output_flags(p, "stream", "stream.json and stream.md")


def _register_recommender(sub) -> None:
    p = _subcommand(sub, "recommender", "write an Inference Recommender advanced job request for a deployed endpoint "
                                        "of the spec, validated offline against botocore's sagemaker model",
                    _run("run_recommender"))
    p.add_argument("endpoint", metavar="ENDPOINT", help="the spec's endpoint")
    p.add_argument("--import", dest="import_job", metavar="JOB_NAME",
                   help="instead of writing a request: read this finished job and record its result for ENDPOINT "
                        "in the capacity file, which sets the invocations target")
    p.add_argument("--capacity", type=pathlib.Path, default=pathlib.Path("capacity.json"),
                   help="with --import: the capacity file (default: capacity.json)")
    p.add_argument("--region", help="with --import: the job's region (default: boto3's)")
    # Required to write a request (checked when it runs; --import needs none of them).
    p.add_argument("--endpoint-name", help="the deployed SageMaker endpoint's name (stack output)")
    p.add_argument("--model-name", help="the SageMaker model behind it (stack output)")
    p.add_argument("--role-arn", help="IAM role Inference Recommender assumes")
    p.add_argument("--sample-payload-url", help="s3:// URL of a .tar.gz of sample request bodies")
    p.add_argument("--content-type", default="application/json", help="content type of the sample payloads")
    p.add_argument("--instance-type", action="append", default=[], metavar="TYPE",
                   help="also try this instance type (the spec's type is always included; repeatable, <= 10 in all)")
    p.add_argument("--phase", action="append", default=[], metavar="USERS:SPAWN:SECONDS",
                   help="a traffic phase (repeatable; default 2:2:1500, the BERT-large scenario's)")
    p.add_argument("--percentile", default="P99", help="latency percentile for the stopping condition (P95 or P99)")
    p.add_argument("--latency-ms", type=int, default=None,
                   help="model latency threshold (default: the endpoint's alarms.latency_sla_ms)")
    p.add_argument("--max-invocations", type=int, default=None, help="stop at this many invocations per minute")
    p.add_argument("--job-name", default=None, help="unique per region (default: <endpoint>-load-test)")
    p.add_argument("--out", type=pathlib.Path, default=None,
                   help="request file (default: bench-results/recommender-<endpoint>.json)")


def _output_flags(p: argparse.ArgumentParser, folder: str, files: str, *, scratch: str | None = None) -> None:
    """``--out`` (the report's folder, ``bench-results/<folder>``) and, where the run needs one, ``--work``."""
    p.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT / folder,
                   help=f"directory for {files} (default: {DEFAULT_OUT / folder})")
    if scratch:
        p.add_argument("--work", type=pathlib.Path, default=DEFAULT_OUT / "work",
                       help=f"scratch directory for {scratch} (default: {DEFAULT_OUT / 'work'})")


def _dispatch(args: argparse.Namespace) -> int:
    return args.bench_run(args)


def _run(name: str) -> Callable[[argparse.Namespace], int]:
    """The subcommand's runner in tritonsm.benchmarking.runners, imported only when it runs (keeps --help light)."""
    def run(args: argparse.Namespace) -> int:
        from tritonsm.benchmarking import runners as commands
        return getattr(commands, name)(args)
    return run

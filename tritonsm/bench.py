"""`tritonsm bench runtime | load | recommender`: the numbers the reference articles measure by hand.

Only argparse here; each subcommand imports its heavy code (torch, onnxruntime, the Triton
server, botocore) when it runs.
"""
from __future__ import annotations

import argparse
import pathlib
import sys
from typing import Callable

from deployment_spec.errors import UserError

REPOSITORY = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_OUT = pathlib.Path("bench-results")


def register(add: Callable[..., argparse.ArgumentParser]) -> None:
    parser = add("bench", "benchmark models and endpoints: runtime comparison, local load test, "
                          "Inference Recommender job request", _dispatch)
    sub = parser.add_subparsers(dest="bench_command", metavar="BENCH", required=True)
    _register_runtime(sub)
    _register_load(sub)
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
                    run_runtime)
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
    p.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT / "runtime",
                   help="directory for runtime.json, runtime.md, runtime.png (default: bench-results/runtime)")
    p.add_argument("--work", type=pathlib.Path, default=DEFAULT_OUT / "work",
                   help="scratch directory for the ONNX files (default: bench-results/work)")


def _register_load(sub) -> None:
    p = _subcommand(sub, "load", "load-test the local endpoint (real Triton server) in phases of rising concurrency, "
                                 "comparing dynamic batching and instance counts; --record writes capacity.json",
                    run_load)
    p.add_argument("--configs", default="pt-base,pt-db,pt-ig,pt-ig-db",
                   help="configurations to compare (default: all four, as in the tuned BERT-large scenario)")
    p.add_argument("--concurrency", default="1,2,4,8,16,32", help="users per phase, rising (default: 1,2,4,8,16,32)")
    p.add_argument("--phase-seconds", type=float, default=10.0, help="duration of each phase (default: 10)")
    p.add_argument("--max-requests", type=int, default=5000, help="request cap per phase (default: 5000)")
    p.add_argument("--latency-threshold-ms", type=float, default=None,
                   help="stop after a phase whose p99 is above this (default: the recorded endpoint's "
                        "alarms.latency_sla_ms, else 500)")
    p.add_argument("--max-error-rate", type=float, default=0.01, help="stop above this error rate (default: 0.01)")
    p.add_argument("--json", action="store_true", help="send JSON payloads instead of binary+json")
    p.add_argument("--record", metavar="ENDPOINT", help="write the best configuration's max RPS within the "
                                                        "threshold into the capacity file for this spec endpoint")
    p.add_argument("--record-config", help="record this configuration instead of the best one")
    p.add_argument("--endpoint", help="load-test this single-model endpoint's own built model (tritonsm build) "
                                      "instead of the synthetic configurations; --record then records it")
    p.add_argument("--cpu-stand-in", action="store_true",
                   help="with --endpoint: serve ONNX Runtime / TorchScript models as labelled CPU stand-ins")
    p.add_argument("--environment", help="with --endpoint: whose overrides apply (default: the first)")
    p.add_argument("--manifest", type=pathlib.Path, default=pathlib.Path("assets/manifest.json"),
                   help="with --endpoint: the build manifest (default: assets/manifest.json)")
    p.add_argument("--input", type=pathlib.Path, help="with --endpoint: request inputs (.json or .npz); text "
                                                      "models get a sample sentence by default")
    p.add_argument("--capacity", type=pathlib.Path, default=None, help="capacity file (default: capacity.json)")
    p.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT / "load",
                   help="directory for load.json and load.md (default: bench-results/load)")
    p.add_argument("--work", type=pathlib.Path, default=DEFAULT_OUT / "work",
                   help="scratch directory for the model archives (default: bench-results/work)")


def _register_recommender(sub) -> None:
    p = _subcommand(sub, "recommender", "write an Inference Recommender advanced job request for a deployed endpoint "
                                        "of the spec, validated offline against botocore's sagemaker model",
                    run_recommender)
    p.add_argument("endpoint", metavar="ENDPOINT", help="the spec's endpoint")
    p.add_argument("--endpoint-name", required=True, help="the deployed SageMaker endpoint's name (stack output)")
    p.add_argument("--model-name", required=True, help="the SageMaker model behind it (stack output)")
    p.add_argument("--role-arn", required=True, help="IAM role Inference Recommender assumes")
    p.add_argument("--sample-payload-url", required=True, help="s3:// URL of a .tar.gz of sample request bodies")
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


def _dispatch(args: argparse.Namespace) -> int:
    _importable_benchmarks()
    return args.bench_run(args)


def _importable_benchmarks() -> None:
    # benchmarks/ sits next to this package in the checkout and is not an installed package.
    if str(REPOSITORY) not in sys.path:
        sys.path.insert(0, str(REPOSITORY))


def _log(line: str) -> None:
    print(line, flush=True)


def run_runtime(args: argparse.Namespace) -> int:
    import json
    import os

    from deployment_spec import load_spec

    spec = load_spec(args.spec)
    names = _runtime_models(spec, args.models)
    int8 = _int8_models(spec, names, args.int8)
    batches = _batch_sizes(args.batch_sizes)
    if args.repeats < 5:
        raise UserError(f"--repeats {args.repeats}: medians need at least 5 repeats; use --repeats 5 or more")
    if args.warmup < 1:
        raise UserError(f"--warmup {args.warmup}: use at least 1 warm-up call (the first call pays for allocation)")
    threads = args.threads or os.cpu_count() or 1
    if threads < 1:
        raise UserError(f"--threads {threads}: use 1 or more")

    from benchmarks import runtime_compare, runtime_report
    from model_build.errors import BuildError

    settings = runtime_compare.Settings(batches=batches, repeats=args.repeats, warmup=args.warmup, threads=threads,
                                        block_seconds=args.block_seconds, unoptimized=args.unoptimized,
                                        build_runtime=args.build_ort)
    _log(f"bench runtime: {', '.join(names)}; batch sizes {batches}; {threads} threads for every engine; "
         f"int8 for {', '.join(sorted(int8)) or 'none'}")
    out = args.out
    try:
        result = runtime_compare.compare(spec, names, int8, settings, args.work / "runtime", _log)
    except BuildError as exc:
        raise UserError(str(exc)) from None
    result["command"] = _command(args, "runtime")
    out.mkdir(parents=True, exist_ok=True)
    (out / "runtime.json").write_text(json.dumps(result, indent=2) + "\n")
    table = runtime_report.markdown(result)
    (out / "runtime.md").write_text(table)
    runtime_report.plot(result, out / "runtime.png")
    print()
    print(table)
    _log(f"wrote {out / 'runtime.json'}, {out / 'runtime.md'}, {out / 'runtime.png'} ({result['seconds']:.0f} s)")
    return 0


def _runtime_models(spec, asked: list[str]) -> list[str]:
    from deployment_spec import recipes

    def exportable(name: str) -> bool:
        m = spec.models[name]
        return (m.source is not None and m.source.recipe in recipes.BUILTIN
                and recipes.BUILTIN[m.source.recipe] == recipes.EXPORTABLE)

    candidates = [n for n in spec.models if exportable(n)]
    if not asked:
        if not candidates:
            raise UserError(f"{spec.path}: no model built from a built-in exportable recipe "
                            f"({', '.join(k for k, v in recipes.BUILTIN.items() if v == recipes.EXPORTABLE)}); "
                            "add one or use another spec")
        return candidates
    problems = [n for n in asked if n not in candidates]
    if problems:
        raise UserError(f"cannot compare {', '.join(problems)}: bench runtime takes models of {spec.path} built from "
                        f"a built-in exportable recipe ({', '.join(candidates) or 'none here'})")
    return list(dict.fromkeys(asked))


def _int8_models(spec, names: list[str], asked: list[str]) -> set[str]:
    from deployment_spec import Precision

    chosen = {n for n in names if spec.models[n].precision is Precision.INT8}
    for name in asked:
        if name == "all":
            chosen |= set(names)
        elif name in names:
            chosen.add(name)
        else:
            raise UserError(f"--int8 {name}: not among the compared models ({', '.join(names)}); name one of "
                            "them or 'all'")
    return chosen


def _batch_sizes(text: str) -> list[int]:
    try:
        sizes = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        sizes = []
    if not sizes or sizes[0] < 1:
        raise UserError(f"--batch-sizes {text!r}: give positive integers separated by commas, e.g. 1,8,32")
    return sizes


def run_load(args: argparse.Namespace) -> int:
    import json
    import os

    from deployment_spec import load_spec
    from deployment_spec.capacity import DEFAULT_CAPACITY, CapacityError, Measurement

    from benchmarks import capacity_record, load_compare
    from benchmarks.load_model import CONFIGS
    from benchmarks.load_phases import PhasePlan

    spec = load_spec(args.spec)
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown or not configs:
        raise UserError(f"--configs {args.configs!r}: unknown {', '.join(unknown) or '(none given)'}; "
                        f"choose from {', '.join(CONFIGS)}")
    if args.record and args.record not in spec.endpoints:
        raise UserError(f"--record {args.record}: no such endpoint in {spec.path} ({', '.join(spec.endpoints)})")
    if args.record_config and args.record_config not in configs:
        raise UserError(f"--record-config {args.record_config}: not among --configs ({', '.join(configs)})")
    concurrencies = tuple(_positive_list(args.concurrency, "--concurrency"))
    if args.phase_seconds <= 0 or args.phase_seconds > 600:
        raise UserError(f"--phase-seconds {args.phase_seconds:g}: use a value in (0, 600]")
    if args.max_requests < 1:
        raise UserError(f"--max-requests {args.max_requests}: use 1 or more")
    if not 0 <= args.max_error_rate < 1:
        raise UserError(f"--max-error-rate {args.max_error_rate:g}: use a fraction in [0, 1)")
    threshold = args.latency_threshold_ms
    if args.endpoint and args.endpoint not in spec.endpoints:
        raise UserError(f"--endpoint {args.endpoint}: no such endpoint in {spec.path} ({', '.join(spec.endpoints)})")
    if threshold is None:
        slo_of = args.record or args.endpoint
        threshold = spec.endpoints[slo_of].alarms.latency_sla_ms if slo_of else 500.0
    plan = PhasePlan(concurrencies=concurrencies, seconds=args.phase_seconds, max_requests=args.max_requests,
                     latency_threshold_ms=threshold, max_error_rate=args.max_error_rate,
                     must_reach=load_compare.GAIN_CONCURRENCY if load_compare.GAIN_CONCURRENCY in concurrencies
                     else None)
    if args.endpoint:
        return _run_endpoint_load(args, spec, plan, threshold)
    _log(f"bench load: {', '.join(configs)}; phases at concurrency {', '.join(map(str, concurrencies))}, "
         f"{args.phase_seconds:g} s each; threshold p99 <= {threshold:g} ms, errors <= {args.max_error_rate:.0%}")
    from local_endpoint import LocalEndpointError

    try:
        result = load_compare.compare(configs, plan, args.work / "load", _log, binary=not args.json)
    except LocalEndpointError as exc:
        raise UserError(str(exc)) from None
    command = _command(args, "load")
    result["command"] = command
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "load.json").write_text(json.dumps(result, indent=2) + "\n")
    table = load_compare.markdown(result)
    (args.out / "load.md").write_text(table)
    print()
    print(table)
    _log(f"wrote {args.out / 'load.json'}, {args.out / 'load.md'} ({result['seconds']:.0f} s)")
    if args.record:
        chosen = args.record_config or load_compare.best_config(result)
        summary = result["configs"].get(chosen) if chosen else None
        if not summary or not summary["max_rps_within_threshold"]:
            raise UserError(f"--record {args.record}: no phase met p99 <= {threshold:g} ms with errors <= "
                            f"{args.max_error_rate:.0%}; nothing recorded (raise the threshold or lower the load)")
        measurement = Measurement(
            max_rps_per_instance=summary["max_rps_within_threshold"], latency_sla_ms=threshold,
            p99_ms=summary["p99_ms_at_max"],
            measured_on=f"local CPU ({os.cpu_count()} cores), {chosen} ({summary['description']}), "
                        f"{result['model']}",
            command=command)
        path = args.capacity or DEFAULT_CAPACITY
        try:
            _, note = capacity_record.record(spec, args.record, measurement, path)
        except CapacityError as exc:
            raise UserError(str(exc)) from None
        _log(f"recorded {measurement.max_rps_per_instance:g} req/s for endpoint {args.record} in {path}: {note}")
        # The phases drive the load test's own Python-backend model on this CPU, not the endpoint's model on
        # its GPU instance: say so every time, so nobody mistakes it for the endpoint's real capacity.
        _log(f"note: measured on {result['model']} on this machine, not on {args.record}'s own model and "
             "instance type; for production targets record a load test of the deployed endpoint "
             "(tritonsm bench recommender) in capacity.json or set scaling.max_rps_per_instance")
    return 0


def _run_endpoint_load(args: argparse.Namespace, spec, plan, threshold: float) -> int:
    """Phases against the endpoint's own model; --record (same endpoint) writes its best RPS."""
    import os

    from deployment_spec.capacity import DEFAULT_CAPACITY, CapacityError, Measurement

    from benchmarks import capacity_record, load_endpoint
    from benchmarks.load_local import DEFAULT_TEXT
    from local_endpoint import LocalEndpointError

    if args.record and args.record != args.endpoint:
        raise UserError(f"--record {args.record} with --endpoint {args.endpoint}: a measurement is recorded for the "
                        "endpoint it was taken on; drop --record or make both the same")
    _log(f"bench load --endpoint {args.endpoint}: phases at concurrency "
         f"{', '.join(map(str, plan.concurrencies))}, {plan.seconds:g} s each; threshold p99 <= {threshold:g} ms")
    try:
        result = load_endpoint.measure(spec.path, args.endpoint, environment=args.environment, manifest=args.manifest,
                                       input_path=args.input, text=DEFAULT_TEXT, cpu_stand_in=args.cpu_stand_in,
                                       binary=not args.json, plan=plan, log=_log)
    except LocalEndpointError as exc:
        raise UserError(str(exc)) from None
    args.out.mkdir(parents=True, exist_ok=True)
    table = load_endpoint.markdown(result)
    (args.out / "load-endpoint.md").write_text(table)
    print()
    print(table)
    if not args.record:
        return 0
    if result.best_rps is None:
        raise UserError(f"--record {args.record}: no phase met p99 <= {threshold:g} ms; nothing recorded")
    measurement = Measurement(max_rps_per_instance=round(result.best_rps, 2), latency_sla_ms=threshold,
                              p99_ms=round(result.best_p99_ms, 1), measured_on=result.model,
                              command=_command(args, "load"))
    path = args.capacity or DEFAULT_CAPACITY
    try:
        _, note = capacity_record.record(spec, args.record, measurement, path)
    except CapacityError as exc:
        raise UserError(str(exc)) from None
    _log(f"recorded {measurement.max_rps_per_instance:g} req/s for endpoint {args.record} in {path}: {note}")
    return 0


def run_recommender(args: argparse.Namespace) -> int:
    import json

    from deployment_spec import load_spec

    from benchmarks import recommender_request as rr

    spec = load_spec(args.spec)
    if args.endpoint not in spec.endpoints:
        raise UserError(f"endpoint {args.endpoint!r} is not in {spec.path} ({', '.join(spec.endpoints)})")
    phases = tuple(_phase(p) for p in args.phase) or rr.DEFAULT_PHASES
    request = rr.build_request(
        spec=spec, endpoint=args.endpoint, job_name=args.job_name or f"{args.endpoint}-load-test",
        role_arn=args.role_arn, model_name=args.model_name, endpoint_name=args.endpoint_name,
        sample_payload_url=args.sample_payload_url, content_type=args.content_type,
        instance_types=args.instance_type, phases=phases, percentile=args.percentile, latency_ms=args.latency_ms,
        max_invocations=args.max_invocations)
    try:
        rr.validate(request)
    except rr.RecommenderRequestError as exc:
        raise UserError(str(exc)) from None
    out = args.out or DEFAULT_OUT / f"recommender-{args.endpoint}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(request, indent=2) + "\n")
    print(f"wrote {out}: {rr.OPERATION} request, valid against botocore's sagemaker service model")
    print(f"  aws sagemaker create-inference-recommendations-job --cli-input-json file://{out}")
    return 0


def _phase(text: str):
    from benchmarks.recommender_request import Phase

    parts = text.split(":")
    try:
        users, spawn, seconds = (int(x) for x in parts)
    except ValueError:
        raise UserError(f"--phase {text!r}: write USERS:SPAWN:SECONDS, e.g. 2:2:1500") from None
    return Phase(users, spawn, seconds)


def _positive_list(text: str, flag: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1 or values != sorted(set(values)):
        raise UserError(f"{flag} {text!r}: give rising positive integers separated by commas, e.g. 1,2,4,8,16")
    return values


def _command(args: argparse.Namespace, sub: str) -> str:
    """The command line that repeats this run, for the results and the capacity file."""
    skip = {"run", "bench_run", "bench_command", "spec", "command", "models", "rest", "work"}
    parts = ["tritonsm", "bench", "--spec", str(args.spec), sub, *getattr(args, "models", [])]
    for key, value in sorted(vars(args).items()):
        if key in skip or value in (None, False, []):
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            parts.append(flag)
        elif isinstance(value, list):
            for item in value:
                parts += [flag, str(item)]
        else:
            parts += [flag, str(value)]
    return " ".join(parts)

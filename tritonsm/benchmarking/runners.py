"""The `tritonsm bench` subcommands (arguments defined in tritonsm/commands/bench.py): each one a run_* function."""
from __future__ import annotations

import argparse
import pathlib

from deployment_spec.parsing.errors import UserError
# Shared with stream_command (`bench stream`), under the names this module has always used.
from tritonsm.benchmarking.arguments import command_line as _command, log as _log, positive_list as _positive_list

DEFAULT_OUT = pathlib.Path("bench-results")


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

    from tritonsm.benchmarking import runtime_compare, runtime_report
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
    from deployment_spec.sections import recipes

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

    from deployment_spec import load_spec
    from deployment_spec.cost.capacity import DEFAULT_CAPACITY, Measurement

    from tritonsm.benchmarking import load_compare, load_cost
    from tritonsm.benchmarking.load_model import CONFIGS
    from tritonsm.benchmarking.load_phases import PhasePlan

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
    if not 1 <= args.repeats <= 20:
        raise UserError(f"--repeats {args.repeats}: use 1 to 20 interleaved rounds (3 or more give a paired and "
                        "a quieter-half ratio worth reading)")
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
    # Read before the run, so a broken price file stops it first; an endpoint run is priced as that endpoint.
    prices = _prices(spec) if args.record or args.endpoint else None
    if args.endpoint:
        return _run_endpoint_load(args, spec, plan, threshold, prices)
    _log(f"bench load: {', '.join(configs)}; phases at concurrency {', '.join(map(str, concurrencies))}, "
         f"{args.phase_seconds:g} s each, {args.repeats} interleaved round(s); threshold p99 <= {threshold:g} ms, "
         f"errors <= {args.max_error_rate:.0%}")
    from local_endpoint import LocalEndpointError

    try:
        result = load_compare.compare(configs, plan, args.work / "load", _log, binary=not args.json,
                                      repeats=args.repeats)
    except LocalEndpointError as exc:
        raise UserError(str(exc)) from None
    command = _command(args, "load")
    result["command"] = command
    result["cost"] = load_cost.section(result, spec, args.record, prices)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "load.json").write_text(json.dumps(result, indent=2) + "\n")
    table = load_compare.markdown(result)
    (args.out / "load.md").write_text(table)
    from tritonsm.benchmarking.load_plot import plot

    plot(result, args.out / "load.png")
    print()
    print(table)
    _log(f"wrote {args.out / 'load.json'}, {args.out / 'load.md'}, {args.out / 'load.png'} ({result['seconds']:.0f} s)")
    if args.record:
        chosen = args.record_config or load_compare.best_config(result)
        summary = result["configs"].get(chosen) if chosen else None
        if not summary or not summary["max_rps_within_threshold"]:
            raise UserError(f"--record {args.record}: no phase met p99 <= {threshold:g} ms with errors <= "
                            f"{args.max_error_rate:.0%}; nothing recorded (raise the threshold or lower the load)")
        measurement = Measurement(
            max_rps_per_instance=summary["max_rps_within_threshold"], latency_sla_ms=threshold,
            p99_ms=summary["p99_ms_at_max"], measured_on=load_cost.measured_on(result, chosen),
            command=command, max_concurrency=summary["at_concurrency"])
        _record(spec, args.record, measurement, args.capacity or DEFAULT_CAPACITY, prices)
        # The phases drive the load test's own Python-backend model on this CPU, not the endpoint's model on
        # its GPU instance: say so every time, so nobody mistakes it for the endpoint's real capacity.
        _log(f"note: measured on {result['model']} on this machine, not on {args.record}'s own model and "
             "instance type; for production targets record a load test of the deployed endpoint "
             "(tritonsm bench recommender) in capacity.json or set scaling.max_rps_per_instance")
    return 0


def run_drain(args: argparse.Namespace) -> int:
    """An asynchronous endpoint's drain rate per concurrency; --record writes the spec's own into capacity.json."""
    import os

    import matplotlib  # noqa: F401 (the plot comes last: a missing bench extra is said before the rounds run)

    from deployment_spec import load_spec
    from deployment_spec.cost.capacity import DEFAULT_CAPACITY, Drain, backlog_target, load_drains, save_drains
    from local_endpoint import LocalEndpointError
    from tritonsm.benchmarking import drain
    from tritonsm.benchmarking.load_local import DEFAULT_TEXT

    spec = load_spec(args.spec)
    if args.endpoint not in spec.endpoints:
        raise UserError(f"--endpoint {args.endpoint}: no such endpoint in {spec.path} ({', '.join(spec.endpoints)})")
    settings = spec.endpoints[args.endpoint].asynchronous
    if settings is None:
        raise UserError(f"--endpoint {args.endpoint}: a real-time endpoint of {spec.path}; bench drain measures an "
                        "asynchronous endpoint's queue (an asynchronous: block); bench load measures this one")
    own = settings.max_concurrent_invocations_per_instance
    concurrencies = sorted(set(_positive_list(args.concurrency, "--concurrency") if args.concurrency
                               else [1, 2, 4, 8, own]))
    if args.record and own not in concurrencies:
        raise UserError(f"--record with --concurrency {args.concurrency}: the spec's own concurrency ({own}) is what "
                        f"deploys, and it is not among them; add {own}")
    if not 1 <= args.requests <= 10000:
        raise UserError(f"--requests {args.requests}: use 1 to 10000")
    _log(f"bench drain --endpoint {args.endpoint}: {args.requests} requests queued at once, at concurrency "
         f"{', '.join(map(str, concurrencies))} per instance")
    try:
        result = drain.measure(spec.path, args.endpoint, environment=args.environment, manifest=args.manifest,
                               input_path=args.input, text=DEFAULT_TEXT, image=args.image_file,
                               cpu_stand_in=args.cpu_stand_in, binary=not args.json, concurrencies=concurrencies,
                               requests=args.requests, timeout_s=args.timeout, log=_log)
    except LocalEndpointError as exc:
        raise UserError(str(exc)) from None
    args.out.mkdir(parents=True, exist_ok=True)
    table = drain.markdown(result)
    (args.out / "drain.md").write_text(table)
    drain.plot(result, args.out / "drain.png")
    print()
    print(table)
    _log(f"wrote {args.out / 'drain.md'}, {args.out / 'drain.png'}")
    if not args.record:
        return 0
    run = next(r for r in result.runs if r.concurrency == own)
    if run.failed or run.succeeded < run.requests:
        unfinished = run.requests - run.succeeded - run.failed
        raise UserError(f"--record: at concurrency {own}, {run.failed} failed and {unfinished} did not finish in "
                        f"{args.timeout:g} s; nothing recorded (see the failure objects' reasons, or raise --timeout)")
    path = args.capacity or DEFAULT_CAPACITY
    drains = load_drains(path)
    drains[args.endpoint] = Drain(drain_rps_per_instance=round(run.drain_rps, 3), concurrency=own,
                                  requests=run.requests, measured_on=result.model, command=_command(args, "drain"))
    save_drains(drains, path)
    target = backlog_target(spec.endpoints[args.endpoint], drains)
    if target is None or not target.measured:
        _log(f"recorded in {path}; the spec sets asynchronous.backlog_per_instance for {args.endpoint}, which wins "
             "over the measurement: remove it to use this one")
    else:
        _log(f"recorded in {path}: backlog target {target.value:g} requests per instance ({target.source})")
    _log(f"note: measured on this machine ({os.cpu_count()} cores), not on {args.endpoint}'s instance type")
    return 0


def run_stream(args: argparse.Namespace) -> int:
    """A generating endpoint's streams at rising concurrency (tritonsm.benchmarking.stream_command)."""
    from tritonsm.benchmarking import stream_command

    return stream_command.run(args)


def _run_endpoint_load(args: argparse.Namespace, spec, plan, threshold: float, prices) -> int:
    """Phases against the endpoint's own model; --record (same endpoint) writes its best RPS."""
    from deployment_spec.cost.capacity import DEFAULT_CAPACITY, Measurement

    from tritonsm.benchmarking import load_cost, load_endpoint
    from tritonsm.benchmarking.load_local import DEFAULT_TEXT
    from local_endpoint import LocalEndpointError

    if args.record and args.record != args.endpoint:
        raise UserError(f"--record {args.record} with --endpoint {args.endpoint}: a measurement is recorded for the "
                        "endpoint it was taken on; drop --record or make both the same")
    if args.record and spec.endpoints[args.endpoint].kind.value == "inference-components":
        # Not an error (the delivery pipeline records every endpoint): the measurement is shown, not recorded.
        _log(f"note: --record {args.record}: not recorded; capacity.json holds per-instance figures for variant "
             "scaling, and an endpoint of inference components scales copies on its components' per-copy targets "
             "(components.<model>.scaling): set those from the per-copy figure below")
        args.record = None
    _log(f"bench load --endpoint {args.endpoint}: phases at concurrency "
         f"{', '.join(map(str, plan.concurrencies))}, {plan.seconds:g} s each; threshold p99 <= {threshold:g} ms")
    try:
        if getattr(args, "deployed", False):
            result = _deployed_load(args, spec, plan)
        else:
            result = load_endpoint.measure(spec.path, args.endpoint, environment=args.environment,
                                           manifest=args.manifest, input_path=args.input, text=DEFAULT_TEXT,
                                           image=getattr(args, "image_file", None), cpu_stand_in=args.cpu_stand_in,
                                           binary=not args.json, plan=plan, log=_log)
    except LocalEndpointError as exc:
        raise UserError(str(exc)) from None
    args.out.mkdir(parents=True, exist_ok=True)
    measurement = None if result.best_rps is None else Measurement(
        max_rps_per_instance=round(result.best_rps, 2), latency_sla_ms=threshold, p99_ms=round(result.best_p99_ms, 1),
        measured_on=result.model, command=_command(args, "load"), max_concurrency=result.best_concurrency)
    table = load_endpoint.markdown(result) + "\n".join(
        load_cost.endpoint_markdown(spec, args.endpoint, measurement, prices)) + "\n"
    (args.out / "load-endpoint.md").write_text(table)
    print()
    print(table)
    if not args.record:
        return 0
    if measurement is None:
        raise UserError(f"--record {args.record}: no phase met p99 <= {threshold:g} ms; nothing recorded")
    _record(spec, args.record, measurement, args.capacity or DEFAULT_CAPACITY, prices)
    return 0


def _deployed_load(args: argparse.Namespace, spec, plan, client=None):
    """The phases against the deployed endpoint, with the smoke test's request for its first model."""
    from deployment_spec.rules.component_endpoint import component_name
    from deployment_spec.rules.container_env import endpoint_name
    from deployment_spec.sections.endpoint import EndpointKind
    from deployment_spec.builds.manifest import load_manifest
    from deployment_spec.served import built_artifacts, spec_endpoint

    import dataclasses

    from tritonsm.benchmarking import load_deployed
    from tritonsm.checks import smoke_requests as smoke

    env_name, endpoint = spec_endpoint(spec, args.endpoint, args.environment)
    built = built_artifacts(args.manifest, endpoint.name, endpoint.models)
    names = {m: component_name(spec.project, env_name, endpoint.name, m) for m in endpoint.models}
    cases = smoke.cases(endpoint, built, load_manifest(args.manifest), spec.models, spec.root, names)
    case, divisor, per = cases[0], endpoint.initial_instances, "instance"
    if endpoint.kind is EndpointKind.INFERENCE_COMPONENTS:
        # One component at a time, named per request; its figure is per copy, as its scaling target is.
        model = getattr(args, "component", None) or endpoint.models[0]
        if model not in endpoint.models:
            raise UserError(f"--component {model}: not a model of endpoint {endpoint.name} "
                            f"({', '.join(endpoint.models)})")
        case = next(c for c in cases if c.model == model)
        divisor, per = max(1, endpoint.component(model).copies), "copy"
    elif getattr(args, "component", None):
        raise UserError(f"--component applies to an endpoint of kind inference-components; {endpoint.name} is "
                        f"{endpoint.kind.value}")
    # No extra phase after the stop on a deployed endpoint: past the SLA it would only load a shared stage.
    plan = dataclasses.replace(plan, must_reach=None)
    return load_deployed.measure(endpoint.name, endpoint_name(spec.project, env_name, endpoint.name),
                                 endpoint.instance_type, divisor, case, plan, _log,
                                 region=args.region or spec.environments[env_name].region, client=client, per=per)


def _record(spec, endpoint: str, measurement, path: pathlib.Path, prices) -> None:
    """Writes the measurement, with its cost per million per region, into the capacity file and says what target it
    sets and what it costs (for an imported Inference Recommender job, against AWS's own figure)."""
    from deployment_spec.cost.capacity import CapacityError

    from tritonsm.benchmarking import capacity_record, cost_per_million, recommender_cost

    measurement = cost_per_million.priced(spec, endpoint, measurement, prices)
    try:
        _, note = capacity_record.record(spec, endpoint, measurement, path)
    except CapacityError as exc:
        raise UserError(str(exc)) from None
    _log(f"recorded {measurement.max_rps_per_instance:g} req/s for endpoint {endpoint} in {path}: {note}")
    for line in cost_per_million.cost_lines(endpoint, measurement):
        _log(f"cost: {line}")
    if measurement.recommender_cost is not None:
        _log(f"compared: {recommender_cost.comparison(measurement, prices)}")


def _prices(spec):
    """The price table beside the spec (refresh cache, then the shipped snapshot), read before a run that records,
    so a broken price file stops it before the load test rather than after."""
    from deployment_spec.cost.pricing import PricesError, load_prices

    try:
        return load_prices(spec.root)
    except PricesError as exc:
        raise UserError(str(exc)) from None


def run_recommender(args: argparse.Namespace) -> int:
    import json

    from deployment_spec import load_spec

    from tritonsm.benchmarking import recommender_request as rr

    spec = load_spec(args.spec)
    if args.endpoint not in spec.endpoints:
        raise UserError(f"endpoint {args.endpoint!r} is not in {spec.path} ({', '.join(spec.endpoints)})")
    if args.import_job:
        return _import_recommendation(args, spec)
    missing = [flag for flag, value in (("--endpoint-name", args.endpoint_name), ("--model-name", args.model_name),
                                        ("--role-arn", args.role_arn), ("--sample-payload-url", args.sample_payload_url))
               if not value]
    if missing:
        raise UserError(f"a recommender request needs {', '.join(missing)}; or give --import JOB_NAME to record a "
                        "finished job's result")
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


def _import_recommendation(args: argparse.Namespace, spec) -> int:
    import boto3

    from tritonsm.benchmarking import recommender_import

    prices = _prices(spec)
    client = boto3.client("sagemaker", region_name=args.region)
    job = recommender_import.describe(client, args.import_job)
    measured = recommender_import.measurement(job, spec.endpoints[args.endpoint], args.endpoint_name)
    _log(f"{args.endpoint}: {measured.p99_ms:g} ms model latency at {measured.max_rps_per_instance:g} req/s per "
         f"instance ({measured.measured_on})")
    _record(spec, args.endpoint, measured, args.capacity, prices)
    from tritonsm.benchmarking import recommender_cost
    for other in recommender_import.other_types(job, spec.endpoints[args.endpoint]):
        # Not recorded (capacity.json holds the endpoint's own type): shown to choose a type by cost.
        _log(f"also measured: {other.max_rps_per_instance:g} req/s per instance, {other.p99_ms:g} ms model latency; "
             f"{recommender_cost.comparison(other, prices)}")
    return 0


def _phase(text: str):
    from tritonsm.benchmarking.recommender_request import Phase

    parts = text.split(":")
    try:
        users, spawn, seconds = (int(x) for x in parts)
    except ValueError:
        raise UserError(f"--phase {text!r}: write USERS:SPAWN:SECONDS, e.g. 2:2:1500") from None
    return Phase(users, spawn, seconds)

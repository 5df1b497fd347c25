"""`tritonsm bench stream` (arguments in tritonsm/commands/bench.py): its arguments checked, the endpoint named,
the levels measured (stream_load), the report written (stream_report)."""
from __future__ import annotations

import argparse
import json
import pathlib
from typing import Any, Optional

from deployment_spec.parsing.errors import UserError
from tritonsm.benchmarking.arguments import command_line, log as _log, positive_list

DEFAULT_PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."
MAX_SECONDS = 3600.0
DEFAULT_REQUESTS = 32   # per level; not argparse's default, which --duration would carry into the repeated command


def run(args: argparse.Namespace) -> int:
    import time

    from local_endpoint.client.invoke import split_local_url
    from local_endpoint.errors import InvokeError
    from tritonsm.benchmarking import stream_load, stream_report

    concurrencies = tuple(positive_list(args.concurrency, "--concurrency"))
    plan = stream_load.StreamPlan(concurrencies, *_budget(args, concurrencies), warmup=args.warmup)
    prompts = _prompts(args.text, args.prompts)
    parameters = _parameters(args.parameter, args.max_new_tokens)
    if args.warmup < 0:
        raise UserError(f"--warmup {args.warmup}: use 0 or more")
    if args.timeout <= 0:
        raise UserError(f"--timeout {args.timeout:g}: use a positive number of seconds")
    if args.plot:
        try:
            import matplotlib  # noqa: F401 (the plot comes last: a missing bench extra is said before the levels)
        except ImportError:
            raise UserError("--plot needs matplotlib: pip install 'tritonsm[bench]'") from None
    name, region, where = _endpoint(args)
    if args.url:
        try:
            split_local_url(args.url)
        except InvokeError as exc:
            raise UserError(str(exc)) from None
    client = stream_load.runtime_client(args.url, region, args.timeout, max(concurrencies))
    budget = f"{plan.requests} requests" if plan.requests is not None else f"{plan.seconds:g} s"
    _log(f"bench stream: {name} ({where}); {len(prompts)} prompt(s), max_new_tokens {args.max_new_tokens}; "
         f"concurrency {', '.join(map(str, concurrencies))}, {budget} each, {plan.warmup} warm-up request(s)")
    started = time.perf_counter()
    levels = stream_load.measure(stream_load.sender(name, client, args.url),
                                 stream_load.bodies(prompts, parameters), plan, _log)
    data = stream_report.result({
        "endpoint": name, "target": where, "prompts": len(prompts), "max_new_tokens": args.max_new_tokens,
        "parameters": parameters, "requests_per_level": plan.requests, "seconds_per_level": plan.seconds,
        "seconds": round(time.perf_counter() - started, 1), "command": command_line(args, "stream")}, levels)
    args.out.mkdir(parents=True, exist_ok=True)
    stream_report.write_json(data, args.out / "stream.json")
    table = stream_report.markdown(data)
    (args.out / "stream.md").write_text(table)
    written = [args.out / "stream.json", args.out / "stream.md"]
    if args.plot:
        stream_report.plot(data, args.plot)
        written.append(args.plot)
    print()
    print(table)
    _log(f"wrote {', '.join(map(str, written))} ({data['seconds']:g} s)")
    # Measured, but not what a generating endpoint is for: say so in the exit status too.
    return 1 if all(level.errors == level.requests for level in levels) else 0


def _budget(args: argparse.Namespace, concurrencies: tuple[int, ...]) -> tuple[Optional[int], Optional[float]]:
    """(requests, seconds) of each level: --duration, else --requests."""
    if args.duration is not None:
        if not 0 < args.duration <= MAX_SECONDS:
            raise UserError(f"--duration {args.duration:g}: use a number of seconds in (0, {MAX_SECONDS:g}]")
        return None, args.duration
    requests = DEFAULT_REQUESTS if args.requests is None else args.requests
    if requests < 1:
        raise UserError(f"--requests {requests}: use 1 or more")
    if requests < max(concurrencies):
        raise UserError(f"--requests {requests} is below --concurrency {max(concurrencies)}: that level would "
                        f"never have {max(concurrencies)} requests in flight; use --requests {max(concurrencies)} or "
                        "more (a few times the concurrency gives steadier figures)")
    return requests, None


def _prompts(text: Optional[str], path: Optional[pathlib.Path]) -> list[str]:
    if path is None:
        return [text or DEFAULT_PROMPT]
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UserError(f"--prompts {path}: cannot read it ({reason})") from None
    prompts = [line for line in lines if line.strip()]
    if not prompts:
        raise UserError(f"--prompts {path}: no prompt in it (one prompt per line; blank lines are skipped)")
    return prompts


def _parameters(items: list[str], max_new_tokens: int) -> dict[str, Any]:
    """The request's generation parameters: max_new_tokens and each --parameter KEY=VALUE (VALUE read as JSON
    where it is JSON, as `tritonsm invoke --stream` reads it)."""
    if max_new_tokens < 1:
        raise UserError(f"--max-new-tokens {max_new_tokens}: use 1 or more")
    parameters: dict[str, Any] = {"max_new_tokens": max_new_tokens}
    for item in items:
        key, sign, value = item.partition("=")
        if not sign or not key:
            raise UserError(f"--parameter {item!r}: write KEY=VALUE, e.g. --parameter temperature=0.7")
        if key == "max_new_tokens":
            raise UserError(f"--parameter {item!r}: give it as --max-new-tokens N")
        try:
            parameters[key] = json.loads(value)
        except ValueError:  # a plain word is a text parameter
            parameters[key] = value
    return parameters


def _endpoint(args: argparse.Namespace) -> tuple[str, Optional[str], str]:
    """(EndpointName, region, where it runs, in words) of --endpoint or --endpoint-name, local or deployed."""
    if bool(args.url) == bool(args.deployed):
        raise UserError("bench stream needs one of --url URL (the local runtime of `tritonsm serve`) and --deployed "
                        "(the SageMaker endpoint, through boto3)")
    if bool(args.endpoint) == bool(args.endpoint_name):
        raise UserError("bench stream needs one of --endpoint NAME (a spec endpoint) and --endpoint-name NAME (a "
                        "SageMaker endpoint name)")
    region = args.region
    name = args.endpoint_name
    if args.endpoint:
        from deployment_spec import load_spec
        from deployment_spec.rules.container_env import endpoint_name
        from deployment_spec.served import spec_endpoint

        spec = load_spec(args.spec)
        env_name, endpoint = spec_endpoint(spec, args.endpoint, args.environment)
        name = endpoint_name(spec.project, env_name, endpoint.name)
        if args.deployed and region is None:
            region = spec.environments[env_name].region
    where = f"local runtime at {args.url}" if args.url else f"deployed, region {region or 'of your AWS configuration'}"
    return name, region, where

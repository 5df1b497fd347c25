"""`tritonsm compare --captures DIR|s3://... --endpoint NAME`: an endpoint's incumbent and candidate variants side by
side, from their data capture: do their answers agree on the same requests, how their latency and errors differ.

Only argparse at import time (`tritonsm --help` stays fast); tritonsm/comparing does the work.
"""
from __future__ import annotations

import argparse
import datetime as dt
import pathlib
from typing import Any, Callable, Optional

from deployment_spec.parsing.errors import UserError
from deployment_spec.sections.variants import LOCAL_CAPTURE_DIR

DEFAULT_PLOT_DIR = pathlib.Path("build") / "compare"
# --plot without a FILE: a sentinel no given path is (argparse would run a str const through type=).
PLOT_DEFAULT: Any = object()
DEFAULT_TOLERANCE_S = 5.0
# Which variant is the incumbent when no flag says: deployment_spec.rules.variant_plan.roles, the rule the constructs'
# alarms and dashboard use, so the comparison and the alarms agree on who is judged against whom.
ROLES_RULE = ("the incumbent is the endpoint's first variant of variants:, or with a shadow its production variant; "
              "the candidate is the other variant or the shadow")


def register(add: Callable[..., argparse.ArgumentParser]) -> None:
    p = add("compare", "compare an endpoint's incumbent and candidate variants (weighted A/B or shadow) from their "
                       "data capture: agreement of the answers on the same requests, latency, errors; a table, "
                       "optionally a PNG (--plot) and JSON (--json)", run)
    p.add_argument("--captures", default=LOCAL_CAPTURE_DIR, metavar="DIR|s3://BUCKET/PREFIX/",
                   help=f"the data-capture root: a local folder (default {LOCAL_CAPTURE_DIR}, where tritonsm serve writes) "
                        "or the endpoint's DestinationS3Uri; "
                        "it holds <endpoint>/<variant>/yyyy/mm/dd/hh/*.jsonl")
    p.add_argument("--endpoint", required=True, metavar="NAME",
                   help="the endpoint's name as its data capture files it (the folder under the root): its "
                        "EndpointName, <project>-<environment>-<endpoint> for an endpoint of the spec")
    p.add_argument("--incumbent", metavar="VARIANT",
                   help="the variant compared against (default: with --candidate alone, the other variant "
                        f"captured; without either flag, the spec's roles for the endpoint: {ROLES_RULE})")
    p.add_argument("--candidate", metavar="VARIANT",
                   help="the variant under test (default: with --incumbent alone, the other variant captured; "
                        "without either flag, the spec's candidate; required with --incumbent when more than two "
                        "variants are captured)")
    p.add_argument("--since", metavar="TIME", help="start of the window: ISO 8601 (UTC without a zone) or a "
                                                   "duration back from now, e.g. 30m, 1h, 2d (default: 1h)")
    p.add_argument("--until", metavar="TIME", help="end of the window, the same forms (default: now)")
    p.add_argument("--pair-tolerance-s", type=float, default=DEFAULT_TOLERANCE_S, metavar="SECONDS",
                   help="records of two variants with different eventIds pair when their requests are byte-identical "
                        f"and their inferenceTimes this close (default: {DEFAULT_TOLERANCE_S:g})")
    p.add_argument("--cloudwatch", action="store_true",
                   help="latency from CloudWatch (ModelLatency p50/p99 per variant over the window) instead of the "
                        "captures: SageMaker's records carry no latency")
    p.add_argument("--region", help="the endpoint's region for --cloudwatch and S3 (default: your AWS configuration's)")
    p.add_argument("--plot", nargs="?", const=PLOT_DEFAULT, type=pathlib.Path, metavar="FILE",
                   help=f"also draw the comparison as a PNG (needs matplotlib, the bench extra); FILE defaults to "
                        f"{DEFAULT_PLOT_DIR}/<endpoint>.png")
    p.add_argument("--json", type=pathlib.Path, metavar="FILE", help="also write the numbers as JSON, for CI")


def run(args: argparse.Namespace, s3: Any = None, cloudwatch: Any = None, now: Optional[dt.datetime] = None) -> int:
    from tritonsm.comparing import agreement, latency, pairing, report, sources
    from tritonsm.comparing.window import parse_window

    window = parse_window(args.since, args.until, now or dt.datetime.now(dt.timezone.utc))
    if not 0 < args.pair_tolerance_s <= 3600:
        raise UserError(f"--pair-tolerance-s {args.pair_tolerance_s:g}: use a number of seconds in (0, 3600]")
    if s3 is None and args.captures.startswith(sources.S3_SCHEME):
        s3 = _client("s3", args.region)
    source = sources.open_source(args.captures, s3)
    where = f"{source.label.rstrip('/')}/{args.endpoint}"
    incumbent, candidate, roles_from = choose_roles(source.variants(args.endpoint), args.incumbent, args.candidate,
                                                    where, lambda: spec_roles(args.spec, args.endpoint))
    records = {v: sources.read_variant(source, args.endpoint, v, window) for v in (incumbent, candidate)}
    empty = [v for v, found in records.items() if not found]
    if empty:
        hours = window.hour_folders()
        raise UserError(f"no records of variant {' or '.join(empty)} in {window.describe()} under {where}/ (hour "
                        f"folders {hours[0]} to {hours[-1]}); widen the window (--since, --until), and check that "
                        "the endpoint captures data and that requests reached the variant")
    paired = pairing.pair(records[incumbent], records[candidate], args.pair_tolerance_s)
    answers = agreement.compare_answers(paired.pairs)
    result: dict[str, Any] = {
        "endpoint": args.endpoint, "captures": args.captures, "window": window.describe(),
        "incumbent": incumbent, "candidate": candidate, "roles_from": roles_from,
        "records": {v: len(found) for v, found in records.items()},
        "pairing": {"by_event_id": paired.by_event_id, "by_input": paired.by_input,
                    "tolerance_s": args.pair_tolerance_s,
                    "unpaired": {incumbent: paired.unpaired_incumbent, candidate: paired.unpaired_candidate}},
        "agreement": {"compared": answers.compared, "with_error": answers.with_error,
                      "without_answer": answers.without_answer,
                      "outputs": {name: o.summary() for name, o in answers.outputs.items()}},
        "latency": _latency(args, records, window, cloudwatch),
        "errors": {v: latency.errors(found) for v, found in records.items()},
    }
    print(report.text(result), end="")
    written = []
    if args.plot is not None:
        # matplotlib only here: the table and the JSON need none of it (the bench extra brings it).
        from tritonsm.comparing import plot

        target = DEFAULT_PLOT_DIR / f"{args.endpoint}.png" if args.plot is PLOT_DEFAULT else args.plot
        plot.plot(result, target)
        written.append(str(target))
    if args.json:
        report.write_json(result, args.json)
        written.append(str(args.json))
    if written:
        print(f"\nwrote {', '.join(written)}")
    return 0


def choose_roles(found: list[str], incumbent: Optional[str], candidate: Optional[str], where: str,
                 from_spec: Callable[[], tuple[str, tuple[str, ...], str]]) -> tuple[str, str, str]:
    """(incumbent, candidate, how they were chosen) among the variants captured under ``where``; without either flag
    the spec's roles (``from_spec``: incumbent, candidates, where the spec says so), read only then."""
    for flag, name in (("--incumbent", incumbent), ("--candidate", candidate)):
        if name is not None and name not in found:
            raise UserError(f"{flag} {name}: no captures of that variant under {where}/; variants captured there: "
                            f"{', '.join(found) or 'none'}")
    if incumbent is not None and incumbent == candidate:
        raise UserError(f"--incumbent and --candidate both name {incumbent}; name two different variants "
                        f"({', '.join(found)})")
    if len(found) < 2:
        raise UserError(f"--endpoint: captures of {len(found)} variant under {where}/ ({', '.join(found) or 'none'}); "
                        "a comparison needs two: give the endpoint a second variant or a shadow (variants:, shadow: "
                        "in the spec) and capture its traffic")
    if incumbent is not None and candidate is not None:
        return incumbent, candidate, "as given"
    if (incumbent is not None or candidate is not None) and len(found) > 2:
        raise UserError(f"--endpoint: captures of {len(found)} variants under {where}/ ({', '.join(found)}); name "
                        "the two to compare: --incumbent VARIANT --candidate VARIANT")
    if incumbent is not None:
        return incumbent, _other(found, incumbent), "--incumbent given, the candidate is the other variant"
    if candidate is not None:
        return _other(found, candidate), candidate, "--candidate given, the incumbent is the other variant"
    return _spec_choice(found, where, *from_spec())


def _spec_choice(found: list[str], where: str, incumbent: str, candidates: tuple[str, ...],
                 said: str) -> tuple[str, str, str]:
    captured = ", ".join(found)
    if incumbent not in found:
        raise UserError(f"--endpoint: no captures of the incumbent {incumbent} ({said}) under {where}/; variants "
                        f"captured there: {captured}; check that the endpoint captures the incumbent's traffic, or "
                        "name the roles: --incumbent VARIANT --candidate VARIANT")
    present = [c for c in candidates if c in found]
    if not present:
        raise UserError(f"--endpoint: no captures of the candidate {' or '.join(candidates)} ({said}) under "
                        f"{where}/; variants captured there: {captured}; check that the endpoint captures the "
                        "candidate's traffic, or name the roles: --incumbent VARIANT --candidate VARIANT")
    if len(present) > 1:
        raise UserError(f"--endpoint: captures of {len(present)} candidates ({', '.join(present)}) under {where}/ "
                        f"({said}); name the one to compare with the incumbent {incumbent}: --candidate VARIANT")
    return incumbent, present[0], said


def spec_roles(spec_path: str, endpoint: str) -> tuple[str, tuple[str, ...], str]:
    """(incumbent, candidates, where the spec says so) of the spec endpoint that deploys as EndpointName
    ``endpoint`` in one of the spec's environments (deployment_spec.rules.variant_plan.roles)."""
    from deployment_spec import load_spec
    from deployment_spec.rules.container_env import endpoint_name
    from deployment_spec.rules.variant_plan import roles

    if not pathlib.Path(spec_path).is_file():
        raise UserError(f"--spec {spec_path}: no such file; without --incumbent and --candidate the roles come from "
                        f"the spec that deploys endpoint {endpoint} ({ROLES_RULE}): pass --spec PATH, or name the "
                        "roles: --incumbent VARIANT --candidate VARIANT")
    spec = load_spec(spec_path)
    deployed = {endpoint_name(spec.project, env_name, ep.name): (env_name, ep)
                for env_name, env in spec.environments.items() for ep in env.endpoints.values()}
    if endpoint not in deployed:
        raise UserError(f"--endpoint {endpoint}: no endpoint of {spec_path} deploys under that name (its endpoints "
                        f"deploy as {', '.join(deployed) or 'none'}); without --incumbent and --candidate the roles "
                        f"come from the spec: pass --spec with the spec that deploys {endpoint}, or name the roles: "
                        "--incumbent VARIANT --candidate VARIANT")
    env_name, spec_endpoint = deployed[endpoint]
    incumbent, candidates = roles(spec_endpoint)
    where = f"endpoints.{spec_endpoint.name} of {spec_path}, environment {env_name}"
    if not candidates:
        raise UserError(f"--endpoint {endpoint}: {where} has one variant ({incumbent}) and no shadow, so the spec "
                        "names no candidate; name the roles: --incumbent VARIANT --candidate VARIANT")
    if spec_endpoint.shadow is not None:
        said = f"the spec, {where}: the production variant is the incumbent, the shadow the candidate"
    else:
        said = f"the spec, {where}: the first variant is the incumbent"
    return incumbent, candidates, said


def _other(found: list[str], name: str) -> str:
    return next(v for v in found if v != name)


def _latency(args: argparse.Namespace, records: dict[str, list[Any]], window: Any, client: Any) -> dict[str, Any]:
    from tritonsm.comparing import cloudwatch, latency

    if args.cloudwatch:
        client = client or _client("cloudwatch", args.region)
        return {"source": cloudwatch.SOURCE, "variants": cloudwatch.read(args.endpoint, list(records), window, client)}
    found = {v: latency.captured_latency(r) for v, r in records.items()}
    if all(s is None for s in found.values()):
        return {"source": None, "variants": {}}
    return {"source": "the captures' tritonsmLatencyMs, per request",
            "variants": {v: s for v, s in found.items() if s is not None}}


def _client(service: str, region: Optional[str]) -> Any:
    import boto3
    return boto3.client(service, region_name=region)

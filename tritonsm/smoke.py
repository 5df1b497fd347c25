"""`tritonsm smoke ENDPOINT (--url URL | --deployed)`: one checked request per model of a spec endpoint.

The pipeline runs it after deploying a staging stage; by hand it checks a local endpoint
(`tritonsm serve`) or a deployed one. Exit 1 when any model fails. Heavy code (numpy, boto3)
loads in benchmarking.smoke only when it runs.
"""
from __future__ import annotations

import argparse
import pathlib

from deployment_spec import load_spec
from deployment_spec.container_env import endpoint_name
from deployment_spec.manifest import DEFAULT_MANIFEST, load_manifest
from deployment_spec.served import built_artifacts, spec_endpoint


def register(add) -> None:
    p = add("smoke", "smoke-test a spec endpoint: one request per model (each model of a multi-model endpoint), "
                     "outputs checked against the build manifest (and a recording with --expected)", run_smoke)
    p.add_argument("endpoint", help="an endpoint name of the spec")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="a local endpoint (tritonsm serve), e.g. http://127.0.0.1:8080")
    where.add_argument("--deployed", action="store_true",
                       help="the deployed endpoint <project>-<environment>-<endpoint>, through boto3 InvokeEndpoint")
    p.add_argument("--environment", help="whose overrides and endpoint name apply (default: the spec's first)")
    p.add_argument("--manifest", type=pathlib.Path, default=DEFAULT_MANIFEST,
                   help=f"build manifest (default: {DEFAULT_MANIFEST})")
    p.add_argument("--region", help="with --deployed: the endpoint's region (default: the environment's)")
    p.add_argument("--expected", type=pathlib.Path, help="also compare values with this recording (--record)")
    p.add_argument("--record", type=pathlib.Path, help="write the outputs to this file, for a later --expected")


def run_smoke(args: argparse.Namespace, client=None) -> int:
    from benchmarking import smoke

    spec = load_spec(args.spec)
    env_name, endpoint = spec_endpoint(spec, args.endpoint, args.environment)
    built = built_artifacts(args.manifest, endpoint.name, endpoint.models)
    cases = smoke.cases(endpoint, built, load_manifest(args.manifest), spec.models)
    if args.deployed:
        name = endpoint_name(spec.project, env_name, endpoint.name)
        target = smoke.DeployedClient(name, args.region or spec.environments[env_name].region, client)
        where = f"deployed endpoint {name}"
    else:
        target, where = smoke.LocalClient(args.url), args.url
    expected = smoke.load_recording(args.expected) if args.expected else None
    print(f"smoke {endpoint.name} ({where}): {len(cases)} model(s)", flush=True)
    results = smoke.run(target, cases, expected, log=lambda line: print(line, flush=True))
    failed = [r for r in results if r.problems]
    if args.record:
        smoke.save_recording(results, args.record)
        print(f"recorded {len(results) - len(failed)} model(s) in {args.record}")
    if failed:
        print(f"error: smoke test of {endpoint.name} failed for {len(failed)} of {len(results)} model(s):")
        for r in failed:
            for problem in r.problems:
                print(f"  - {problem}")
        return 1
    print(f"smoke {endpoint.name}: all {len(results)} model(s) answered as the build recorded")
    return 0


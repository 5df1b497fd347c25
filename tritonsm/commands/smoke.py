"""`tritonsm smoke [ENDPOINT ...] (--url URL | --local | --image [KIND] | --deployed)`: one checked request per model.

The pipeline runs it twice. In the GPU build step, `--image --record-dir DIR` starts each endpoint
in its own `sagemaker-tritonserver` image on the build GPU (as `tritonsm serve --image`), every
backend included, and records its answers. After a staging deploy, `--deployed --expected-dir DIR`
sends the same requests to the deployed endpoints and compares the answers with those recordings
within each model's tolerance. `--local` does the same on the local Triton server with CPU stand-ins
(no GPU, no Docker); an endpoint it cannot run (a TensorRT plan) has no recording, and a later
`--expected-dir` check of it compares with the manifest only, saying so.
By hand it checks a local endpoint (`--url`, from `tritonsm serve`) or a deployed one. Exit 1 when
any model fails. Heavy code (numpy, boto3) loads in tritonsm.checks.smoke_requests only when it runs.
"""
from __future__ import annotations

import argparse
import contextlib
import pathlib

from deployment_spec import load_spec
from deployment_spec.rules.component_endpoint import component_name
from deployment_spec.rules.container_env import endpoint_name
from deployment_spec.parsing.errors import UserError
from deployment_spec.builds.manifest import load_manifest
from deployment_spec.served import built_artifacts, resolve_endpoint, spec_endpoint
from tritonsm.commands.options import add_image_flags, add_spec_endpoint_flags


def register(add) -> None:
    p = add("smoke", "smoke-test spec endpoints: one request per model (each model of a multi-model endpoint), "
                     "outputs checked against the build manifest and, where one exists, a recording", run_smoke)
    p.add_argument("endpoint", nargs="*", help="endpoint names of the spec (default: every endpoint)")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="a local endpoint (tritonsm serve), e.g. http://127.0.0.1:8080")
    where.add_argument("--local", action="store_true",
                       help="start each endpoint on the local Triton server with CPU stand-ins for the test; "
                            "endpoints it cannot run (TensorRT plans) are skipped and named")
    where.add_argument("--deployed", action="store_true",
                       help="the deployed endpoint <project>-<environment>-<endpoint>, through boto3 InvokeEndpoint")
    add_image_flags(where, "start each endpoint in its own image with Docker on this host's GPUs for the test "
                           "(`tritonsm serve --image`): sagemaker (default) or ngc; every backend runs, TensorRT "
                           "plans included", region=False)
    add_spec_endpoint_flags(p, environment_help="whose overrides and endpoint name apply (default: the spec's first)")
    p.add_argument("--region", help="with --deployed: the endpoint's region (default: the environment's); with "
                                    "--image sagemaker: the registry's (default: your AWS configuration's, else the "
                                    "environment's)")
    p.add_argument("--expected", type=pathlib.Path, help="also compare values with this recording (one endpoint)")
    p.add_argument("--record", type=pathlib.Path, help="write the outputs to this file, for a later --expected")
    p.add_argument("--expected-dir", type=pathlib.Path,
                   help="compare each endpoint with DIR/<endpoint>.json where it exists (--record-dir's output)")
    p.add_argument("--record-dir", type=pathlib.Path, help="write each endpoint's outputs to DIR/<endpoint>.json")


def run_smoke(args: argparse.Namespace, client=None) -> int:
    spec = load_spec(args.spec)
    names = args.endpoint or list(spec.endpoints)
    if (args.expected or args.record or args.url) and len(names) != 1:
        raise UserError(f"--url, --expected and --record take one endpoint, got {len(names)} "
                        f"({', '.join(names)}); name one, or use --expected-dir / --record-dir")
    failed = 0
    for name in names:
        failed += _one(args, spec, name, client)
    return 1 if failed else 0


def _one(args: argparse.Namespace, spec, name: str, client) -> int:
    from tritonsm.checks import smoke_requests as smoke

    env_name, endpoint = spec_endpoint(spec, name, args.environment)
    built = built_artifacts(args.manifest, endpoint.name, endpoint.models)
    names = {m: component_name(spec.project, env_name, endpoint.name, m) for m in endpoint.models}
    cases = smoke.cases(endpoint, built, load_manifest(args.manifest), spec.models, spec.root, names)
    expected_file = args.expected or (args.expected_dir / f"{endpoint.name}.json" if args.expected_dir else None)
    expected = None
    if expected_file is not None and (args.expected or expected_file.is_file()):
        expected = smoke.load_recording(expected_file)
    elif args.expected_dir:
        print(f"smoke {endpoint.name}: no recording in {args.expected_dir} (the build could not run it locally): "
              "outputs checked against the manifest only", flush=True)
    record = args.record or (args.record_dir / f"{endpoint.name}.json" if args.record_dir else None)
    from local_endpoint.errors import LocalEndpointError
    try:
        with _target(args, spec, env_name, endpoint, client) as (target, where):
            if target is None:
                print(f"smoke {endpoint.name}: skipped, {where}", flush=True)
                return 0
            print(f"smoke {endpoint.name} ({where}): {len(cases)} model(s)", flush=True)
            results = smoke.run(target, cases, expected, log=lambda line: print(line, flush=True))
    except LocalEndpointError as exc:  # the endpoint did not start: a failure of this endpoint, not of the run
        print(f"error: smoke test of {endpoint.name} failed: {exc}", flush=True)
        return 1
    failed = [r for r in results if r.problems]
    if record:
        smoke.save_recording(results, record)
        print(f"recorded {len(results) - len(failed)} model(s) in {record}")
    if failed:
        print(f"error: smoke test of {endpoint.name} failed for {len(failed)} of {len(results)} model(s):")
        for r in failed:
            for problem in r.problems:
                print(f"  - {problem}")
        return 1
    print(f"smoke {endpoint.name}: all {len(results)} model(s) answered as the build recorded")
    return 0


@contextlib.contextmanager
def _target(args, spec, env_name: str, endpoint, client):
    from tritonsm.checks import smoke_requests as smoke

    name = endpoint_name(spec.project, env_name, endpoint.name)
    if args.deployed:
        region = args.region or spec.environments[env_name].region
        if endpoint.asynchronous is not None:
            yield _deployed_async(name, f"{spec.project}-{env_name}-Storage", endpoint.name, region, client), \
                f"deployed asynchronous endpoint {name}"
            return
        yield smoke.DeployedClient(name, region, client), f"deployed endpoint {name}"
    elif args.url:
        from local_endpoint.cli import one_name, runtime_address
        url, named_in_url = runtime_address(args.url)
        one_name(name, named_in_url, args.url)
        if endpoint.asynchronous is not None:
            yield _served_async(name, endpoint, spec.environments[env_name].region, url, client), \
                f"asynchronous {name} at {url}"
            return
        yield smoke.DeployedClient(name, client=client, endpoint_url=url), f"{name} at {url}"
    elif args.image:
        from local_endpoint.image.endpoints import for_spec_endpoint
        from local_endpoint.server.stop_signals import interrupting
        local = resolve_endpoint(args.spec, endpoint.name, args.environment, args.manifest)
        if local.components:
            # Skipped, not failed: the deployed smoke test then checks its answers against the manifest only.
            yield None, ("--image runs single-model and multi-model endpoints; an endpoint of inference components "
                         "runs one container per component, which --image does not start yet (use --local)")
            return
        with interrupting():
            server = for_spec_endpoint(local, args.image, region=args.region)
            with _runtime(name, local, server) as runtime:
                yield _local_client(name, runtime), f"{server.image.uri} in container {server.container_name}"
    else:
        from local_endpoint.endpoints.spec_servers import local_server
        from local_endpoint.errors import UnsupportedBackendError
        local = resolve_endpoint(args.spec, endpoint.name, args.environment, args.manifest)
        runtime = _runtime(name, local, local_server(local, cpu_stand_in=True))
        try:
            runtime.start()
        except UnsupportedBackendError as exc:
            runtime.stop()
            yield None, f"the local server cannot run it: {exc}"
            return
        try:
            yield _local_client(name, runtime), f"{name} at {runtime.url}, CPU stand-ins"
        finally:
            runtime.stop()


def _runtime(name: str, local, server):
    """``server`` behind the local SageMaker Runtime, under its deployed name: smoke calls it as it calls the
    deployed endpoint."""
    from local_endpoint.asynchronous import AsyncSetup
    from local_endpoint.endpoints.spec_servers import kind_of
    from local_endpoint.runtime.local_runtime import NamedEndpoint, LocalRuntime
    variant = local.endpoint.variant_name if local.endpoint else "AllTraffic"
    asynchronous = AsyncSetup.of(local, local.endpoint.name) if local.endpoint else None
    return LocalRuntime([NamedEndpoint(name, kind_of(local), server, variant, asynchronous)])


def _local_client(name: str, runtime):
    """How smoke calls an endpoint it started: InvokeEndpoint, or InvokeEndpointAsync through the local S3."""
    from local_endpoint.client.local_clients import local_client
    from tritonsm.checks import smoke_requests as smoke
    queue = runtime.asynchronous.queues.get(name) if runtime.asynchronous else None
    if queue is None:
        return smoke.DeployedClient(name, endpoint_url=runtime.url)
    return smoke.AsyncClient(name, queue.locations.input.url, local_client("sagemaker-runtime", runtime.url, attempts=3),
                             local_client("s3", runtime.asynchronous.aws.url, queue.locations.success_topic.region, attempts=3))


def _served_async(name: str, endpoint, region, url: str, client):
    """An asynchronous endpoint of a running `tritonsm serve`: its local S3 is the one AWS_ENDPOINT_URL_S3 names
    (the banner prints it), its input location the spec's layout there."""
    import os

    from local_endpoint.asynchronous.locations import locations_for
    from local_endpoint.client.local_clients import local_client
    from tritonsm.checks import smoke_requests as smoke
    s3_url = os.environ.get("AWS_ENDPOINT_URL_S3")
    if not s3_url:
        raise UserError(f"endpoint {endpoint.name} is asynchronous: its requests go through the local S3 of "
                        "`tritonsm serve`; set AWS_ENDPOINT_URL_S3 to the URL its banner prints (local S3, SNS and "
                        "SQS at ...) and run smoke again")
    where = locations_for(endpoint.name, endpoint.asynchronous, region or "us-east-1")
    return smoke.AsyncClient(name, where.input.url, client or local_client("sagemaker-runtime", url, attempts=3),
                             local_client("s3", s3_url, region, attempts=3))


def _deployed_async(name: str, storage_stack: str, storage_name: str, region, client):
    """A deployed asynchronous endpoint: its input location is under the stage bucket, named by the storage stack's
    BucketName output, at the prefix the construct gives it (``async/<endpoint>/input/``)."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    from deployment_spec.sections.asynchronous import input_prefix
    from tritonsm.checks import smoke_requests as smoke
    try:
        stack = boto3.client("cloudformation", region_name=region).describe_stacks(StackName=storage_stack)["Stacks"][0]
    except (BotoCoreError, ClientError) as error:
        raise UserError(f"endpoint {name} is asynchronous: smoke reads its stage bucket from stack {storage_stack}'s "
                        f"BucketName output, and could not: {error}") from None
    bucket = next((o["OutputValue"] for o in stack.get("Outputs", []) if o["OutputKey"] == "BucketName"), None)
    if bucket is None:
        raise UserError(f"stack {storage_stack} has no BucketName output; deploy it with this version (cdk deploy) "
                        "and run smoke again")
    return smoke.AsyncClient(name, f"s3://{bucket}/{input_prefix(storage_name)}",
                             client or boto3.client("sagemaker-runtime", region_name=region),
                             boto3.client("s3", region_name=region))

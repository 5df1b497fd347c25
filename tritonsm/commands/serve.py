"""`tritonsm serve`: a spec endpoint (or every one) on the local Triton server, as SageMaker's container starts it.

It resolves a spec endpoint into what the local endpoint needs (the tarballs of the build manifest, the
SAGEMAKER_TRITON_* environment the CDK app gives the SageMaker model) and hands over to ``local_endpoint.cli``,
which owns the server.
"""
from __future__ import annotations

import argparse
import pathlib

from deployment_spec import load_spec
from deployment_spec.parsing.errors import UserError
from deployment_spec.served import LocalEndpoint, resolve_endpoint
from deployment_spec.sections.variants import LOCAL_CAPTURE_DIR
from tritonsm.commands.options import add_image_flags, add_spec_endpoint_flags
from tritonsm.serving.names import check_image_flags, runtime_name
from tritonsm.serving.restarts import restart_flags, restart_policy
from tritonsm.serving.shadow_queue import shadow_queue_size

CAPTURE_DIR = pathlib.Path(LOCAL_CAPTURE_DIR)


def register(add) -> None:
    serve = add("serve", "run a spec endpoint (or --all) on the real Triton server, started as the SageMaker "
                         "container starts it, on the tarballs `tritonsm build` wrote; the port answers the SageMaker "
                         "Runtime API (InvokeEndpoint, under the deployed endpoint name) and the container's own "
                         "/ping and /invocations", run_serve)
    serve.add_argument("endpoint", nargs="?", help="an endpoint name of the spec")
    serve.add_argument("--all", action="store_true",
                       help="every endpoint of the spec behind one port, each under its deployed name "
                            "<project>-<environment>-<endpoint> (point AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME at it)")
    add_spec_endpoint_flags(serve)
    serve.add_argument("--port", type=int, help="port to listen on (default: a free one)")
    serve.add_argument("--mme-capacity", type=int, help="multi-model: most models loaded at once (default: no limit)")
    serve.add_argument("--component", action="append", metavar="MODEL",
                       help="inference components: serve only this model's component (repeatable; default: all, "
                            "each in its own Triton server behind one port)")
    serve.add_argument("--log-file", type=pathlib.Path, help="server log file (default: under the temp directory; "
                                                             "inference components: one file per component in its "
                                                             "folder; variants: one file per variant in its folder)")
    serve.add_argument("--capture-dir", type=pathlib.Path, default=CAPTURE_DIR, metavar="DIR",
                       help="endpoints with variants or a shadow: where the exchanges are captured, in SageMaker Data "
                            "Capture's layout DIR/<endpoint name>/<variant>/YYYY/MM/DD/HH/*.jsonl, which `tritonsm "
                            f"compare` reads (default: {CAPTURE_DIR})")
    # 64 and 1024 spelled out: local_endpoint.variants.shadow holds them (MAX_PENDING, MOST_PENDING) and checks the
    # value; importing it here would load numpy for every tritonsm command.
    serve.add_argument("--shadow-queue-size", type=int, metavar="N",
                       help="endpoints with a shadow: how many copies of production requests may wait for the "
                            "shadow's server (default: 64, at most 1024; each holds its request body); a copy that "
                            "finds the queue full is dropped, never delaying production, and the drops are counted "
                            "and printed: while they happen and in a line at the stop")
    serve.add_argument("--startup-timeout", type=float,
                       help="seconds to wait for readiness (default: 120; with --image the endpoint's startup_timeout_s)")
    # Spelled out here, not imported: importing local_endpoint would load numpy for every tritonsm command.
    serve.add_argument("--cpu-stand-in", action="store_true",
                       help="serve onnxruntime and pytorch models, which the local server lacks, as labelled "
                            "Python-backend stand-ins running ONNX Runtime / TorchScript on the CPU (latency not "
                            "representative), and KIND_GPU instance groups on the CPU; TensorRT plans cannot be stood in")
    # Spelled out as local_endpoint.cli.add_restart_flags defines them (defaults there: None means its default).
    serve.add_argument("--max-restarts", type=int, metavar="N",
                       help="restart a Triton server that exited or stopped answering /ping, as SageMaker replaces "
                            "a failed container, at most N times within --restart-window; one more failure stops "
                            "serve (default: 3; 0: stop on the first; a container of --image is not restarted)")
    serve.add_argument("--restart-window", type=float, metavar="SECONDS",
                       help="the window --max-restarts counts in (default: 600)")
    serve.add_argument("--unhealthy-after", type=float, metavar="SECONDS",
                       help="a running server whose /ping has not answered 200 for this long is restarted "
                            "(default: 30)")
    add_image_flags(serve, "run the endpoint in its own image with Docker on this host's GPUs, as SageMaker runs "
                           "it: sagemaker (default: the endpoint's sagemaker-tritonserver image, pulled after an ECR "
                           "login with your AWS credentials) or ngc (nvcr.io/nvidia/tritonserver of the same release, "
                           "with that release's SageMaker serve script)")


def run_serve(args: argparse.Namespace) -> int:
    restart_policy(args)   # a restart flag out of range is told before anything is resolved or started
    shadow_queue_size(args)
    if args.all:
        from tritonsm.serving.all_endpoints import run_serve_all
        return run_serve_all(args)
    if not args.endpoint:
        names = ", ".join(load_spec(args.spec).endpoints)
        raise UserError(f"name the endpoint to serve (one of: {names}) or pass --all to serve every endpoint")
    local = resolve_endpoint(args.spec, args.endpoint, args.environment, args.manifest)
    from tritonsm.checks import signatures  # before any server starts: an archive that fails is never served
    signatures.check_before_serving(local.every_tarball, local.public_key, local.manifest, args.manifest)
    named = runtime_name(args, local)
    if args.shadow_queue_size is not None and (local.endpoint is None or local.endpoint.shadow is None):
        raise UserError(f"--shadow-queue-size applies to an endpoint with a shadow; endpoint {args.endpoint} has "
                        "none: drop --shadow-queue-size")
    if local.components:
        if args.image:
            raise UserError("--image serves single-model and multi-model endpoints; serve an endpoint of inference "
                            "components on the local server (one server per component), without --image")
        return _serve_components(args, local, named)
    if args.component:
        raise UserError(f"--component applies to an endpoint of kind inference-components; {args.endpoint} is "
                        f"{'multi-model' if local.multi_model else 'single-model'}")
    if local.variants:
        return _serve_variants(args, local, named)
    if args.image:
        return _serve_image(args, local, named)
    argv = [str(tarball) for tarball in local.tarballs] + ["--endpoint-name", named[0], "--variant-name", named[1]]
    argv += ["--mode", "mme" if local.multi_model else "sme", "--startup-timeout", str(args.startup_timeout or 120.0)]
    if local.default_model:
        argv += ["--default-model", local.default_model]
    for key, value in local.env.items():
        argv += ["--env", f"{key}={value}"]
    if args.cpu_stand_in:
        argv += ["--cpu-stand-in", "--triton-version", local.triton_version]
    for flag, value in (("--port", args.port), ("--mme-capacity", args.mme_capacity), ("--log-file", args.log_file),
                        *restart_flags(args)):
        if value is not None:
            argv += [flag, str(value)]
    from local_endpoint.asynchronous import AsyncSetup
    from local_endpoint.cli import serve_main
    return serve_main(argv, AsyncSetup.of(local, args.endpoint))


def _serve_components(args: argparse.Namespace, local: LocalEndpoint, named: tuple[str, str]) -> int:
    """Each component as the container serves a single-model endpoint, behind one port
    (local_endpoint.endpoints.components)."""
    chosen = list(local.components)
    if args.component:
        by_model = {c.model: c for c in local.components}
        unknown = [m for m in args.component if m not in by_model]
        if unknown:
            raise UserError(f"--component {', '.join(unknown)}: not a model of endpoint {args.endpoint} "
                            f"(components: {', '.join(by_model)})")
        chosen = [by_model[m] for m in args.component]
    if args.mme_capacity is not None:
        raise UserError("--mme-capacity applies to multi-model endpoints; each component runs its own server")
    from local_endpoint.cli import serve_components
    return serve_components(chosen, name=named[0], variant=named[1], port=args.port,
                            log_dir=args.log_file.parent if args.log_file else None,
                            startup_timeout=args.startup_timeout or 120.0, cpu_stand_in=args.cpu_stand_in,
                            triton_version=local.triton_version, restarts=restart_policy(args))


def _serve_variants(args: argparse.Namespace, local: LocalEndpoint, named: tuple[str, str]) -> int:
    """Each variant (and the shadow) on a server of its own, routed by weight (local_endpoint.variants)."""
    kinds = "variants" if local.endpoint is not None and local.endpoint.variants else "a shadow"
    if args.image:
        raise UserError(f"--image runs one container per endpoint; endpoint {args.endpoint} has {kinds} (one server "
                        "each): serve it on the local server, without --image")
    if args.mme_capacity is not None:
        raise UserError(f"--mme-capacity applies to multi-model endpoints; endpoint {args.endpoint} is single-model "
                        f"with {kinds}: drop --mme-capacity")
    from local_endpoint.variants.serve import serve_variants
    return serve_variants(local, named[0], named[1], port=args.port, capture_dir=args.capture_dir,
                          log_dir=args.log_file.parent if args.log_file else None,
                          startup_timeout=args.startup_timeout or 120.0, cpu_stand_in=args.cpu_stand_in,
                          restarts=restart_policy(args), shadow_queue_size=shadow_queue_size(args))


def _serve_image(args: argparse.Namespace, local, named: tuple[str, str]) -> int:
    check_image_flags(args)
    from local_endpoint.asynchronous import AsyncSetup
    from local_endpoint.cli import KIND_OF_MODE, announce
    from local_endpoint.errors import LocalEndpointError
    from local_endpoint.image.endpoints import for_spec_endpoint
    from local_endpoint.runtime.cli import serve_one
    from local_endpoint.runtime.local_runtime import NamedEndpoint
    try:
        endpoint = for_spec_endpoint(local, args.image, region=args.region, capacity=args.mme_capacity,
                                     log_file=args.log_file, startup_timeout=args.startup_timeout)
    except LocalEndpointError as error:
        raise UserError(str(error)) from None
    mode = "mme" if local.multi_model else "sme"
    asynchronous = AsyncSetup.of(local, args.endpoint)
    named_endpoint = NamedEndpoint(named[0], KIND_OF_MODE[mode], endpoint, named[1], asynchronous)
    return serve_one(named_endpoint, args.port, lambda url: announce(endpoint, mode, url), restart_policy(args))

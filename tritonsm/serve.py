"""`tritonsm serve` and `tritonsm invoke` on spec endpoints.

They resolve a spec endpoint into what the local endpoint needs (the tarballs of
the build manifest, the SAGEMAKER_TRITON_* environment the CDK app gives the
SageMaker model) and hand over to ``local_endpoint.cli``, which owns the server.
"""
from __future__ import annotations

import argparse
import pathlib

from deployment_spec import load_spec
from deployment_spec.container_env import endpoint_name
from deployment_spec.errors import UserError
from deployment_spec.manifest import DEFAULT_MANIFEST, EndpointArtifacts
from deployment_spec.served import built_artifacts, resolve_endpoint, spec_endpoint

# Spelled out here, not imported from local_endpoint.image.images, to keep numpy out of every command.
SAGEMAKER, IMAGE_KINDS = "sagemaker", ("sagemaker", "ngc")


def register(add) -> None:
    serve = add("serve", "run a spec endpoint on the real Triton server, started as the SageMaker container "
                         "starts it, on the tarballs `tritonsm build` wrote", run_serve)
    serve.add_argument("endpoint", help="an endpoint name of the spec")
    _common(serve)
    serve.add_argument("--port", type=int, help="port to listen on (default: a free one)")
    serve.add_argument("--mme-capacity", type=int, help="multi-model: most models loaded at once (default: no limit)")
    serve.add_argument("--log-file", type=pathlib.Path, help="server log file (default: under the temp directory)")
    serve.add_argument("--startup-timeout", type=float,
                       help="seconds to wait for readiness (default: 120; with --image the endpoint's startup_timeout_s)")
    # Spelled out here, not imported: importing local_endpoint would load numpy for every tritonsm command.
    serve.add_argument("--cpu-stand-in", action="store_true",
                       help="serve onnxruntime and pytorch models, which the local server lacks, as labelled "
                            "Python-backend stand-ins running ONNX Runtime / TorchScript on the CPU (latency not "
                            "representative), and KIND_GPU instance groups on the CPU; TensorRT plans cannot be stood in")
    add_image_flags(serve, "run the endpoint in its own image with Docker on this host's GPUs, as SageMaker runs "
                           "it: sagemaker (default: the endpoint's sagemaker-tritonserver image, pulled after an ECR "
                           "login with your AWS credentials) or ngc (nvcr.io/nvidia/tritonserver of the same release, "
                           "with that release's SageMaker serve script)")

    invoke = add("invoke", "send one request to a local endpoint (--url) or a deployed one "
                           "(--endpoint with --deployed); other options as in `tritonsm invoke --url URL --help`",
                 run_invoke, add_help=False)
    # -h with --url (or --endpoint-name) shows the local endpoint's request options, which this parser hands on
    # unparsed; argparse's own -h would print this parser's help and exit before seeing --url.
    invoke.add_argument("-h", "--help", action="store_true",
                        help="show this help message and exit; with --url URL, the request options")
    invoke.set_defaults(print_help=invoke.print_help)
    invoke.add_argument("--endpoint", help="a spec endpoint: names the deployed endpoint and resolves --model")
    _common(invoke)
    invoke.add_argument("--deployed", action="store_true",
                        help="call the deployed SageMaker endpoint <project>-<environment>-<endpoint> through boto3")
    invoke.add_argument("--model", help="multi-model: a Triton model name of the endpoint, resolved to its "
                                        "current TargetModel (the content-versioned tarball name)")


def add_image_flags(parser, help_: str, *, region: bool = True) -> None:
    """`--image [sagemaker|ngc]` (and `--region`), shared with `tritonsm smoke`."""
    parser.add_argument("--image", nargs="?", const=SAGEMAKER, choices=IMAGE_KINDS, help=help_)
    if region:
        parser.add_argument("--region", help="with --image sagemaker: the registry's region (default: your AWS "
                                             "configuration's, else the environment's)")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--environment", help="whose overrides apply (default: the spec's first environment)")
    parser.add_argument("--manifest", type=pathlib.Path, default=DEFAULT_MANIFEST,
                        help=f"build manifest (default: {DEFAULT_MANIFEST})")


def run_serve(args: argparse.Namespace) -> int:
    local = resolve_endpoint(args.spec, args.endpoint, args.environment, args.manifest)
    if args.image:
        return _serve_image(args, local)
    argv = [str(tarball) for tarball in local.tarballs]
    argv += ["--mode", "mme" if local.multi_model else "sme", "--startup-timeout", str(args.startup_timeout or 120.0)]
    if local.default_model:
        argv += ["--default-model", local.default_model]
    for key, value in local.env.items():
        argv += ["--env", f"{key}={value}"]
    if args.cpu_stand_in:
        argv += ["--cpu-stand-in", "--triton-version", local.triton_version]
    for flag, value in (("--port", args.port), ("--mme-capacity", args.mme_capacity), ("--log-file", args.log_file)):
        if value is not None:
            argv += [flag, str(value)]
    from local_endpoint.cli import serve_main
    return serve_main(argv)


def _serve_image(args: argparse.Namespace, local) -> int:
    if args.cpu_stand_in:
        raise UserError("--cpu-stand-in and --image exclude each other: the image runs every backend itself, "
                        "on the GPU; drop one of them")
    from local_endpoint.cli import serve_endpoint
    from local_endpoint.errors import LocalEndpointError
    from local_endpoint.image.endpoints import for_spec_endpoint
    try:
        endpoint = for_spec_endpoint(local, args.image, region=args.region, port=args.port,
                                     capacity=args.mme_capacity, log_file=args.log_file,
                                     startup_timeout=args.startup_timeout)
    except LocalEndpointError as error:
        raise UserError(str(error)) from None
    return serve_endpoint(endpoint, "mme" if local.multi_model else "sme")


def run_invoke(args: argparse.Namespace) -> int:
    rest = list(args.rest)
    if args.help:
        if not any(a.split("=", 1)[0] in ("--url", "--endpoint-name") for a in rest):
            args.print_help()
            return 0
        rest.append("--help")
    if args.endpoint:
        spec = load_spec(args.spec)
        env_name, endpoint = spec_endpoint(spec, args.endpoint, args.environment)
        if args.deployed:
            rest += ["--endpoint-name", endpoint_name(spec.project, env_name, endpoint.name)]
            region = spec.environments[env_name].region
            if region and "--region" not in rest:
                rest += ["--region", region]
        if args.model:
            built = built_artifacts(args.manifest, endpoint.name, endpoint.models)
            rest += ["--target-model", _target_model(built, args.model)]
    elif args.deployed or args.model:
        raise UserError("--deployed and --model need --endpoint NAME (a spec endpoint)")
    from local_endpoint.cli import invoke_main
    return invoke_main(rest)


def _target_model(built: EndpointArtifacts, model: str) -> str:
    for artifact in built.artifacts:
        if model in artifact.models or model == artifact.object_name:
            return artifact.object_name
    names = sorted(m for a in built.artifacts for m in a.models)
    raise UserError(f"--model {model!r} is not served by this endpoint (models: {', '.join(names)})")

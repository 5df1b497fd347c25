"""`tritonsm invoke`: one request to a local endpoint (``--url``) or a deployed one (``--endpoint`` with ``--deployed``).

A spec endpoint names the deployed endpoint and resolves ``--model`` and ``--component``; the request options
themselves are the local endpoint's (``local_endpoint.cli``), handed on unparsed.
"""
from __future__ import annotations

import argparse

from deployment_spec import load_spec
from deployment_spec.builds.manifest import EndpointArtifacts
from deployment_spec.parsing.errors import UserError
from deployment_spec.rules.component_endpoint import component_name
from deployment_spec.rules.container_env import endpoint_name
from deployment_spec.sections.endpoint import EndpointKind, EndpointSpec
from deployment_spec.served import built_artifacts, spec_endpoint
from tritonsm.commands.options import add_spec_endpoint_flags


def register(add) -> None:
    invoke = add("invoke", "send one request to a local endpoint (--url) or a deployed one "
                           "(--endpoint with --deployed); other options as in `tritonsm invoke --url URL --help`",
                 run_invoke, add_help=False)
    # -h with --url (or --endpoint-name) shows the local endpoint's request options, which this parser hands on
    # unparsed; argparse's own -h would print this parser's help and exit before seeing --url.
    invoke.add_argument("-h", "--help", action="store_true",
                        help="show this help message and exit; with --url URL, the request options")
    invoke.set_defaults(print_help=invoke.print_help)
    invoke.add_argument("--endpoint", help="a spec endpoint: names the deployed endpoint and resolves --model")
    add_spec_endpoint_flags(invoke)
    invoke.add_argument("--deployed", action="store_true",
                        help="call the deployed SageMaker endpoint <project>-<environment>-<endpoint> through boto3")
    invoke.add_argument("--model", help="multi-model: a Triton model name of the endpoint, resolved to its "
                                        "current TargetModel (the content-versioned tarball name)")
    invoke.add_argument("--component", metavar="MODEL",
                        help="inference components: the model whose component answers, resolved to its "
                             "InferenceComponentName <project>-<environment>-<endpoint>-<model>")


def run_invoke(args: argparse.Namespace) -> int:
    rest = list(args.rest)
    if args.help:
        if not any(a.split("=", 1)[0] in ("--url", "--endpoint-name") for a in rest):
            args.print_help()
            from local_endpoint.cli import invoke_options_help
            print("\n" + invoke_options_help())   # the request options (--url, --text...) too
            return 0
        rest.append("--help")
    if args.endpoint:
        spec = load_spec(args.spec)
        env_name, endpoint = spec_endpoint(spec, args.endpoint, args.environment)
        rest += _component_flag(spec.project, env_name, endpoint, args.component)
        if args.deployed or any(a.split("=", 1)[0] == "--url" for a in rest):
            # The same EndpointName locally (the runtime of `tritonsm serve`) and deployed.
            rest += ["--endpoint-name", endpoint_name(spec.project, env_name, endpoint.name)]
        if args.deployed:
            region = spec.environments[env_name].region
            if region and "--region" not in rest:
                rest += ["--region", region]
        if args.model:
            built = built_artifacts(args.manifest, endpoint.name, endpoint.models)
            rest += ["--target-model", _target_model(built, args.model)]
        if "--image" in rest and "--input-name" not in rest:
            rest += _image_input(spec, endpoint, args.model or args.component)
    elif args.deployed or args.model or args.component:
        raise UserError("--deployed, --model and --component need --endpoint NAME (a spec endpoint)")
    from local_endpoint.cli import invoke_main
    return invoke_main(rest)


def _image_input(spec, endpoint, model: str | None) -> list[str]:
    """``--input-name`` for ``--image``: the served model's encoded-image input, from the spec."""
    from deployment_spec.sections.dali import image_inputs

    name = model or (endpoint.models[0] if len(endpoint.models) == 1 else None)
    found = sorted(image_inputs(spec.models, name)) if name else []
    return ["--input-name", found[0]] if len(found) == 1 else []


def _target_model(built: EndpointArtifacts, model: str) -> str:
    for artifact in built.artifacts:
        if model in artifact.models or model == artifact.object_name:
            return artifact.object_name
    names = sorted(m for a in built.artifacts for m in a.models)
    raise UserError(f"--model {model!r} is not served by this endpoint (models: {', '.join(names)})")


def _component_flag(project: str, env_name: str, endpoint: EndpointSpec, model: str | None) -> list[str]:
    """``--inference-component NAME`` for an endpoint of inference components (every call names one)."""
    if endpoint.kind is not EndpointKind.INFERENCE_COMPONENTS:
        if model:
            raise UserError(f"--component applies to an endpoint of kind inference-components; {endpoint.name} is "
                            f"{endpoint.kind.value}")
        return []
    if model not in endpoint.models:
        got = f"--component {model!r} is not one of its models" if model else "no --component given"
        raise UserError(f"endpoint {endpoint.name} hosts inference components and {got}; name one with "
                        f"--component MODEL: {', '.join(endpoint.models)}")
    return ["--inference-component", component_name(project, env_name, endpoint.name, model)]

"""`serve` and `invoke`: command-line entry points the tritonsm CLI delegates to.

Both return an exit code and never let a traceback reach the user for a
mistake they can fix: every LocalEndpointError is printed as one message.
"""

from __future__ import annotations

import argparse
import json
import pathlib

from deployment_spec.sections.endpoint import EndpointKind
from deployment_spec.facts.serving_runtimes import DEFAULT_TRITON_VERSION
from deployment_spec.sections.tasks import AUDIO, IMAGE, TEXT, TEXT_PAIR
from local_endpoint.asynchronous import AsyncSetup
from local_endpoint.client.invoke import (INFERENCE_COMPONENT_HEADER, endpoint_names_at, invoke_sagemaker_endpoint,
                                          split_local_url)
from local_endpoint.client.invoke_stream import audio_body, generate_body, stream_sagemaker_endpoint
from local_endpoint.client.payload import encode_request
from local_endpoint.client.request_inputs import (audio_bytes_tensor, image_bytes_tensor, image_tensor, read_audio_file,
                                                  read_input_file, text_tensor, tokenize_text)
from local_endpoint.client.response_output import OUTPUT_FILE_SUFFIXES, format_response, save_response
from local_endpoint.endpoints.components import ComponentsEndpoint
from local_endpoint.endpoints.multi_model import MultiModelEndpoint
from local_endpoint.endpoints.single_model import SingleModelEndpoint
from local_endpoint.errors import InvokeError, LocalEndpointError
from local_endpoint.runtime.cli import DEFAULT_ENDPOINT_NAME, fail as _fail, serve_one
from local_endpoint.runtime.local_runtime import DEFAULT_VARIANT, NamedEndpoint
from local_endpoint.runtime.routes import endpoint_in_path
from local_endpoint.server.serve_flags import MME, SME
from local_endpoint.server.supervision import (DEFAULT_MAX_RESTARTS, DEFAULT_UNHEALTHY_AFTER_S, DEFAULT_WINDOW_S,
                                               RestartPolicy)

KIND_OF_MODE = {SME: EndpointKind.SINGLE_MODEL, MME: EndpointKind.MULTI_MODEL}


def serve_main(argv: list[str], asynchronous: AsyncSetup | None = None) -> int:
    """Serve tarballs on the local Triton server until Ctrl-C; 0 on a clean stop. ``asynchronous``: serve them as
    an asynchronous endpoint (InvokeEndpointAsync, `tritonsm serve` of a spec endpoint with an asynchronous block)."""
    parser = _serve_parser()
    try:
        args = parser.parse_args(argv)
        endpoint = _endpoint_from_args(parser, args)
        restarts = restart_policy(args)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    except LocalEndpointError as error:
        return _fail(error)
    named = NamedEndpoint(args.endpoint_name, KIND_OF_MODE[args.mode], endpoint, args.variant_name, asynchronous)
    return serve_one(named, args.port, lambda url: announce(endpoint, args.mode, url), restarts)


def serve_components(components, *, name: str = DEFAULT_ENDPOINT_NAME, variant: str = DEFAULT_VARIANT,
                     port: int | None = None,
                     log_dir: pathlib.Path | None = None, startup_timeout: float = 120.0, cpu_stand_in: bool = False,
                     triton_version: str = DEFAULT_TRITON_VERSION,
                     restarts: RestartPolicy = RestartPolicy()) -> int:
    """Serve inference components (``deployment_spec.served.LocalComponent``) behind one port until Ctrl-C; ``name``
    is the endpoint's EndpointName; ``restarts`` bounds the restarts of a component's failed server."""
    try:
        endpoint = ComponentsEndpoint(components, log_dir=log_dir, startup_timeout=startup_timeout,
                                      cpu_stand_in=cpu_stand_in, triton_version=triton_version)
    except LocalEndpointError as error:
        return _fail(error)

    def announce_components(url: str) -> None:
        print(f"serving {len(endpoint.component_names)} inference component(s) at {url}; name one per "
              f"request ({INFERENCE_COMPONENT_HEADER}, tritonsm invoke --component MODEL): "
              f"{', '.join(endpoint.component_names)}", flush=True)
        for note in endpoint.stand_in_notes:
            print(note, flush=True)
        print(f"server logs: {endpoint.log_path}", flush=True)

    named = NamedEndpoint(name, EndpointKind.INFERENCE_COMPONENTS, endpoint, variant)
    return serve_one(named, port, announce_components, restarts)


def announce(endpoint, mode: str, url: str) -> None:
    """What a single-model or multi-model endpoint serves, at ``url``."""
    archives = len(endpoint.tarballs) if mode == MME else 1
    print(f"serving {archives} model archive(s) ({mode.upper()}) at {url}", flush=True)
    if mode == MME:
        print(f"target models: {', '.join(endpoint.target_models)}", flush=True)
    else:
        print(f"default model: {endpoint.default_model}", flush=True)
    for note in endpoint.stand_in_notes:
        print(note, flush=True)
    print(f"server log: {endpoint.log_path}", flush=True)
    metrics = getattr(endpoint, "metrics_url", None)  # an endpoint in its own image keeps them in the container
    if metrics:
        print(f"Triton metrics (Prometheus): {metrics}", flush=True)


def invoke_main(argv: list[str]) -> int:
    """Send one request to a local or deployed endpoint and print the outputs."""
    parser = _invoke_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    try:
        if not (args.url or args.endpoint_name):
            parser.error("one of the arguments --url --endpoint-name is required")
        if args.output is not None and args.output.suffix not in OUTPUT_FILE_SUFFIXES:
            parser.error(f"--output {args.output} must end in {' or '.join(OUTPUT_FILE_SUFFIXES)}")
        parameters = _request_parameters(parser, args.parameter)
        clip = None
        if args.stream:
            _check_stream_flags(parser, args)
            clip = read_audio_file(args.audio[0]) if args.audio is not None else None   # before any call
        else:
            # Encoded image files are bytes that are not text: only binary+json carries them as BYTES.
            raw_files = (args.image is not None and not args.input_name) or args.audio is not None
            request = encode_request(_tensors_from_args(parser, args), binary=args.binary or raw_files,
                                     parameters=parameters)
        name, url = args.endpoint_name, None
        if args.url:
            url, named_in_url = runtime_address(args.url)
            name = _local_endpoint_name(url, one_name(name, named_in_url, args.url))
        if args.stream:
            body = audio_body(clip, parameters) if clip is not None else generate_body(args.text, parameters)
            return _stream(name, body, args.region, url, args.timeout, args.inference_component)
        try:
            response = invoke_sagemaker_endpoint(
                name, request, region=args.region, target_model=args.target_model,
                inference_component=args.inference_component, endpoint_url=url, timeout=args.timeout,
            )
        except InvokeError as error:
            raise InvokeError(_with_image_hint(str(error), args)) from None
        print(format_response(response))
        if args.output is not None:
            save_response(response, args.output)
            print(f"outputs saved to {args.output}")
        return 0
    except SystemExit as exit_:
        return int(exit_.code or 0)
    except (LocalEndpointError, OSError) as error:  # OSError: e.g. an unwritable --output
        return _fail(error)


def _stream(name: str, body: bytes, region: str | None, url: str | None, timeout: float,
            inference_component: str | None) -> int:
    """Print each streamed ``text_output`` as it arrives, then end the line (also before an error)."""
    written = False

    def write(text: str) -> None:
        nonlocal written
        written = True
        print(text, end="", flush=True)

    try:
        stream_sagemaker_endpoint(name, body, write, region=region, endpoint_url=url, timeout=timeout,
                                  inference_component=inference_component)
    except InvokeError:
        if written:
            print(flush=True)
        raise
    print(flush=True)
    return 0


# What --stream sends is the generate JSON of --text or --audio and --parameter: the flags of a KServe v2 request do
# not apply.
_NOT_STREAMED = ("text_pair", "input_name", "tokenizer", "max_length", "binary", "output", "target_model")


def _check_stream_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if (args.text is None) == (args.audio is None):
        parser.error('--stream sends --text as the generate JSON {"text_input": TEXT, "parameters": {...}} of a '
                     'decoupled model, or --audio FILE as {"audio": <its bytes, base64>, "parameters": {...}} of a '
                     "speech model; give one of them (and --parameter KEY=VALUE for its parameters)")
    if args.audio is not None and len(args.audio) != 1:
        parser.error(f"--stream --audio takes one file (one clip per request); got {len(args.audio)}")
    given = [f"--{flag.replace('_', '-')}" for flag in _NOT_STREAMED if getattr(args, flag) not in (None, False)]
    if given:
        parser.error(f"--stream sends only --text or --audio, and --parameter; leave out {', '.join(given)}")


def _serve_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tritonsm serve",
        description="Run the real Triton server on model tarballs, started as the SageMaker container starts it.",
    )
    parser.add_argument("tarballs", nargs="+", type=pathlib.Path, help="model archives (.tar.gz)")
    parser.add_argument("--mode", choices=(SME, MME), default=SME,
                        help="single-model (one tarball, /invocations) or multi-model (target model per request)")
    parser.add_argument("--default-model", help="SME: the model /invocations serves (default: the only one)")
    parser.add_argument("--port", type=int, help="port to listen on (default: a free one)")
    parser.add_argument("--endpoint-name", default=DEFAULT_ENDPOINT_NAME,
                        help="the EndpointName the SageMaker Runtime API (POST /endpoints/NAME/invocations) answers "
                             f"to (default: {DEFAULT_ENDPOINT_NAME}; `tritonsm serve ENDPOINT` passes the deployed "
                             "name <project>-<environment>-<endpoint>)")
    parser.add_argument("--variant-name", default=DEFAULT_VARIANT,
                        help=f"the production variant the API reports as invoked (default: {DEFAULT_VARIANT})")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                        help="container environment variable, e.g. SAGEMAKER_TRITON_LOG_VERBOSE=0 (repeatable)")
    parser.add_argument("--mme-capacity", type=int, help="MME: most models loaded at once (default: no limit)")
    parser.add_argument("--log-file", type=pathlib.Path, help="server log file (default: under the temp directory)")
    parser.add_argument("--startup-timeout", type=float, default=120.0, help="seconds to wait for readiness")
    add_cpu_stand_in_flag(parser)
    add_restart_flags(parser)
    return parser


def add_restart_flags(parser: argparse.ArgumentParser) -> None:
    """`--max-restarts`, `--restart-window`, `--unhealthy-after` (`tritonsm serve <endpoint>` spells out the same)."""
    parser.add_argument("--max-restarts", type=int, default=DEFAULT_MAX_RESTARTS, metavar="N",
                        help="restart a Triton server that exited or stopped answering /ping, as SageMaker replaces "
                             "a failed container, at most N times within --restart-window; one more failure stops "
                             f"serve (default: {DEFAULT_MAX_RESTARTS}; 0: stop on the first)")
    parser.add_argument("--restart-window", type=float, default=DEFAULT_WINDOW_S, metavar="SECONDS",
                        help=f"the window --max-restarts counts in (default: {DEFAULT_WINDOW_S:g})")
    parser.add_argument("--unhealthy-after", type=float, default=DEFAULT_UNHEALTHY_AFTER_S, metavar="SECONDS",
                        help="a running server whose /ping has not answered 200 for this long is restarted "
                             f"(default: {DEFAULT_UNHEALTHY_AFTER_S:g})")


def restart_policy(args: argparse.Namespace) -> RestartPolicy:
    """The policy of the flags ``add_restart_flags`` defines; LocalEndpointError for a value out of range."""
    return RestartPolicy(args.max_restarts, args.restart_window, args.unhealthy_after)


def add_cpu_stand_in_flag(parser: argparse.ArgumentParser) -> None:
    """`--cpu-stand-in`, shared with `tritonsm serve <endpoint>`."""
    parser.add_argument("--cpu-stand-in", action="store_true",
                        help="serve onnxruntime and pytorch models, which the local server lacks, as labelled "
                             "Python-backend stand-ins running ONNX Runtime / TorchScript on the CPU (same name, "
                             "inputs, outputs and batching; latency not representative), and run KIND_GPU instance "
                             "groups on the CPU. TensorRT plans cannot be stood in")
    parser.add_argument("--triton-version", default=DEFAULT_TRITON_VERSION, metavar="YY.MM",
                        help="the endpoint image's release: ONNX stand-ins run its ONNX Runtime "
                             f"(default: {DEFAULT_TRITON_VERSION}; `tritonsm serve <endpoint>` passes the spec's)")


# Triton's own words when BYTES reach a UINT8 input (core src/infer_request.cc, input data-type check).
_UINT8_WANTED = "data-type is 'BYTES', but model"


def _with_image_hint(message: str, args: argparse.Namespace) -> str:
    """An image sent as BYTES to a model that takes UINT8 rows (a DALI model, a task with preprocess: dali): the
    server names the type; the fix is a flag of this command."""
    if args.image is None or args.input_name or _UINT8_WANTED not in message or "expects 'UINT8'" not in message:
        return message
    return (f"{message}; this model takes each image as UINT8 rows (DALI preprocessing): add --input-name with its "
            "image input, e.g. --input-name IMAGE for a task entry with task.preprocess: dali")


def _request_parameters(parser: argparse.ArgumentParser, items: list[str]) -> dict[str, object]:
    parameters: dict[str, object] = {}
    for item in items:
        key, separator, value = item.partition("=")
        if not separator or not key:
            parser.error(f"--parameter {item!r} must be KEY=VALUE, e.g. --parameter threshold=0.3")
        try:
            parameters[key] = json.loads(value)
        except ValueError:  # a plain word is a text parameter
            parameters[key] = value
    return parameters


def _endpoint_from_args(parser: argparse.ArgumentParser, args: argparse.Namespace):
    env = {}
    for item in args.env:
        key, separator, value = item.partition("=")
        if not separator or not key:
            parser.error(f"--env {item!r} must be KEY=VALUE, e.g. --env SAGEMAKER_TRITON_THREAD_COUNT=16")
        env[key] = value
    if args.mode == SME:
        if len(args.tarballs) != 1:
            parser.error(f"--mode sme serves one tarball, got {len(args.tarballs)}; use --mode mme for several")
        if args.mme_capacity is not None:
            parser.error("--mme-capacity applies to --mode mme only")
        return SingleModelEndpoint(args.tarballs[0], default_model=args.default_model, env=env,
                                   log_file=args.log_file, startup_timeout=args.startup_timeout,
                                   cpu_stand_in=args.cpu_stand_in, triton_version=args.triton_version)
    if args.default_model is not None:
        parser.error("--default-model applies to --mode sme only; an MME picks the model per request "
                     "(tritonsm invoke --target-model)")
    return MultiModelEndpoint(args.tarballs, env=env, capacity=args.mme_capacity,
                              log_file=args.log_file, startup_timeout=args.startup_timeout,
                              cpu_stand_in=args.cpu_stand_in, triton_version=args.triton_version)


def invoke_options_help() -> str:
    """The request options of `tritonsm invoke` (this parser's), without its usage line, for `tritonsm invoke -h`."""
    text = _invoke_parser().format_help()
    options = text[text.index("\noptions:") + 1:] if "\noptions:" in text else text
    lines = [line for line in options[len("options:"):].splitlines() if not line.startswith("  -h, --help")]
    return "request options:" + "\n".join(lines)


def _invoke_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tritonsm invoke",
        description="Send one KServe v2 request through boto3's sagemaker-runtime InvokeEndpoint to a local endpoint "
                    "(--url) or a deployed one (--endpoint-name).",
    )
    parser.add_argument("--url", help="the local SageMaker Runtime of `tritonsm serve`, e.g. http://127.0.0.1:8080")
    parser.add_argument("--endpoint-name", help="the EndpointName: a deployed SageMaker endpoint, or with --url one "
                                                "the local runtime serves (default there: its only one)")
    parser.add_argument("--region", help="the deployed endpoint's region (default: boto3's)")
    parser.add_argument("--target-model", help="MME: the model archive to run, e.g. resnet.tar.gz")
    parser.add_argument("--inference-component", help="an endpoint of inference components: the component to run "
                                                      "(InferenceComponentName)")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--input", type=pathlib.Path, help="inputs: KServe v2 .json, .npy (with --input-name) or .npz")
    what.add_argument("--text", help="text input: sent as BYTES --input-name (default TEXT, what a task's ensemble "
                                     "takes), or tokenized with --tokenizer")
    what.add_argument("--image", type=pathlib.Path, nargs="+", metavar="FILE",
                      help="image files (JPEG, PNG, WebP) sent as their encoded bytes: one BYTES row each as "
                           "IMAGE (what an image task's ensemble takes, in binary+json), or with --input-name one "
                           "UINT8 row each (a DALI model or an ensemble starting with one)")
    what.add_argument("--audio", type=pathlib.Path, nargs="+", metavar="FILE",
                      help="audio files (WAV, FLAC, Ogg, MP3...) sent as their bytes, one BYTES row each as AUDIO "
                           "(what an audio task's ensemble takes, in binary+json); one file per request for clips of "
                           "different lengths")
    parser.add_argument("--text-pair", help="with --text: the second text of a pair, sent as BYTES TEXT_PAIR (a "
                                            "question-answering context, an NLI hypothesis, a reranked passage)")
    parser.add_argument("--input-name", help="model input fed by a .npy file, by raw --text or by --image")
    parser.add_argument("--tokenizer", type=pathlib.Path, help="directory of the model's saved tokenizer")
    parser.add_argument("--max-length", type=int, help="pad/truncate tokens to this length (fixed-shape models)")
    parser.add_argument("--token-datatype", choices=("INT64", "INT32"), default="INT64",
                        help="datatype of the token inputs (default INT64)")
    parser.add_argument("--binary", action="store_true",
                        help="send binary+json (application/vnd.sagemaker-triton.binary+json) instead of JSON")
    parser.add_argument("--parameter", action="append", default=[], metavar="KEY=VALUE",
                        help="a KServe v2 request parameter, repeatable; VALUE is read as JSON where it is one "
                             "(numbers, true/false), else as text; e.g. --parameter threshold=0.3 for a detector")
    parser.add_argument("--output", type=pathlib.Path, help="also save the outputs (.json or .npz)")
    parser.add_argument("--stream", action="store_true",
                        help="call InvokeEndpointWithResponseStream with --text as the generate JSON "
                             '{"text_input": TEXT, "parameters": {--parameter ...}} of a decoupled (streaming) '
                             'model, or one --audio FILE as {"audio": <base64>, ...} of a speech model, printing '
                             "each event's text_output as it arrives")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for a local endpoint")

    return parser


def runtime_address(url: str) -> tuple[str, str | None]:
    """The local runtime's address in ``--url`` and the EndpointName its path names, if any.

    People paste the address `tritonsm serve` prints, or a path they know from SageMaker: the container's
    ``/invocations`` or InvokeEndpoint's ``/endpoints/{EndpointName}/invocations``. Both mean the same
    runtime; any other path would be passed on to the container and answered by Triton, not InvokeEndpoint.
    """
    _, _, parsed = split_local_url(url)
    base = f"http://{parsed.netloc}"
    path = parsed.path.rstrip("/")
    name = None if path in ("", "/invocations") else endpoint_in_path(path)
    if parsed.query or parsed.fragment or (name is None and path not in ("", "/invocations")):
        raise InvokeError(
            f"--url {url!r} has a path this command does not call ({url[len(base):]}); give the address "
            f"`tritonsm serve` prints, e.g. {base} (the request goes to "
            "/endpoints/<EndpointName>/invocations, as InvokeEndpoint's does)")
    return base, name


def one_name(given: str | None, in_url: str | None, url: str) -> str | None:
    """The EndpointName given (--endpoint-name, or the spec's) and the one of the --url path, which must agree
    when both are there."""
    if given and in_url and given != in_url:
        raise InvokeError(f"--url {url!r} names endpoint {in_url!r} but the request is for {given!r}; "
                          "give one of them")
    return given or in_url


def _local_endpoint_name(url: str, name: str | None) -> str:
    """``name``, or the only endpoint the local runtime at ``url`` serves; InvokeError naming them otherwise."""
    served = endpoint_names_at(url)
    if name in served or (name is None and len(served) == 1):
        return name or served[0]
    said = f"--endpoint-name {name!r} is not one of them" if name else "name one with --endpoint-name"
    raise InvokeError(f"the local runtime at {url} serves {', '.join(served) or 'no endpoint'}; {said}")


def _tensors_from_args(parser: argparse.ArgumentParser, args: argparse.Namespace):
    if args.text_pair is not None and (args.text is None or args.tokenizer is not None):
        parser.error("--text-pair goes with --text, sent as raw text (without --tokenizer)")
    if args.input is not None:
        return read_input_file(args.input, args.input_name)
    if args.audio is not None:
        return [audio_bytes_tensor(args.audio, args.input_name or AUDIO)]
    if args.image is not None:
        if not args.input_name:  # what an image task's ensemble takes: one encoded file per BYTES row
            return [image_bytes_tensor(args.image, IMAGE)]
        return [image_tensor(args.image, args.input_name)]
    if args.tokenizer is not None:
        return tokenize_text(args.text, args.tokenizer, max_length=args.max_length, datatype=args.token_datatype)
    texts = [text_tensor(args.text, args.input_name or TEXT)]
    return texts + ([text_tensor(args.text_pair, TEXT_PAIR)] if args.text_pair is not None else [])

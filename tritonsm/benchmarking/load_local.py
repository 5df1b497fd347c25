"""Load check of a local single-model endpoint: N requests at concurrency C, zero errors expected.

Usage:
    .venv/bin/python benchmarks/load_local.py                       # the tests' tiny add model
    .venv/bin/python benchmarks/load_local.py assets/x.tar.gz --default-model x --input in.json [--binary]
    .venv/bin/python benchmarks/load_local.py --endpoint classifier --cpu-stand-in   # a spec endpoint, after
                                                                                     # `tritonsm build`

A spec endpoint is served as `tritonsm serve` serves it (its built tarball, the
container environment of the spec, verbose logging off unless --env says
otherwise); text models get --text, other models need --input.

Prints throughput and p50/p99 latency; exits 1 if any request failed. A
script, not a timed test: the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import http.client
import pathlib
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

REPOSITORY_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY_ROOT))

import numpy as np  # noqa: E402

from deployment_spec import DEFAULT_SPEC, SpecError, load_spec  # noqa: E402
from deployment_spec.builds.manifest import DEFAULT_MANIFEST  # noqa: E402
from deployment_spec.facts.serving_runtimes import DEFAULT_TRITON_VERSION  # noqa: E402
from local_endpoint import (  # noqa: E402
    LocalEndpointError,
    NamedTensor,
    SingleModelEndpoint,
    encode_request,
    read_input_file,
    text_tensor,
)
from local_endpoint.client.request_inputs import image_tensor  # noqa: E402
from deployment_spec.sections.dali import image_inputs  # noqa: E402
from deployment_spec.parsing.errors import UserError  # noqa: E402
from deployment_spec.served import resolve_endpoint  # noqa: E402
from tritonsm.benchmarking import stats  # noqa: E402

DEFAULT_TEXT = "a great movie with a fast story, the best film of the year"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tarball", nargs="?", type=pathlib.Path, help="model archive (default: a tiny add model)")
    parser.add_argument("--default-model", help="the model /invocations serves")
    parser.add_argument("--endpoint", help="a single-model endpoint of the spec instead of a tarball, e.g. classifier")
    parser.add_argument("--spec", default=DEFAULT_SPEC, help=f"with --endpoint (default: {DEFAULT_SPEC})")
    parser.add_argument("--manifest", type=pathlib.Path, default=DEFAULT_MANIFEST,
                        help=f"with --endpoint: the build manifest (default: {DEFAULT_MANIFEST})")
    parser.add_argument("--environment", help="with --endpoint: whose overrides apply (default: the first)")
    parser.add_argument("--cpu-stand-in", action="store_true",
                        help="serve onnxruntime/pytorch models as labelled Python-backend CPU stand-ins")
    parser.add_argument("--input", type=pathlib.Path, help="request inputs (.json, .npz)")
    parser.add_argument("--text", default=DEFAULT_TEXT, help="the text sent to a text model's string inputs")
    parser.add_argument("--binary", action="store_true", help="send binary+json instead of JSON")
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16)
    # Verbose logging writes several lines per request: it would measure the log, not the model.
    parser.add_argument("--env", action="append", default=["SAGEMAKER_TRITON_LOG_VERBOSE=0"], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    if args.endpoint and (args.tarball or args.default_model):
        parser.error("give a tarball (with --default-model) or --endpoint, not both")
    overrides = dict(item.split("=", 1) for item in args.env)
    with tempfile.TemporaryDirectory() as scratch:
        try:
            served = _served(args, pathlib.Path(scratch))
            request = encode_request(served.tensors, binary=args.binary)
            env = {**served.env, **overrides}
            with SingleModelEndpoint(served.tarball, default_model=served.default_model, env=env,
                                     cpu_stand_in=args.cpu_stand_in,
                                     triton_version=served.triton_version) as endpoint:
                for note in endpoint.stand_in_notes:
                    print(note)
                print(f"{served.label}: {served.tarball.name} ({endpoint.default_model}) at {endpoint.url}, "
                      f"{args.requests} requests, concurrency {args.concurrency}, "
                      f"{'binary+json' if args.binary else 'JSON'}", flush=True)
                return _run(endpoint.port, request.body, request.content_type, args.requests, args.concurrency)
        except (UserError, SpecError) as error:  # a LocalEndpointError is a UserError
            print(f"error: {error}", file=sys.stderr)
            return 1


@dataclasses.dataclass(frozen=True)
class Served:
    label: str
    tarball: pathlib.Path
    default_model: str | None
    env: dict[str, str]
    tensors: list[NamedTensor]
    triton_version: str = DEFAULT_TRITON_VERSION  # CPU stand-ins run this release's ONNX Runtime


def _served(args: argparse.Namespace, scratch: pathlib.Path) -> Served:
    if args.endpoint:
        return _spec_endpoint(args)
    if args.tarball is not None:
        if args.input is None:
            raise LocalEndpointError("give --input with the request inputs for this model")
        return Served("tarball", args.tarball, args.default_model, {}, read_input_file(args.input))
    sys.path.insert(0, str(REPOSITORY_ROOT / "tests" / "local_endpoint"))
    import triton_model_fixtures as models

    models.write_add(scratch / "repository")
    tarball = models.pack(scratch / "repository", scratch / "add.tar.gz")
    ones = np.ones((1, 4), dtype=np.float32)
    return Served("tiny add model", tarball, None, {}, [NamedTensor("A", "FP32", ones), NamedTensor("B", "FP32", ones)])


def _spec_endpoint(args: argparse.Namespace) -> Served:
    local = resolve_endpoint(args.spec, args.endpoint, args.environment, args.manifest)
    if local.multi_model or local.components:
        kind = "multi-model" if local.multi_model else "of inference components"
        raise UserError(f"endpoint {args.endpoint!r} of {args.spec} is {kind}; this load check drives a "
                        "single-model endpoint's /invocations: name a single-model endpoint"
                        + ("" if local.multi_model else ", or load-test a component of the deployed endpoint "
                           "(tritonsm bench load --endpoint E --deployed --component MODEL)"))
    label = f"endpoint {args.endpoint} ({args.spec})"
    if args.input is not None:
        return Served(label, local.tarballs[0], local.default_model, local.env, read_input_file(args.input),
                      local.triton_version)
    inputs = local.manifest.models[local.default_model].inputs
    images = image_inputs(load_spec(args.spec).models, local.manifest.models[local.default_model].spec_model)
    if images:
        # Each request sends the --image files as one batch; without them, the smoke test's sample JPEG.
        files = list(getattr(args, "image", None) or []) or [_sample_image()]
        return Served(label, local.tarballs[0], local.default_model, local.env,
                      [image_tensor(files, name) for name in sorted(images)], local.triton_version)
    if not all(tensor.data_type == "TYPE_STRING" for tensor in inputs):
        raise UserError(f"model {local.default_model!r} takes {', '.join(t.name for t in inputs)} "
                        "(not only text); give --input FILE (.json or .npz) with those inputs")
    return Served(label, local.tarballs[0], local.default_model, local.env,
                  [text_tensor(args.text, tensor.name) for tensor in inputs], local.triton_version)


def _sample_image() -> pathlib.Path:
    from tritonsm.checks.smoke_requests import SAMPLE_IMAGE
    from model_build.backends.dali.check_images import jpeg

    path = pathlib.Path(tempfile.mkdtemp(prefix="tritonsm-image-")) / "sample-{}x{}.jpg".format(*SAMPLE_IMAGE)
    path.write_bytes(jpeg(*SAMPLE_IMAGE))
    return path


def _run(port: int, body: bytes, content_type: str, total: int, concurrency: int) -> int:
    local = threading.local()
    headers = {"Content-Type": content_type}

    def one_request(_: int) -> tuple[float, str | None]:
        # One keep-alive connection per worker, as a real client pool would hold.
        if not hasattr(local, "connection"):
            local.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        started = time.perf_counter()
        try:
            local.connection.request("POST", "/invocations", body=body, headers=headers)
            response = local.connection.getresponse()
            payload = response.read()
            error = None if response.status == 200 else f"HTTP {response.status}: {payload[:200]!r}"
        except OSError as exc:
            local.connection.close()
            del local.connection
            error = f"{type(exc).__name__}: {exc}"
        return time.perf_counter() - started, error

    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one_request, range(concurrency)))  # warm-up: connections and first batch
        started = time.perf_counter()
        results = list(pool.map(one_request, range(total)))
        elapsed = time.perf_counter() - started
    latencies_ms = sorted(latency * 1000 for latency, _ in results)
    errors = [error for _, error in results if error]
    quantiles = statistics.quantiles(latencies_ms, n=100, method="inclusive")
    print(f"throughput: {total / elapsed:.1f} requests/s over {elapsed:.2f} s")
    print(f"latency: p50 {quantiles[49]:.2f} ms, p99 {quantiles[98]:.2f} ms, max {latencies_ms[-1]:.2f} ms")
    print(f"errors: {len(errors)}")
    print(f"load average (1/5/15 min) at the end: {stats.load_average()}")  # the machine's share of the result
    for error in sorted(set(errors))[:5]:
        print(f"  {error}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

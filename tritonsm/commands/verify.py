"""`tritonsm verify --gpu [ENDPOINT ...]`: the built artifacts on this host's GPU, for a CUDA host without Docker.

Each TorchScript model loaded on cuda:0 as the libtorch backend loads a KIND_GPU instance and compared with
the CPU; each Python-backend model served by the real Triton Python stub of the image's Python inside its
shipped execution environment, GPUs visible; TensorRT plans and the ONNX Runtime CUDA provider where their
Python wheels are installed (tritonsm.checks.gpu). Prints what ran, what could not and why, and writes
the same as JSON. Exit 0: every check that ran passed; 1: one failed; 2: bad input; 3: no CUDA device here.
"""
from __future__ import annotations

import argparse
import pathlib

from deployment_spec.parsing.errors import UserError
from tritonsm.commands.options import add_spec_endpoint_flags

DEFAULT_REPORT = "verify-gpu.json"


def register(add) -> None:
    p = add("verify", "check the built artifacts: --signatures, every tarball an environment deploys against the "
                      "manifest's sha256 and the spec's signing key; --gpu, on this host's GPU without Docker "
                      "(TorchScript on cuda:0 vs the CPU, Python-backend models in the stub of the image's Python, "
                      "TensorRT plans and ONNX Runtime's CUDA provider where their wheels are installed; exit 3 when "
                      "there is no CUDA device)",
            run_verify)
    p.add_argument("endpoint", nargs="*", help="endpoint names of the spec (default: every endpoint)")
    p.add_argument("--gpu", action="store_true", help="run the GPU checks")
    p.add_argument("--signatures", action="store_true",
                   help="check every tarball the environment deploys: with the spec's signing.public_key, the "
                        "build's signed statement, each model directory's signature, and each tarball and the "
                        "manifest against the statement; without it, each tarball's sha256 against the manifest (the "
                        "pipeline runs this before each stage deploys); exit 2 on the first that fails")
    add_spec_endpoint_flags(p)
    p.add_argument("--report", type=pathlib.Path,
                   help=f"the JSON report (default: {DEFAULT_REPORT} next to the manifest)")


def run_verify(args: argparse.Namespace) -> int:
    if args.signatures == args.gpu:
        raise UserError("tritonsm verify needs one kind of check: --signatures (the tarballs against the manifest "
                        "and the signing key) or --gpu (the artifacts on this host's GPU)")
    if args.signatures:
        return _signatures(args)
    from tritonsm.checks.gpu.run import run

    report = run(pathlib.Path(args.spec), args.manifest, args.endpoint, args.environment,
                 log=lambda line: print(line, flush=True))
    path = args.report or args.manifest.parent / DEFAULT_REPORT
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report.to_json())
    print(report.text(path))
    return report.exit_code()


def _signatures(args: argparse.Namespace) -> int:
    from deployment_spec import SpecError, load_spec
    from deployment_spec.rules.cross_section import production_signing
    from deployment_spec.served import resolve_endpoint, spec_endpoint
    from tritonsm.checks import signatures

    spec = load_spec(args.spec)
    environment = args.environment or next(iter(spec.environments))
    if environment not in spec.environments:
        spec_endpoint(spec, "", environment)  # an unknown environment: its own message
    # Synth's rule first: without a key nothing here could be verified, and a production stage needs the reason.
    refused = production_signing(spec.signing, spec.environments[environment])
    if refused is not None:
        raise SpecError(args.spec, [refused])
    names = args.endpoint or list(spec.environments[environment].endpoints)
    checked = 0
    for name in names:
        spec_endpoint(spec, name, environment)  # an unknown name: its own message
        local = resolve_endpoint(args.spec, name, environment, args.manifest)
        recorded = {local.manifest.artifact_path(a): a.sha256 for ep in local.manifest.endpoints.values()
                    for a in ep.artifacts}
        for line in signatures.check(local.every_tarball, local.public_key, local.manifest, args.manifest, recorded):
            print(f"{name}: {line}", flush=True)
            checked += 1
    print(f"verify --signatures: {checked} tarball(s) of environment {environment} checked", flush=True)
    return 0

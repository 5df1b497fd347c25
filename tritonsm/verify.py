"""`tritonsm verify --gpu [ENDPOINT ...]`: the built artifacts on this host's GPU, for a CUDA host without Docker.

Each TorchScript model loaded on cuda:0 as the libtorch backend loads a KIND_GPU instance and compared with
the CPU; each Python-backend model served by the real Triton Python stub of the image's Python inside its
shipped execution environment, GPUs visible; TensorRT plans and the ONNX Runtime CUDA provider where their
Python wheels are installed (tritonsm.benchmarking.gpu_verify). Prints what ran, what could not and why, and writes
the same as JSON. Exit 0: every check that ran passed; 1: one failed; 2: bad input; 3: no CUDA device here.
"""
from __future__ import annotations

import argparse
import pathlib

from deployment_spec.errors import UserError
from deployment_spec.manifest import DEFAULT_MANIFEST

DEFAULT_REPORT = "verify-gpu.json"


def register(add) -> None:
    p = add("verify", "check the built artifacts on this host's GPU without Docker (--gpu): TorchScript on cuda:0 vs "
                      "the CPU, Python-backend models in the stub of the image's Python, TensorRT plans and ONNX "
                      "Runtime's CUDA provider where their wheels are installed; exit 3 when there is no CUDA device",
            run_verify)
    p.add_argument("endpoint", nargs="*", help="endpoint names of the spec (default: every endpoint)")
    p.add_argument("--gpu", action="store_true", help="run the GPU checks (the one kind `verify` has)")
    p.add_argument("--environment", help="whose overrides apply (default: the spec's first environment)")
    p.add_argument("--manifest", type=pathlib.Path, default=DEFAULT_MANIFEST,
                   help=f"build manifest (default: {DEFAULT_MANIFEST})")
    p.add_argument("--report", type=pathlib.Path,
                   help=f"the JSON report (default: {DEFAULT_REPORT} next to the manifest)")


def run_verify(args: argparse.Namespace) -> int:
    if not args.gpu:
        raise UserError("tritonsm verify needs --gpu, its one kind of check today (the build already verifies "
                        "every artifact on the CPU): tritonsm verify --gpu [ENDPOINT ...]")
    from tritonsm.benchmarking.gpu_verify.run import run

    report = run(pathlib.Path(args.spec), args.manifest, args.endpoint, args.environment,
                 log=lambda line: print(line, flush=True))
    path = args.report or args.manifest.parent / DEFAULT_REPORT
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report.to_json())
    print(report.text(path))
    return report.exit_code()

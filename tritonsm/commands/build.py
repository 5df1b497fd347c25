"""``tritonsm build``: argument definitions (no heavy imports) and the run function."""
from __future__ import annotations

import argparse
import pathlib
import sys
import time
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from model_build.signing import AnyKey

DEFAULT_OUT = "assets"
DEFAULT_WORK = ".tritonsm/build"


def register(add) -> None:
    p = add("build", "export, convert, verify and package every model of the spec into assets/ "
                     "(Triton model repositories as .tar.gz, plus manifest.json)", run_build)
    p.add_argument("--model", action="append", default=[], metavar="NAME",
                   help="build only this model (and its ensemble steps); repeatable. Fails if it cannot be "
                        "built on this machine (e.g. TensorRT without a GPU)")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"folder for tarballs and manifest.json (default: {DEFAULT_OUT})")
    p.add_argument("--work-dir", default=DEFAULT_WORK,
                   help=f"cache of built model directories, keyed by input hash (default: {DEFAULT_WORK})")
    p.add_argument("--force", action="store_true", help="rebuild the selected models even if their inputs are unchanged")
    p.add_argument("--require-all", action="store_true",
                   help="exit 1 when any model of the spec was not built (e.g. a TensorRT plan on a machine "
                        "without a GPU): for the build stage that must produce every artifact")
    p.add_argument("--check-serving-torch", action="store_true",
                   help="also run each traced TorchScript model in the PyPI torch release nearest the libtorch of "
                        "the spec's Triton image (installs that torch, a multi-GB CUDA build, once)")
    p.add_argument("--no-memory-check", action="store_true",
                   help="build even if the largest model needs more memory than this machine has available "
                        "(3 x its fp32 weights + 1.5 GB); by default the build refuses before it starts")
    p.add_argument("--python-env-for", choices=("image", "local"), default="image",
                   help="build Python-backend execution environments for the spec's Triton image (default) or "
                        "for this machine's Python: `tritonsm serve` only, synthesis refuses such a build")
    p.add_argument("--signing-key", metavar="KEY",
                   help="sign every model directory with this elliptic-curve PEM private key, or an AWS KMS key "
                        "named awskms:///KEY-ID-ARN-OR-ALIAS (OpenSSF Model Signing; default: TRITONSM_SIGNING_KEY, "
                        "a key file's password in TRITONSM_SIGNING_KEY_PASSWORD); without one the tarballs are "
                        "unsigned")


def run_build(args: argparse.Namespace) -> int:
    from deployment_spec import load_spec
    from model_build import build, disk_space
    from model_build.errors import NotEnoughMemory

    start = time.monotonic()
    spec = load_spec(args.spec)
    try:
        report = build.run(spec, pathlib.Path(args.out), pathlib.Path(args.work_dir), args.model, args.force,
                           log=_log, serving_torch=args.check_serving_torch,
                           python_env_for=args.python_env_for, memory_check=not args.no_memory_check,
                           signing_key=_signing_key(args.signing_key))
    except NotEnoughMemory as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    except OSError as exc:
        if not disk_space.is_full(exc):
            raise
        # Models are assembled in a staging folder and archives in a partial file, both removed on failure.
        folder = pathlib.Path(exc.filename).parent if exc.filename else pathlib.Path(args.work_dir)
        print("error: " + disk_space.message(
            exc, folder, f"build the models of {spec.path.name}",
            "free space on that disk, or give --work-dir (the build cache) and --out folders on a larger one; "
            "the half-written files were removed, and the models already built are kept and not rebuilt"),
            file=sys.stderr, flush=True)
        return 1
    for name, why in report.unavailable.items():
        _log(f"not built here: {why}")
    # A task's steps fail alike when their shared checkpoint does: each reason once.
    for why in dict.fromkeys(list(report.failed.values()) + list(report.endpoints_failed.values())):
        print(f"error: {why}", file=sys.stderr, flush=True)
    key = _signing_key(args.signing_key)
    _log(f"signed with {key.identity}" if key else "unsigned: no --signing-key or TRITONSM_SIGNING_KEY "
         "(docs/howto/signing.md)")
    summary = (f"build: {len(report.built)} built, {len(report.cached)} unchanged, "
               f"{len(report.unavailable)} not buildable here, {len(report.failed)} failed; "
               f"{len(report.written)} file(s) written to {args.out}/ in {time.monotonic() - start:.1f} s")
    _log(summary)
    if args.require_all and report.unavailable and not report.exit_code():
        names = ", ".join(sorted(report.unavailable))
        print(f"error: --require-all: {len(report.unavailable)} model(s) of {spec.path.name} not built on this "
              f"machine: {names}; run the build on a GPU host with a Docker engine (docs/howto/unbuildable-models.md), "
              "or leave out --require-all to build the rest", file=sys.stderr, flush=True)
        return 1
    return report.exit_code()


def _signing_key(given: Optional[str]) -> Optional[AnyKey]:
    import os
    from model_build import kms_signing, signing
    path = given or os.environ.get(signing.KEY_VARIABLE)
    return kms_signing.named_key(path, os.environ.get(signing.PASSWORD_VARIABLE)) if path else None


def _log(line: str) -> None:
    print(line, flush=True)

"""`tritonsm <subcommand>`: one entry point; each subcommand imports its heavy code lazily."""
from __future__ import annotations

import argparse
import sys
from typing import Callable

from deployment_spec import DEFAULT_SPEC, SpecError
from deployment_spec.parsing.errors import UserError  # noqa: F401  (re-exported: tritonsm.cli.UserError)

DISTRIBUTION = "triton-sagemaker-cdk"
# Exit codes: 0 ok, 1 a step failed, 2 bad input (spec, arguments, files).
EXIT_FAILED, EXIT_BAD_INPUT = 1, 2
# The modules the base install (the construct library) leaves out: (the package that brings it, the extra of
# pyproject.toml that installs it). A command that needs one says which to install.
EXTRA_OF = {"torch": ("torch", "build"), "transformers": ("transformers", "build"), "onnx": ("onnx", "build"),
            "onnxruntime": ("onnxruntime", "build"), "onnxscript": ("onnxscript", "build"), "tqdm": ("tqdm", "build"),
            "google": ("protobuf", "build"), "tritonclient": ("tritonclient", "local"), "numpy": ("numpy", "local"),
            "psutil": ("psutil", "local"), "boto3": ("boto3", "local"), "matplotlib": ("matplotlib", "bench")}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tritonsm", description=(
        "Triton models on SageMaker as code: validate the deployment spec, build model repositories, "
        "serve them on a local Triton server, invoke and benchmark them."))
    parser.add_argument("--version", action="version", version=f"tritonsm {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str, help_: str, run: Callable[[argparse.Namespace], int], add_help: bool = True,
            spec: bool = True) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_, add_help=add_help)
        if spec:
            p.add_argument("--spec", default=DEFAULT_SPEC, help=f"deployment spec (default: {DEFAULT_SPEC})")
        p.set_defaults(run=run)
        return p

    for register in _registrations():
        register(add)
    return parser


def _version() -> str:
    """The installed distribution's version (pyproject.toml's, through the package metadata)."""
    from importlib import metadata

    try:
        return f"{metadata.version(DISTRIBUTION)} ({DISTRIBUTION})"
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return f"unknown: {DISTRIBUTION} is not installed; run `make` (or pip install the wheel)"


def _registrations() -> list[Callable]:
    """The commands in the order `tritonsm --help` lists them; each module's `register(add)` defines its
    arguments (argparse only: what a command runs is imported when it runs)."""
    from tritonsm.commands import (bench, build, compare, cost, invoke, prices, schema, serve, smoke, validate,
                                   verify)
    return [m.register for m in (validate, schema, build, serve, invoke, bench, compare, smoke, verify, cost, prices)]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    # `invoke` hands its remaining options to the local endpoint's invoke parser.
    args, rest = parser.parse_known_args(argv)
    if rest and args.command != "invoke":
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    args.rest = rest
    try:
        return args.run(args)
    except SpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ModuleNotFoundError as exc:
        missing = EXTRA_OF.get((exc.name or "").split(".")[0])
        if missing is None:
            raise
        package, extra = missing
        print(f"error: tritonsm {args.command} needs the Python package '{package}', which is not installed (the "
              f"base install, the construct library, leaves it out); install the {extra} extra: pip install "
              f"'triton-sagemaker-cdk[{extra}]' (in a checkout of the repository, `make` installs everything)",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""`tritonsm <subcommand>`: one entry point; each subcommand imports its heavy code lazily."""
from __future__ import annotations

import argparse
import pathlib
import sys
from typing import Callable

from deployment_spec import DEFAULT_SPEC, SpecError, load_spec
from deployment_spec.errors import UserError  # noqa: F401  (re-exported: tritonsm.cli.UserError)

# Exit codes: 0 ok, 1 a step failed, 2 bad input (spec, arguments, files).
EXIT_FAILED, EXIT_BAD_INPUT = 1, 2
# The modules the base install (the construct library) leaves out: (the package that brings it, the extra of
# pyproject.toml that installs it). A command that needs one says which to install.
EXTRA_OF = {"torch": ("torch", "build"), "transformers": ("transformers", "build"), "onnx": ("onnx", "build"),
            "onnxruntime": ("onnxruntime", "build"), "onnxscript": ("onnxscript", "build"), "tqdm": ("tqdm", "build"),
            "google": ("protobuf", "build"), "tritonclient": ("tritonclient", "local"), "numpy": ("numpy", "local"),
            "psutil": ("psutil", "local"), "boto3": ("boto3", "local"), "matplotlib": ("matplotlib", "bench")}


def cmd_validate(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    print(f"{args.spec}: valid ({_count(spec.models, 'model')}, {_count(spec.endpoints, 'endpoint')}, "
          f"{_count(spec.environments, 'environment')}: {', '.join(spec.environments)}; "
          f"Triton {spec.triton_version})")
    # Not a spec problem (synth reads built assets, not these), but `tritonsm build` will refuse them.
    notes = {}  # a task entry's steps share its weights: one note, under the name the spec has
    for name, model in spec.models.items():
        for field, value in model.local_files():
            path = (spec.root / value).resolve()
            if not path.exists():
                notes[f"models.{model.task_entry or name}.{field}"] = path
    for where, path in notes.items():
        print(f"note: {where}: {path} does not exist; tritonsm build needs it for this model")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from deployment_spec.json_schema import SCHEMA_PATH, render, spec_schema
    text = render(spec_schema())
    if args.output is None:
        sys.stdout.write(text)
        return 0
    if args.output.is_dir():
        raise UserError(f"--output {args.output}: a folder; pass the file to write, e.g. --output {SCHEMA_PATH}")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(f"wrote {args.output}")
    return 0


def _count(items: object, noun: str) -> str:
    n = len(items)  # type: ignore[arg-type]
    return f"{n} {noun}" + ("" if n == 1 else "s")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tritonsm", description=(
        "Triton models on SageMaker as code: validate the deployment spec, build model repositories, "
        "serve them on a local Triton server, invoke and benchmark them."))
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str, help_: str, run: Callable[[argparse.Namespace], int],
            add_help: bool = True) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_, add_help=add_help)
        p.add_argument("--spec", default=DEFAULT_SPEC, help=f"deployment spec (default: {DEFAULT_SPEC})")
        p.set_defaults(run=run)
        return p

    add("validate", "check the deployment spec and list every problem", cmd_validate)
    # No --spec: the schema describes every spec (its keys, types, bounds and patterns).
    schema_help = ("print the deployment spec's JSON Schema for editors and check-jsonschema, generated from the "
                   "loader's own definitions (validate also checks the rules between fields)")
    schema = sub.add_parser("schema", help=schema_help, description=schema_help)
    schema.add_argument("--output", type=pathlib.Path, default=None, metavar="FILE",
                        help="write it to this file instead of stdout (the committed one: schemas/triton.schema.json)")
    schema.set_defaults(run=cmd_schema)
    for register in _registrations():
        register(add)
    return parser


def _registrations() -> list[Callable]:
    """Subcommands of other packages; each module's `register(add)` defines its arguments (no heavy imports)."""
    from model_build.cli import register as build
    from tritonsm.bench import register as bench
    from tritonsm.compare import register as compare
    from tritonsm.cost import register as cost
    from tritonsm.serve import register as serve_and_invoke
    from tritonsm.smoke import register as smoke
    from tritonsm.verify import register as verify
    return [build, serve_and_invoke, bench, compare, smoke, verify, cost]


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

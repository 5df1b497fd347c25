"""`tritonsm schema`: the deployment spec's JSON Schema, generated from the loader's own definitions."""
from __future__ import annotations

import argparse
import pathlib
import sys

from deployment_spec.parsing.errors import UserError


def register(add) -> None:
    # No --spec: the schema describes every spec (its keys, types, bounds and patterns).
    schema = add("schema", "print the deployment spec's JSON Schema for editors and check-jsonschema, generated from "
                           "the loader's own definitions (validate also checks the rules between fields)", cmd_schema,
                 spec=False)
    schema.add_argument("--output", type=pathlib.Path, default=None, metavar="FILE",
                        help="write it to this file instead of stdout (the committed one: schemas/triton.schema.json)")


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

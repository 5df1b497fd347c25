"""`tritonsm validate`: the deployment spec checked, every problem listed (the loader's own checks and rules)."""
from __future__ import annotations

import argparse

from deployment_spec import SpecError, load_spec
from deployment_spec.rules.cross_section import production_signing


def register(add) -> None:
    add("validate", "check the deployment spec and list every problem", cmd_validate)


def cmd_validate(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    # Not a loader rule (a spec without a signing key still builds and serves), but synth refuses it: so does validate.
    refused = [p for env in spec.environments.values() if (p := production_signing(spec.signing, env)) is not None]
    if refused:
        raise SpecError(args.spec, refused)
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


def _count(items: object, noun: str) -> str:
    n = len(items)  # type: ignore[arg-type]
    return f"{n} {noun}" + ("" if n == 1 else "s")

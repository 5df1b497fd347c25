"""`tritonsm cost`: each environment's monthly floor and ceiling, and the change against another spec or commit.

The arithmetic is deployment_spec.cost.figures's; the prices deployment_spec.cost.pricing's (the cache `tritonsm prices
refresh` writes, then the shipped snapshot).
"""
from __future__ import annotations

import argparse
import pathlib
import subprocess
from typing import Any, Callable

import yaml

from deployment_spec import load_spec
from deployment_spec.cost.capacity import DEFAULT_CAPACITY, CapacityError, load_capacity
from deployment_spec.cost.figures import HOURS_PER_MONTH, spec_costs
from deployment_spec.cost.report import diff, report
from deployment_spec.parsing.errors import UserError
from deployment_spec.cost.pricing import PricesError, load_prices
from deployment_spec.spec import Spec, parse_spec

def register(add: Callable[..., argparse.ArgumentParser]) -> None:
    p = add("cost", "each environment's monthly floor and ceiling (and expected range with schedules), per endpoint, "
                    "on-demand; --diff shows the change against another spec or a git commit", cmd_cost)
    p.add_argument("--environment", action="append", default=None, metavar="E",
                   help="only this environment (repeatable; default: every one)")
    p.add_argument("--capacity", type=pathlib.Path, default=None, metavar="FILE",
                   help=f"measured capacity for the cost per million inferences (default: {DEFAULT_CAPACITY})")
    p.add_argument("--hours", type=float, default=HOURS_PER_MONTH,
                   help=f"hours per month (default: {HOURS_PER_MONTH:g}, 24 × 365 / 12)")
    p.add_argument("--diff", default=None, metavar="SPEC_OR_GIT_REF",
                   help="compare with another spec file, or with this spec as of a git commit (e.g. HEAD, main)")


def cmd_cost(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    costs = _costs(spec, args)
    if args.diff is None:
        print("\n".join(report(costs)))
        return 0
    other = _other_spec(spec, args.diff)
    print("\n".join(diff(_costs(other, args), costs)))
    return 0


def _costs(spec: Spec, args: argparse.Namespace) -> dict[str, Any]:
    try:
        prices = load_prices(spec.root)
        capacity = load_capacity(args.capacity or DEFAULT_CAPACITY)
    except (PricesError, CapacityError) as exc:
        raise UserError(str(exc)) from None
    wanted = args.environment or list(spec.environments)
    unknown = [e for e in wanted if e not in spec.environments]
    if unknown:
        raise UserError(f"--environment {unknown[0]}: not an environment of {args.spec} "
                        f"({', '.join(spec.environments)})")
    return spec_costs({e: spec.environments[e] for e in wanted}, prices, capacity, args.hours)


def _other_spec(spec: Spec, other: str) -> Spec:
    """The spec to compare with: a file, else this spec's file at a git commit (relative paths of either resolve
    against this spec's folder)."""
    path = pathlib.Path(other)
    if path.is_file():
        return load_spec(path)
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=spec.root, capture_output=True, text=True,
                             check=True).stdout.strip()
        relative = spec.path.relative_to(pathlib.Path(top).resolve())
        text = subprocess.run(["git", "show", f"{other}:{relative.as_posix()}"], cwd=top, capture_output=True,
                              text=True, check=True).stdout
    except (subprocess.CalledProcessError, ValueError, FileNotFoundError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        raise UserError(f"--diff {other}: neither a spec file nor a git commit holding {spec.path.name} "
                        f"({detail.strip()}); pass a spec path or a commit such as HEAD") from None
    return parse_spec(yaml.safe_load(text), spec.path)



"""What every `tritonsm bench` subcommand's runner shares: progress lines, rising concurrency lists, and the
command line that repeats a run."""
from __future__ import annotations

import argparse

from deployment_spec.parsing.errors import UserError


def log(line: str) -> None:
    print(line, flush=True)


def positive_list(text: str, flag: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1 or values != sorted(set(values)):
        raise UserError(f"{flag} {text!r}: give rising positive integers separated by commas, e.g. 1,2,4,8,16")
    return values


def command_line(args: argparse.Namespace, sub: str) -> str:
    """The command line that repeats this run, for the results and the capacity file."""
    skip = {"run", "bench_run", "bench_command", "spec", "command", "models", "rest", "work"}
    parts = ["tritonsm", "bench", "--spec", str(args.spec), sub, *getattr(args, "models", [])]
    for key, value in sorted(vars(args).items()):
        if key in skip or value in (None, False, []):
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            parts.append(flag)
        elif isinstance(value, list):
            for item in value:
                parts += [flag, str(item)]
        else:
            parts += [flag, str(value)]
    return " ".join(parts)

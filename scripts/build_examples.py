"""Every example spec built and synthesized, as its scenario page says, from a fresh clone: `make examples`.

    .venv/bin/python scripts/build_examples.py [--only NAME ...] [--out build/examples] [--examples examples]

First `examples/make_checkpoints.py` (the tiny checkpoints three examples name; a folder that exists is kept), then
for each `examples/*.yaml`, the commands of its scenario page with their own output folders, so that one example's
tarballs never replace another's or the default spec's `assets/`:

    tritonsm build --spec examples/NAME.yaml --out OUT/NAME/assets
    cdk synth --quiet -c spec=examples/NAME.yaml -c manifest=OUT/NAME/assets/manifest.json -o OUT/NAME/cdk.out

The builds share the build cache (`.tritonsm/build`): a model whose inputs are unchanged since an earlier run is not
built again (the table's "unchanged" column). The synthesis runs the app's
cdk-nag and account-rule checks on every stage, as `make` does for the default spec. A TensorRT model on a host
without a GPU and a Docker engine is left unbuilt, as `tritonsm build` does, and named in the summary; the endpoints
that serve it are left out of the synthesis (`-c endpoints=` the others, docs/howto/unbuildable-models.md), and an
example with no other endpoint is only built. Prints each command as it starts, then a summary
table (also written to OUT/summary.md); exits 1 if any build or synthesis failed.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SUMMARY = re.compile(r"build: (\d+) built, (\d+) unchanged, (\d+) not buildable here, (\d+) failed")


@dataclasses.dataclass
class Outcome:
    example: str
    built: int = 0
    unchanged: int = 0
    not_here: list[str] = dataclasses.field(default_factory=list)
    left_out: list[str] = dataclasses.field(default_factory=list)  # endpoints serving a model not built here
    stages: int = 0
    seconds: float = 0.0
    error: str = ""


def example_names() -> list[str]:
    return sorted(p.stem for p in EXAMPLES.glob("*.yaml"))


def _run(command: list[str], log: pathlib.Path) -> tuple[int, str]:
    """Runs one command with its output in ``log`` (and its tail on failure), as the user would type it."""
    print(f"$ {shlex.join(command)}", flush=True)
    with log.open("w") as out:
        code = subprocess.run(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"}).returncode
    return code, log.read_text()


def build_and_synth(name: str, examples: pathlib.Path, out: pathlib.Path) -> Outcome:
    outcome, start = Outcome(name), time.monotonic()
    try:
        _build_and_synth(outcome, examples, out / name)
    finally:
        outcome.seconds = time.monotonic() - start
    return outcome


def _build_and_synth(outcome: Outcome, examples: pathlib.Path, folder: pathlib.Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    spec_path = examples / f"{outcome.example}.yaml"
    spec = str(spec_path.relative_to(ROOT) if spec_path.is_relative_to(ROOT) else spec_path)
    bin_dir = pathlib.Path(sys.executable).parent
    code, text = _run([str(bin_dir / "tritonsm"), "build", "--spec", spec, "--out", str(folder / "assets")],
                      folder / "build.log")
    counts = SUMMARY.search(text)
    if counts:
        outcome.built, outcome.unchanged = int(counts[1]), int(counts[2])
    if code != 0:
        outcome.error = f"tritonsm build exited {code}: {_tail(text)} (whole log: {folder / 'build.log'})"
        return
    manifest = json.loads((folder / "assets" / "manifest.json").read_text())
    # What this host could not build, and the endpoints serving it (docs/howto/unbuildable-models.md): the build
    # records both; the endpoints built here are synthesized, the others wait for a GPU host.
    outcome.not_here = [why for key, why in sorted(manifest["not_built"].items()) if key.startswith("models.")]
    outcome.left_out = sorted(key.split(".", 1)[1] for key in manifest["not_built"] if key.startswith("endpoints."))
    command = [str(bin_dir / "cdk"), "synth", "--quiet", "-c", f"spec={spec}",
               "-c", f"manifest={folder / 'assets' / 'manifest.json'}", "-o", str(folder / "cdk.out")]
    if outcome.left_out:
        if not manifest["endpoints"]:
            return
        command[3:3] = ["-c", "endpoints=" + ",".join(sorted(manifest["endpoints"]))]
    code, text = _run(command, folder / "synth.log")
    if code != 0:
        outcome.error = f"cdk synth exited {code}: {_tail(text)} (whole log: {folder / 'synth.log'})"
    else:
        outcome.stages = len(list((folder / "cdk.out").glob("assembly-*")))


def _tail(text: str) -> str:
    """The last lines of a failed command's output: the error and what it lists under it."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("python app.py:")]
    errors = [i for i, line in enumerate(lines) if line.lower().startswith("error")]
    return " // ".join(lines[errors[0]:errors[0] + 3] if errors else lines[-3:])


def table(outcomes: list[Outcome]) -> str:
    rows = ["| example | models built | unchanged (build cache) | not built on this host | endpoints left out of "
            "the synthesis | stages synthesized | s | result |", "|---|---:|---:|---|---|---:|---:|---|"]
    for o in outcomes:
        rows.append(f"| {o.example} | {o.built} | {o.unchanged} | {'; '.join(o.not_here) or '-'} | "
                    f"{', '.join(o.left_out) or '-'} | {o.stages} | {o.seconds:.0f} | {o.error or 'ok'} |")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = example_names()
    parser.add_argument("--only", action="append", choices=names, metavar="NAME",
                        help=f"this example only (repeatable); default: all of {', '.join(names)}")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "build" / "examples",
                        help="a folder per example: its tarballs, synthesized assembly and logs")
    parser.add_argument("--examples", type=pathlib.Path, default=EXAMPLES,
                        help="the folder of the example specs, whose checkpoints/ is made beside them (a copy of "
                             "examples/, as the tests use; default: examples/)")
    args = parser.parse_args(argv)
    out, examples = args.out.resolve(), args.examples.resolve()
    out.mkdir(parents=True, exist_ok=True)
    checkpoints = subprocess.run([sys.executable, str(EXAMPLES / "make_checkpoints.py"),
                                  "--out", str(examples / "checkpoints")], cwd=ROOT, capture_output=True, text=True)
    print(checkpoints.stdout, end="", flush=True)
    if checkpoints.returncode != 0:
        print(f"error: examples/make_checkpoints.py exited {checkpoints.returncode}: {checkpoints.stderr[-2000:]}",
              file=sys.stderr)
        return 1
    selected = args.only or names
    outcomes = []
    for number, name in enumerate(selected, 1):
        print(f"[{number}/{len(selected)}] {name}", flush=True)
        outcomes.append(build_and_synth(name, examples, out))
        print(f"[{number}/{len(selected)}] {name}: {outcomes[-1].error or 'ok'} in {outcomes[-1].seconds:.0f} s",
              flush=True)
    summary = table(outcomes)
    (out / "summary.md").write_text(summary)
    print(summary, end="")
    return 1 if any(o.error for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())

"""Builds every example spec and prints the sha256 of each tarball: the same bytes before and after a refactor.

    .venv/bin/python benchmarks/example_tarballs.py OUT_DIR            # build, then list
    .venv/bin/python benchmarks/example_tarballs.py OUT_DIR --list     # list an earlier build only

Each spec (examples/*.yaml, examples/your-own-model/spec.yaml, triton.yaml) is built with
``tritonsm build --spec SPEC --out OUT_DIR/<spec> --work-dir OUT_DIR/work``; a model this machine
cannot build (a TensorRT plan without a GPU) is named in OUT_DIR/<spec>.log. Prints one line per
tarball: ``<spec> <file> <sha256>``, sorted, ready for benchmarks/backends-sha256.md.
"""
from __future__ import annotations

import argparse
import hashlib
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
SPECS = sorted(ROOT.glob("examples/*.yaml")) + [ROOT / "examples/your-own-model/spec.yaml", ROOT / "triton.yaml"]


def folder_name(spec: pathlib.Path) -> str:
    return str(spec.relative_to(ROOT).with_suffix("")).replace("/", "_")


def build(out: pathlib.Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tritonsm = pathlib.Path(sys.executable).parent / "tritonsm"
    for spec in SPECS:
        name = folder_name(spec)
        with open(out / f"{name}.log", "w") as log:
            done = subprocess.run([str(tritonsm), "build", "--spec", str(spec), "--out", str(out / name),
                                   "--work-dir", str(out / "work")], stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        print(f"built {spec.relative_to(ROOT)}: exit {done.returncode}", file=sys.stderr, flush=True)


def listing(out: pathlib.Path) -> list[str]:
    lines = []
    for spec in SPECS:
        for tarball in sorted((out / folder_name(spec)).glob("*.tar.gz")):
            digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
            lines.append(f"{spec.relative_to(ROOT)} {tarball.name} {digest}")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--list", action="store_true", help="list the tarballs of an earlier build; build nothing")
    args = parser.parse_args(argv)
    if not args.list:
        build(args.out)
    print("\n".join(listing(args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

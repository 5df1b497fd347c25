"""Peak resident memory of building a spec from scratch, and the time of an unchanged rebuild.

    .venv/bin/python benchmarks/build_memory.py [--spec triton.yaml]

Runs `tritonsm build` in a child process with empty output and cache folders (so every model is
really exported and verified) and prints the largest resident set size of that process and of
the processes it started (the TorchScript trace runs in its own process), in MB. Then it runs
the same build 5 more times with nothing changed and prints the median wall time (target < 2 s).
"""
from __future__ import annotations

import argparse
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default=str(ROOT / "triton.yaml"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tritonsm-bench-") as tmp:
        cmd = [sys.executable, "-m", "tritonsm", "build", "--spec", args.spec, "--out", f"{tmp}/assets",
               "--work-dir", f"{tmp}/work"]
        print(f"clean build of {pathlib.Path(args.spec).name} (a few minutes) ...", flush=True)
        start = time.monotonic()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        elapsed = time.monotonic() - start
        if proc.returncode != 0:
            print(proc.stdout + proc.stderr, file=sys.stderr)
            return proc.returncode
        # ru_maxrss of RUSAGE_CHILDREN: the largest peak among the waited-for descendants, in KiB on Linux.
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"build of {pathlib.Path(args.spec).name}: {elapsed:.1f} s, peak RSS {peak_mb:.0f} MB "
              f"(load average {os.getloadavg()[0]:.2f})")
        noop = []
        for _ in range(5):
            start = time.monotonic()
            subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True)
            noop.append(time.monotonic() - start)
        print(f"unchanged rebuild: median {statistics.median(noop):.2f} s over 5 runs "
              f"(min {min(noop):.2f}, max {max(noop):.2f}; includes Python start-up)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

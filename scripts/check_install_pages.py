"""Follow docs/howto/install.md's ways 2 and 3 word for word in fresh virtual environments, from a checkout's
`make dist` (way 1 is `make` itself: every fresh-clone run of `make test` follows it).

    .venv/bin/python scripts/check_install_pages.py [--keep]

Way 2 runs its `make dist` block in this checkout, then its `pip install` block in a new virtual environment (your
app's), and imports the library there; way 3 runs its block as written (it makes its own environment) and its
`tritonsm --version`. Each block runs in one `bash -e` session in a temporary folder holding dist/ and
requirements.lock, as a user's checkout would; prints each command, its time and the result. pip's cache makes
repeats quick; nothing outside the temporary folder changes (but dist/ of this checkout).
"""
from __future__ import annotations

import argparse
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "howto" / "install.md"


def blocks(way: int) -> list[str]:
    """The ```sh blocks of section '## <way>.' of the install page."""
    section = PAGE.read_text().split(f"## {way}.", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, re.S)


def run(script: str, cwd: pathlib.Path, label: str) -> float:
    print(f"--- {label} (in {cwd})\n{script.rstrip()}", flush=True)
    start = time.monotonic()
    done = subprocess.run(["bash", "-e", "-c", script], cwd=cwd, capture_output=True, text=True)
    took = time.monotonic() - start
    print(done.stdout[-2000:], done.stderr[-3000:] if done.returncode else "", sep="", flush=True)
    if done.returncode != 0:
        raise SystemExit(f"{label}: exit {done.returncode} after {took:.0f} s")
    print(f"--- {label}: ok in {took:.0f} s", flush=True)
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (its path is printed)")
    args = parser.parse_args()
    dist_block, install_block = blocks(2)
    (tools_block,) = blocks(3)
    run(dist_block.replace("make dist", "make -s dist"), ROOT, "way 2: make dist (in the checkout)")
    folder = pathlib.Path(tempfile.mkdtemp(prefix="tritonsm-install-"))
    try:
        shutil.copytree(ROOT / "dist", folder / "dist")
        shutil.copy(ROOT / "requirements.lock", folder / "requirements.lock")
        times = {"way 2": run(f"{sys.executable} -m venv app && . app/bin/activate\n{install_block}"
                              "python -c 'import triton_constructs, deployment_spec; print(\"library imported\")'\n",
                              folder, "way 2: the library in a new environment"),
                 "way 3": run(tools_block, folder, "way 3: the tools in a virtual environment")}
        print("; ".join(f"{way}: {took:.0f} s" for way, took in times.items()))
    finally:
        if args.keep:
            print(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The built docs site (`make docs`, build/docs) opened in headless Chromium, as a reader's browser shows it: one PNG
per page that carries a picture or `<placeholders>` (the data flow, a stage's resources, the spec and command-line
references), for a person to look at.

    make docs && .venv/bin/python scripts/screenshot_docs.py [--out build/screenshots] [--chromium /usr/bin/chromium]

Serves build/docs on a free 127.0.0.1 port (as a web server would: dirhtml's folder URLs), runs Chromium headless
(no sandbox, no GPU, no network beyond the loopback) for each page, and prints each PNG with its size. Chromium is
not installed by `make`: on Debian, `apt-get install chromium` (the browser of every screenshot described in the
changelog's notes). Not part of `make test`: what the tests check of the same pages (the pictures' <img> tags, the
placeholders' text) is tests/docs/test_docs_build.py.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading
from typing import Iterator

ROOT = pathlib.Path(__file__).resolve().parents[1]
SITE = ROOT / "build" / "docs"
# (page, what a reader should see on it)
PAGES = (("concepts/overview/", "the data-flow picture: spec, build, tarballs, stacks, endpoint"),
         ("concepts/deployed/", "the picture of one stage's resources"),
         ("reference/spec/", "field help with its placeholders shown as written: <project>-<environment>-<endpoint>"),
         ("reference/cli/", "the commands at a glance with their metavariables (ENDPOINT, [--spec F], URL)"))
WINDOW = "1280,2000"


@contextlib.contextmanager
def _served(folder: pathlib.Path) -> Iterator[str]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *_: object) -> None:  # the pages' files, not worth a line each
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def _screenshot(chromium: str, url: str, png: pathlib.Path) -> None:
    with tempfile.TemporaryDirectory(prefix="tritonsm-chromium-") as profile:
        done = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                               "--no-first-run", "--disable-background-networking", "--disable-component-update",
                               "--disable-sync", "--hide-scrollbars", f"--user-data-dir={profile}",
                               f"--window-size={WINDOW}", f"--screenshot={png}", url],
                              capture_output=True, text=True, timeout=120)
    if done.returncode != 0 or not png.is_file():
        raise SystemExit(f"screenshot_docs: chromium could not render {url} (exit {done.returncode}): "
                         f"{done.stderr.strip()[-1500:]}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "build" / "screenshots")
    parser.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser") or "")
    args = parser.parse_args(argv)
    if not (SITE / "index.html").is_file():
        parser.error(f"no built site in {SITE}; run `make docs` first")
    if not args.chromium:
        parser.error("no Chromium on PATH; give --chromium PATH, or install it (Debian: apt-get install chromium)")
    args.out.mkdir(parents=True, exist_ok=True)
    with _served(SITE) as base:
        for page, what in PAGES:
            png = args.out / (page.strip("/").replace("/", "-") + ".png")
            _screenshot(args.chromium, base + page, png)
            print(f"{png} ({png.stat().st_size:,} bytes): {what}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

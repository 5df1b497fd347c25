"""A benchmark's child command, its output kept in a log file and returned with the time of each line."""
from __future__ import annotations

import pathlib
import subprocess
import time

# A missing command is waited for this long: reinstalling the checkout (pip install -e) rewrites the console
# scripts (.venv/bin/tritonsm), and a benchmark of hours should not stop for the seconds they are gone.
MISSING_WAIT_S, MISSING_POLL_S = 120, 5


def run_logged(command: list[str], log_file: pathlib.Path, cwd: pathlib.Path) -> tuple[int, list[tuple[float, str]]]:
    """Runs ``command`` in ``cwd``, streaming its output into ``log_file``; (exit status, [(seconds since start,
    line)])."""
    start, lines = time.monotonic(), []
    with log_file.open("a") as log:
        log.write(f"$ {' '.join(command)}\n")
        log.flush()
        proc = _started(command, cwd)
        assert proc.stdout is not None  # stdout=PIPE
        for line in proc.stdout:
            log.write(line)
            log.flush()
            lines.append((time.monotonic() - start, line.rstrip("\n")))
        return proc.wait(), lines


def _started(command: list[str], cwd: pathlib.Path) -> subprocess.Popen[str]:
    """``command`` started with its output piped; FileNotFoundError only once it has been missing MISSING_WAIT_S."""
    deadline = time.monotonic() + MISSING_WAIT_S
    while True:
        try:
            return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd,
                                    stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(MISSING_POLL_S)

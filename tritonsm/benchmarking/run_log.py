"""A benchmark's child command, its output kept in a log file and returned with the time of each line."""
from __future__ import annotations

import pathlib
import subprocess
import time


def run_logged(command: list[str], log_file: pathlib.Path, cwd: pathlib.Path) -> tuple[int, list[tuple[float, str]]]:
    """Runs ``command`` in ``cwd``, streaming its output into ``log_file``; (exit status, [(seconds since start,
    line)])."""
    start, lines = time.monotonic(), []
    with log_file.open("a") as log:
        log.write(f"$ {' '.join(command)}\n")
        log.flush()
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd,
                                stdin=subprocess.DEVNULL)
        assert proc.stdout is not None  # stdout=PIPE
        for line in proc.stdout:
            log.write(line)
            log.flush()
            lines.append((time.monotonic() - start, line.rstrip("\n")))
        return proc.wait(), lines

"""The five-minute path (README.md between the five-minute markers, which docs/quickstart.md includes), run as
written: every command of every block, in order, in one bash session, in a copy of the checkout.

The copy shares `.venv` and `node_modules` (what `make`'s set-up step would install, unchanged) and the build's
work folder `.tritonsm/build` (a cache keyed by each model's inputs, so a second run skips unchanged models
as `make` does for a user), and gets its own `assets/`, `cdk.out/` and files, so the checkout is not changed.
Port 8080 becomes a free port. Comment lines right after a command are the output the page promises for it.
"""
from __future__ import annotations

import contextlib
import os
import pathlib
import re
import shutil
import signal
import subprocess
import time

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
START, END = "<!-- five-minute start -->", "<!-- /five-minute start -->"
# What the copy leaves out: the toolchain and caches it links instead, and outputs of earlier runs.
SKIP = {".git", ".venv", "node_modules", ".tritonsm", "assets", "cdk.out", "build", "bench-results", ".mypy_cache",
        ".pytest_cache", "__pycache__"}


def blocks() -> list[list[tuple[str, list[str]]]]:
    """Each ```sh block of the five-minute path as (command, the output lines promised after it)."""
    text = (ROOT / "README.md").read_text()
    section = text.split(START, 1)[1].split(END, 1)[0]
    out = []
    for block in re.findall(r"```sh\n(.*?)```", section, re.S):
        commands: list[tuple[str, list[str]]] = []
        for line in block.replace("\\\n", " ").splitlines():
            if line.startswith("# "):
                commands[-1][1].append(line[2:])
            elif line.strip():
                commands.append((line.strip(), []))
        out.append(commands)
    return out


def test_the_docs_page_shows_the_readme_path_and_the_path_has_what_the_issue_promises():
    page = (ROOT / "docs" / "quickstart.md").read_text()
    assert f":start-after: {START}" in page and f":end-before: {END}" in page and "../README.md" in page
    commands = [c for block in blocks() for c, _ in block]
    assert commands[0] == "make"
    assert [c.split()[:2] for c in commands if c.startswith(("tritonsm", "cdk"))] == [
        ["tritonsm", "validate"], ["tritonsm", "serve"], ["tritonsm", "invoke"], ["cdk", "diff"]]


def _copy_checkout(into: pathlib.Path) -> None:
    shutil.copytree(ROOT, into, symlinks=True, ignore=lambda _, names: [n for n in names if n in SKIP])
    for name in (".venv", "node_modules"):
        (into / name).symlink_to(ROOT / name)
    cache = ROOT / ".tritonsm" / "build"
    cache.mkdir(parents=True, exist_ok=True)
    (into / ".tritonsm").mkdir()
    (into / ".tritonsm" / "build").symlink_to(cache)


@pytest.mark.triton
@pytest.mark.slow
def test_the_five_minute_path_runs_as_written(tmp_path):
    from local_endpoint.server.ports import free_port

    work = tmp_path / "checkout"
    _copy_checkout(work)
    port = str(free_port())
    script, promised = ["set -euo pipefail"], {}
    for number, (command, output) in enumerate(c for block in blocks() for c in block):
        command = command.replace("8080", port)
        log = f"{tmp_path}/step-{number}.log"
        if command.startswith("source ") or command.startswith("kill "):
            script.append(command)  # changes the shell itself
        elif command.endswith("&"):
            script.append(f"{command[:-1].rstrip()} > {log} 2>&1 &")
        else:
            script.append(f"echo '$ {command}' >&2; {{ {command} ; }} > {log} 2>&1 || {{ cat {log} >&2; exit 1; }}")
        promised[number] = (command, output, pathlib.Path(log))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "VIRTUAL_ENV"))}
    shell = subprocess.Popen(["bash", "-c", "\n".join(script)], cwd=work, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = shell.communicate(timeout=1500)
    finally:
        _stop_session(shell.pid, work)
    assert shell.returncode == 0, err[-6000:]
    # `kill %1` stopped the server as Ctrl-C would: it says so last
    [serve_log] = [p for c, _, p in promised.values() if c.startswith("tritonsm serve")]
    assert serve_log.read_text().splitlines()[-1] == "stopped", serve_log.read_text()[-3000:]

    for command, output, log in promised.values():
        if not output:
            continue
        said = log.read_text().splitlines()
        if command.startswith("tritonsm invoke"):
            # model and tensor lines exactly; the logits of the random-weight model within float noise
            assert said[:2] == output[:2], said
            np.testing.assert_allclose(_numbers(said[2]), _numbers(output[2]), atol=1e-4)
        else:
            assert said == output, (command, said)
    # what the page says of the diff: MaxCapacity 3 -> 5 on the scalable target, no other property of the endpoint
    diff = [p for c, _, p in promised.values() if c.startswith("cdk diff")][0].read_text()
    assert "Number of stacks with differences: 1" in diff
    changed = re.findall(r"^\s+└─ \[~\] (\w+)", diff, re.M)
    assert changed and set(changed) == {"MaxCapacity"}, diff
    assert re.search(r"\[-\] 3\s+.*\[\+\] 5", diff, re.S)
    assert "AWS::ApplicationAutoScaling::ScalableTarget" in diff and "AWS::SageMaker::Endpoint " not in diff


def _numbers(line: str) -> list[float]:
    return [float(x) for x in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", line)]


def _stop_session(pid: int, work: pathlib.Path) -> None:
    """Waits until what the script started is gone: its process group (the background `tritonsm serve`) and the
    Triton server that serve runs in a session of its own, which ends a moment after serve. Whatever is still
    there after a minute is killed, so the suite's no-server-left-behind check sees nothing of this test."""
    import psutil

    def group_alive() -> bool:
        try:
            os.killpg(pid, 0)
            return True
        except ProcessLookupError:
            return False

    def servers() -> list[psutil.Process]:
        return [p for p in psutil.process_iter(["cmdline"]) if str(work) in " ".join(p.info["cmdline"] or [])]

    deadline = time.monotonic() + 60
    while (group_alive() or servers()) and time.monotonic() < deadline:
        time.sleep(1)
    if group_alive():
        os.killpg(pid, signal.SIGKILL)
    for process in servers():
        with contextlib.suppress(psutil.Error):
            process.kill()

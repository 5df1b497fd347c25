"""A server that exits during start-up is reported with its log tail and, where the log shows a cause a user can act
on, that cause and its fix: Triton's Python backend failing to unpack an execution environment into /tmp (the line
Triton 24.10 logged when the disk filled while ten generation models loaded). Its twin: another failure gets no
cause."""
from __future__ import annotations

import pathlib
import time

import pytest

from local_endpoint.errors import ServerStartError
from local_endpoint.server.server_process import LoggedProcess, known_cause

FULL = ("error: creating server: Invalid argument - load failed for model '/tmp/m/opt-ml-model::gen_qwen2': version 1 "
        "is at UNAVAILABLE state: Internal: archive_write_data_block() failed with error code = -20, error message "
        "is Write failed")
CAUSE = (": Triton's Python backend could not write a model's execution environment into /tmp (it unpacks each one "
         "into a /tmp/python_env_* folder; the disk holding /tmp is most likely full): free space there, starting "
         "with /tmp/python_env_* folders that killed servers left (docs/troubleshooting.md)")


def _exited(tmp_path: pathlib.Path, line: str) -> tuple[str, str]:
    """The start-up error of a server that printed ``line`` and exited 1, and its log's tail (our "$ command" line,
    then the server's)."""
    log = tmp_path / "server.log"
    process = LoggedProcess(["sh", "-c", f"echo \"$0\"; exit 1", line], None, log, what="the Triton server")
    deadline = time.monotonic() + 30
    while process.exit_code() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(ServerStartError) as caught:
        process.raise_if_exited_during_start()
    process.stop()
    return str(caught.value), process.log_tail()


def test_an_environment_that_cannot_be_unpacked_is_told_as_a_full_tmp(tmp_path: pathlib.Path) -> None:
    message, tail = _exited(tmp_path, FULL)
    assert tail.endswith("\n" + FULL)
    assert message == (f"the Triton server exited during start-up with exit code 1{CAUSE}; last lines of its log "
                       f"({tmp_path / 'server.log'}):\n{tail}")


def test_another_failure_gets_the_log_tail_only(tmp_path: pathlib.Path) -> None:
    other = "error: creating server: Internal - failed to load all models"
    assert known_cause(other) == ""
    message, tail = _exited(tmp_path, other)
    assert message == (f"the Triton server exited during start-up with exit code 1; last lines of its log "
                       f"({tmp_path / 'server.log'}):\n{tail}")

"""A server that aborts at start-up in the Python backend's stub hand-shake (``boost::interprocess::lock_exception``,
a transient under load seen in a full suite run) is started once more, and the retry is said in its log; any other
start-up failure is reported at once, and the hand-shake abort twice in a row is reported, not retried forever.

The real Triton server serves a real model; in front of its binary stands a script that, for the first N starts,
prints what the aborting server printed and aborts itself (SIGABRT, as std::terminate does), then runs the real one.
"""
from __future__ import annotations

import dataclasses
import pathlib

import numpy as np
import pytest

from local_endpoint.client.invoke import invoke_url
from local_endpoint.client.payload import NamedTensor, encode_request
from local_endpoint.endpoints import single_model
from local_endpoint.endpoints.single_model import SingleModelEndpoint
from local_endpoint.errors import ServerStartError
from local_endpoint.server.launch import STUB_ABORT_RETRY_NOTE, STUB_HANDSHAKE_ABORT
from local_endpoint.server.triton_install import TritonInstall, find_triton_install

ONES = [NamedTensor("A", "FP32", np.ones((1, 4), np.float32)), NamedTensor("B", "FP32", np.ones((1, 4), np.float32))]
OTHER_ABORT = "terminate called after throwing an instance of 'std::bad_alloc'"


@dataclasses.dataclass(frozen=True)
class _FrontedInstall(TritonInstall):
    """The real install, its server binary behind ``front``."""

    front: pathlib.Path = pathlib.Path()

    @property
    def server_binary(self) -> pathlib.Path:
        return self.front


def _front(tmp_path: pathlib.Path, aborts: int, line: str) -> tuple[TritonInstall, pathlib.Path]:
    """An install whose first ``aborts`` starts print ``line`` and abort; and the file counting the starts."""
    real = find_triton_install()
    starts = tmp_path / "starts"
    front = tmp_path / "tritonserver"
    front.write_text(f"""#!/bin/sh
echo x >> '{starts}'
if [ "$(wc -l < '{starts}')" -le {aborts} ]; then
  echo "{line}"
  kill -ABRT $$
fi
exec '{real.server_binary}' "$@"
""")
    front.chmod(0o755)
    return _FrontedInstall(real.root, front), starts


def _started(starts: pathlib.Path) -> int:
    return len(starts.read_text().splitlines())


@pytest.mark.triton
def test_a_stub_hand_shake_abort_is_started_once_more(tarballs: dict[str, pathlib.Path], tmp_path: pathlib.Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    install, starts = _front(tmp_path, aborts=1, line=STUB_HANDSHAKE_ABORT)
    monkeypatch.setattr(single_model, "find_triton_install", lambda: install)
    log = tmp_path / "server.log"
    with SingleModelEndpoint(tarballs["add"], log_file=log) as server:
        answer = invoke_url(server.url, encode_request(ONES, binary=False))
        assert answer.outputs[0].array.tolist() == [[2.0, 2.0, 2.0, 2.0]]
    assert _started(starts) == 2
    text = log.read_text()
    # The log tells the whole story: the abort, our note, then the second server's start.
    assert text.index(STUB_HANDSHAKE_ABORT) < text.index(STUB_ABORT_RETRY_NOTE) < text.rindex("$ ")
    assert f"tritonsm: {STUB_ABORT_RETRY_NOTE} (log: {log})\n" in capsys.readouterr().err


def _failed_start(tarballs: dict[str, pathlib.Path], tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
                  aborts: int, line: str) -> tuple[str, int, str]:
    """The start-up error of an endpoint whose server's first ``aborts`` starts print ``line`` and abort, how many
    starts there were, and the server's log."""
    install, starts = _front(tmp_path, aborts=aborts, line=line)
    monkeypatch.setattr(single_model, "find_triton_install", lambda: install)
    log = tmp_path / "server.log"
    with pytest.raises(ServerStartError) as caught:
        SingleModelEndpoint(tarballs["add"], log_file=log).start()
    message = str(caught.value)
    assert message.startswith(f"the Triton server exited during start-up with signal SIGABRT; last lines of its log "
                              f"({log}):\n") and message.endswith(line)
    return message, _started(starts), log.read_text()


@pytest.mark.triton
def test_the_abort_twice_is_reported_not_retried_again(tarballs: dict[str, pathlib.Path], tmp_path: pathlib.Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    _message, starts, log = _failed_start(tarballs, tmp_path, monkeypatch, aborts=5, line=STUB_HANDSHAKE_ABORT)
    assert starts == 2 and log.count(STUB_ABORT_RETRY_NOTE) == 1


@pytest.mark.triton
def test_another_abort_is_reported_at_once(tarballs: dict[str, pathlib.Path], tmp_path: pathlib.Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    _message, starts, log = _failed_start(tarballs, tmp_path, monkeypatch, aborts=1, line=OTHER_ABORT)
    assert starts == 1 and STUB_ABORT_RETRY_NOTE not in log

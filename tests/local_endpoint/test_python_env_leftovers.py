"""The /tmp/python_env_* folders of killed Triton servers (local_endpoint/server/python_env_leftovers.py): which
are removed and which a live server may still own. Folders under a test folder stand for /tmp; the real server's
case is in test_python_env_serve.py."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import time

import pytest

from local_endpoint.server import python_env_leftovers as leftovers

DAY_AGO = time.time() - 86400  # before any server this suite starts


def _folder(root: pathlib.Path, name: str, changed: float | None = None) -> pathlib.Path:
    folder = root / f"python_env_{name}"
    (folder / "0" / "bin").mkdir(parents=True)
    (folder / "0" / "bin" / "python3").write_bytes(b"x" * 1000)
    if changed is not None:
        os.utime(folder, (changed, changed))
    return folder


@pytest.fixture
def sleeper(tmp_path):
    """Starts a process (named ``name``, with ``env``) that lives for the test."""
    started = []

    def start(name: str = "sleep", **env: str) -> subprocess.Popen:
        binary = tmp_path / "bin" / name
        binary.parent.mkdir(exist_ok=True)
        shutil.copy(shutil.which("sleep"), binary)
        started.append(subprocess.Popen([str(binary), "60"], env={**os.environ, **env}))
        time.sleep(0.2)
        return started[-1]

    yield start
    for process in started:
        process.kill()
        process.wait()


def test_the_log_names_the_folders_a_server_unpacked_into() -> None:
    # As Triton 24.10 logs it (nvidia-pytriton 0.7.0), then as r25.08's launcher does; a model's own output is not
    # the server's word.
    log = ('I1129 22:39:47.602197 7239 stub_launcher.cc:385] "Starting Python backend stub: source '
           '/tmp/python_env_Ab12Cd/0/bin/activate && exec env LD_LIBRARY_PATH=/tmp/python_env_Ab12Cd/0/lib:$LD_LIB"\n'
           'I1129 22:39:48.1 7239 stub_launcher.cc:470] "Activation script: /tmp/python_env_Ef34Gh/1/bin/activate"\n'
           "I1129 22:39:49.1 7300 model.py:1] some model printed /tmp/python_env_Zz99Zz/0\n")
    assert leftovers.folders_in_log(log) == {pathlib.Path("/tmp/python_env_Ab12Cd"),
                                             pathlib.Path("/tmp/python_env_Ef34Gh")}


def test_a_folder_no_live_process_names_is_removed_and_a_named_one_kept(tmp_path, sleeper) -> None:
    abandoned, used = _folder(tmp_path, "aaaaaa", DAY_AGO), _folder(tmp_path, "bbbbbb", DAY_AGO)
    sleeper(VIRTUAL_ENV=str(used / "0"))  # a stub of a live server runs with its environment
    assert leftovers.remove_abandoned(tmp_path) == [(abandoned, 1000)]
    assert not abandoned.exists() and used.is_dir()


def test_a_live_server_that_may_have_made_a_folder_keeps_it(tmp_path, sleeper, monkeypatch) -> None:
    monkeypatch.setattr(leftovers, "_loaded_python_backend", lambda pid: True)
    sleeper("tritonserver")  # a server with the Python backend loaded, whose stubs name no folder
    before, after = _folder(tmp_path, "cccccc", DAY_AGO), _folder(tmp_path, "dddddd", time.time() + 5)
    assert leftovers.remove_abandoned(tmp_path) == [(before, 1000)]  # made before that server started: not its
    assert after.is_dir()


def test_only_folders_that_exist_and_are_ours_are_removed(tmp_path) -> None:
    gone = tmp_path / "python_env_eeeeee"
    assert leftovers.remove([gone]) == []

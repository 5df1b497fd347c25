"""Work folders left by a killed serve are removed by the next one; a live serve's never (no Triton server needed:
real processes, one killed with SIGKILL, stand for the serves)."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time

import psutil

from local_endpoint.server import work_dirs

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


def test_only_folders_whose_processes_are_all_gone_are_removed(tmp_path: pathlib.Path) -> None:
    killed, live = subprocess.Popen(SLEEPER), subprocess.Popen(SLEEPER)
    try:
        abandoned = tmp_path / "tritonsm-sme-abandoned"  # its serve was killed
        abandoned.mkdir()
        (abandoned / "model.plan").write_bytes(b"x" * 3000)
        work_dirs.add_owner(abandoned, killed.pid)
        in_use = tmp_path / "tritonsm-mme-in-use"  # its serve is gone but its server still runs
        in_use.mkdir()
        work_dirs.add_owner(in_use, killed.pid)
        work_dirs.add_owner(in_use, live.pid)
        reused = tmp_path / "tritonsm-sme-reused"  # its owner's PID now belongs to another process
        reused.mkdir()
        started = psutil.Process(live.pid).create_time()
        (reused / "owners.json").write_text(json.dumps([{"pid": live.pid, "started": started - 100}]))
        unrecorded = tmp_path / "tritonsm-sme-unrecorded"  # just made, its record not written yet
        unrecorded.mkdir()
        other = tmp_path / "other-tool-folder"
        other.mkdir()
        killed.kill()
        killed.wait()
        expected = [(abandoned, 3000 + (abandoned / "owners.json").stat().st_size, [killed.pid]),
                    (reused, (reused / "owners.json").stat().st_size, [live.pid])]
        assert work_dirs.remove_abandoned(tmp_path) == expected
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            "other-tool-folder", "tritonsm-mme-in-use", "tritonsm-sme-unrecorded"]
    finally:
        live.kill()
        live.wait()


def test_a_new_folder_records_its_owner_and_says_what_it_removed(tmp_path: pathlib.Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(work_dirs.tempfile, "tempdir", str(tmp_path))
    # Not /tmp's Python-backend folders, which other tests' killed servers may leave (test_python_env_leftovers).
    monkeypatch.setattr(work_dirs.python_env_leftovers, "ROOT", tmp_path / "python-envs")
    killed = subprocess.Popen(SLEEPER)
    abandoned = tmp_path / "tritonsm-sme-abandoned"
    abandoned.mkdir()
    work_dirs.add_owner(abandoned, killed.pid)
    (abandoned / "model.onnx").write_bytes(b"x" * (3 * 2**20))
    killed.kill()
    killed.wait()
    folder = work_dirs.make("tritonsm-sme-")
    assert capsys.readouterr().out == (
        f"removed {abandoned} (3.0 MiB), left by a serve that is gone (pid {killed.pid})\n")
    assert [o["pid"] for o in json.loads((folder / "owners.json").read_text())] == [psutil.Process().pid]
    assert [p.name for p in tmp_path.iterdir()] == [folder.name]


def test_an_image_serve_s_folder_is_one_of_them(tmp_path: pathlib.Path) -> None:
    # `serve --image` makes tritonsm-sme-image-* / tritonsm-mme-image-* with work_dirs.make: the same cleanup applies.
    killed = subprocess.Popen(SLEEPER)
    folder = tmp_path / "tritonsm-mme-image-abc"
    folder.mkdir()
    work_dirs.add_owner(folder, killed.pid)
    killed.kill()
    killed.wait()
    assert [f for f, _, _ in work_dirs.remove_abandoned(tmp_path)] == [folder]


def test_a_killed_server_s_python_environments_are_removed_and_told_but_an_empty_folder_silently(
        tmp_path: pathlib.Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(work_dirs.tempfile, "tempdir", str(tmp_path / "work"))
    (tmp_path / "work").mkdir()
    envs = tmp_path / "python-envs"
    monkeypatch.setattr(work_dirs.python_env_leftovers, "ROOT", envs)
    (envs / "python_env_Full01" / "0").mkdir(parents=True)
    (envs / "python_env_Full01" / "0" / "lib.so").write_bytes(b"x" * 2048)
    (envs / "python_env_Empty1").mkdir()   # a server without environments makes its folder all the same
    old = time.time() - 86400  # before any live server of the suite started: none of them can own these
    for folder in envs.iterdir():
        os.utime(folder, (old, old))
    work_dirs.make("tritonsm-sme-")
    assert capsys.readouterr().err == (f"removed {envs}/python_env_Full01 (2.0 KiB), the Python execution "
                                       "environments of a Triton server that was killed\n")
    assert list(envs.iterdir()) == []

"""A disk that fills up while a local endpoint unpacks a model: told as a full disk, with the fix, and nothing
half-unpacked left behind.

A full disk cannot be made on demand (a small tmpfs needs mount rights CI does not have), so the OS's answer
is played at the one place tarfile writes a member's bytes: the file is half written, then the write fails
with ENOSPC, as it does when the disk runs out mid-archive.
"""
from __future__ import annotations

import errno
import json
import pathlib
import re
import tarfile
import tempfile

import pytest

from local_endpoint.cli import serve_main
from local_endpoint.endpoints.model_cache import MultiModelCache


def expected(folder: pathlib.Path, doing: str) -> re.Pattern[str]:
    """The whole message; only the free space, measured when the error is raised, varies."""
    return re.compile(
        re.escape(f"no space left on the disk of {folder} to {doing} (No space left on device; ")
        + r"[0-9.]+ (GiB|MiB|KiB)"
        + re.escape(" free there now); free space on that disk, or point TMPDIR at a folder on a larger one and "
                    f"start again (local endpoints unpack their models under {tempfile.gettempdir()})"))


@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Extraction fails with ENOSPC while the returned flag holds True (set it to False: space freed)."""
    full = [True]
    makefile = tarfile.TarFile.makefile

    def makefile_on_a_full_disk(self: tarfile.TarFile, tarinfo: tarfile.TarInfo, targetpath: str) -> None:
        if not full[0]:
            return makefile(self, tarinfo, targetpath)
        pathlib.Path(targetpath).write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device", targetpath)

    monkeypatch.setattr(tarfile.TarFile, "makefile", makefile_on_a_full_disk)
    return full


def test_an_mme_answers_507_naming_the_disk_and_unpacks_afresh_once_space_is_freed(
        full_disk: list[bool], tarballs: dict[str, pathlib.Path], tmp_path: pathlib.Path) -> None:
    # The unpack comes before any call to the server, so no server is needed (port 9 is never called).
    archive = tarballs["times2"]
    cache = MultiModelCache({archive.name: archive}, 9, tmp_path / "models", None)
    reply = cache.invoke(archive.name, b"{}", "application/json")
    model_dir = next((tmp_path / "models").iterdir()) / "model"
    assert reply.status == 507  # what SageMaker's Triton front end answers for "No space left on device"
    message = json.loads(reply.body)["error"]
    assert expected(model_dir, f"unpack target model 'times2.tar.gz' ({archive})").fullmatch(message), message
    assert not model_dir.exists()  # the half-written file went with its folder
    assert cache.loaded_models() == []
    full_disk[0] = False
    cache._prepare(archive.name)
    assert (model_dir / "times2" / "config.pbtxt").is_file()


def test_an_sme_serve_says_the_disk_is_full_and_removes_its_folder(
        full_disk: list[bool], tarballs: dict[str, pathlib.Path], capsys: pytest.CaptureFixture[str]) -> None:
    before = set(pathlib.Path(tempfile.gettempdir()).glob("tritonsm-sme-*"))
    assert serve_main([str(tarballs["add"])]) == 1
    made = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert len(made) == 1, made
    folder = pathlib.Path(made[0].split("no space left on the disk of ", 1)[1].split(" to unpack", 1)[0])
    assert folder.name == "opt-ml-model" and folder.parent.name.startswith("tritonsm-sme-")
    assert expected(folder, f"unpack model archive {tarballs['add']}").fullmatch(made[0].removeprefix("error: "))
    assert set(pathlib.Path(tempfile.gettempdir()).glob("tritonsm-sme-*")) == before  # its work folder is gone



def test_an_image_serve_says_the_disk_is_full_before_any_container_runs(
        full_disk: list[bool], tarballs: dict[str, pathlib.Path], tmp_path: pathlib.Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from image_fixtures import install_fake_docker, write_built_spec
    from tritonsm.cli import main as tritonsm_main

    built = write_built_spec(tmp_path / "project", tarballs)
    docker = install_fake_docker(tmp_path / "fake")
    for key, value in docker.env(FAKE_DOCKER_HAVE_IMAGE="1").items():
        monkeypatch.setenv(key, value)
    before = set(pathlib.Path(tempfile.gettempdir()).glob("tritonsm-sme-*"))
    code = tritonsm_main(["serve", "add-sme", *built.flags(), "--image", "ngc"])
    err = capsys.readouterr().err
    folder = pathlib.Path(err.split("no space left on the disk of ", 1)[1].split(" to unpack", 1)[0])
    assert (code, folder.name) == (1, "opt-ml-model")
    asset = next((tmp_path / "project" / "assets").glob("add-*.tar.gz"))  # the archive the build's manifest names
    assert expected(folder, f"unpack model archive {asset}").fullmatch(err.removeprefix("error: ").rstrip("\n")), err
    assert "run" not in [argv[0] for argv in docker.commands()]
    assert set(pathlib.Path(tempfile.gettempdir()).glob("tritonsm-sme-*")) == before


def test_verify_gpu_says_the_disk_is_full_and_removes_its_folder(
        full_disk: list[bool], tarballs: dict[str, pathlib.Path], tmp_path: pathlib.Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # verify unpacks only where CUDA is usable: the probe says so here, and the disk fills before any check runs.
    from image_fixtures import write_built_spec
    from tritonsm.checks.gpu import host
    from tritonsm.cli import main as tritonsm_main

    built = write_built_spec(tmp_path / "project", tarballs)
    monkeypatch.setattr(host, "probe", lambda: (True, "", {"device": "cuda:0 (played by the test)"}))
    before = set(pathlib.Path(tempfile.gettempdir()).glob("tritonsm-verify-*"))
    assert tritonsm_main(["verify", "--gpu", *built.flags()]) == 2
    err = capsys.readouterr().err
    folder = pathlib.Path(err.split("no space left on the disk of ", 1)[1].split(" to unpack", 1)[0])
    asset = tmp_path / "project" / "assets" / folder.parent.name.split("-", 1)[1]  # its folder: <n>-<archive name>
    assert folder.name == "repository" and folder.parent.parent.name.startswith("tritonsm-verify-")
    assert expected(folder, f"unpack model archive {asset} for the GPU checks").fullmatch(
        err.removeprefix("error: ").rstrip("\n")), err
    assert set(pathlib.Path(tempfile.gettempdir()).glob("tritonsm-verify-*")) == before

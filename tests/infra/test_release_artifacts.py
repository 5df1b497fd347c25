"""`make dist` builds the release artifacts: the wheel and the source distribution named with pyproject.toml's
version, the wheel holding the two packages and no tests, the sdist the sources (in a copy of the checkout)."""
from __future__ import annotations

import pathlib
import shutil
import subprocess
import tarfile
import tomllib
import zipfile

from synth_helpers import ROOT


def test_make_dist_builds_the_wheel_and_sdist_of_the_version(tmp_path):
    source = tmp_path / "checkout"
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", "node_modules", "assets", "cdk.out", "build", "dist", ".tritonsm", "__pycache__",
        "*.egg-info", ".mypy_cache", ".pytest_cache"))
    (source / ".venv").symlink_to(ROOT / ".venv")
    done = subprocess.run(["make", "-o", "setup", "dist"], cwd=source, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    wheel = source / "dist" / f"triton_sagemaker_cdk-{version}-py3-none-any.whl"
    sdist = source / "dist" / f"triton_sagemaker_cdk-{version}.tar.gz"
    assert sorted(p.name for p in (source / "dist").iterdir()) == sorted([wheel.name, sdist.name])
    tops = {name.split("/", 1)[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert {"triton_constructs", "deployment_spec"} <= tops and "tests" not in tops
    with tarfile.open(sdist) as archive:
        names = archive.getnames()
    assert f"triton_sagemaker_cdk-{version}/pyproject.toml" in names

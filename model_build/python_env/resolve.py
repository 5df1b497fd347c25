"""Resolving pinned requirements to one wheel per package for a target, with pip.

pip does the resolution (``pip install --dry-run --report``, https://pip.pypa.io/en/stable/reference/installation-report/)
with ``--only-binary=:all:`` and, for the image, its Python/ABI/platform flags: the same rules pip
would apply inside the image, without running there. The report names the exact file and its
sha256, which the download then requires.
"""
from __future__ import annotations

import dataclasses
import json
import pathlib
import re
import subprocess
import sys
import tempfile
import urllib.parse

from deployment_spec.sections.requirements import NO_DEPS
from model_build.errors import BuildError
from model_build.python_env.target import EnvTarget


@dataclasses.dataclass(frozen=True)
class Locked:
    """One resolved wheel: project name, exact version, file name, URL and sha256."""

    name: str
    version: str
    filename: str
    url: str
    sha256: str

    def requirement(self) -> str:
        return f"{self.name}=={self.version} --hash=sha256:{self.sha256}"


def resolve(lines: list[str], target: EnvTarget, where: str) -> list[Locked]:
    """One wheel per package for ``lines`` (already checked to be pins), sorted by name; with a ``NO_DEPS`` line,
    only the pins themselves."""
    pins = [line for line in lines if line != NO_DEPS]
    with tempfile.TemporaryDirectory(prefix="tritonsm-resolve-") as tmp:
        folder = pathlib.Path(tmp)
        (folder / "requirements.txt").write_text("\n".join(pins) + "\n")
        command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                   "--disable-pip-version-check", "--no-input", "--report", str(folder / "report.json"),
                   "--only-binary=:all:", "--target", str(folder / "target"), *target.pip_flags(),
                   *([NO_DEPS] if NO_DEPS in lines else []), "-r", str(folder / "requirements.txt")]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise BuildError(explain_failure(done.stderr, target, where))
        report = json.loads((folder / "report.json").read_text())
    return sorted((_locked(item) for item in report["install"]), key=lambda x: x.name.lower())


def _locked(item: dict) -> Locked:
    info = item["download_info"]
    url = info["url"]
    hashes = info.get("archive_info", {}).get("hashes", {})
    sha256 = hashes.get("sha256") or info.get("archive_info", {}).get("hash", "sha256=").split("=", 1)[1]
    # pip saves "torch-2.13.0+cpu-....whl" for the URL's "torch-2.13.0%2Bcpu-....whl"
    filename = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])
    return Locked(item["metadata"]["name"], item["metadata"]["version"], filename, url, sha256)


_NO_MATCH = re.compile(r"No matching distribution found for (\S+)")
_VERSIONS = re.compile(r"Could not find a version that satisfies the requirement (\S+) \(from versions: ([^)]*)\)")


def explain_failure(stderr: str, target: EnvTarget, where: str) -> str:
    """pip's refusal in the user's terms: which package, which version, which tags were tried."""
    tags = (f"CPython {target.python} (ABI {target.abi}, abi3, none) on {', '.join(target.platforms[:1])} "
            f"... {target.platforms[-1]} ({len(target.platforms)} platform tags)" if target.platforms
            else f"this machine's CPython {target.python}")
    missing = _NO_MATCH.search(stderr)
    if missing:
        versions = _VERSIONS.search(stderr)
        seen = versions.group(2).strip() if versions else ""
        found = f"wheels exist there for: {seen}" if seen not in ("", "none") else "no release of it has a wheel there"
        return (f"{where}: no wheel of {missing.group(1)} for {target.label}: tried {tags}; {found}. "
                "Pick a version with a binary wheel for that Python and platform (the environment takes "
                "wheels only: nothing is compiled at build or load time)")
    if "ResolutionImpossible" in stderr or "conflict" in stderr.lower():
        detail = "\n".join(line for line in stderr.splitlines() if line.strip() and "WARNING" not in line)
        return f"{where}: the pinned requirements conflict for {target.label}; pip says:\n{detail}"
    detail = "\n".join(line for line in stderr.splitlines() if "ERROR" in line) or stderr.strip()[-2000:]
    return f"{where}: pip could not resolve the requirements for {target.label}: {detail}"

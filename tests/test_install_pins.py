"""docs/howto/install.md's way 3 (the tools with their extras) resolves to what the tests ran: every requirement of
the base install and of each extra its pip command names is pinned, at the version requirements.lock pins (the lock
`make` installs and every test runs on), and its `nvidia-pytriton` pin is the one the local endpoint asks for. So
`pip install -c requirements.lock "<wheel>[build,local,bench]"` installs the tested versions, or pip refuses the
constraint, without this suite downloading torch (scripts/check_install_pages.py installs it for real, minutes)."""
from __future__ import annotations

import pathlib
import re
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "howto" / "install.md"


def _name(requirement: str) -> str:
    """PEP 503's normalised project name of ``name[extras]==version``."""
    return re.sub(r"[-_.]+", "-", re.split(r"[\[=<>!~; ]", requirement, maxsplit=1)[0]).lower()


def _lock(text: str) -> dict[str, str]:
    return {_name(line): line.split("==", 1)[1].split()[0] for line in text.splitlines() if "==" in line}


def way_3_mismatches(page: str, pyproject: dict, lock: dict[str, str], pytriton: str) -> list[str]:
    """Each requirement way 3 installs that the lock does not pin at the same version, in words."""
    section = page.split("## 3.", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```sh\n(.*?)```", section, re.S)
    extras = re.findall(r"\.whl\)\[([a-z,]+)\]", block)
    assert extras, block   # the page installs the wheel with extras
    wanted = list(pyproject["project"]["dependencies"])
    for extra in extras[0].split(","):
        wanted += pyproject["project"]["optional-dependencies"][extra]
    found = []
    for requirement in wanted:
        pinned = re.search(r"==([^;\s]+)", requirement)
        if pinned is None:
            found.append(f"{requirement}: not pinned")
        elif lock.get(_name(requirement)) != pinned.group(1):
            found.append(f"{requirement}: requirements.lock has {lock.get(_name(requirement), 'no pin')}")
    on_page = re.findall(r"pip install --no-deps (nvidia-pytriton==\S+)", block)
    if on_page != [pytriton]:
        found.append(f"the page installs {on_page or 'no nvidia-pytriton'}; the local endpoint asks for {pytriton}")
    return found


def _actual() -> tuple[str, dict, dict[str, str], str]:
    from local_endpoint.server.triton_install import PYTRITON

    return (PAGE.read_text(), tomllib.loads((ROOT / "pyproject.toml").read_text()),
            _lock((ROOT / "requirements.lock").read_text()), PYTRITON)


def test_way_3_installs_the_versions_the_tests_ran() -> None:
    page, pyproject, lock, pytriton = _actual()
    assert way_3_mismatches(page, pyproject, lock, pytriton) == []
    # It looked at the whole of it: the base install and the three extras, dozens of pins.
    assert len(lock) > 150 and len(pyproject["project"]["optional-dependencies"]["build"]) >= 15


def test_a_planted_pin_that_differs_from_the_lock_is_reported() -> None:
    page, pyproject, lock, pytriton = _actual()
    lock = {**lock, "torch": "2.12.0"}
    pyproject["project"]["optional-dependencies"]["bench"] = [*pyproject["project"]["optional-dependencies"]["bench"],
                                                             "pandas>=2"]
    assert way_3_mismatches(page.replace(pytriton, "nvidia-pytriton==0.6.0"), pyproject, lock, pytriton) == [
        "torch==2.13.0: requirements.lock has 2.12.0", "pandas>=2: not pinned",
        f"the page installs ['nvidia-pytriton==0.6.0']; the local endpoint asks for {pytriton}"]

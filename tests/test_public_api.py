"""The public API changes only with notice: every break since the last recorded release (api/<version>.json)
is named in CHANGELOG.md's [Unreleased], and the version is past that release (CHANGELOG.md's header says how).

The twins: a break planted in a copy of the sources is reported with its path, kind and old → new, and passes
once the changelog names it; the record covers the whole public API (a floor), so an empty one cannot pass.
"""
from __future__ import annotations

import shutil
import tomllib
from typing import Sequence

import pytest

from scripts.public_api import (API_DIR, CHANGELOG, PACKAGES, ROOT, Break, Recorded, breaks, latest_release,
                                load_recorded, load_sources, public_api, release_tuple, report, required_release,
                                unannounced)

# 0.1.0 recorded 289 public objects (api/0.1.0.json). A release recorded later with fewer (its CHANGELOG
# section names what was removed) lowers this to its own count.
MIN_PUBLIC_OBJECTS = 289
PLANTED_PATH = "triton_constructs.TritonSageMakerEndpoint.metric_errors"


@pytest.fixture(scope="module")
def release() -> Recorded:
    return latest_release()


@pytest.fixture(scope="module")
def found(release: Recorded) -> list[Break]:
    return breaks(release.modules, load_sources())


@pytest.fixture(scope="module")
def first_release() -> Recorded:
    """0.1.0, whatever the last release: the twins' expected text is written against it."""
    return load_recorded(API_DIR / "0.1.0.json")


@pytest.fixture(scope="module")
def planted(first_release: Recorded, tmp_path_factory: pytest.TempPathFactory) -> list[Break]:
    """The breaks since 0.1.0 of a copy of the sources in which ``metric_errors``' parameter ``kind`` is renamed:
    0.1.0 declared the method on ``TritonSageMakerEndpoint``, now it is inherited, as ``metric_model_latency``'s
    break was (the case griffe's own walk skips)."""
    root = tmp_path_factory.mktemp("planted")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, root / package, ignore=shutil.ignore_patterns("__pycache__"))
    source = root / "triton_constructs" / "endpoint_reference.py"
    text = source.read_text()
    assert text.count("def metric_errors(self, kind: str") == 1
    source.write_text(text.replace("def metric_errors(self, kind: str", "def metric_errors(self, error_kind: str"))
    return breaks(first_release.modules, load_sources(root))


@pytest.fixture(scope="module")
def since_first(first_release: Recorded) -> list[Break]:
    """The real breaks since 0.1.0: what the planted tree has besides the planted one."""
    return breaks(first_release.modules, load_sources())


def test_the_record_covers_the_public_api(release: Recorded):
    count = len(public_api(release.modules))
    assert count == release.public_objects, (
        f"{release.path.name} records {release.public_objects} public objects but reads back as {count}: "
        "griffe no longer reads it whole; record it again from its commit (CHANGELOG.md's header)")
    assert count >= MIN_PUBLIC_OBJECTS, f"{release.path.name}: {count} public objects, fewer than {MIN_PUBLIC_OBJECTS}"


def test_every_break_since_the_last_release_is_in_the_changelog(release: Recorded, found: list[Break]):
    missing = unannounced(found, CHANGELOG.read_text())
    assert not missing, report(missing, release)


def test_the_version_is_past_the_last_release(release: Recorded, found: list[Break]):
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    required = required_release(release_tuple(release.version), broken=bool(found))
    wanted = ".".join(map(str, required))
    assert release_tuple(version) >= required, (
        f"pyproject.toml: version: got {version!r} with {len(found)} break(s) since {release.version}; allowed: "
        f"{wanted} or its development version (CHANGELOG.md's version rule); fix: set version = \"{wanted}.dev0\"")


@pytest.mark.parametrize("last, broken, required", [
    ((0, 1, 0), True, (0, 2, 0)), ((0, 1, 3), False, (0, 1, 3)), ((1, 4, 2), True, (2, 0, 0))])
def test_the_version_rule(last, broken, required):
    assert required_release(last, broken=broken) == required


def test_a_planted_unannounced_break_is_reported(first_release: Recorded, planted: list[Break],
                                                 since_first: list[Break]):
    missing = unannounced(planted, _changelog(changed=[each.path for each in since_first]))
    assert report(missing, first_release) == (
        "1 break(s) of the public API since 0.1.0 (api/0.1.0.json) that CHANGELOG.md's [Unreleased] does not name:\n"
        f"  - {PLANTED_PATH}: Parameter was removed: kind: str = '5XX' (positional or keyword) → (none)\n"
        "fix: restore the old form, or name each path in backticks in a bullet marked **Breaking:** under '### Changed' "
        "or '### Removed' of [Unreleased], saying what users write instead (CHANGELOG.md's header)")


def test_a_break_named_in_a_bullet_not_marked_breaking_is_not_announced(planted: list[Break],
                                                                         since_first: list[Break]):
    changelog = _changelog(changed=[each.path for each in since_first]).replace(
        "### Changed\n\n", f"### Changed\n\n- `{PLANTED_PATH}`: named, not marked.\n", 1)
    assert [each.path for each in unannounced(planted, changelog)] == [PLANTED_PATH]


def test_a_planted_break_the_changelog_names_passes(planted: list[Break], since_first: list[Break]):
    changelog = _changelog(changed=[each.path for each in since_first] + [f"{PLANTED_PATH}(error_kind='4XX')"])
    assert unannounced(planted, changelog) == []


def test_a_break_named_elsewhere_than_changed_or_removed_of_unreleased_is_not_announced(
        planted: list[Break], since_first: list[Break]):
    changelog = _changelog(changed=[each.path for each in since_first], added=[PLANTED_PATH], older=[PLANTED_PATH])
    assert [each.path for each in unannounced(planted, changelog)] == [PLANTED_PATH]


def _changelog(*, changed: list[str], added: Sequence[str] = (), older: Sequence[str] = ()) -> str:
    """A changelog in CHANGELOG.md's form naming ``changed`` under [Unreleased]'s Changed, ``added`` under its
    Added, ``older`` under Changed of the release before."""
    def bullets(paths: Sequence[str]) -> str:
        return "".join(f"- **Breaking:** `{path}`: what to write instead.\n" for path in paths)

    return (f"# Changelog\n\n## [Unreleased]\n\n### Added\n\n{bullets(added)}\n### Changed\n\n{bullets(changed)}\n"
            f"## [0.1.0] - 2026-11-24\n\n### Changed\n\n{bullets(older)}")


def test_the_changelog_has_a_section_per_recorded_release():
    text = CHANGELOG.read_text()
    missing = [p.stem for p in API_DIR.glob("*.json") if f"## [{p.stem}] - " not in text]
    assert not missing, f"CHANGELOG.md: no '## [X.Y.Z] - date' section for the recorded release(s) {missing}"

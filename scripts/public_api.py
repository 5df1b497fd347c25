#!/usr/bin/env python3
"""The public API of ``triton_constructs`` and ``deployment_spec``: recorded per release, compared with griffe.

Public means what ``from triton_constructs import X`` / ``from deployment_spec import X`` gives: each name in
the package's ``__all__``, and of each such class every member whose name does not start with ``_`` (inherited
ones included) plus ``__init__`` (calling the class). Submodules (``triton_constructs.sagemaker_endpoint``...)
are where the building blocks live, not the API: code moves between them without notice.

    scripts/public_api.py record 0.2.0                  # api/0.2.0.json, from the working tree
    scripts/public_api.py record 0.1.0 --ref 7a8db22    # from a commit (git archive: nothing is checked out)
    scripts/public_api.py check                         # the breaks since the last recorded release

griffe reads the sources without importing them (no CDK, no Node): https://mkdocstrings.github.io/griffe/.
Its ``find_breaking_changes`` compares each public function and method here; the walk over the public names
is this module's own, because griffe 2.4.1 skips an object that became an alias of the same kind (its
``seen_paths`` holds the old path when it follows the alias): a method moved into a base class, as
``TritonSageMakerEndpoint.metric_model_latency`` was after 0.1.0, is compared with nothing there.
"""
from __future__ import annotations

import argparse
import dataclasses
import enum
import io
import json
import pathlib
import re
import subprocess
import sys
import tarfile
import tempfile
from typing import Any, Iterable, Iterator, Optional

import griffe

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("deployment_spec", "triton_constructs")
API_DIR = ROOT / "api"
CHANGELOG = ROOT / "CHANGELOG.md"
# The [Unreleased] subsections whose backticked dotted paths announce a break (CHANGELOG.md's header).
ANNOUNCING = ("Changed", "Removed")
BREAKING = "**Breaking:** "   # how a bullet announcing a break starts
_NAMED = re.compile(r"`([A-Za-z_][\w.]*)(?:\([^`]*\))?`")


@dataclasses.dataclass(frozen=True)
class Break:
    """One incompatible change at a public path: what griffe calls it, the old form and the new."""

    path: str
    kind: str
    old: str
    new: str

    def __str__(self) -> str:
        return f"{self.path}: {self.kind}: {self.old} → {self.new}"


@dataclasses.dataclass(frozen=True)
class Recorded:
    """A release's API as recorded in api/<version>.json."""

    version: str
    commit: str
    public_objects: int  # as counted when recorded
    modules: dict[str, griffe.Module]
    path: pathlib.Path


# --- Loading: the sources, or a recorded release.

def load_sources(root: pathlib.Path = ROOT) -> dict[str, griffe.Module]:
    """Both packages under ``root``, read statically, in one collection (their aliases resolve across both)."""
    loader = griffe.GriffeLoader(search_paths=[root], allow_inspection=False, store_source=False,
                                 modules_collection=griffe.ModulesCollection())
    # Not try_relative_path: run from the repository, a name would find its folder there, not under root.
    modules = {name: _module(loader.load(name, try_relative_path=False)) for name in PACKAGES}
    loader.resolve_aliases(implicit=False, external=False)
    return modules


def load_recorded(path: pathlib.Path) -> Recorded:
    data = json.loads(path.read_text(), object_hook=griffe.json_decoder)
    collection = griffe.ModulesCollection()
    for name in PACKAGES:
        collection.set_member(name, data["packages"][name])  # aliases and bases resolve in the collection
        _attach_bases(data["packages"][name])
    return Recorded(data["version"], data["commit"], data["public_objects"],
                    {name: collection[name] for name in PACKAGES}, path)


def _attach_bases(parent: griffe.Module | griffe.Class) -> None:
    """Each class's base names attached to the class's parent, as griffe's loader leaves them: its JSON decoder
    (2.4.1) attaches decorators and annotations but not bases, which then resolve to nothing, and inherited
    members (``SpecError.problems``) vanish from the recorded API."""
    for member in parent.members.values():
        if isinstance(member, griffe.Class):
            for base in member.bases:
                for name in base if isinstance(base, griffe.Expr) else ():
                    first = name.first if isinstance(name, griffe.ExprAttribute) else name
                    if isinstance(first, griffe.ExprName):
                        first.parent = parent
        if isinstance(member, (griffe.Module, griffe.Class)):
            _attach_bases(member)


def latest_release(api_dir: pathlib.Path = API_DIR) -> Recorded:
    """The highest version recorded in ``api_dir`` (files named X.Y.Z.json)."""
    recorded = sorted(api_dir.glob("*.json"), key=lambda p: release_tuple(p.stem))
    if not recorded:
        raise FileNotFoundError(f"no recorded release in {api_dir}: run scripts/public_api.py record VERSION")
    return load_recorded(recorded[-1])


def release_tuple(version: str) -> tuple[int, int, int]:
    """``0.2.0`` or ``0.2.0.dev0`` → (0, 2, 0): the release a version is or leads to."""
    match = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    if not match:
        raise ValueError(f"version {version!r}: not X.Y.Z (SemVer, PEP 440)")
    major, minor, patch = map(int, match.groups())
    return major, minor, patch


def required_release(last: tuple[int, int, int], *, broken: bool) -> tuple[int, int, int]:
    """The least release after ``last`` (CHANGELOG.md's rule): a break raises the major version, before 1.0.0
    the minor; without one, ``last`` itself will do (this check leaves additions and fixes to review)."""
    major, minor, _ = last
    if not broken:
        return last
    return (major + 1, 0, 0) if major >= 1 else (0, minor + 1, 0)


def _module(obj: griffe.Object | griffe.Alias) -> griffe.Module:
    if not isinstance(obj, griffe.Module):
        raise TypeError(f"{obj.path}: griffe loaded a {obj.kind.value}, not a package")
    return obj


# --- The public API: path → object.

def public_api(modules: dict[str, griffe.Module]) -> dict[str, griffe.Object]:
    """Every public path (see the module's docstring) and the object it names, aliases followed."""
    api: dict[str, griffe.Object] = {}
    for package, module in modules.items():
        for name in _exports(module):
            path, obj = f"{package}.{name}", _target(module[name])
            api[path] = obj
            if isinstance(obj, griffe.Class):
                api.update({f"{path}.{member}": _target(each) for member, each in obj.all_members.items()
                            if _public_member(member)})
    return api


def _exports(module: griffe.Module) -> list[str]:
    if not module.exports:
        raise ValueError(f"{module.path} has no __all__: its public names would be a guess")
    return [str(name) for name in module.exports]


def _public_member(name: str) -> bool:
    return name == "__init__" or not name.startswith("_")


def _target(obj: griffe.Object | griffe.Alias) -> griffe.Object:
    target = obj.final_target if isinstance(obj, griffe.Alias) else obj
    assert isinstance(target, griffe.Object), obj.path
    return target


# --- Comparing two APIs.

def breaks(old: dict[str, griffe.Module], new: dict[str, griffe.Module]) -> list[Break]:
    """Each incompatible change from ``old`` to ``new``, at its public path; a removed class once, not per member."""
    old_api, new_api = public_api(old), public_api(new)
    found: list[Break] = []
    for path, before in old_api.items():
        after = new_api.get(path)
        if after is None:
            if path.rpartition(".")[0] in new_api or path.count(".") == 1:
                found.append(Break(path, griffe.BreakageKind.OBJECT_REMOVED.value, before.kind.value, "(none)"))
        elif after.kind is not before.kind:
            found.append(Break(path, griffe.BreakageKind.OBJECT_CHANGED_KIND.value, before.kind.value,
                               after.kind.value))
        elif isinstance(before, griffe.Class) and isinstance(after, griffe.Class):
            found += _removed_bases(path, before, after)
        elif isinstance(before, griffe.Function) and isinstance(after, griffe.Function):
            found += [_as_break(_called(path), each) for each in _signature_breaks(before, after)]
    return found


def _called(path: str) -> str:
    """A break of ``X.__init__`` is one of calling ``X``: the changelog names the class."""
    return path.removesuffix(".__init__")


def _removed_bases(path: str, before: griffe.Class, after: griffe.Class) -> list[Break]:
    """As griffe's own class check: fewer bases is a break (an instance no longer passes ``isinstance``)."""
    if len(after.bases) >= len(before.bases):
        return []
    return [Break(path, griffe.BreakageKind.CLASS_REMOVED_BASE.value, _text(before.bases), _text(after.bases))]


def _signature_breaks(before: griffe.Function, after: griffe.Function) -> Iterator[griffe.Breakage]:
    """griffe's comparison of two signatures: each function held alone, so no alias stands between them."""
    yield from griffe.find_breaking_changes(_holding(before), _holding(after))


def _holding(function: griffe.Function) -> griffe.Class:
    holder = griffe.Class("Holder")
    holder.members[function.name] = function  # not set_member: the function keeps its own parent
    return holder


def _as_break(path: str, breakage: griffe.Breakage) -> Break:
    new = _text(breakage.new_value)
    if breakage.details:
        new = f"{new} ({breakage.details})"
    return Break(path, breakage.kind.value, _text(breakage.old_value), new)


def _text(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, griffe.Parameter):
        annotation = f": {value.annotation}" if value.annotation is not None else ""
        default = f" = {value.default}" if value.default is not None else ""
        kind = f" ({value.kind.value})" if value.kind is not None else ""
        return f"{value.name}{annotation}{default}{kind}"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


# --- What the changelog announces.

def announced(changelog: str) -> set[str]:
    """The dotted paths in backticks of the bullets marked BREAKING under ### Changed or ### Removed of
    ## [Unreleased] (a reader of the changelog, on the site too, sees each break marked)."""
    names: set[str] = set()
    for heading, body in _subsections(_unreleased(changelog)):
        if heading in ANNOUNCING:
            for bullet in re.split(r"^- ", body, flags=re.MULTILINE)[1:]:
                if bullet.startswith(BREAKING):
                    names |= set(_NAMED.findall(bullet))
    return names


def _unreleased(changelog: str) -> str:
    match = re.search(r"^## \[Unreleased\][^\n]*\n(.*?)(?=^## \[|\Z)", changelog, re.MULTILINE | re.DOTALL)
    if not match:
        raise ValueError("CHANGELOG.md has no '## [Unreleased]' section (https://keepachangelog.com/en/1.1.0/)")
    return match.group(1)


def _subsections(section: str) -> Iterable[tuple[str, str]]:
    for match in re.finditer(r"^### (\w+)[^\n]*\n(.*?)(?=^### |\Z)", section, re.MULTILINE | re.DOTALL):
        yield match.group(1), match.group(2)


def unannounced(found: Iterable[Break], changelog: str) -> list[Break]:
    names = announced(changelog)
    return [each for each in found if each.path not in names]


def report(missing: list[Break], release: Recorded) -> str:
    """The failure: each break the changelog does not name, and what to do."""
    where = release.path.relative_to(ROOT) if release.path.is_relative_to(ROOT) else release.path
    lines = [f"{len(missing)} break(s) of the public API since {release.version} ({where}) that CHANGELOG.md's "
             "[Unreleased] does not name:"]
    lines += [f"  - {each}" for each in missing]
    lines.append("fix: restore the old form, or name each path in backticks in a bullet marked **Breaking:** under "
                 "'### Changed' or '### Removed' of [Unreleased], saying what users write instead (CHANGELOG.md's "
                 "header)")
    return "\n".join(lines)


# --- Recording a release.

def record(version: str, ref: Optional[str] = None, api_dir: pathlib.Path = API_DIR) -> pathlib.Path:
    """Writes ``api_dir/<version>.json``: what the comparison reads of both packages, as griffe serializes it,
    from ``ref`` or the working tree."""
    release_tuple(version)
    with tempfile.TemporaryDirectory() as tmp:
        root = _exported(ref, pathlib.Path(tmp)) if ref else ROOT
        modules = load_sources(root)
        kept = _kept(modules)
        packages = {name: _stripped(_pruned(json.loads(module.as_json()), kept), root)
                    for name, module in modules.items()}
        count = len(public_api(modules))
    data = {"version": version, "commit": _commit(ref), "public_objects": count, "packages": packages}
    api_dir.mkdir(exist_ok=True)
    out = api_dir / f"{version}.json"
    out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return out


def _exported(ref: str, into: pathlib.Path) -> pathlib.Path:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", ref, *PACKAGES],
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def _commit(ref: Optional[str]) -> str:
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", ref or "HEAD"], check=True, capture_output=True,
                            text=True).stdout.strip()
    if ref is None and subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", *PACKAGES],
                                      check=True, capture_output=True, text=True).stdout.strip():
        commit += " with uncommitted changes"
    return commit


def _kept(modules: dict[str, griffe.Module]) -> set[str]:
    """The paths a comparison reads: the packages' exported aliases, the public objects, the classes they
    inherit from (for inherited members), and the modules holding them. The rest (private helpers, tables,
    constants) made 0.1.0's record three times the size (1.6 MB, 0.5 MB without)."""
    kept: set[str] = set()

    def keep_class(cls: griffe.Class) -> None:
        if cls.path not in kept:
            kept.add(cls.path)
            for base in cls.resolved_bases:
                if isinstance(base, griffe.Class):
                    keep_class(base)

    for package, module in modules.items():
        kept.update(f"{package}.{name}" for name in _exports(module))
    for obj in public_api(modules).values():
        kept.add(obj.path)
        if isinstance(obj, griffe.Class):
            keep_class(obj)
    return kept | {path.rsplit(".", depth)[0] for path in kept for depth in range(1, path.count(".") + 1)}


def _pruned(module: dict[str, Any], kept: set[str], parent: str = "") -> dict[str, Any]:
    """griffe's JSON of a module with only the members ``kept`` names (a kept class whole)."""
    path = f"{parent}.{module['name']}".lstrip(".")
    members = {name: _pruned(member, kept, path) if member["kind"] == "module" else member
               for name, member in module["members"].items() if f"{path}.{name}" in kept}
    return {**module, "members": members}


def _stripped(data: Any, root: pathlib.Path) -> Any:
    """Without docstrings (not the API), file paths relative to the repository (not this machine's)."""
    if isinstance(data, list):
        return [_stripped(each, root) for each in data]
    if not isinstance(data, dict):
        return data
    return {key: pathlib.Path(value).relative_to(root).as_posix() if key == "filepath" else _stripped(value, root)
            for key, value in data.items() if key != "docstring"}


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    recording = commands.add_parser("record", help="write api/VERSION.json")
    recording.add_argument("version", help="the release, X.Y.Z")
    recording.add_argument("--ref", help="a commit to record instead of the working tree")
    commands.add_parser("check", help="the breaks since the last recorded release the changelog does not name")
    args = parser.parse_args(argv)
    if args.command == "record":
        out = record(args.version, args.ref)
        print(f"{out.relative_to(ROOT)}: {json.loads(out.read_text())['public_objects']} public objects")
        return 0
    release = latest_release()
    found = breaks(release.modules, load_sources())
    missing = unannounced(found, CHANGELOG.read_text())
    print(f"{len(found)} break(s) since {release.version}, {len(found) - len(missing)} named in CHANGELOG.md")
    if missing:
        print(report(missing, release), file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())

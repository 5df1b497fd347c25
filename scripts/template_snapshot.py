#!/usr/bin/env python3
"""Synthesizes every spec the project ships (default, examples/, the infra test specs) with a fabricated
build and writes each stack's template, or compares two such snapshots resource by resource.

    scripts/template_snapshot.py write DIR          # one JSON per stack: DIR/<spec>/<stack artifact>.json
    scripts/template_snapshot.py compare OLD NEW    # every resource that differs, and how

Used to prove a refactoring of the CDK app leaves the templates as they were. Test data only: the
tarballs are the infrastructure tests' placeholders (tests/infra/fixtures/fake_build.py).
"""
from __future__ import annotations

import json
import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "infra" / "fixtures")]
import stacks  # noqa: E402,F401  (points jsii at the pinned Node before aws_cdk loads)

# CDK path metadata names the construct tree, not a deployed property: a moved construct changes it alone.
IGNORED_METADATA = ("aws:cdk:path",)


def specs() -> list[pathlib.Path]:
    return [ROOT / "triton.yaml", *sorted((ROOT / "examples").glob("*.yaml")),
            *sorted((ROOT / "tests" / "infra" / "fixtures" / "specs").glob("*.yaml"))]


def write(out: pathlib.Path) -> None:
    from synth_helpers import synth_spec  # noqa: PLC0415  (needs the sys.path above)

    for spec in specs():
        with tempfile.TemporaryDirectory() as tmp:
            synth = synth_spec(spec, pathlib.Path(tmp))
            assembly = synth.app.synth()
            for stack in assembly.stacks_recursively:
                target = out / spec.stem / f"{stack.hierarchical_id.replace('/', '.')}.json"
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(json.dumps(stack.template, indent=1, sort_keys=True) + "\n")
        print(f"{spec.relative_to(ROOT)}: {len(list((out / spec.stem).glob('*.json')))} stacks", flush=True)


def _strip(resource: dict) -> dict:
    out = dict(resource)
    metadata = {k: v for k, v in (out.pop("Metadata", None) or {}).items() if k not in IGNORED_METADATA}
    if metadata:
        out["Metadata"] = metadata
    return out


def compare(old: pathlib.Path, new: pathlib.Path) -> int:
    """Prints one line per difference; returns how many there are."""
    found = 0
    old_files = {p.relative_to(old) for p in old.rglob("*.json")}
    new_files = {p.relative_to(new) for p in new.rglob("*.json")}
    for missing in sorted(old_files ^ new_files):
        print(f"{missing}: only in {'old' if missing in old_files else 'new'}")
        found += 1
    resources = 0
    for relative in sorted(old_files & new_files):
        a, b = (json.loads((root / relative).read_text()) for root in (old, new))
        for section in sorted(set(a) | set(b)):
            if section == "Resources":
                continue
            if a.get(section) != b.get(section):
                print(f"{relative}: section {section} differs")
                found += 1
        ra, rb = a.get("Resources", {}), b.get("Resources", {})
        resources += len(set(ra) | set(rb))
        for logical_id in sorted(set(ra) | set(rb)):
            if logical_id not in ra or logical_id not in rb:
                where = "new" if logical_id in rb else "old"
                kind = (rb.get(logical_id) or ra.get(logical_id))["Type"]
                print(f"{relative}: {logical_id} ({kind}) only in {where}")
                found += 1
            elif _strip(ra[logical_id]) != _strip(rb[logical_id]):
                keys = sorted(k for k in set(ra[logical_id]) | set(rb[logical_id])
                              if _strip(ra[logical_id]).get(k) != _strip(rb[logical_id]).get(k))
                print(f"{relative}: {logical_id} ({ra[logical_id]['Type']}) differs in {', '.join(keys)}")
                found += 1
    print(f"compared {len(old_files & new_files)} templates, {resources} resources: {found} difference(s)")
    return found


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "write":
        write(pathlib.Path(argv[1]))
        return 0
    if len(argv) == 3 and argv[0] == "compare":
        return 1 if compare(pathlib.Path(argv[1]), pathlib.Path(argv[2])) else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

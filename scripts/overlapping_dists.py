"""Print, one per line as ``name==version``, the installed distributions that write a file another one writes too,
each after the ones it requires: the order in which reinstalling them one by one leaves on disk what pip leaves.

pip installs dependencies first, so where two wheels write the same file the dependent's copy stays. uv installs in
parallel, and either copy may stay (astral-sh/uv#13435): `aws-cdk-lib` and its dependency
`aws-cdk.cloud-assembly-schema` both write `aws_cdk/cloud_assembly_schema/__init__.py` with different jsii type
names, and the wrong one breaks every synthesis ("Unknown interface: aws-cdk-lib.cloud_assembly_schema.MetadataEntry";
aws/aws-cdk#38482). scripts/bootstrap.sh reinstalls these, in this order, after uv. Run with the environment's python.
"""
from __future__ import annotations

import collections
import importlib.metadata as metadata
import re
import sys


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def overlapping(files: dict[str, list[str]]) -> set[str]:
    """The distributions sharing a file: ``files`` maps each distribution to the files it wrote."""
    owners = collections.defaultdict(set)
    for dist, paths in files.items():
        for path in paths:
            if ".dist-info/" not in path and "__pycache__" not in path:
                owners[path].add(dist)
    return {dist for dists in owners.values() if len(dists) > 1 for dist in dists}


def dependencies_first(names: set[str], requires: dict[str, set[str]]) -> list[str]:
    """``names`` ordered so that each comes after every one of them it requires, directly or not."""
    order: list[str] = []
    done: set[str] = set()  # visited once each (a cycle among requirements is cut where it is met)

    def visit(name: str) -> None:
        if name in done:
            return
        done.add(name)
        for needed in sorted(requires.get(name, set())):
            visit(needed)
        if name in names:
            order.append(name)

    for name in sorted(names):
        visit(name)
    return order


def main() -> int:
    dists = {normalized(d.metadata["Name"]): d for d in metadata.distributions()}
    files = {name: [str(f) for f in (d.files or [])] for name, d in dists.items()}
    requires = {name: {normalized(re.split(r"[\s;<>=!~\[(]", r, maxsplit=1)[0]) for r in (d.requires or [])}
                for name, d in dists.items()}
    for name in dependencies_first(overlapping(files), requires):
        print(f"{name}=={dists[name].version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

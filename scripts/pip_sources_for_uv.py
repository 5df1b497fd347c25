"""Print, one per line, the uv flags that make uv read the package sources pip is configured with.

uv does not read pip's configuration (pip.conf files and PIP_* variables), and a machine may hold packages only in
local folders or indexes named there (find-links, extra indexes, a constraints file). ``pip config list`` shows
them as ``<scope>.<key>='<value>'``; each becomes the uv flag of the same meaning
(https://docs.astral.sh/uv/pip/compatibility/). pip merges every index; ``unsafe-best-match`` makes uv do the same.
Run by scripts/bootstrap.sh with the new environment's pip: ``python scripts/pip_sources_for_uv.py``.
"""
from __future__ import annotations

import subprocess
import sys

# pip's key -> uv's flag; a value may list several, separated by whitespace.
FLAGS = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links",
         "constraint": "--constraint"}


def uv_flags(pip_config_list: str) -> list[str]:
    found: dict[str, list[str]] = {}
    from_environment: set[str] = set()
    for line in pip_config_list.splitlines():
        name, _, value = line.partition("=")
        scope, _, key = name.rpartition(".")
        if key not in FLAGS or key in from_environment:
            continue
        # A PIP_* variable (scope ":env:") overrides the files; among the files, the later listed wins (global,
        # user, site), as in pip's own loading order.
        if scope == ":env:":
            from_environment.add(key)
        found[key] = value.strip().strip("'\"").split()
    flags = ["--index-strategy", "unsafe-best-match"]
    for key, values in found.items():
        for value in values:
            flags += [FLAGS[key], value]
    return flags


def main() -> int:
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                            check=True).stdout
    print("\n".join(uv_flags(listed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

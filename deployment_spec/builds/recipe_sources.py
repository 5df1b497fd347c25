"""The source files a user recipe runs: its module, the packages above it and, transitively, the modules
beside it that it imports (``from scorer.net import ConvScorer``). Found by reading import statements, never
by importing: the build hash is computed before any recipe runs, and without torch.

A module counts when it lies under the folder the recipe was found in; the standard library and installed
packages do not (their versions are in the build hash already). A recipe that is itself an installed package
counts only its own package's files: walking site-packages would read torch's thousands of modules. Imports made by strings at run time
(importlib.import_module) are not seen: such a module is listed nowhere, so a change to it does not rebuild.

Here, not in model_build: the build's cache key and the staleness check of synth and `tritonsm serve`
(``deployment_spec.builds.model_sources``) find the same files, and the synth path imports no model_build.
"""
from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import pathlib
from typing import Optional, Sequence


def files(module: str, search: Sequence[pathlib.Path] = ()) -> Optional[tuple[pathlib.Path, list[pathlib.Path]]]:
    """(the folder the module was found in, its files: the packages above it, itself, then what they import,
    transitively); None where the module is not found. ``search``: folders looked in before sys.path (the build
    puts the spec's folder and the working directory first on sys.path, and so do its checks)."""
    root = _root(module, search)
    if root is None or _local(root, module) is None:
        return None
    scope = root / module.split(".")[0] if root in _installed_roots() else root
    found: list[pathlib.Path] = []
    todo = [module]
    seen: set[str] = set()
    while todo:
        name = todo.pop(0)
        if name in seen:
            continue
        seen.add(name)
        for path in _with_packages(root, name):
            if path not in found:
                found.append(path)
                todo += [n for n in _imports(path, _package_of(root, path))
                         if (local := _local(root, n)) is not None and local.is_relative_to(scope)]
    return root, found


def _installed_roots() -> set[pathlib.Path]:
    """The folders installed packages live in (this interpreter's site-packages)."""
    import sysconfig

    paths = sysconfig.get_paths()
    return {pathlib.Path(paths[key]).resolve() for key in ("purelib", "platlib")}


def _root(module: str, search: Sequence[pathlib.Path] = ()) -> Optional[pathlib.Path]:
    """The folder in ``search`` or on sys.path that holds the module's top-level package or file (finding a
    top-level name executes nothing)."""
    top = module.split(".")[0]
    try:
        spec = (importlib.machinery.PathFinder.find_spec(top, [str(folder) for folder in search]) if search else None)
        spec = spec or importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not pathlib.Path(spec.origin).is_file():
        return None
    origin = pathlib.Path(spec.origin).resolve()
    return origin.parent.parent if origin.name == "__init__.py" else origin.parent


def _local(root: pathlib.Path, dotted: str) -> Optional[pathlib.Path]:
    """The file of ``dotted`` under ``root``, or None (a module elsewhere, or an attribute, not a module)."""
    base = root.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _with_packages(root: pathlib.Path, dotted: str) -> list[pathlib.Path]:
    """Importing a.b.c runs a/__init__.py and a/b/__init__.py before a/b/c.py."""
    parts = dotted.split(".")
    paths = [_local(root, ".".join(parts[:i])) for i in range(1, len(parts) + 1)]
    return [p for p in paths if p is not None]


def _package_of(root: pathlib.Path, path: pathlib.Path) -> str:
    """The package a file's relative imports start from."""
    # a/b/c.py and a/b/__init__.py both import relative to a.b
    return ".".join(path.relative_to(root).with_suffix("").parts[:-1])


def _imports(path: pathlib.Path, package: str) -> list[str]:
    """Module names a file imports; for ``from m import x`` both m and m.x (x may be a module)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"), str(path))
    except SyntaxError:
        return []  # the build itself reports it when the recipe is imported
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".") if package else []
                anchor = anchor[:len(anchor) - (node.level - 1)]  # each dot past the first goes one package up
                base = ".".join([*anchor, base] if base else anchor)
            if base:
                names.append(base)
            names += [f"{base}.{alias.name}" if base else alias.name for alias in node.names if alias.name != "*"]
    return names

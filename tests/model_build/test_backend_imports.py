"""Each Triton backend's home (model_build/backends/<backend>/) imports no other backend's code.

What backends share lives in named homes outside them (model_build/onnx_graph/, verification/,
build_context.py, tensor_types.py, given_files.py) or in model_build/backends/result.py, and those
homes import no backend either. Every import statement counts, also the ones inside functions (a
lazy import is still a dependency). A planted cross-backend import in a copy of the tree proves the
check reports what it should.
"""
from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
BACKENDS_PACKAGE = "model_build.backends"
# Modules under model_build/backends/ that every backend may import: the contract with the dispatcher.
SHARED_IN_BACKENDS = {"model_build.backends.result"}
# Files the Triton Python backend or a DALI side environment runs: not imported by the build.
ELSEWHERE = ("python_models",)
# The builder stands above the backends: it picks one (dispatch.py) and probes the TensorRT toolchain
# once per build for the build hashes (build.py).
BUILDER = {"model_build.build", "model_build.dispatch"}
# The backends' homes held 31 modules when this test was written; far fewer means the scan missed them.
MIN_BACKEND_MODULES = 28


def _module_name(root: pathlib.Path, path: pathlib.Path) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def _imports(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, dotted name) of every absolute import; ``from pkg import sub`` counts as ``pkg.sub``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return out


def _backend_of(dotted: str) -> str | None:
    """``onnxruntime`` for model_build.backends.onnxruntime[.anything]; None outside a backend's home."""
    if not dotted.startswith(BACKENDS_PACKAGE + ".") or any(
            dotted == shared or dotted.startswith(shared + ".") for shared in SHARED_IN_BACKENDS):
        return None
    return dotted.removeprefix(BACKENDS_PACKAGE + ".").split(".")[0]


def cross_backend_imports(root: pathlib.Path) -> tuple[list[str], int]:
    """(one line per import of another backend's code, how many backend modules were scanned)."""
    found, scanned = [], 0
    for path in sorted((root / "model_build" / "backends").rglob("*.py")):
        own = _backend_of(_module_name(root, path))
        if own is None:
            continue
        scanned += 1
        for line, dotted in _imports(path):
            other = _backend_of(dotted)
            if other is not None and other != own:
                found.append(f"{path.relative_to(root)}:{line} imports {dotted} (backend {other})")
    return found, scanned


def shared_homes_importing_backends(root: pathlib.Path) -> list[str]:
    """Modules of model_build outside backends/ (the builder aside) that import a backend's code."""
    found = []
    for path in sorted((root / "model_build").rglob("*.py")):
        name = _module_name(root, path)
        if name.startswith(BACKENDS_PACKAGE + ".") or name in BUILDER or any(
                part in ELSEWHERE for part in path.parts):
            continue
        for line, dotted in _imports(path):
            if _backend_of(dotted) is not None:
                found.append(f"{path.relative_to(root)}:{line} imports {dotted}")
    return found


def test_no_backend_imports_another_backend():
    found, scanned = cross_backend_imports(ROOT)
    assert found == []
    assert scanned >= MIN_BACKEND_MODULES, scanned


def test_check_reports_a_planted_cross_backend_import(tmp_path):
    # A copy of the backends with one lazy import of the onnxruntime backend's optimizer from TensorRT's build.
    copy = tmp_path / "model_build" / "backends"
    for path in (ROOT / "model_build" / "backends").rglob("*.py"):
        target = copy / path.relative_to(ROOT / "model_build" / "backends")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text())
    planted = copy / "tensorrt" / "build.py"
    lines = planted.read_text().splitlines()
    planted.write_text("\n".join(lines + ["", "", "def _planted():",
                                          "    from model_build.backends.onnxruntime import optimize",
                                          "    return optimize", ""]))
    found, scanned = cross_backend_imports(tmp_path)
    assert found == [f"model_build/backends/tensorrt/build.py:{len(lines) + 4} imports "
                     "model_build.backends.onnxruntime.optimize (backend onnxruntime)"]
    assert scanned >= MIN_BACKEND_MODULES


def test_shared_homes_import_no_backend():
    assert shared_homes_importing_backends(ROOT) == []

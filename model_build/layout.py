"""The one place that knows a Triton model directory's layout.

    <name>/config.pbtxt
    <name>/<extra model-level files>      (e.g. a packed Python environment)
    <name>/1/model.onnx | model.plan | model.pt | model.py (+ files next to it)
"""
from __future__ import annotations

import pathlib
import shutil
from typing import Any, Mapping

VERSION = "1"
CONFIG = "config.pbtxt"


def version_dir(model_dir: pathlib.Path) -> pathlib.Path:
    return model_dir / VERSION


def write_model_dir(model_dir: pathlib.Path, config_text: str, version_files: Mapping[str, Any],
                    model_files: Mapping[str, Any] = {}) -> None:
    """Creates ``model_dir``. File values: bytes, a file or directory to copy, or a {relative path: value} dict."""
    model_dir.mkdir(parents=True)
    (model_dir / CONFIG).write_text(config_text)
    vdir = version_dir(model_dir)
    vdir.mkdir()
    for rel, value in version_files.items():
        _put(vdir / rel, value)
    for rel, value in model_files.items():
        _put(model_dir / rel, value)


def _put(target: pathlib.Path, value: Any) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(value, bytes):
        target.write_bytes(value)
    elif isinstance(value, dict):
        for rel, inner in value.items():
            _put(target / rel, inner)
    elif isinstance(value, pathlib.Path) and value.is_dir():
        shutil.copytree(value, target)
    elif isinstance(value, pathlib.Path):
        shutil.copyfile(value, target)
    else:
        raise TypeError(f"cannot place {type(value).__name__} at {target}")

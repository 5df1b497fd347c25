"""Fixtures for the local endpoint tests: tarballs built here, servers shared per module."""

from __future__ import annotations

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))

import triton_model_fixtures as models  # noqa: E402


@pytest.fixture(scope="session")
def tarballs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pathlib.Path]:
    """Every archive the tests serve, keyed by a short name."""
    root = tmp_path_factory.mktemp("model-archives")
    built = {}

    def build(key: str, file_name: str, write, pack_subdir: str | None = None) -> None:
        repository = root / "repositories" / key
        write(repository)
        source = repository / pack_subdir if pack_subdir else repository
        built[key] = models.pack(source, root / "tarballs" / key / file_name)

    build("add", "add.tar.gz", models.write_add)
    build("ensemble", "ensemble.tar.gz", models.write_ensemble)
    build("bare", "bare.tar.gz", lambda r: models.write_add(r, "add"), pack_subdir="add")
    build("onnx", "resnet.tar.gz", models.write_onnx_stub)
    build("whereami", "whereami.tar.gz", models.write_whereami)
    for key, factor in (("times2", 2), ("times3", 3), ("times4", 4)):
        build(key, f"{key}.tar.gz",
              lambda r, k=key, f=factor: models.write_affine(r, k, factor=f, offset=0, input_name="INPUT",
                                                             output_name="OUTPUT"))
    return built

"""Archive checks and backend checks, without starting a server."""

from __future__ import annotations

import io
import pathlib
import tarfile

import pytest

import triton_model_fixtures as models
from local_endpoint.endpoints.single_model import SingleModelEndpoint
from local_endpoint.errors import TarballError, UnsupportedBackendError
from local_endpoint.server import archive, backends


def test_sme_refuses_a_bare_config_pbtxt(tarballs: dict[str, pathlib.Path]) -> None:
    # What the serve script exits on ("Incorrect directory structure") is
    # refused before any server starts, naming the file, what is there and the fix.
    tarball = tarballs["bare"]
    with pytest.raises(TarballError) as caught:
        SingleModelEndpoint(tarball).start()
    assert str(caught.value) == (
        f"model archive {tarball} has config.pbtxt at its top level (found: 1, config.pbtxt); "
        "a single-model endpoint needs one directory per model at the top, e.g. "
        "'<model>/config.pbtxt' and '<model>/1/...', or the SageMaker container stops with "
        "'Incorrect directory structure'; repack it from the repository directory: "
        "tar -C <repository> -czf <name>.tar.gz <model>"
    )


def test_several_models_without_a_default_are_refused(tarballs: dict[str, pathlib.Path]) -> None:
    # The serve script's "More than 1 model directory found", with the names.
    tarball = tarballs["ensemble"]
    listing = backends.list_archive_models(tarball)
    with pytest.raises(TarballError) as caught:
        archive.choose_default_model(tarball, listing, None)
    assert str(caught.value) == (
        f"model archive {tarball} contains 3 model directories (double, pipeline, plus_one) and no "
        "default model is set; set the default model (SAGEMAKER_TRITON_DEFAULT_MODEL_NAME, e.g. the "
        "ensemble) to one of them"
    )


def test_an_unknown_default_model_is_refused(tarballs: dict[str, pathlib.Path]) -> None:
    tarball = tarballs["ensemble"]
    listing = backends.list_archive_models(tarball)
    with pytest.raises(TarballError) as caught:
        archive.choose_default_model(tarball, listing, "pipelin")
    assert str(caught.value) == (
        f"default model 'pipelin' (SAGEMAKER_TRITON_DEFAULT_MODEL_NAME) has no directory in {tarball} "
        "(directories: double, pipeline, plus_one); set it to one of those directory names"
    )


def test_the_only_model_is_the_default(tarballs: dict[str, pathlib.Path]) -> None:
    listing = backends.list_archive_models(tarballs["add"])
    assert archive.choose_default_model(tarballs["add"], listing, None) == "add"


def test_a_missing_archive_is_named(tmp_path: pathlib.Path) -> None:
    missing = tmp_path / "nope.tar.gz"
    with pytest.raises(TarballError) as caught:
        archive.check_tarball_path(missing)
    assert str(caught.value) == (
        f"model archive {missing} does not exist; build it first (tritonsm build) "
        "or pass the path of an existing .tar.gz"
    )


def test_an_archive_that_is_not_gzip_is_named(tmp_path: pathlib.Path) -> None:
    broken = tmp_path / "broken.tar.gz"
    broken.write_bytes(b"not a tarball")
    with pytest.raises(TarballError, match=r"^model archive .*broken\.tar\.gz cannot be read as a gzipped tar file"):
        backends.list_archive_models(broken)


def test_an_archive_escaping_its_directory_is_refused(tmp_path: pathlib.Path) -> None:
    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as tar:
        info = tarfile.TarInfo("../outside.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(TarballError, match=r"^model archive .*evil\.tar\.gz has an unsafe member"):
        archive.extract_tarball(evil, tmp_path / "out")
    assert not (tmp_path / "outside.txt").exists()


def test_listing_reads_both_layouts(tarballs: dict[str, pathlib.Path]) -> None:
    # Directory layout: keyed by model; bare layout: keyed by the top level.
    assert sorted(backends.list_archive_models(tarballs["ensemble"])) == ["double", "pipeline", "plus_one"]
    bare = backends.list_archive_models(tarballs["bare"])
    assert list(bare) == [backends.TOP_LEVEL]
    assert bare[backends.TOP_LEVEL].files == ("1", "1/model.py", "config.pbtxt")


def test_mme_picks_the_ensemble_as_triton_does(tarballs: dict[str, pathlib.Path]) -> None:
    assert backends.mme_root_model(backends.list_archive_models(tarballs["ensemble"])) == "pipeline"


def test_an_ensemble_needs_its_steps_backends(tarballs: dict[str, pathlib.Path]) -> None:
    tarball = tarballs["ensemble"]
    needed = backends.models_to_load(backends.list_archive_models(tarball), tarball, "pipeline")
    assert [(m.model, m.backend) for m in needed] == [
        ("double", "python"), ("pipeline", "ensemble"), ("plus_one", "python")
    ]


def test_models_of_missing_backends_are_named_before_start(tarballs: dict[str, pathlib.Path]) -> None:
    # The wheel's server has no onnxruntime: say so instead of failing to load.
    tarball = tarballs["onnx"]
    with pytest.raises(UnsupportedBackendError) as caught:
        SingleModelEndpoint(tarball).start()
    assert str(caught.value) == (
        "cannot serve locally, the Triton server of the nvidia-pytriton wheel lacks a backend:\n"
        f"  model 'resnet' in {tarball} needs the 'onnxruntime' backend\n"
        "it has only: ensemble, python; test these models on a deployed endpoint "
        "(tritonsm invoke --endpoint ENDPOINT --deployed), or exercise their payloads locally with --cpu-stand-in "
        "(onnxruntime models then run as labelled Python-backend stand-ins on the CPU; latency is not "
        "representative)"
    )


def test_backend_is_inferred_from_the_model_file(tmp_path: pathlib.Path) -> None:
    # No backend or platform: Triton's auto-complete goes by the file name.
    models.write_model(tmp_path / "repo", "plan", 'max_batch_size: 0\n', {"model.plan": "x"})
    tarball = models.pack(tmp_path / "repo", tmp_path / "plan.tar.gz")
    needed = backends.models_to_load(backends.list_archive_models(tarball), tarball, "plan")
    assert needed[0].backend == "tensorrt"


def test_a_malformed_config_is_named(tmp_path: pathlib.Path) -> None:
    models.write_model(tmp_path / "repo", "m", 'backend: "python"\nmax_batch_sise: 8\n', {"model.py": ""})
    tarball = models.pack(tmp_path / "repo", tmp_path / "m.tar.gz")
    with pytest.raises(TarballError, match=(
        r"^m/config\.pbtxt in .*m\.tar\.gz is not a valid Triton model configuration: "
        r".*max_batch_sise.*; fix or regenerate it \(tritonsm build\)$"
    )):
        backends.models_to_load(backends.list_archive_models(tarball), tarball, "m")


def test_the_test_packer_is_deterministic(tmp_path: pathlib.Path) -> None:
    # Same inputs, same bytes: the fixtures never make a test flaky.
    models.write_add(tmp_path / "repo")
    first = models.pack(tmp_path / "repo", tmp_path / "a.tar.gz").read_bytes()
    second = models.pack(tmp_path / "repo", tmp_path / "b.tar.gz").read_bytes()
    assert first == second

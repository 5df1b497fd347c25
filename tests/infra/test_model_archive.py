"""Archives a user brings are opened at synth: their root must hold the Triton models they declare."""
import gzip
import hashlib
import io
import tarfile

import pytest

from user_app import model_archive
from triton_constructs import ModelArchive, PropsError
from triton_constructs.archive_listing import read_listing


def test_the_archive_s_own_models_are_served_when_none_are_declared_ensemble_first(tmp_path):
    path = model_archive(tmp_path, "pipeline", ["text-classifier", "bert", "preprocess"])
    archive = ModelArchive.from_file(path)
    assert archive.models == ("text-classifier", "bert", "preprocess")
    assert archive.size == path.stat().st_size
    assert archive.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_declared_names_keep_their_order(tmp_path):
    path = model_archive(tmp_path, "pipeline", ["text-classifier", "bert", "preprocess"])
    assert ModelArchive.from_file(path, ["text-classifier", "preprocess"]).models == ("text-classifier", "preprocess")


def test_a_declared_model_the_archive_does_not_hold_is_refused_with_what_it_holds(tmp_path):
    with pytest.raises(PropsError) as caught:
        ModelArchive.from_file(model_archive(tmp_path, "bert"), ["resnet"])
    assert str(caught.value) == (
        "ModelArchive: 1 problem\n  - models[0]: got 'resnet'; allowed: a model directory at the archive's root "
        "(bert); fix: name one of them, or leave models out to serve the archive's own")


def test_a_model_repository_root_is_refused_with_the_tar_command_that_packs_it_right(tmp_path):
    path = model_archive(tmp_path, "resnet", ["resnet", "bert"], root="model_repository/")
    with pytest.raises(PropsError) as caught:
        ModelArchive.from_file(path, ["resnet"])
    assert str(caught.value) == (
        f"ModelArchive: 1 problem\n  - path: got '{path}', whose models sit one directory down "
        "(model_repository/bert/config.pbtxt, model_repository/resnet/config.pbtxt); allowed: model directories at "
        "the archive's root: Triton's model repository is the directory SageMaker unpacks the archive into; fix: pack "
        "it from inside model_repository/: `tar -czf resnet.tar.gz -C model_repository bert resnet`")


def test_a_file_that_is_not_gzip_is_refused(tmp_path):
    path = tmp_path / "resnet.tar.gz"
    path.write_bytes(b"PK\x03\x04 a zip file")
    with pytest.raises(PropsError) as caught:
        ModelArchive.from_file(path, ["resnet"])
    assert str(caught.value) == (
        f"ModelArchive: 1 problem\n  - path: got '{path}', which is not gzip-compressed; allowed: a gzip-compressed "
        "tar archive (.tar.gz): SageMaker unpacks ModelDataUrl with gzip; fix: pack the model directories at the "
        "archive's root: `tar -czf NAME.tar.gz -C REPOSITORY MODEL...`")


def test_an_uncompressed_tar_is_named_as_such(tmp_path):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo("resnet/config.pbtxt")
        tar.addfile(info, io.BytesIO(b""))
    path = tmp_path / "resnet.tar.gz"
    path.write_bytes(raw.getvalue())
    with pytest.raises(PropsError, match="which is a plain \\(uncompressed\\) tar archive; allowed"):
        ModelArchive.from_file(path)


def test_gzip_that_is_not_a_tar_and_a_truncated_archive_are_refused_without_a_traceback(tmp_path):
    path = tmp_path / "notes.tar.gz"
    path.write_bytes(gzip.compress(b"just text, not a tar archive" * 40))
    with pytest.raises(PropsError, match=r"which is not a readable tar archive \(.+\); allowed: a gzip-compressed"):
        ModelArchive.from_file(path)
    whole = model_archive(tmp_path, "bert").read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(whole[:len(whole) // 2])
    with pytest.raises(PropsError, match="which is not a readable tar archive"):
        ModelArchive.from_file(cut)


def test_an_archive_without_any_model_directory_names_what_its_root_holds(tmp_path):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name in ("README.md", "weights/model.onnx"):
            tar.addfile(tarfile.TarInfo(name), io.BytesIO(b""))
    path = tmp_path / "loose.tar.gz"
    path.write_bytes(gzip.compress(raw.getvalue()))
    with pytest.raises(PropsError) as caught:
        ModelArchive.from_file(path)
    assert str(caught.value) == (
        f"ModelArchive: 1 problem\n  - path: got '{path}', which holds no model directory (at its root: README.md, "
        "weights); allowed: one directory per model at the root, each with its config.pbtxt; fix: pack the model "
        "directories at the archive's root: `tar -czf NAME.tar.gz -C REPOSITORY MODEL...`")


def test_a_dot_rooted_archive_as_tar_c_dir_dot_writes_it_is_accepted(tmp_path):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        data = b'name: "resnet"\n'
        info = tarfile.TarInfo("./resnet/config.pbtxt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    path = tmp_path / "dot.tar.gz"
    path.write_bytes(gzip.compress(raw.getvalue()))
    assert ModelArchive.from_file(path).models == ("resnet",)


def test_a_string_for_models_is_refused_not_read_as_letters(tmp_path):
    with pytest.raises(PropsError) as caught:
        ModelArchive.from_file(model_archive(tmp_path, "bert"), "bert")  # type: ignore[arg-type]
    assert str(caught.value) == ("ModelArchive: 1 problem\n  - models: got 'bert' (str); allowed: a list of model "
                                 "directory names; fix: write ['bert']")


def test_a_given_sha256_must_match_the_file(tmp_path):
    path = model_archive(tmp_path, "bert")
    actual = read_listing(path).sha256  # type: ignore[union-attr]
    with pytest.raises(PropsError) as caught:
        ModelArchive.from_file(path, sha256="0" * 64)
    assert str(caught.value) == (f"ModelArchive: 1 problem\n  - sha256: got '{'0' * 64}'; allowed: the file's sha256 "
                                 f"({actual}); fix: give the sha256 of this file, or leave it out")

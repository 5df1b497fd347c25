"""Deterministic, atomic tarballs (same inputs, same bytes: the sha256 is the CDK asset hash and object name)."""
from __future__ import annotations

import gzip
import hashlib
import os
import tarfile
import time

import pytest

from model_build import archive


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "src" / "m"
    (root / "1").mkdir(parents=True)
    (root / "config.pbtxt").write_text('name: "m"\n')
    (root / "1" / "model.onnx").write_bytes(os.urandom(1000))
    (root / "2").mkdir()  # an empty version directory (ensembles have one) must survive packing
    return {"m": root}


def test_same_inputs_same_bytes_even_seconds_apart(tmp_path, tree):
    # Timestamps, owners and file modes do not leak into the archive.
    first = archive.write_tarball(tmp_path / "a.tar.gz", tree)
    time.sleep(1.1)
    for path in tree["m"].rglob("*"):
        os.utime(path, (1, 1))
    os.chmod(tree["m"] / "config.pbtxt", 0o600)
    second = archive.write_tarball(tmp_path / "b.tar.gz", tree)
    assert first == second == hashlib.sha256((tmp_path / "a.tar.gz").read_bytes()).hexdigest()


def test_entries_are_sorted_and_normalised(tmp_path, tree):
    archive.write_tarball(tmp_path / "a.tar.gz", tree)
    with tarfile.open(tmp_path / "a.tar.gz") as tar:
        infos = tar.getmembers()
    assert [i.name for i in infos] == ["m", "m/1", "m/1/model.onnx", "m/2", "m/config.pbtxt"]
    assert {(i.mtime, i.uid, i.gid, i.uname, i.gname) for i in infos} == {(0, 0, 0, "", "")}
    assert {i.name: oct(i.mode) for i in infos if i.isfile()} == {"m/1/model.onnx": "0o644", "m/config.pbtxt": "0o644"}


def test_gzip_header_has_no_timestamp_or_name(tmp_path, tree):
    archive.write_tarball(tmp_path / "a.tar.gz", tree)
    header = (tmp_path / "a.tar.gz").read_bytes()[:10]
    assert header[4:8] == b"\0\0\0\0"  # MTIME
    assert header[3] & 0x08 == 0        # FNAME flag unset
    assert gzip.decompress((tmp_path / "a.tar.gz").read_bytes())


def test_replaced_member_is_written_instead_of_the_file(tmp_path, tree):
    archive.write_tarball(tmp_path / "a.tar.gz", {"m-1": tree["m"]}, {"m-1/config.pbtxt": b'name: "m-1"\n'})
    with tarfile.open(tmp_path / "a.tar.gz") as tar:
        assert tar.extractfile("m-1/config.pbtxt").read() == b'name: "m-1"\n'


def test_failed_write_leaves_no_file(tmp_path, tree):
    # A crash mid-write must not leave a partial tarball that a deploy could pick up.
    with pytest.raises(ValueError):
        archive.write_tarball(tmp_path / "a.tar.gz", tree, {"m/missing.txt": b"x"})
    assert list(tmp_path.glob("*.tar.gz")) == [] and list(tmp_path.glob(".*")) == []


def test_atomic_text_write_keeps_old_content_on_failure(tmp_path):
    target = tmp_path / "manifest.json"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with archive.atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("boom")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]

"""The tiny spec built end to end: repository layout, manifest, skip on unchanged inputs, determinism."""
from __future__ import annotations

import hashlib
import shutil
import tarfile

import pytest

from deployment_spec.builds.manifest import load_manifest
from model_build import build, checks, model_config
from model_build.onnx_graph.export import graph_io


def _names(tarball):
    with tarfile.open(tarball) as tar:
        return sorted(m.name for m in tar.getmembers())


def test_builds_everything_but_the_tensorrt_plan(tiny_build):
    # No GPU/Docker here: the plan is reported with its reason, the rest is built, exit code 0.
    _, _, _, report, lines = tiny_build
    assert sorted(report.built) == ["classifier", "preprocess", "text", "traced", "vision"]
    assert list(report.unavailable) == ["plan"]
    assert report.unavailable["plan"].startswith("model plan: a TensorRT plan needs an NVIDIA GPU and a Docker engine")
    assert report.endpoints_skipped == {"gpu-only": "models not built: plan"}
    assert report.exit_code() == 0


def test_manifest_lists_models_and_endpoints(tiny_build):
    _, out, _, _, _ = tiny_build
    manifest = load_manifest(out / "manifest.json")
    assert manifest.triton_version == "25.04"
    assert sorted(manifest.models) == ["classifier", "preprocess", "text", "traced", "vision-0", "vision-1"]
    assert manifest.models["vision-1"].spec_model == "vision"
    assert sorted(manifest.endpoints) == ["multi", "single"]
    assert manifest.endpoints["single"].default_model == "text"
    # Added optional field: why something is missing, by spec path.
    assert list(manifest.not_built) == ["endpoints.gpu-only", "models.plan"]
    assert [a.models for a in manifest.endpoints["multi"].artifacts] == [
        ("vision-0",), ("vision-1",), ("traced",), ("text", "preprocess", "classifier")]


def test_artifact_names_are_content_addressed(tiny_build):
    # <name>-<sha256[:12]>.tar.gz: the MME TargetModel changes whenever the bytes change.
    _, out, _, _, _ = tiny_build
    for ep in load_manifest(out / "manifest.json").endpoints.values():
        for artifact in ep.artifacts:
            data = (out / artifact.file).read_bytes()
            assert hashlib.sha256(data).hexdigest() == artifact.sha256 and len(data) == artifact.size
            assert artifact.object_name.endswith(f"-{artifact.sha256[:12]}.tar.gz")


def test_single_model_tarball_has_one_directory_per_model(tiny_build):
    # SME: ensemble + steps at the top, never a bare config.pbtxt; the ensemble keeps an empty version dir.
    _, out, _, _, _ = tiny_build
    artifact = load_manifest(out / "manifest.json").endpoints["single"].artifacts[0]
    names = _names(out / artifact.file)
    assert sorted({n.split("/")[0] for n in names}) == ["classifier", "preprocess", "text"]
    assert "config.pbtxt" not in names
    assert {"text/1", "classifier/1/model.onnx", "preprocess/1/model.py", "preprocess/1/vocab.txt"} <= set(names)


def test_mme_copy_is_renamed_in_directory_and_config(tiny_build, tmp_path):
    _, out, _, _, _ = tiny_build
    artifact = load_manifest(out / "manifest.json").endpoints["multi"].artifacts[1]
    with tarfile.open(out / artifact.file) as tar:
        tar.extractall(tmp_path, filter="data")
    assert model_config.parse((tmp_path / "vision-1" / "config.pbtxt").read_text()).name == "vision-1"
    checks.check_model_dir(tmp_path / "vision-1")


def test_every_packed_model_passes_the_repository_checks(tiny_build, tmp_path):
    _, out, _, _, _ = tiny_build
    for ep in load_manifest(out / "manifest.json").endpoints.values():
        for artifact in ep.artifacts:
            target = tmp_path / artifact.file
            with tarfile.open(out / artifact.file) as tar:
                tar.extractall(target, filter="data")
            for model_dir in target.iterdir():
                checks.check_model_dir(model_dir)
    config = (tmp_path / load_manifest(out / "manifest.json").endpoints["single"].artifacts[0].file / "text"
              / "config.pbtxt").read_text()
    assert 'platform: "ensemble"' in config


def test_onnx_graph_matches_manifest_tensors(tiny_build, tmp_path):
    _, out, _, _, _ = tiny_build
    manifest = load_manifest(out / "manifest.json")
    artifact = manifest.endpoints["single"].artifacts[0]
    with tarfile.open(out / artifact.file) as tar:
        tar.extractall(tmp_path, filter="data")
    inputs, outputs = graph_io(tmp_path / "classifier" / "1" / "model.onnx", 8, "classifier")
    assert inputs == manifest.models["classifier"].inputs and outputs == manifest.models["classifier"].outputs


def test_parity_and_builder_facts_are_recorded(tiny_build):
    _, out, _, _, _ = tiny_build
    manifest = load_manifest(out / "manifest.json")
    parity = manifest.models["classifier"].parity
    assert set(parity) == {"max_abs_error", "max_rel_error", "atol", "rtol"}
    assert parity["max_abs_error"] <= parity["atol"]
    assert manifest.models["traced"].parity["max_abs_error"] <= 1e-5
    assert manifest.models["classifier"].builder.versions["onnx_opset"] == "18"
    assert manifest.models["preprocess"].parity is None


def test_second_build_skips_every_model_and_writes_nothing(tiny_build):
    # The speed of this no-op build is measured by benchmarks/build_memory.py, not timed here.
    spec, out, work, _, _ = tiny_build
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    report = build.run(spec, out, work, log=lambda line: None)
    assert report.built == [] and report.written == []
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before


def test_two_clean_builds_give_identical_tarballs(tiny_build, tmp_path):
    spec, out, _, _, _ = tiny_build
    build.run(spec, tmp_path / "assets", tmp_path / "work", log=lambda line: None)
    first = load_manifest(out / "manifest.json")
    second = load_manifest(tmp_path / "assets" / "manifest.json")
    assert {a.file for ep in first.endpoints.values() for a in ep.artifacts} == \
        {a.file for ep in second.endpoints.values() for a in ep.artifacts}
    assert (out / "manifest.json").read_text() == (tmp_path / "assets" / "manifest.json").read_text()


def test_requesting_an_unbuildable_model_fails(tiny_build, tmp_path, monkeypatch):
    # `tritonsm build --model plan` on a machine without GPU: non-zero, the reason is reported.
    from model_build.backends.tensorrt import gpu
    monkeypatch.setattr(gpu, "detect", lambda: gpu.Toolchain(None, False, False, "no NVIDIA GPU (nvidia-smi not found)"))
    spec, out, work, _, _ = tiny_build
    copy = tmp_path / "assets"
    shutil.copytree(out, copy)
    report = build.run(spec, copy, work, requested=["plan"], log=lambda line: None)
    assert list(report.unavailable) == ["plan"] and report.exit_code() == 1

"""A spec endpoint with variants or a shadow as `tritonsm serve` resolves it (each variant's build from the manifest)
and the refusals before any server starts, each with its exact message. No Triton server runs here."""
from __future__ import annotations

import json
import pathlib

import pytest

from deployment_spec.served import resolve_endpoint
from tritonsm.cli import main as tritonsm_main

from variant_fixtures import variants_spec


@pytest.fixture(scope="module")
def spec(module_tmp) -> tuple[pathlib.Path, pathlib.Path]:
    return variants_spec(module_tmp.mktemp("variants"))


def serve_error(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str]:
    code = tritonsm_main(["serve", *argv])
    return code, capsys.readouterr().err


def test_each_variant_serves_its_build(spec: tuple[pathlib.Path, pathlib.Path]) -> None:
    ab = resolve_endpoint(spec[0], "ab", None, spec[1])
    # A serves the endpoint's model from the endpoint's build; B its own model from <endpoint>.<variant>.
    assert [(v.name, v.model, v.build, v.share, v.shadow, v.default_model) for v in ab.variants] == [
        ("A", "times2", "ab", 0.8, False, "times2"), ("B", "times3", "ab.B", 0.2, False, "times3")]
    # The archives `tritonsm build` wrote for each build (<build>-<content hash>.tar.gz).
    assert [v.tarball.name.rsplit("-", 1)[0] for v in ab.variants] == ["ab", "ab.B"]
    assert all(v.tarball.is_file() for v in ab.variants)
    assert ab.variants[1].env["SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"] == "times3"


def test_a_shadowed_endpoints_own_model_is_its_production_variant(spec: tuple[pathlib.Path, pathlib.Path]) -> None:
    shadowed = resolve_endpoint(spec[0], "shadowed", None, spec[1])
    assert [(v.name, v.model, v.build, v.share, v.shadow) for v in shadowed.variants] == [
        ("Prod", "times2", "shadowed", 1.0, False), ("Shadow", "times3", "shadowed.Shadow", 0.0, True)]


def test_a_variant_build_missing_from_the_manifest_says_which_and_to_build(
        tmp_path: pathlib.Path, capsys: pytest.CaptureFixture) -> None:
    spec, manifest = variants_spec(tmp_path, builds=("ab", "shadowed", "shadowed.Shadow"))
    assert serve_error(capsys, "ab", "--spec", str(spec), "--manifest", str(manifest)) == (
        2, f"error: {manifest}: variant 'B' of endpoint 'ab' (model times3) has not been built: the manifest has no "
           "entry 'ab.B'; run `tritonsm build` (it builds every variant's model)\n")


def test_image_is_refused_for_an_endpoint_with_variants(spec: tuple[pathlib.Path, pathlib.Path],
                                                          capsys: pytest.CaptureFixture) -> None:
    assert serve_error(capsys, "ab", "--spec", str(spec[0]), "--manifest", str(spec[1]), "--image") == (
        2, "error: --image runs one container per endpoint; endpoint ab has variants (one server each): serve it on "
           "the local server, without --image\n")


def test_mme_capacity_is_refused_for_a_shadowed_endpoint(spec: tuple[pathlib.Path, pathlib.Path],
                                                          capsys: pytest.CaptureFixture) -> None:
    assert serve_error(capsys, "shadowed", "--spec", str(spec[0]), "--manifest", str(spec[1]),
                       "--mme-capacity", "2") == (
        2, "error: --mme-capacity applies to multi-model endpoints; endpoint shadowed is single-model with a shadow: "
           "drop --mme-capacity\n")


def test_an_unwritable_capture_dir_is_told_before_any_server_starts(
        spec: tuple[pathlib.Path, pathlib.Path], tmp_path: pathlib.Path, capsys: pytest.CaptureFixture) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    assert serve_error(capsys, "ab", "--spec", str(spec[0]), "--manifest", str(spec[1]),
                       "--capture-dir", str(blocked)) == (
        1, f"error: --capture-dir {blocked}: cannot write there (File exists); pass a folder you can write to with "
           "--capture-dir DIR\n")


def test_a_variant_build_the_build_skipped_says_why(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture) -> None:
    spec, manifest = variants_spec(tmp_path, builds=("ab", "shadowed", "shadowed.Shadow"))
    raw = json.loads(manifest.read_text())
    raw["not_built"] = {"endpoints.ab.B": "models not built: times3"}   # as a build without a GPU records a plan
    manifest.write_text(json.dumps(raw))
    assert serve_error(capsys, "ab", "--spec", str(spec), "--manifest", str(manifest)) == (
        2, f"error: {manifest}: variant 'B' of endpoint 'ab' (model times3) has not been built: the manifest has no "
           "entry 'ab.B' (models not built: times3); run `tritonsm build` where it can be built\n")

"""A spec endpoint with variants or a shadow as `tritonsm serve` resolves it (each variant's build from the manifest)
and the refusals before any server starts, each with its exact message. No Triton server runs here."""
from __future__ import annotations

import json
import os
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


# --- a build the spec no longer names: synth's rule (deployment_spec.builds.spec_match), the same message ---------------------

def shadow_error(capsys: pytest.CaptureFixture, spec: pathlib.Path, manifest: pathlib.Path) -> tuple[int, str]:
    return serve_error(capsys, "shadowed", "--spec", str(spec), "--manifest", str(manifest))


def test_a_shadow_moved_to_a_model_never_built_is_refused_not_served_from_the_old_build(
        spec: tuple[pathlib.Path, pathlib.Path], capsys: pytest.CaptureFixture) -> None:
    # The spec changed after the build: the shadow serves times4 now, which no build made; shadowed.Shadow still
    # holds times3, which `tritonsm serve` used to start under times4's name.
    moved = spec[0].with_name("shadow-times4.yaml")
    moved.write_text(spec[0].read_text().replace(
        "models:\n", "models:\n  times4: {backend: python, source: {python_dir: times3_model}, max_batch_size: 8}\n")
                     .replace("shadow: {model: times3", "shadow: {model: times4"))
    assert shadow_error(capsys, moved, spec[1]) == (
        2, "error: variant 'Shadow' of endpoint 'shadowed' (its own build, 'shadowed.Shadow'):\n"
           f"  - model 'times4' has no artifact in {spec[1]} (its archives hold times3, which the spec no longer "
           "serves there: a build made before the spec changed); run `tritonsm build`\n")


def test_a_model_whose_source_changed_after_the_build_is_refused_and_served_again_once_rebuilt(
        tmp_path: pathlib.Path, capsys: pytest.CaptureFixture) -> None:
    spec, manifest = variants_spec(tmp_path)
    model = tmp_path / "times3_model" / "model.py"
    model.write_text(model.read_text().replace("factor", "factor * 2"))
    assert shadow_error(capsys, spec, manifest) == (
        2, "error: variant 'Shadow' of endpoint 'shadowed' (its own build, 'shadowed.Shadow'):\n"
           "  - model 'times3' is stale: models.times3.source.python_dir (times3_model) changed since the build, so "
           "its build serves the model as it was; run `tritonsm build` to rebuild it\n")
    # The fix the message names.
    assert tritonsm_main(["build", "--spec", str(spec), "--out", str(manifest.parent)]) == 0
    assert [v.model for v in resolve_endpoint(spec, "shadowed", None, manifest).variants] == ["times2", "times3"]


def test_a_model_whose_settings_changed_after_the_build_is_refused(
        spec: tuple[pathlib.Path, pathlib.Path], capsys: pytest.CaptureFixture) -> None:
    changed = spec[0].with_name("times3-batch-4.yaml")
    changed.write_text(spec[0].read_text().replace("times3_model}, max_batch_size: 8",
                                                   "times3_model}, max_batch_size: 4"))
    assert shadow_error(capsys, changed, spec[1]) == (
        2, "error: variant 'Shadow' of endpoint 'shadowed' (its own build, 'shadowed.Shadow'):\n"
           "  - model 'times3' is stale: its settings under models.times3 changed since the build, so its build serves "
           "the model as it was; run `tritonsm build` to rebuild it\n")


def test_a_source_touched_but_not_changed_is_still_served(tmp_path: pathlib.Path) -> None:
    # The twin of the stale source: its stamp moved (a checkout, a copy), its bytes did not.
    spec, manifest = variants_spec(tmp_path)
    model = tmp_path / "times3_model" / "model.py"
    model.write_text(model.read_text())
    os.utime(model, ns=(1, 1))
    assert [v.model for v in resolve_endpoint(spec, "shadowed", None, manifest).variants] == ["times2", "times3"]


# --- --shadow-queue-size ------------------------------------------------------------------------------------------

def test_a_shadow_queue_size_out_of_range_is_refused_before_anything_is_resolved(
        spec: tuple[pathlib.Path, pathlib.Path], capsys: pytest.CaptureFixture) -> None:
    assert serve_error(capsys, "shadowed", "--spec", str(spec[0]), "--manifest", str(spec[1]),
                       "--shadow-queue-size", "0") == (
        2, "error: --shadow-queue-size 0: give a number of copies from 1 to 1024 (each waiting copy holds its request "
           "body, up to 6 MB); the default is 64\n")


def test_a_shadow_queue_size_for_an_endpoint_without_a_shadow_is_refused(
        spec: tuple[pathlib.Path, pathlib.Path], capsys: pytest.CaptureFixture) -> None:
    assert serve_error(capsys, "ab", "--spec", str(spec[0]), "--manifest", str(spec[1]),
                       "--shadow-queue-size", "128") == (
        2, "error: --shadow-queue-size applies to an endpoint with a shadow; endpoint ab has none: drop "
           "--shadow-queue-size\n")


def test_a_shadow_queue_size_that_is_no_number_is_refused_by_the_parser(
        spec: tuple[pathlib.Path, pathlib.Path], capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as stopped:
        tritonsm_main(["serve", "shadowed", "--spec", str(spec[0]), "--shadow-queue-size", "many"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "tritonsm serve: error: argument --shadow-queue-size: invalid int value: 'many'")


def test_the_shadow_queue_size_given_is_the_shadow_worker_s_and_said_at_start_up(
        spec: tuple[pathlib.Path, pathlib.Path]) -> None:
    # The twin of the refusals: a size in range reaches the endpoint (no server starts here).
    from local_endpoint.variants.endpoint import for_spec_endpoint

    endpoint = for_spec_endpoint(resolve_endpoint(spec[0], "shadowed", None, spec[1]), "Tests-dev-shadowed",
                                 capture_dir=None, shadow_queue_size=256)
    assert endpoint.shadow_queue_size == 256
    assert ("shadow Shadow: up to 256 copies wait for its server (--shadow-queue-size); a copy that finds them full "
            "is dropped, and the drops are told here") in endpoint.notes()

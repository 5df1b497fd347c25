"""A variant or shadow serving another model is built as a single-model endpoint of its own, ``<endpoint>.<variant>``.

Two tiny Python-backend models from a python_dir (no recipe, no execution environment): the build takes well under
a second, so each test builds for real.
"""
from __future__ import annotations

import pathlib

import pytest

from deployment_spec.builds.manifest import load_manifest
from deployment_spec.rules.variant_plan import endpoints_to_build
from model_build import build
from model_build.build_context import serving_devices
from mb_support import make_spec

CONFIG = """\
backend: "python"
max_batch_size: 4
input [ { name: "X" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] } ]
"""
MODEL = """\
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X")
                                                            .as_numpy() * {factor})]) for r in requests]
"""
MODELS = """\
incumbent: {backend: python, source: {python_dir: incumbent}, max_batch_size: 4}
candidate: {backend: python, source: {python_dir: candidate}, max_batch_size: 4}
"""
SHADOWED = """\
ep:
  kind: single-model
  models: [incumbent]
  instance_type: ml.c5.xlarge
  shadow: {model: candidate}
"""
PLAIN = """\
ep:
  kind: single-model
  models: [incumbent]
  instance_type: ml.c5.xlarge
"""


def _spec(folder: pathlib.Path, endpoints: str, environments: str = ""):
    for name, factor in (("incumbent", 1), ("candidate", 2)):
        (folder / name).mkdir(exist_ok=True)
        (folder / name / "config.pbtxt").write_text(CONFIG)
        (folder / name / "model.py").write_text(MODEL.format(factor=factor))
    spec = make_spec(folder, MODELS, endpoints)
    if environments:  # make_spec writes dev: {region}; an override needs the environment's own body
        path = folder / "spec.yaml"
        text = path.read_text().replace("  dev: {region: us-east-1}\n", environments)
        path.write_text(text)
        from deployment_spec import load_spec
        spec = load_spec(path)
    return spec


def _build(spec, root: pathlib.Path) -> build.Report:
    return build.run(spec, root / "assets", root / "work", log=lambda line: None)


def test_a_shadow_on_another_model_gets_a_manifest_entry_of_its_own(tmp_path):
    report = _build(_spec(tmp_path, SHADOWED), tmp_path)
    assert report.exit_code() == 0 and sorted(report.built) == ["candidate", "incumbent"]
    manifest = load_manifest(tmp_path / "assets" / "manifest.json")
    assert sorted(manifest.endpoints) == ["ep", "ep.Shadow"]
    own = manifest.endpoints["ep.Shadow"]
    assert own.kind == "single-model" and own.default_model == "candidate"
    assert [a.models for a in own.artifacts] == [("candidate",)]
    assert own.artifacts[0].file.startswith("ep.Shadow-") and (tmp_path / "assets" / own.artifacts[0].file).is_file()
    assert [a.models for a in manifest.endpoints["ep"].artifacts] == [("incumbent",)]


def test_an_unchanged_rebuild_reuses_the_variant_tarball(tmp_path):
    spec = _spec(tmp_path, SHADOWED)
    _build(spec, tmp_path)
    again = _build(spec, tmp_path)
    assert again.written == [] and sorted(again.cached) == ["candidate", "incumbent"]


def test_removing_the_shadow_prunes_its_tarball(tmp_path):
    _build(_spec(tmp_path, SHADOWED), tmp_path)
    old = load_manifest(tmp_path / "assets" / "manifest.json").endpoints["ep.Shadow"].artifacts[0].file
    report = _build(_spec(tmp_path, PLAIN), tmp_path)
    assert report.written == ["manifest.json"]
    assert sorted(load_manifest(tmp_path / "assets" / "manifest.json").endpoints) == ["ep"]
    assert not (tmp_path / "assets" / old).exists()


def test_a_shadow_only_one_environment_adds_is_built(tmp_path):
    staging = """\
  dev: {region: us-east-1}
  staging:
    region: us-east-1
    overrides:
      endpoints:
        ep: {shadow: {model: candidate, name: Candidate}}
"""
    spec = _spec(tmp_path, PLAIN, staging)
    assert sorted(endpoints_to_build(spec)) == ["ep", "ep.Candidate"]
    _build(spec, tmp_path)
    assert sorted(load_manifest(tmp_path / "assets" / "manifest.json").endpoints) == ["ep", "ep.Candidate"]


@pytest.mark.parametrize("variants, own", [
    # Both serve the endpoint's model on its instance type: the endpoint's build serves both.
    ("[{name: A}, {name: B, weight: 0.5}]", []),
    # Another instance type: an own build, judged on that type at synth.
    ("[{name: A}, {name: B, instance_type: ml.g5.xlarge}]", ["ep.B"]),
    ("[{name: A}, {name: B, model: candidate}]", ["ep.B"]),
])
def test_only_a_variant_with_another_model_or_instance_type_is_built_apart(tmp_path, variants, own):
    spec = _spec(tmp_path, PLAIN + f"  variants: {variants}\n")
    assert sorted(endpoints_to_build(spec)) == ["ep", *own]


def test_a_variant_on_a_gpu_type_puts_the_model_on_cuda_too(tmp_path):
    # The devices a model is built for follow every instance type serving it, a variant's included.
    spec = _spec(tmp_path, PLAIN + "  variants: [{name: A}, {name: B, model: candidate, instance_type: ml.g5.xlarge}]\n")
    assert serving_devices(spec, spec.models["candidate"]) == {"cuda"}
    assert serving_devices(spec, spec.models["incumbent"]) == {"cpu"}


def _variant_build(spec):
    from deployment_spec.rules.variant_plan import own_builds

    return own_builds(spec.endpoints["ep"])["ep.Shadow"]


def test_synth_finds_the_shadows_own_build(tmp_path):
    from triton_constructs import checks

    spec = _spec(tmp_path, SHADOWED)
    _build(spec, tmp_path)
    path = tmp_path / "assets" / "manifest.json"
    built = checks.built_endpoint(_variant_build(spec), spec.models, spec.triton_version, load_manifest(path), path,
                                  spec_root=spec.root)
    assert [a.models for a in built.artifacts] == [("candidate",)] and built.default_model is None


def test_synth_refuses_a_build_made_before_the_shadow_was_added(tmp_path):
    # The twin of the one above: the manifest of a build without the shadow lacks its entry.
    from triton_constructs import checks
    from triton_constructs.errors import SynthError

    _build(_spec(tmp_path, PLAIN), tmp_path)
    spec = _spec(tmp_path, SHADOWED)
    path = tmp_path / "assets" / "manifest.json"
    with pytest.raises(SynthError) as raised:
        checks.built_endpoint(_variant_build(spec), spec.models, spec.triton_version, load_manifest(path), path,
                              spec_root=spec.root)
    assert str(raised.value) == (f"variant 'Shadow' of endpoint 'ep' (its own build, 'ep.Shadow'):\n"
                                 f"  - {path} has no artifacts for this endpoint; run `tritonsm build`")


def test_the_synth_tests_fake_build_makes_the_variants_entries_too(tmp_path):
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "infra" / "fixtures"))
    from fake_build import fake_build

    spec = _spec(tmp_path, PLAIN + "  variants: [{name: A, weight: 90}, {name: B, model: candidate, weight: 10}]\n")
    manifest = load_manifest(fake_build(spec, tmp_path / "fake"))
    assert sorted(manifest.endpoints) == ["ep", "ep.B"]
    assert [a.models for a in manifest.endpoints["ep.B"].artifacts] == [("candidate",)]


def test_synth_offers_only_endpoints_whose_variants_were_all_built(tmp_path):
    # The candidate fails to build: the endpoint it shadows is not offered for `-c endpoints=`, the other one is.
    from triton_constructs import checks
    from triton_constructs.errors import SynthError

    spec = _spec(tmp_path, SHADOWED + "other: {kind: single-model, models: [incumbent], instance_type: ml.c5.xlarge}\n")
    (tmp_path / "candidate" / "model.py").unlink()
    report = _build(spec, tmp_path)
    assert report.endpoints_skipped == {"ep.Shadow": "models not built: candidate"}
    path = tmp_path / "assets" / "manifest.json"
    with pytest.raises(SynthError) as raised:
        checks.built_endpoint(_variant_build(spec), spec.models, spec.triton_version, load_manifest(path), path,
                              spec_root=spec.root)
    assert raised.value.problems[-1] == ("fix the error above and run `tritonsm build`; or synthesize only the built "
                                         "endpoints: `cdk synth -c endpoints=other`")


# --- a build the spec no longer names: one rule for synth and `tritonsm serve` (deployment_spec.builds.spec_match) -------------

def _synth_and_serve_errors(spec, build_spec) -> tuple[str, str]:
    """What synth (the stacks' check) and `tritonsm serve` (resolve_endpoint) say about the build ``build_spec``."""
    from deployment_spec.parsing.errors import UserError
    from deployment_spec.served import resolve_endpoint
    from triton_constructs import checks
    from triton_constructs.errors import SynthError

    path = spec.root / "assets" / "manifest.json"
    with pytest.raises(SynthError) as synth:
        checks.built_endpoint(build_spec, spec.models, spec.triton_version, load_manifest(path), path,
                              spec_root=spec.root)
    with pytest.raises(UserError) as serve:
        resolve_endpoint(spec.path, "ep", None, path)
    return str(synth.value), str(serve.value)


def test_synth_and_serve_refuse_a_shadow_moved_to_a_model_never_built_alike(tmp_path):
    _build(_spec(tmp_path, SHADOWED), tmp_path)
    (tmp_path / "spec.yaml").write_text((tmp_path / "spec.yaml").read_text().replace(
        "models:\n", "models:\n  candidate-v2: {backend: python, source: {python_dir: candidate}, max_batch_size: 4}\n")
                                        .replace("shadow: {model: candidate}", "shadow: {model: candidate-v2}"))
    from deployment_spec import load_spec

    spec = load_spec(tmp_path / "spec.yaml")
    synth, serve = _synth_and_serve_errors(spec, _variant_build(spec))
    assert synth == serve == (
        "variant 'Shadow' of endpoint 'ep' (its own build, 'ep.Shadow'):\n"
        f"  - model 'candidate-v2' has no artifact in {tmp_path / 'assets' / 'manifest.json'} (its archives hold "
        "candidate, which the spec no longer serves there: a build made before the spec changed); run `tritonsm build`")


def test_synth_and_serve_refuse_a_model_whose_file_changed_since_the_build_alike(tmp_path):
    spec = _spec(tmp_path, SHADOWED)
    _build(spec, tmp_path)
    (tmp_path / "candidate" / "model.py").write_text(MODEL.format(factor=5))
    synth, serve = _synth_and_serve_errors(spec, _variant_build(spec))
    assert synth == serve == (
        "variant 'Shadow' of endpoint 'ep' (its own build, 'ep.Shadow'):\n"
        "  - model 'candidate' is stale: models.candidate.source.python_dir (candidate) changed since the build, so "
        "its build serves the model as it was; run `tritonsm build` to rebuild it")


def test_synth_refuses_an_endpoint_whose_model_folder_is_gone_and_passes_it_once_restored(tmp_path):
    from triton_constructs import checks
    from triton_constructs.errors import SynthError

    spec = _spec(tmp_path, PLAIN)
    _build(spec, tmp_path)
    path = tmp_path / "assets" / "manifest.json"
    (tmp_path / "incumbent").rename(tmp_path / "moved")
    with pytest.raises(SynthError) as raised:
        checks.built_endpoint(spec.endpoints["ep"], spec.models, spec.triton_version, load_manifest(path), path,
                              spec_root=spec.root)
    assert str(raised.value) == (
        "endpoint 'ep':\n  - model 'incumbent' is stale: models.incumbent.source.python_dir (incumbent) no longer "
        "exists, so its build serves the model as it was; run `tritonsm build` to rebuild it")
    (tmp_path / "moved").rename(tmp_path / "incumbent")   # the twin: the same files back
    built = checks.built_endpoint(spec.endpoints["ep"], spec.models, spec.triton_version, load_manifest(path), path,
                                  spec_root=spec.root)
    assert [a.models for a in built.artifacts] == [("incumbent",)]


def test_the_manifest_records_each_models_sources(tmp_path):
    _build(_spec(tmp_path, PLAIN), tmp_path)
    entry = load_manifest(tmp_path / "assets" / "manifest.json").models["incumbent"]
    assert sorted(entry.sources) == ["settings", "source.python_dir"]
    assert sorted(entry.source_stamps) == ["source.python_dir"]

"""The ``backend: dali`` model kind in the spec: its pipeline settings, their errors, and the DALI release rule."""
import copy
import pathlib

import pytest
import yaml

from deployment_spec import SpecError
from deployment_spec.sections.dali import image_inputs
from deployment_spec.facts.serving_runtimes import DALI_RELEASES, RUNTIMES, buildable_dali
from deployment_spec.spec import parse_spec

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "image-ensemble-sme.yaml"
BASE = yaml.safe_load(EXAMPLE.read_text())


def _parse(mutate) -> list[str]:
    raw = copy.deepcopy(BASE)
    mutate(raw)
    with pytest.raises(SpecError) as caught:
        parse_spec(raw, EXAMPLE)
    return [str(p) for p in caught.value.problems]


def test_the_example_reads_as_the_article_runs_it():
    spec = parse_spec(copy.deepcopy(BASE), EXAMPLE)
    dali = spec.models["preprocess"].dali
    # 224x224 NCHW float: what the ResNet-50 graph's pixel_values takes.
    assert dali.output_dims() == (3, 224, 224)
    # The ensemble's IMAGE input is the DALI model's encoded-bytes input; the classifier takes none.
    assert image_inputs(spec.models, "image-ensemble") == {"IMAGE"}
    assert image_inputs(spec.models, "classifier") == frozenset()


def test_a_release_whose_dali_has_no_wheel_is_refused_with_the_reason():
    problems = _parse(lambda raw: raw.__setitem__("triton_version", "25.09"))
    assert problems == [
        "models.preprocess.backend: got 'dali' with triton_version '25.09', whose image runs DALI 1.51.2 "
        "(nvidia-dali-cuda130==1.51.2): PyPI holds only a wheel-stub sdist of it, which downloads the wheel from "
        "NVIDIA's own index at install time, so the build cannot serialize a pipeline in that release's format; "
        "allowed: backend dali with a triton_version whose DALI the build can install: 23.12 (DALI 1.31.0), "
        "24.01 (DALI 1.31.0), 24.03 (DALI 1.31.0), 26.05 (DALI 2.1.0); fix: set triton_version to one of those "
        "(the newest: 26.05)"]


def test_every_release_has_its_dali_from_the_dali_backend_branch():
    # DALI_VERSION on dali_backend rYY.MM (read at the branch heads); the wheel flavour follows the CUDA major.
    assert sorted(DALI_RELEASES) == sorted(RUNTIMES)
    assert {v: r.requirement for v, r in DALI_RELEASES.items()} == {
        "23.12": "nvidia-dali-cuda120==1.31.0", "24.01": "nvidia-dali-cuda120==1.31.0",
        "24.03": "nvidia-dali-cuda120==1.31.0", "24.05": "nvidia-dali-cuda120==1.36.0",
        "24.09": "nvidia-dali-cuda120==1.39.0", "25.04": "nvidia-dali-cuda120==1.47.0",
        "25.09": "nvidia-dali-cuda130==1.51.2", "26.05": "nvidia-dali-cuda130==2.1.0"}
    assert [r.triton_version for r in buildable_dali()] == ["23.12", "24.01", "24.03", "26.05"]
    assert all(r.sources[0].endswith(f"/blob/r{r.triton_version}/DALI_VERSION") for r in DALI_RELEASES.values())


@pytest.mark.parametrize("release", sorted({r.requirement for r in buildable_dali()}))
def test_each_installable_release_has_a_hashed_lock(release):
    from model_build.verification import side_env

    package, version = release.split("==")
    lock = side_env.lock_path(package, version).read_text()
    assert f"\n{release} --hash=sha256:" in lock


CASES = {
    "resize with both kinds of size": (
        lambda raw: raw["models"]["preprocess"]["dali"].__setitem__("resize", {"shorter": 256, "width": 300}),
        "models.preprocess.dali.resize: got shorter, width; allowed: either shorter, or height and width; fix: "
        "write resize: {shorter: 256} (keeps the aspect ratio) or {height: 299, width: 299}"),
    "crop larger than the resize keeps": (
        lambda raw: raw["models"]["preprocess"]["dali"].__setitem__("crop", [300, 224]),
        "models.preprocess.dali.crop: got [300, 224]; allowed: at most the resized size (256x256); fix: crop no "
        "more than the resize keeps, or resize to a larger size"),
    "two means for three channels": (
        lambda raw: raw["models"]["preprocess"]["dali"].__setitem__("mean", [1.0, 2.0]),
        "models.preprocess.dali.mean: got 2 values; allowed: 1 value (all channels) or 3 (one per channel); fix: "
        "give mean 1 or 3 numbers"),
    "a zero std": (
        lambda raw: raw["models"]["preprocess"]["dali"].__setitem__("std", [0.0]),
        "models.preprocess.dali.std: got [0.0]; allowed: numbers > 0; fix: every std divides: make it positive"),
    "unknown layout": (
        lambda raw: raw["models"]["preprocess"]["dali"].__setitem__("layout", "chw"),
        "models.preprocess.dali.layout: got 'chw'; allowed: nchw, nhwc; fix: did you mean 'nchw'?"),
    "a source on a dali model": (
        lambda raw: raw["models"]["preprocess"].__setitem__("source", {"recipe": "resnet50"}),
        "models.preprocess.source: got a source; allowed: no source for backend dali (the dali: section is the "
        "pipeline); fix: remove source"),
    "dali settings on another backend": (
        lambda raw: raw["models"]["classifier"].__setitem__("dali", copy.deepcopy(BASE["models"]["preprocess"]["dali"])),
        "models.classifier.dali: got dali settings with backend onnxruntime; allowed: only with backend: dali; "
        "fix: remove dali or set backend: dali"),
    "a dali model without its pipeline": (
        lambda raw: raw["models"]["preprocess"].pop("dali"),
        "models.preprocess.dali: got nothing (the key is missing); allowed: the preprocessing pipeline; fix: add "
        "dali: {resize: {shorter: 256}, crop: [224, 224], mean: [...], std: [...]}"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_bad_pipeline_setting_is_named_with_the_fix(case):
    mutate, message = CASES[case]
    assert _parse(mutate) == [message]

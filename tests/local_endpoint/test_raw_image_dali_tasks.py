"""``task.preprocess: dali``: image tasks whose first step is a DALI pipeline derived from the checkpoint's own
preprocessor_config.json (ConvNeXT: shortest edge / crop_pct, centre crop, bicubic; CLIP: shortest edge, crop,
bicubic, CLIP's mean and std), built for Triton 26.05 (DALI 2.1.0 installs here), verified at build time on DALI's
CPU operators against transformers, then served (the DALI step as a CPU stand-in) with raw images as UINT8 rows.

Also: a planted wrong mean and a planted resize rule (DALI's own rounding instead of the processor's) in the
shipped model.dali fail the build-time check with its message.
"""
from __future__ import annotations

import dataclasses
import pathlib

import numpy as np
import pytest

from deployment_spec import load_spec
from deployment_spec.sections.dali import SizeRule
from deployment_spec.facts.serving_runtimes import DALI_RELEASES
from local_endpoint.client.invoke import invoke_url
from local_endpoint.client.payload import NamedTensor, encode_request
from model_build import layout
from model_build.dali_pipeline import run as dali_build
from model_build.dali_pipeline.worker import pad
from model_build.backends.ensemble import dali_image_check, image_check, image_samples, task_check, task_reference
from model_build.errors import BuildError
from model_build.verification import side_env
from tritonsm.cli import main as tritonsm_main
from benchmarks.tooling import image_checkpoints

import task_fixtures  # tests/local_endpoint is on sys.path (conftest.py)

pytestmark = pytest.mark.triton

SPEC = """\
project: Images
triton_version: "26.05"
models:
  birds:
    task: {kind: image-classification, top_k: 3, preprocess: dali}
    backend: onnxruntime
    weights: birds-convnext
    max_batch_size: 8
  search:
    task: {kind: image-embedding, normalize: true, preprocess: dali}
    backend: onnxruntime
    weights: search-clip
    max_batch_size: 8
endpoints:
  images:
    kind: multi-model
    models: [birds, search]
    instance_type: ml.g5.xlarge
environments:
  dev: {region: us-east-1}
"""
CHECKPOINTS = {"birds-convnext": "convnext", "search-clip": "clip"}
MODELS = ("birds", "search")
RUNTIME_NAME = "Images-dev-images"
# image_samples.py's images but the EXIF-rotated JPEG (DALI's decoder disregards EXIF orientation).
CHECKED = [s for s in image_samples.images() if s.what not in dali_image_check.SKIPPED]


@pytest.fixture(scope="module")
def built(module_tmp) -> task_fixtures.Built:
    def save(root: pathlib.Path) -> None:
        for folder, family in CHECKPOINTS.items():
            image_checkpoints.save(root / folder, family)
    return task_fixtures.build(module_tmp.mktemp("raw-images-dali"), SPEC, "images", save)


@pytest.fixture(scope="module")
def served(built, module_tmp):
    # In the spec's release: the stand-in runs model.dali in Triton 26.05's DALI.
    with task_fixtures.served(built, MODELS, RUNTIME_NAME, module_tmp.mktemp("logs"), "26.05") as runtime:
        yield runtime


def test_the_build_records_what_ran_where(built):
    models = built.manifest().models
    for name, measure in (("birds", "max score difference"), ("search", "1 - cosine")):
        check = models[name].verification
        assert check.ran and check.cases == len(CHECKED) and check.details["measure"] == measure, name
        assert check.details["images"] == [s.what for s in CHECKED]
        assert check.details["not_checked"] == ["JPEG 400x300 with EXIF orientation 6 (shown rotated): DALI's "
                                                "fn.decoders.image disregards EXIF orientation (its docs): served "
                                                "unrotated"]
        # ml.g5.xlarge has a GPU: the shipped file decodes with nvJPEG, which no check here ran.
        assert check.details["preprocess"] == ("DALI 2.1.0 CPU operators here (model.dali with its operators moved "
                                               "to the CPU); nvJPEG decoding and the GPU resize on the endpoint not "
                                               "measured")
        pixels = check.details["pixels"]
        assert pixels["tolerance_levels"] == {"max": 12.0, "mean": 0.5}  # bicubic (dali/reference.py)
        assert pixels["max_levels"] <= 12.0 and pixels["mean_levels"] <= 0.5, pixels
        # The whole ensemble takes encoded files as UINT8 rows, as the dali backend takes them.
        assert [(t.name, t.data_type, t.dims) for t in models[name].inputs] == [("IMAGE", "TYPE_UINT8", (-1,))]
        assert models[f"{name}-preprocess"].verification.runtime == "dali"
    assert models["birds"].verification.max_abs_error <= 1e-3
    assert models["search"].verification.max_abs_error <= 1 - task_reference.EMBEDDING_COSINE


def _send(served, built, model: str, images: list[bytes]):
    # Rows zero-padded to one length: Triton batches one shape; the decoder ignores the tail.
    tensors = [NamedTensor("IMAGE", "UINT8", pad([np.frombuffer(i, dtype=np.uint8) for i in images]))]
    response = invoke_url(served.endpoints[0].server.url, encode_request(tensors, binary=True),
                          target_model=f"{built.target(model)}.tar.gz")
    return {o.name: o.array for o in response.outputs}


def test_the_served_ensembles_answer_as_the_pipeline(built, served, tmp_path):
    for name in MODELS:
        answered = _send(served, built, name, [s.data for s in CHECKED])
        ours = (task_check.label_rows(answered) if name == "birds" else list(answered["image_embedding"]))
        _, theirs, _ = image_check.reference(task_fixtures.chain(built, name, tmp_path / name), CHECKED)
        task = load_spec(built.spec_path).models[name].task
        worst, problems = task_reference.compare(task, ours, theirs, 1e-3)
        assert not problems, (name, worst, problems)


def test_the_cli_sends_images_as_uint8_rows_and_names_the_flag_when_they_went_as_bytes(built, served, tmp_path,
                                                                                    capsys):
    path = tmp_path / "photo.jpg"
    path.write_bytes(CHECKED[0].data)
    common = ["invoke", "--url", served.url, "--target-model", f"{built.target('birds')}.tar.gz", "--image", str(path)]
    assert tritonsm_main([*common, "--input-name", "IMAGE"]) == 0
    _, theirs, _ = image_check.reference(task_fixtures.chain(built, "birds", tmp_path), CHECKED[:1])
    assert f"row 0: {theirs[0][0]['label']} " in capsys.readouterr().out
    # Without --input-name the file goes as BYTES, what a Python-preprocessed task takes: Triton refuses the type,
    # and the command says which flag sends what this model takes.
    assert tritonsm_main(common) == 1
    error = capsys.readouterr().err
    assert "inference input 'IMAGE' data-type is 'BYTES', but model" in error and error.rstrip().endswith(
        "; this model takes each image as UINT8 rows (DALI preprocessing): add --input-name with its image input, "
        "e.g. --input-name IMAGE for a task entry with task.preprocess: dali"), error


def _replant(built, chain: task_check.Chain, **changes) -> None:
    """The chain's copy of model.dali serialized again from the derived pipeline with ``changes``."""
    step = load_spec(built.spec_path).models[chain.dirs[0].name]
    wrong = dataclasses.replace(step, dali=dataclasses.replace(step.dali, **changes))
    release = DALI_RELEASES["26.05"]
    env = side_env.ensure(release.package, release.version)
    dali_build.serialize(env, wrong, "gpu", layout.version_dir(chain.dirs[0]) / dali_build.MODEL_FILE, release)


@pytest.mark.parametrize("name, changes", [
    ("birds", {"mean": (0.485 * 255, 0.456 * 255, 0.406 * 255)}),  # ImageNet's mean, not the checkpoint's 0.5
    ("search", {"sizes": SizeRule.DALI}),  # DALI's rounding: the longer side and the crop one pixel off
])
def test_a_planted_pipeline_defect_fails_the_check(built, tmp_path, name, changes):
    chain = task_fixtures.chain(built, name, tmp_path)
    step = load_spec(built.spec_path).models[f"{name}-preprocess"]
    assert dali_image_check.check(step, chain, tmp_path / "twin", print).ran  # the untouched copy passes
    _replant(built, chain, **changes)
    with pytest.raises(BuildError) as caught:
        dali_image_check.check(step, chain, tmp_path / "planted", print)
    message = str(caught.value)
    assert message.startswith(f"model {name}: raw images through its DALI step (DALI 2.1.0's CPU operators) and its "
                              f"other steps do not answer as "), message
    assert "pixel_values differ from the processor's by up to " in message
    assert message.endswith(dali_image_check.PIXELS_DIFFER)


def test_answers_that_move_with_pixels_inside_the_tolerance_name_both_ways_out(built, tmp_path):
    # ConvNeXT's scores move by about 7e-4 on DALI's pixels (docs/image-audio-tasks.md): a model step held to 1e-9
    # fails on the answers, not on the pixels, and the message offers python preprocessing or a tolerance to accept.
    chain = task_fixtures.chain(built, "birds", tmp_path)
    strict = dataclasses.replace(chain.model_step, tolerance=dataclasses.replace(chain.model_step.tolerance, atol=1e-9))
    step = load_spec(built.spec_path).models["birds-preprocess"]
    with pytest.raises(BuildError) as caught:
        dali_image_check.check(step, dataclasses.replace(chain, model_step=strict), tmp_path / "strict", print)
    message = str(caught.value)
    assert "pixel_values differ" not in message and "score off by " in message, message
    assert message.endswith(dali_image_check.ANSWERS_DIFFER.format(name="birds"))
    assert "raise models.birds.tolerance.atol above it" in message

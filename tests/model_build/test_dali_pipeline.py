"""The spec's image pipeline serialized by the Triton image's own DALI release, run on DALI's CPU operators
against the plain PIL/numpy reference, on real JPEGs of six sizes made here.

Tolerance (model_build/dali_pipeline/reference.py), in the decoded image's 0..255 units: on average at most 0.5
level; anywhere at most 2 levels with linear resizing (12 cubic, 16 Lanczos). Both sides decode with
libjpeg-turbo; the resize rounds its 8-bit result from float weights in DALI and fixed-point ones in PIL,
so a pixel can land one level apart (measured: linear 1.0 max, 0.04-0.15 mean); PIL clips its first
resampling pass to 8 bits, which changes the ringing of cubic and Lanczos filters at hard edges.
nvJPEG on the endpoint's GPU is not measured.
"""
import copy
import dataclasses
import pathlib

import numpy as np
import pytest
import yaml

from deployment_spec.facts.serving_runtimes import DALI_RELEASES
from deployment_spec.spec import parse_spec
from model_build.backends.dali import check_images
from model_build.dali_pipeline import placement, reference, run as build
from model_build.errors import BuildError
from model_build.verification import side_env

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "image-ensemble-sme.yaml"


def _model(triton_version="26.05", **dali):
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["triton_version"] = triton_version
    raw["models"]["preprocess"]["dali"].update(copy.deepcopy(dali))
    return parse_spec(raw, EXAMPLE).models["preprocess"]


@pytest.fixture(scope="module")
def dali_env():
    release = DALI_RELEASES["26.05"]
    return side_env.ensure(release.package, release.version), release


def _outputs(dali_env, model, where, tmp_path, images):
    env, release = dali_env
    shipped = build.serialize(env, model, where, tmp_path / f"model.{where}.dali", release)
    cpu_file = tmp_path / "model.cpu.dali"
    cpu_file.write_bytes(placement.to_cpu(shipped.read_bytes()))
    return build.run_on_cpu(env, model, cpu_file, images, tmp_path, release)


def test_the_example_pipeline_matches_pil_on_six_jpegs_of_different_sizes(dali_env, tmp_path):
    model = _model()
    images = check_images.write(tmp_path / "images")
    got = _outputs(dali_env, model, "gpu", tmp_path, images)
    for path, output in zip(images, got):
        want = reference.preprocess(path.read_bytes(), model.dali)
        difference = reference.compare(output, want, model.dali)
        # Same shape and type as the classifier's input, and within the stated tolerance of PIL.
        assert output.shape == want.shape == (3, 224, 224) and output.dtype == np.float32, path.name
        assert reference.within(difference, model.dali), (path.name, difference)


def test_the_articles_fixed_299_nhwc_bgr_fp16_variant_matches_pil_too(dali_env, tmp_path):
    model = _model(resize={"height": 299, "width": 299, "interpolation": "cubic"}, crop=[299, 299],
                   layout="nhwc", color="bgr", dtype="fp16", mean=[127.5], std=[127.5])
    images = check_images.write(tmp_path / "images", check_images.SIZES[:3])
    got = _outputs(dali_env, model, "cpu", tmp_path, images)
    for path, output in zip(images, got):
        want = reference.preprocess(path.read_bytes(), model.dali)
        assert output.shape == (299, 299, 3) and output.dtype == np.float16
        assert reference.within(reference.compare(output, want, model.dali), model.dali), path.name


def test_the_gpu_pipeline_moved_to_the_cpu_is_byte_identical_to_the_cpu_pipeline(dali_env, tmp_path):
    env, release = dali_env
    model = _model()
    gpu = build.serialize(env, model, "gpu", tmp_path / "gpu.dali", release).read_bytes()
    cpu = build.serialize(env, model, "cpu", tmp_path / "cpu.dali", release).read_bytes()
    # The shipped file decodes with nvJPEG (mixed) and resizes/normalises on the GPU ...
    assert placement.devices(gpu) == ["ExternalSource:cpu", "decoders__Image:mixed", "Resize:gpu",
                                      "CropMirrorNormalize:gpu"]
    # ... and only the placement differs from the CPU pipeline the check (and the local stand-in) runs.
    assert placement.to_cpu(gpu) == cpu and gpu != cpu


def test_serialization_is_deterministic(dali_env, tmp_path):
    env, release = dali_env
    model = _model()
    first = build.serialize(env, model, "gpu", tmp_path / "a.dali", release).read_bytes()
    second = build.serialize(env, model, "gpu", tmp_path / "b.dali", release).read_bytes()
    # No call-stack records (paths of this checkout) in the file: same spec, same bytes, same tarball hash.
    assert first == second and b"_origin_stack" not in first and str(ROOT).encode() not in first


def test_a_pipeline_off_by_a_pixel_is_caught(dali_env, tmp_path):
    # The guard's twin: the reference with the crop one pixel lower must fail the tolerance.
    model = _model()
    images = check_images.write(tmp_path / "images", check_images.SIZES[:1])
    got = _outputs(dali_env, model, "cpu", tmp_path, images)[0]
    want = reference.preprocess(images[0].read_bytes(), model.dali)
    shifted = np.roll(want, 1, axis=1)
    assert not reference.within(reference.compare(got, shifted, model.dali), model.dali)


def test_dali_1_31_refuses_gpu_operators_without_a_cuda_driver(tmp_path):
    # Triton 23.12-24.03 ship DALI 1.31.0, which needs a CUDA driver to place operators on the GPU even to
    # serialize them; the build says so and how to get on (measured, not assumed).
    release = DALI_RELEASES["24.03"]
    env = side_env.ensure(release.package, release.version)
    model = _model("24.03")
    with pytest.raises(BuildError) as caught:
        build.serialize(env, model, "gpu", tmp_path / "model.dali", release)
    message = str(caught.value)
    assert message.startswith("model preprocess: DALI 1.31.0 (Triton 24.03's) could not serialize the pipeline: ")
    assert message.endswith(build._GPU_FIX)
    # The CPU placement of the same pipeline serializes and matches PIL in that release too.
    images = check_images.write(tmp_path / "images", check_images.SIZES[:2])
    cpu_file = build.serialize(env, model, "cpu", tmp_path / "model.cpu.dali", release)
    for path, output in zip(images, build.run_on_cpu(env, model, cpu_file, images, tmp_path, release)):
        want = reference.preprocess(path.read_bytes(), model.dali)
        assert reference.within(reference.compare(output, want, model.dali), model.dali)


def test_the_config_is_the_dali_backends(tmp_path):
    from deployment_spec.builds.manifest import TensorSpec
    from model_build import model_config

    model = _model()
    config = model_config.build_config(
        model, name="preprocess", inputs=[TensorSpec("DALI_INPUT_0", "TYPE_UINT8", (-1,))],
        outputs=[TensorSpec("DALI_OUTPUT_0", "TYPE_FP32", model.dali.output_dims())], triton_version="26.05",
        parameters={"num_threads": "4"})
    # Golden file: backend "dali", encoded bytes in, 3x224x224 float out, dynamic batching, num_threads.
    golden = pathlib.Path(__file__).parent / "golden" / "dali.pbtxt"
    assert model_config.render(config) == golden.read_text()
    assert dataclasses.replace(model, max_batch_size=32).max_batch_size == config.max_batch_size

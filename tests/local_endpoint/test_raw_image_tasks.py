"""Image bytes in, labels out: tiny checkpoints with their own image processors (ViT: fixed resize, bilinear;
ConvNeXT: shortest edge / crop_pct, centre crop, bicubic), built as ``task:`` ensembles, verified at build time
against transformers' pipeline on raw images (sizes, modes, formats, a rotated JPEG), then served by the real
Triton server and compared with the pipeline again.

Also: a planted wrong resize rule and a planted wrong mean fail the build-time check, and bad images get a 400
naming IMAGE while the server goes on answering.
"""
from __future__ import annotations

import concurrent.futures
import io
import json
import pathlib

import numpy as np
import pytest

from deployment_spec import load_spec
from local_endpoint.client.invoke import invoke_url
from local_endpoint.client.payload import NamedTensor, encode_request
from local_endpoint.errors import InvokeError
from model_build import layout
from model_build.backends.ensemble import image_check, image_samples, task_check, task_reference
from model_build.errors import BuildError
from benchmarks.tooling import image_checkpoints
from tritonsm.cli import main as tritonsm_main

import shipped_env  # tests/local_endpoint is on sys.path (conftest.py)
import task_fixtures

pytestmark = pytest.mark.triton

MAX_BYTES = 200_000  # below the 455 kB portrait PNG of image_samples: the limit is exercised on the server
SPEC = f"""\
project: Images
triton_version: "25.09"
models:
  pets:
    task: {{kind: image-classification, top_k: 3, max_image_bytes: {MAX_BYTES}, max_image_pixels: 1000000}}
    backend: onnxruntime
    weights: pets-vit
    max_batch_size: 8
    dynamic_batching: {{max_queue_delay_us: 500}}
  birds:
    task: {{kind: image-classification}}
    backend: pytorch
    weights: birds-convnext
    max_batch_size: 4
  boxes:
    task: {{kind: object-detection, threshold: 0.2}}
    backend: onnxruntime
    weights: boxes-detr
    max_batch_size: 4
  search:
    task: {{kind: image-embedding, normalize: true}}
    backend: onnxruntime
    weights: search-clip
    max_batch_size: 8
endpoints:
  images:
    kind: multi-model
    models: [pets, birds, boxes, search]
    instance_type: ml.g5.xlarge
environments:
  dev: {{region: us-east-1}}
"""
CHECKPOINTS = {"pets-vit": "vit", "birds-convnext": "convnext", "boxes-detr": "detr", "search-clip": "clip"}
MODELS = ("pets", "birds", "boxes", "search")
# pets refuses files over MAX_BYTES: the build checks it on the 8 raw images within its limits.
IMAGES_CHECKED = {"pets": 8, "birds": 9, "boxes": 9, "search": 9}
RUNTIME_NAME = "Images-dev-images"


@pytest.fixture(scope="module")
def built(module_tmp) -> task_fixtures.Built:
    def save(root: pathlib.Path) -> None:
        for folder, family in CHECKPOINTS.items():
            image_checkpoints.save(root / folder, family)
    return task_fixtures.build(module_tmp.mktemp("raw-images"), SPEC, "images", save)


@pytest.fixture(scope="module")
def runtime(built, module_tmp):
    with task_fixtures.served(built, MODELS, RUNTIME_NAME, module_tmp.mktemp("logs")) as served:
        yield served


@pytest.fixture(scope="module")
def served(runtime):
    return runtime.endpoints[0].server


_chain = task_fixtures.chain


def test_the_build_verifies_each_image_task_against_the_pipeline(built):
    models = built.manifest().models
    for name, processor in (("pets", "ViTImageProcessorPil"), ("birds", "ConvNextImageProcessorPil")):
        check = models[name].verification
        assert check.ran and check.details["reference"] == (
            f"transformers 5.23.0 pipeline('image-classification') ({processor})"), name
        assert check.details["processor"] == processor and check.cases == IMAGES_CHECKED[name]
        assert check.max_abs_error < 1e-5, (name, check.max_abs_error)
    assert models["pets"].verification.runtime == "onnxruntime" and models["birds"].verification.runtime == "torch"
    assert [(t.name, t.data_type, t.dims) for t in models["pets"].inputs] == [("IMAGE", "TYPE_STRING", (1,))]
    assert [(t.name, t.dims) for t in models["pets"].outputs] == [("labels", (3,)), ("scores", (3,)), ("options", (1,))]
    assert [t.dims for t in models["birds-model"].inputs] == [(3, 32, 32)]
    # The detector keeps each image's aspect ratio: any pixel size, boxes in the image's own pixels.
    boxes = models["boxes"].verification
    assert boxes.ran and boxes.cases == 18 and boxes.max_abs_error < 1e-5  # 9 images at threshold 0.2 and at 0
    assert boxes.details["reference"] == "transformers 5.23.0 pipeline('object-detection') (DetrImageProcessorPil)"
    assert [(t.name, t.dims) for t in models["boxes-model"].inputs] == [("pixel_values", (3, -1, -1))]
    assert [(t.name, t.dims) for t in models["boxes"].outputs] == [("detections", (1,)), ("options", (1,))]


def test_the_check_passes_on_the_built_steps(built, tmp_path):
    # The twin of the planted defects below: the same call on the untouched copies finds nothing.
    assert image_check.check(_chain(built, "pets", tmp_path), tmp_path, print).ran


def _plant(chain: task_check.Chain, **changes) -> None:
    path = layout.version_dir(chain.dirs[0]) / "preprocessor_config.json"
    config = json.loads(path.read_text())
    path.write_text(json.dumps({**config, **changes}))


@pytest.mark.parametrize("name, changes, rows", [
    # The checkpoint resizes bilinearly to 32x32; nearest-neighbour gives other pixels on every image.
    ("pets", {"resample": 0}, 8),
    # ConvNeXT resizes the shortest edge to 32 / 0.875 and crops; resizing straight to 32 keeps more of the image.
    ("birds", {"crop_pct": 1.0}, 9),
    ("pets", {"image_mean": [0.485, 0.456, 0.406]}, 8),
    # The detector's processor resizes the shortest edge to 48 pixels (the longest at most 80); 40 gives every image
    # but the portrait (held by its longest edge) another size: 8 images at two thresholds.
    ("boxes", {"size": {"shortest_edge": 40, "longest_edge": 80}}, 16),
])
def test_a_planted_preprocessing_defect_fails_the_check(built, tmp_path, name, changes, rows):
    chain = _chain(built, name, tmp_path)
    _plant(chain, **changes)
    with pytest.raises(BuildError) as caught:
        image_check.check(chain, tmp_path, print)
    processor = {"pets": "ViTImageProcessorPil", "birds": "ConvNextImageProcessorPil",
                 "boxes": "DetrImageProcessorPil"}[name]
    kind, total, what = (("object-detection", 18, "answers") if name == "boxes" else
                         ("image-classification", IMAGES_CHECKED[name], "images"))
    first = "RGB JPEG 640x480, threshold 0.2" if name == "boxes" else "RGB JPEG 640x480"
    assert str(caught.value).startswith(
        f"model {name}: raw images through its steps do not answer as transformers 5.23.0 "
        f"pipeline('{kind}') ({processor}) on {rows} of {total} {what}: row 0 ({first}): pixel_values "
        + ("shape [3, 40, 53], the pipeline's [3, 48, 64]" if name == "boxes" else
           "differ from the pipeline's by up to ")), str(caught.value)
    assert str(caught.value).endswith(image_check.PIXELS_DIFFER)


def _send(served, model: str, images: list[bytes], binary: bool = True, parameters=None):
    tensors = [NamedTensor("IMAGE", "BYTES", np.array([[i] for i in images], dtype=np.object_))]
    return invoke_url(served.url, encode_request(tensors, binary=binary, parameters=parameters),
                      target_model=f"{model}.tar.gz")


def _target(built, model):
    return built.target(model)


def test_the_served_ensembles_answer_as_the_pipeline(built, served, tmp_path):
    samples = image_samples.images()
    small = [s for s in samples if len(s.data) <= MAX_BYTES]  # pets refuses larger files by its spec
    for name, sent in (("pets", small), ("birds", samples)):
        ours = []
        for start in range(0, len(sent), 4):  # requests of at most max_batch_size rows (birds: 4)
            response = _send(served, _target(built, name), [s.data for s in sent[start:start + 4]])
            ours += task_check.label_rows({o.name: o.array for o in response.outputs})
        _, theirs, _ = image_check.reference(_chain(built, name, tmp_path / name), sent)
        task = load_spec(built.spec_path).models[name].task
        worst, problems = task_reference.compare(task, ours, theirs, 1e-5)
        assert problems == [] and worst < 1e-5, (name, problems, worst)
        assert all(len(row) == task.top_k for row in ours)


def test_the_served_detector_answers_as_the_pipeline(built, served, tmp_path):
    samples = image_samples.images()
    spec = load_spec(built.spec_path)
    ours = []
    for sample in samples:  # one image per request: each keeps its aspect ratio
        response = _send(served, _target(built, "boxes"), [sample.data])
        ours.append(json.loads({o.name: o.array for o in response.outputs}["detections"][0][0]))
    _, theirs, _ = image_check.reference(_chain(built, "boxes", tmp_path), samples)
    worst, problems = task_reference.compare(spec.models["boxes"].task, ours, theirs[:len(samples)], 1e-5)
    assert problems == [] and worst < 1e-5, (problems, worst)
    # The tiny random detector still finds something: boxes inside the image, labels of the checkpoint.
    found = [d for row in ours for d in row]
    assert found and {d["label"] for d in found} <= set(image_checkpoints.LABELS) | {"N/A"}


def test_a_request_sets_the_detectors_threshold_as_the_pipelines_threshold_argument(built, served, tmp_path):
    samples = image_samples.images()
    boxes = _target(built, "boxes")
    _, theirs, _ = image_check.reference(_chain(built, "boxes", tmp_path), samples)
    at_zero = theirs[len(samples):]  # the reference answers at the spec's threshold, then at LOW_THRESHOLD (0)
    task = load_spec(built.spec_path).models["boxes"].task
    ours = []
    for sample, sent in zip(samples, [0, "0", 0.0] * len(samples)):
        # the parameter as a number or as text (clients whose parameters are all text)
        response = _send(served, boxes, [sample.data], parameters={"threshold": sent})
        ours.append(json.loads({o.name: o.array for o in response.outputs}["detections"][0][0]))
    worst, problems = task_reference.compare(task, ours, at_zero, 1e-5)
    assert problems == [] and worst < 1e-5, (problems, worst)
    # A higher threshold keeps DETR's detections scored above it, in the same order (the pipeline's rule).
    scores = sorted(d["score"] for row in ours for d in row)
    high = round(scores[len(scores) // 2], 2)
    for sample, at_zero_row in zip(samples[:3], ours):
        response = _send(served, boxes, [sample.data], parameters={"threshold": high})
        kept = json.loads({o.name: o.array for o in response.outputs}["detections"][0][0])
        assert kept == [d for d in at_zero_row if d["score"] > high]
    assert 0 < sum(d["score"] > high for row in ours for d in row) < len(scores)
    with pytest.raises(InvokeError) as caught:
        _send(served, boxes, [samples[0].data], parameters={"threshold": 1.5})
    assert ("the endpoint rejected the request (HTTP 400): " in str(caught.value) and
            "request parameter 'threshold' is 1.5; allowed: a number from 0 to 1, the lowest score a detection is "
            f"answered with (this model's default: {task.threshold:g}); send e.g. \"parameters\": "
            "{\"threshold\": 0.3} beside \"inputs\"" in str(caught.value)), str(caught.value)


def test_the_served_embedder_answers_as_clip_does(built, served, tmp_path):
    check = built.manifest().models["search"].verification
    assert check.details["reference"] == ("transformers 5.23.0 CLIPModel.get_image_features (CLIPImageProcessorPil), "
                                          "L2-normalised") and check.max_abs_error < 1e-6
    samples = image_samples.images()
    ours = []
    for start in range(0, len(samples), 8):  # requests of at most max_batch_size rows
        response = _send(served, _target(built, "search"), [s.data for s in samples[start:start + 8]])
        ours += list({o.name: o.array for o in response.outputs}["image_embedding"])
    _, theirs, _ = image_check.reference(_chain(built, "search", tmp_path), samples)
    worst, problems = task_reference.compare(load_spec(built.spec_path).models["search"].task, ours, theirs, 1e-5)
    assert problems == [] and worst < 1e-6, (problems, worst)
    assert [len(v) for v in ours] == [16] * len(samples)  # CLIP's projection, not the tower's 32
    assert np.allclose([np.linalg.norm(v) for v in ours], 1.0, atol=1e-5)


def _encoded(fmt: str, size=(64, 48), **options) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", size, (200, 30, 90)).save(out, format=fmt, **options)
    return out.getvalue()


def test_bad_images_are_400s_naming_the_input_and_the_server_goes_on(built, served):
    pets = _target(built, "pets")
    jpeg = _encoded("JPEG")
    portrait = image_samples.images()[1].data
    photo = image_samples.images()[0].data  # a header that opens, pixel data cut short
    big = _encoded("PNG", size=(1001, 1000))
    prefix = f"in ensemble '{pets}.tar.gz', "
    bad = {
        (b"",): "IMAGE row 0 is empty (0 bytes); send the encoded image file (JPEG, PNG, WEBP)",
        (jpeg, b"not an image at all"): "IMAGE row 1 is not an image file (first bytes b'not an i'); allowed: "
                                        "JPEG, PNG, WEBP files, sent as their bytes",
        (_encoded("GIF"),): "IMAGE row 0 is a GIF image; allowed: JPEG, PNG, WEBP; convert it to one of them before "
                            "sending",
        (portrait,): f"IMAGE row 0 is {len(portrait)} bytes; at most {MAX_BYTES} bytes are allowed "
                     "(task.max_image_bytes); send a smaller image",
        (big,): "IMAGE row 0 is 1001x1000 (1001000 pixels); at most 1000000 pixels are allowed "
                "(task.max_image_pixels); downscale it",
        (jpeg[: len(jpeg) // 2],): "IMAGE row 0: the JPEG data is cut short or corrupt (Pillow cannot read its "
                                   "header); send the whole file",
        (photo[: len(photo) - 4000],): "IMAGE row 0: the JPEG data is cut short or corrupt (image file is truncated "
                                       "(",
    }
    good = (jpeg,)

    def send(images):
        try:
            return _send(served, pets, list(images))
        except InvokeError as error:
            return str(error)

    cases = list(bad) + [good] * 6
    boxes = _target(built, "boxes")
    portrait = image_samples.images()[1].data
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(send, cases))
    for case, answer in zip(cases, answers):
        if case in bad:
            assert isinstance(answer, str) and answer.startswith("the endpoint rejected the request (HTTP 400): "), answer
            assert prefix + bad[case] in answer, (bad[case], answer)
        else:
            assert sorted(o.name for o in answer.outputs) == ["labels", "options", "scores"]
    assert _send(served, pets, list(good)).outputs  # still answering afterwards
    # A detector keeps each image's aspect ratio: two images of other shapes in one request are refused.
    with pytest.raises(InvokeError) as caught:
        _send(served, boxes, [jpeg, portrait])
    assert (f"in ensemble '{boxes}.tar.gz', IMAGE: the images of one request give pixel tensors of 2 sizes (48x64, "
            "80x40); this model takes images of one size per request (padding would move its boxes); send one image "
            "per request") in str(caught.value)


def test_the_sagemaker_runtime_api_and_the_cli_take_image_bytes(built, runtime, tmp_path, capsys):
    # What an application's boto3 code sends: binary+json, the image's bytes after the JSON header.
    import boto3

    image = image_samples.images()[0].data
    body = encode_request([NamedTensor("IMAGE", "BYTES", np.array([[image]], dtype=np.object_))], binary=True)
    client = boto3.client("sagemaker-runtime", endpoint_url=runtime.url, region_name="us-east-1",
                          aws_access_key_id="local", aws_secret_access_key="local")
    reply = client.invoke_endpoint(EndpointName=RUNTIME_NAME, TargetModel=built.tarball("pets").name,
                                   ContentType=body.content_type, Body=body.body)
    assert reply["ContentType"].startswith("application/vnd.sagemaker-triton.binary+json") or \
        reply["ContentType"] == "application/json"
    _, theirs, _ = image_check.reference(_chain(built, "pets", tmp_path), [image_samples.images()[0]])
    # `tritonsm invoke --image FILE` sends the same and prints the answer per row.
    path = tmp_path / "photo.jpg"
    path.write_bytes(image)
    assert tritonsm_main(["invoke", "--url", runtime.url, "--target-model", built.tarball("pets").name,
                          "--image", str(path)]) == 0
    printed = capsys.readouterr().out
    best = theirs[0][0]
    assert f"row 0: {best['label']} {best['score']:.4f}" in printed, printed


def test_smoke_sends_each_task_model_a_file_of_its_kind(built, runtime, capsys):
    # One request per model of the endpoint, each a real encoded file (a JPEG, a WAV at the model's rate).
    assert tritonsm_main(["smoke", "images", "--spec", str(built.spec_path), "--manifest",
                          str(built.root / "assets" / "manifest.json"), "--url", runtime.url]) == 0, \
        capsys.readouterr().out


def test_the_shipped_environment_preprocesses_as_the_build_did(built, tmp_path):
    # The preprocessing step's own code in the environment that ships (transformers, Pillow and numpy wheels for
    # the image's CPython 3.12), on the raw images: the same pixels as the build's check computed.
    python = shipped_env.interpreter("python3.12")
    if python is None:
        pytest.skip("no python3.12 here: the shipped environment is built for the Triton 25.09 image's CPython 3.12")
    chain = _chain(built, "birds", tmp_path)
    params = task_check.step_parameters(chain.dirs[0])
    rows = np.array([s.data for s in image_samples.images()], dtype=np.object_)
    shipped = shipped_env.run_preprocess(chain.dirs[0], python, "pixels", rows, params)
    here = task_check.step_module(chain.dirs[0], "preprocess").Preprocess(
        str(layout.version_dir(chain.dirs[0])), params).pixels(rows)
    assert shipped["python"].startswith("3.12.") and all("/env/lib/python3.12/site-packages/" in f
                                                          for f in shipped["site"])
    assert shipped["made"].shape == here.shape and np.abs(shipped["made"] - here).max() <= 1e-6

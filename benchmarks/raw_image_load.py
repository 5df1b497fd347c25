"""What serving image bytes costs: an image-classification ensemble fed a JPEG against its model step fed the
very ``pixel_values`` the ensemble's preprocess step makes of that JPEG.

    .venv/bin/python benchmarks/raw_image_load.py [--concurrency 1,4,16] [--phase-seconds 8] [--repeats 3]

The model is ResNet-50 sized: transformers' ``ResNetConfig()`` defaults (ResNet-50: bottleneck blocks, depths
3-4-6-3, 25.6 M parameters), ``ResNetForImageClassification`` with 1000 labels and random weights (seed 0, saved
once under ``--work``: speed only, the answers mean nothing), with the image processor microsoft/resnet-50 ships
(``ConvNextImageProcessorPil``: shortest edge resized to 224 / 0.875 = 256, bicubic, centre crop 224x224,
rescale, ImageNet mean and std). ``tritonsm build`` makes the task ensemble (``classify-preprocess``: Pillow
decode and the processor's PIL backend in a Python step; ``classify-model``: the ONNX export; ``classify-answer``:
softmax, labels, top-k), verified at build time as any image task is.

Compared, as benchmarks/raw_text_load.py compares raw text with token ids: two single-model endpoints on the real
Triton server, up at once (ONNX Runtime of the 25.09 image as the labelled CPU stand-in), max_batch_size 16,
dynamic batching with a 1 ms queue delay:

- ``jpeg``: the ensemble, sent one photo-like RGB JPEG of 640x480 per request (``image_samples``' first image,
  quality 90), as applications send them;
- ``pixels``: its model step alone, sent the FP32 [1, 3, 224, 224] tensor the built preprocess step's own
  ``model.py`` (``Preprocess(folder, params).pixels(rows)``) makes of that JPEG.

Phases at each concurrency (1, 4, 16 by default), the two taking turns in a rotated order, ``--repeats`` rounds
(tritonsm/benchmarking/paired_endpoints.py); the ratio of throughputs (jpeg / pixels) is paired per round.
Triton's own counters give each step's average batch, queue and compute time.

Writes benchmarks/raw_image_load.json and .md. The numbers are this machine's CPU (ResNet-50's convolutions on a
few cores dominate both sides); a GPU figure, where the model step is far faster and the CPU preprocessing
weighs more, is for a GPU host.

The command line, spec, build, tarballs, the built first step and the written results:
tritonsm/benchmarking/raw_input_load.py, shared with benchmarks/raw_text_load.py.
"""
from __future__ import annotations

import os
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from local_endpoint import encode_request  # noqa: E402
from local_endpoint.client.payload import NamedTensor  # noqa: E402
from tritonsm.benchmarking import paired_endpoints, raw_input_load  # noqa: E402
from tritonsm.benchmarking.load_phases import PhasePlan  # noqa: E402

TRITON_VERSION = "25.09"
NUM_LABELS = 1000
SIDES = ("jpeg", "pixels")  # the summary's keys: the candidate (the ensemble), the baseline (its model step)


def classifier(work: pathlib.Path) -> pathlib.Path:
    """ResNet-50 (ResNetConfig() defaults) with random weights (seed 0) and microsoft/resnet-50's image processor,
    saved once, so every build and run serves the same weights."""
    def save(folder: pathlib.Path) -> None:
        import transformers

        net = transformers.ResNetForImageClassification(transformers.ResNetConfig(num_labels=NUM_LABELS))
        net.save_pretrained(folder)
        # microsoft/resnet-50's preprocessor_config.json: shortest edge 224, crop_pct 0.875, bicubic (resample 3),
        # ImageNet mean and std (transformers' ConvNeXT default mean and std are 0.5: given here as shipped).
        transformers.ConvNextImageProcessorPil(size={"shortest_edge": 224}, crop_pct=0.875, resample=3,
                                               image_mean=[0.485, 0.456, 0.406],
                                               image_std=[0.229, 0.224, 0.225]).save_pretrained(folder)

    return raw_input_load.saved_once(work / "resnet50-random", save)


def spec(work: pathlib.Path) -> str:
    """The classifier: its image ensemble and its model step, each an endpoint."""
    return raw_input_load.spec({"classify": raw_input_load.task_model("image-classification", classifier(work), 16)},
                               {"jpeg": "classify", "pixels": "classify-model"}, TRITON_VERSION)


def photo() -> tuple[str, bytes]:
    """The photo-like JPEG the build verifies image tasks on first (smooth gradients, seeded noise, 640x480)."""
    from model_build.backends.ensemble import image_samples

    first = image_samples.images()[0]
    return first.what, first.data


def pixel_values(work: pathlib.Path, manifest: dict, jpeg: bytes) -> np.ndarray:
    """The preprocess step's own pixel tensor for ``jpeg``: what the model step gets inside the ensemble."""
    module, params, step = raw_input_load.built_step(work, manifest, "classify-preprocess")
    pixels: np.ndarray = module.Preprocess(str(step), params).pixels(np.array([jpeg], dtype=np.object_))
    return pixels


def load_comparison(work: pathlib.Path, manifest: dict, plan: PhasePlan, repeats: int, jpeg: bytes) -> dict:
    pixels = pixel_values(work, manifest, jpeg)
    (name,) = [t["name"] for t in manifest["models"]["classify-model"]["inputs"]]
    requests = {"jpeg": encode_request([NamedTensor("IMAGE", "BYTES", np.array([[jpeg]], dtype=np.object_))],
                                       binary=True),
                "pixels": encode_request([NamedTensor(name, "FP32", pixels)], binary=True)}
    result = paired_endpoints.compare(
        {"JPEG bytes": (*raw_input_load.tarball(work, manifest, "jpeg"), requests["jpeg"]),
         "pixel_values": (*raw_input_load.tarball(work, manifest, "pixels"), requests["pixels"])},
                                      plan, repeats, keys=SIDES, triton_version=TRITON_VERSION)
    result["request_bytes"] = {side: len(requests[side].body) for side in SIDES}
    result["pixel_values_shape"] = list(pixels.shape)
    return result


def markdown(result: dict) -> str:
    from deployment_spec.facts import serving_runtimes

    ort = serving_runtimes.runtime(TRITON_VERSION).onnxruntime
    c = result["classification"]
    lines = ["# Image bytes in: what the preprocess and answer steps cost (`benchmarks/raw_image_load.py`)", "",
             f"{result['machine']}; ResNet-50 (transformers `ResNetConfig()` defaults, random weights, 1000 labels), "
             f"ONNX Runtime {ort} (Triton {TRITON_VERSION}'s) as the CPU stand-in; the image processor "
             "microsoft/resnet-50 ships (`ConvNextImageProcessorPil`: shortest edge 224, crop_pct 0.875, bicubic, "
             f"ImageNet mean/std); one {result['image']} per request ({c['request_bytes']['jpeg']} bytes sent) against "
             f"the preprocess step's own pixel_values {c['pixel_values_shape']} FP32 ({c['request_bytes']['pixels']} "
             f"bytes sent) to the model step; max_batch_size 16, 1 ms queue delay; {result['repeats']} interleaved "
             f"rounds of {result['phase_seconds']:g} s phases. This machine's CPU, not a GPU instance's.", "",
             "| users | JPEG req/s | pixel_values req/s | ratio (paired) | quieter half | JPEG p99 ms | pixels p99 ms |"
             " errors |", "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in c["per_concurrency"]:
        lines.append(f"| {row['concurrency']} | {row['jpeg_rps']:.1f} | {row['pixels_rps']:.1f} | "
                     f"{row['ratio_paired']:.2f} | {row['ratio_quieter_half']:.2f} | {row['jpeg_p99_ms']:.1f} | "
                     f"{row['pixels_p99_ms']:.1f} | {row['errors']} |")
    lines += ["", "Where the time goes (Triton's counters, the median round's phase, per request):", "",
              "| users | input | step | avg batch | queue ms | compute ms |", "|---:|---|---|---:|---:|---:|"]
    for row in c["per_concurrency"]:
        for label, key in (("JPEG", "steps_jpeg"), ("pixel_values", "steps_pixels")):
            for step, fig in sorted((row[key] or {}).items()):
                lines.append(f"| {row['concurrency']} | {label} | {step} | {fig['average_batch']:.2f} | "
                             f"{fig['queue_ms']:.2f} | {fig['compute_ms']:.2f} |")
    lines += ["", f"Wall time {result['wall_s'] / 60:.1f} min, of which the build (or finding it built) "
              f"{result['build_s'] / 60:.1f} min.", ""]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    from tritonsm.cli import main as tritonsm_main

    args, plan = raw_input_load.arguments(__doc__.splitlines()[0], "raw_image_load", argv)
    started = time.monotonic()
    manifest = raw_input_load.build(args.work, spec(args.work), tritonsm_main)
    built = time.monotonic()
    what, jpeg = photo()
    result = {"machine": f"{os.cpu_count()} cores", "repeats": args.repeats, "phase_seconds": args.phase_seconds,
              "image": what, "classification": load_comparison(args.work, manifest, plan, args.repeats, jpeg),
              "build_s": round(built - started, 1)}
    result["wall_s"] = round(time.monotonic() - started, 1)
    raw_input_load.write("raw_image_load", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

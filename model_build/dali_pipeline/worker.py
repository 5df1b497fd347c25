"""Serializes and runs a DALI image pipeline in one DALI release; executed inside a side environment.

    python -S -E worker.py SITE_DIR serialize REQUEST.json
    python -S -E worker.py SITE_DIR run REQUEST.json

Standard library, numpy and DALI only (no project code): with ``-S`` the build's own site-packages
are not on the path, so ``import nvidia.dali`` finds the pinned release in SITE_DIR (model_build/
verification/side_env.py). The local CPU stand-in copies this file next to its model.py and uses
``CpuPipeline`` from it, so the build's check and the local endpoint run the same code.

serialize: ``{"pipeline": <DaliPipeline as plain data>, "placement": "gpu" | "cpu", "max_batch_size": N,
"out": FILE}`` writes the serialized pipeline to FILE. ``gpu`` decodes with the ``mixed`` decoder
(nvJPEG) and resizes and normalises on the GPU, as the dali backend runs it on a GPU instance.

run: ``{"model": FILE, "images": [JPEG files], "max_batch_size": N, "num_threads": N, "out": NPZ}`` runs a
CPU-placed ``model.dali`` on the images, padded with zeros to one length and fed as one batch as
Triton feeds a dynamic batch (dali_backend README, "Known limitations"), and writes ``NPZ``
(``image<i>`` -> output array).
"""
import json
import sys


def main(argv):
    site_dir, command, request_file = argv
    sys.path.insert(0, site_dir)
    with open(request_file) as fh:
        request = json.load(fh)
    if command == "serialize":
        data = serialize(request["pipeline"], request["placement"], request["max_batch_size"])
        with open(request["out"], "wb") as fh:
            fh.write(data)
        return 0
    import numpy as np

    images = []
    for path in request["images"]:
        with open(path, "rb") as fh:
            images.append(np.frombuffer(fh.read(), dtype=np.uint8))
    with open(request["model"], "rb") as fh:
        pipeline = CpuPipeline(fh.read(), request["max_batch_size"], request["num_threads"])
    outputs = pipeline.run([pad(images)])[0]
    np.savez(request["out"], **{f"image{i}": array for i, array in enumerate(outputs)})
    return 0


def serialize(settings, placement, max_batch_size):
    """The pipeline's protobuf bytes, the same for the same settings and DALI release."""
    import nvidia.dali as dali
    import nvidia.dali.fn as fn
    import nvidia.dali.types as types

    try:  # DALI >= 1.4x records the Python call stack of every operator: paths of this checkout, not content.
        from nvidia.dali._utils import dali_trace
        dali_trace.set_tracing(enabled=False)
    except ImportError:
        pass
    gpu = placement == "gpu"
    resize = settings["resize"]
    interpolation = {"linear": types.INTERP_LINEAR, "cubic": types.INTERP_CUBIC,
                     "lanczos": types.INTERP_LANCZOS3}[resize["interpolation"]]
    size = ({"resize_shorter": float(resize["shorter"])} if resize.get("shorter")
            else {"resize_x": float(resize["width"]), "resize_y": float(resize["height"])})
    out_type = {"fp32": types.FLOAT, "fp16": types.FLOAT16}[settings["dtype"]]
    crop = [float(v) for v in settings["crop"]]

    # device_id=None: a DALI 2.x pipeline serializes GPU operators without a GPU; the dali backend
    # sets the device of each model instance when it loads the file.
    @dali.pipeline_def(batch_size=max_batch_size, num_threads=settings["num_threads"], device_id=None,
                       output_dtype=[out_type], output_ndim=[3])
    def image_pipeline():
        encoded = fn.external_source(name="DALI_INPUT_0", device="cpu", dtype=types.UINT8, ndim=1)
        images = fn.decoders.image(encoded, device="mixed" if gpu else "cpu",
                                   output_type={"rgb": types.RGB, "bgr": types.BGR}[settings["color"]])
        sizes, where = size, {}
        if settings.get("sizes", "dali") == "transformers":
            sizes, where = transformers_sizes(encoded, resize, crop)
        images = fn.resize(images, device="gpu" if gpu else "cpu", interp_type=interpolation, **sizes)
        return fn.crop_mirror_normalize(
            images, device="gpu" if gpu else "cpu", crop=crop,
            mean=[float(v) for v in settings["mean"]], std=[float(v) for v in settings["std"]],
            output_layout="CHW" if settings["layout"] == "nchw" else "HWC", dtype=out_type, **where)

    return image_pipeline().serialize()


def transformers_sizes(encoded, resize, crop):
    """(fn.resize's size arguments, fn.crop_mirror_normalize's crop position arguments) per image, rounded as a
    transformers image processor rounds them (deployment_spec.sections.dali.SizeRule.TRANSFORMERS): the longer side
    ``floor(shorter_size * long / short)``, the crop offset ``floor((size - crop) / 2)``.

    Computed from the encoded bytes' shape (fn.peek_image_shape, on the CPU: argument inputs must be CPU data in
    either placement), which is the decoded shape: fn.decoders.image disregards EXIF orientation, as this does.
    In float32, exact: the products are integers below 2**24, and a quotient that is not an integer is at least
    1/short away from one, far more than float32's rounding."""
    import nvidia.dali.fn as fn
    import nvidia.dali.math as math
    import nvidia.dali.types as types

    if not resize.get("shorter"):  # one size for every image: the offsets are plain numbers
        out_h, out_w = float(resize["height"]), float(resize["width"])
        spare_h, spare_w = out_h - crop[0], out_w - crop[1]
        return ({"resize_x": out_w, "resize_y": out_h},
                {"crop_pos_x": (spare_w // 2) / max(spare_w, 1.0), "crop_pos_y": (spare_h // 2) / max(spare_h, 1.0)})
    shape = fn.peek_image_shape(encoded, dtype=types.FLOAT)
    height, width = shape[0], shape[1]
    target = float(resize["shorter"])
    short = math.min(height, width)
    out_h, out_w = math.floor(target * height / short), math.floor(target * width / short)

    # DALI places the crop at round(pos * (size - crop)) (halves up); pos = floor(spare / 2) / spare lands on
    # transformers' integer offset (max(spare, 1): no spare, no offset).
    def position(size, wanted):
        spare = size - wanted
        return math.floor(spare * 0.5) / math.max(spare, 1.0)

    return ({"resize_x": out_w, "resize_y": out_h},
            {"crop_pos_x": position(out_w, crop[1]), "crop_pos_y": position(out_h, crop[0])})


class CpuPipeline:
    """A CPU-placed serialized pipeline, run batch by batch: ``run([encoded, ...])`` -> per-output arrays."""

    def __init__(self, serialized, max_batch_size, num_threads):
        import nvidia.dali as dali
        import nvidia.dali.types as types

        self.version = dali.__version__
        # 1.x marks a CPU-only pipeline with CPU_ONLY_DEVICE_ID; 2.x with None.
        device = getattr(types, "CPU_ONLY_DEVICE_ID", None) if self.version.startswith("1.") else None
        # Synchronous, no prefetching: one request batch in, its outputs out (1.x would otherwise wait
        # for a second batch to fill its prefetch queue).
        self.pipeline = dali.Pipeline.deserialize(serialized_pipeline=serialized, batch_size=max_batch_size,
                                                  num_threads=num_threads, device_id=device, prefetch_queue_depth=1,
                                                  exec_pipelined=False, exec_async=False)
        self.pipeline.build()

    def run(self, inputs):
        import numpy as np

        self.pipeline.feed_input("DALI_INPUT_0", list(inputs[0]))
        return [[np.array(sample) for sample in output] for output in self.pipeline.run()]


def pad(encoded):
    """One zero-padded [batch, length] array: Triton batches only equal shapes; decoders ignore the tail."""
    import numpy as np

    out = np.zeros((len(encoded), max(len(e) for e in encoded)), dtype=np.uint8)
    for row, data in enumerate(encoded):
        out[row, :len(data)] = data
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

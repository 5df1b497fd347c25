"""Triton Python-backend model: encoded image bytes -> the ``pixel_values`` of the checkpoint's own image processor.

The first step of an image ``task:`` ensemble (deployment_spec/sections/tasks.py). ``preprocessor_config.json`` sits next
to this file and is loaded by transformers' ``AutoImageProcessor`` on its PIL backend (numpy and Pillow: no
torch in the execution environment): resize with the processor's rule and resampling, centre crop, rescale,
normalise, exactly as ``pipeline("image-classification")`` runs them. Before it, each image is decoded as the
pipeline's ``transformers.image_utils.load_image`` does: ``PIL.ImageOps.exif_transpose`` (a phone's rotated
JPEG), then ``convert("RGB")`` (grayscale, palette, RGBA: alpha dropped, not composited).

config.pbtxt parameters: ``max_image_bytes``, ``max_image_pixels``, ``formats`` (Pillow format names, comma
separated) and ``processor_class`` (the class the build verified with; the step refuses to start on another).

Input ``IMAGE``, BYTES, one encoded file per row. Outputs ``pixel_values`` [rows, channels, height, width] FP32
(each image through the processor on its own, as the pipeline runs it) and, for detectors, ``image_size``
[rows, 2] INT64 (height, width of the upright image: boxes are answered in its pixels). The images of one
request must give one pixel size (a detector's processor keeps each image's aspect ratio): else a 400 says to
send one image per request; padding them to one size would move the boxes.
A bad row (empty, corrupt or cut short, a format not allowed, too many bytes or pixels) fails its own request
with a 400 naming IMAGE and the row; the other requests of the batch are answered.
"""
import io
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # step_requests.py ships beside this file
from step_requests import RequestError, answer_requests  # noqa: E402

import numpy as np

try:  # absent when the build imports this file to verify the ensemble (model_build/backends/ensemble)
    import triton_python_backend_utils as pb_utils
except ImportError:
    pb_utils = None

INPUT = "IMAGE"


class Preprocess:
    """Decoding and the checkpoint's image processor with the parameters of config.pbtxt; no Triton types."""

    def __init__(self, folder, params):
        from PIL import Image
        from transformers import AutoImageProcessor

        self.processor = AutoImageProcessor.from_pretrained(folder, local_files_only=True, backend="pil")
        found = type(self.processor).__name__
        if found != params["processor_class"]:
            raise RuntimeError(f"the image processor loaded as {found}, the build verified "
                               f"{params['processor_class']}: rebuild the model with the same transformers")
        self.max_bytes = int(params["max_image_bytes"])
        self.max_pixels = int(params["max_image_pixels"])
        self.formats = tuple(params["formats"].split(","))
        # The pixel limit is ours (max_image_pixels), checked from the header before anything is decoded.
        Image.MAX_IMAGE_PIXELS = None

    def pixels(self, rows):
        """BYTES rows -> pixel_values [rows, C, H, W] float32; RequestError naming the first bad row."""
        return self.tensors(rows)["pixel_values"]

    def tensors(self, rows):
        """BYTES rows -> {"pixel_values": [rows, C, H, W] float32, "image_size": [rows, 2] int64 (height, width
        of each image as decoded and turned upright)}; RequestError naming the first bad row."""
        images = [self.decode(value, row) for row, value in enumerate(rows)]
        made = [np.asarray(self.processor(images=[image], return_tensors="np")["pixel_values"], dtype=np.float32)
                for image in images]
        shapes = sorted({m.shape[1:] for m in made})
        if len(shapes) > 1:  # a processor that keeps each image's aspect ratio (detectors)
            raise RequestError(f"{INPUT}: the images of one request give pixel tensors of {len(shapes)} sizes "
                               f"({', '.join('x'.join(str(d) for d in s[1:]) for s in shapes)}); this model takes "
                               "images of one size per request (padding would move its boxes); send one image per "
                               "request")
        return {"pixel_values": np.concatenate(made),
                "image_size": np.array([[image.height, image.width] for image in images], dtype=np.int64)}

    def decode(self, value, row):
        from PIL import Image, ImageOps, UnidentifiedImageError

        data = value if isinstance(value, bytes) else str(value).encode()
        allowed = ", ".join(self.formats)
        if not data:
            raise RequestError(f"{INPUT} row {row} is empty (0 bytes); send the encoded image file ({allowed})")
        if len(data) > self.max_bytes:
            raise RequestError(f"{INPUT} row {row} is {len(data)} bytes; at most {self.max_bytes} bytes are allowed "
                               "(task.max_image_bytes); send a smaller image")
        try:
            image = Image.open(io.BytesIO(data))
        except (UnidentifiedImageError, OSError, ValueError):
            known = _format_by_signature(data)
            if known is not None:  # it starts as an image does: its header is cut short or broken
                raise RequestError(f"{INPUT} row {row}: the {known} data is cut short or corrupt (Pillow cannot read "
                                   "its header); send the whole file") from None
            raise RequestError(f"{INPUT} row {row} is not an image file (first bytes {data[:8]!r}); allowed: "
                               f"{allowed} files, sent as their bytes") from None
        if image.format not in self.formats:
            raise RequestError(f"{INPUT} row {row} is a {image.format} image; allowed: {allowed}; convert it to "
                               "one of them before sending")
        width, height = image.size
        if width * height > self.max_pixels:
            raise RequestError(f"{INPUT} row {row} is {width}x{height} ({width * height} pixels); at most "
                               f"{self.max_pixels} pixels are allowed (task.max_image_pixels); downscale it")
        try:
            image.load()  # the whole file, so a file cut short is found here, not half-decoded
            return ImageOps.exif_transpose(image).convert("RGB")
        except (OSError, ValueError, SyntaxError) as exc:
            raise RequestError(f"{INPUT} row {row}: the {image.format} data is cut short or corrupt ({exc}); send "
                               "the whole file") from None


def _format_by_signature(data):
    """The format whose magic bytes ``data`` starts with (JPEG, PNG, WebP), else None."""
    if data.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "PNG"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "WEBP"
    return None


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        here = os.path.join(args["model_repository"], args["model_version"])
        self.step = Preprocess(here, params)
        self.outputs = [o["name"] for o in config["output"]]

    def execute(self, requests):
        def compute(request):
            images = pb_utils.get_input_tensor_by_name(request, INPUT).as_numpy().reshape(-1)
            made = self.step.tensors(images)
            return [pb_utils.Tensor(name, made[name]) for name in self.outputs]

        return answer_requests(pb_utils, requests, compute)

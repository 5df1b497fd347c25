"""Raw images an image task's ensemble is verified on: what applications send, made here without files.

Several sizes and aspect ratios (landscape, portrait, a few pixels), the modes cameras and browsers produce
(RGB, grayscale, RGBA with transparency, palette, CMYK), JPEG, PNG and WebP, and a JPEG whose EXIF
orientation says "rotate 90°" as phones write it. Pixels are smooth gradients with seeded noise, so resizing
and cropping rules that differ give different pixels.
"""
from __future__ import annotations

import dataclasses
import io
from typing import Any

import numpy as np
import numpy.typing as npt

EXIF_ORIENTATION = 0x0112
ROTATE_90_CW = 6  # EXIF orientation 6: the stored image is shown turned 90° clockwise


@dataclasses.dataclass(frozen=True)
class RawImage:
    what: str
    data: bytes

    @property
    def pixels(self) -> int:
        from PIL import Image

        width, height = Image.open(io.BytesIO(self.data)).size
        return width * height


SMALLEST = "a 7x5 PNG of 178 bytes"


def _pixels(height: int, width: int, seed: int) -> npt.NDArray[np.uint8]:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([255 * x / max(width - 1, 1), 255 * y / max(height - 1, 1),
                     127 + 100 * np.sin((x + 2 * y) / 9.0)], axis=-1)
    noisy: npt.NDArray[np.uint8] = np.clip(base + rng.normal(0, 18, base.shape), 0, 255).astype(np.uint8)
    return noisy


def _encode(image: Any, fmt: str, **options: Any) -> bytes:
    out = io.BytesIO()
    image.save(out, format=fmt, **options)
    return out.getvalue()


def images(max_bytes: int | None = None, max_pixels: int | None = None) -> list[RawImage]:
    """The raw images, those within the limits a task's spec sets (what the step refuses is not an answer)."""
    return [i for i in _all() if (max_bytes is None or len(i.data) <= max_bytes)
            and (max_pixels is None or i.pixels <= max_pixels)]


def _all() -> list[RawImage]:
    from PIL import Image

    rgb = Image.fromarray(_pixels(480, 640, 1))
    portrait = Image.fromarray(_pixels(600, 300, 2))
    gray = Image.fromarray(_pixels(131, 97, 3)).convert("L")
    rgba = Image.fromarray(_pixels(256, 256, 4)).convert("RGBA")
    rgba.putalpha(Image.fromarray(np.tile(np.linspace(0, 255, 256, dtype=np.uint8), (256, 1))))
    rotated = Image.fromarray(_pixels(300, 400, 5))
    exif = rotated.getexif()
    exif[EXIF_ORIENTATION] = ROTATE_90_CW
    return [
        RawImage("RGB JPEG 640x480", _encode(rgb, "JPEG", quality=90)),
        RawImage("RGB PNG 300x600 (portrait)", _encode(portrait, "PNG")),
        RawImage("grayscale PNG 97x131", _encode(gray, "PNG")),
        RawImage("RGBA PNG 256x256 (transparency)", _encode(rgba, "PNG")),
        RawImage("RGB WebP 320x200", _encode(Image.fromarray(_pixels(200, 320, 6)), "WEBP", quality=90)),
        RawImage("JPEG 400x300 with EXIF orientation 6 (shown rotated)", _encode(rotated, "JPEG", exif=exif)),
        RawImage("RGB PNG 7x5 (a few pixels)", _encode(Image.fromarray(_pixels(5, 7, 7)), "PNG")),
        RawImage("palette PNG 120x80", _encode(Image.fromarray(_pixels(80, 120, 8)).convert("P"), "PNG")),
        RawImage("CMYK JPEG 150x100", _encode(Image.fromarray(_pixels(100, 150, 9)).convert("CMYK"), "JPEG")),
    ]

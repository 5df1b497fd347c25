"""Real JPEG files made on the spot: what the build checks a DALI pipeline on, and the clients' sample image.

Deterministic (fixed seeds, Pillow's encoder), of different sizes and aspect ratios, chroma
subsampled 4:2:0, 4:2:2 and 4:4:4, with smooth gradients, noise and hard edges, so decoding,
resampling and cropping are all exercised. No image files are shipped or downloaded.
"""
from __future__ import annotations

import io
import pathlib

import numpy as np

# (width, height, subsampling: 0 = 4:4:4, 1 = 4:2:2, 2 = 4:2:0)
SIZES = ((640, 480, 2), (333, 500, 2), (1024, 768, 0), (257, 300, 2), (224, 224, 1), (1920, 1080, 2))


def jpeg(width: int, height: int, seed: int = 0, subsampling: int = 2, quality: int = 90) -> bytes:
    """One encoded JPEG: a colour gradient with noise and a dozen filled ellipses."""
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    pixels = np.stack([x * 255 / width, y * 255 / height, (x + y) * 127 / (width + height) + 60], -1)
    pixels += rng.normal(0, 12, pixels.shape)
    image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(image)
    for _ in range(12):
        left, top = int(rng.integers(0, width)), int(rng.integers(0, height))
        right = left + int(rng.integers(10, max(11, width // 2)))
        bottom = top + int(rng.integers(10, max(11, height // 2)))
        draw.ellipse([left, top, right, bottom], fill=tuple(int(v) for v in rng.integers(0, 256, 3)))
    out = io.BytesIO()
    image.save(out, "JPEG", quality=quality, subsampling=subsampling)
    return out.getvalue()


def write(folder: pathlib.Path, sizes=SIZES) -> list[pathlib.Path]:
    """One file per size in ``folder``, named by its size."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for seed, (width, height, subsampling) in enumerate(sizes):
        path = folder / f"check-{width}x{height}.jpg"
        path.write_bytes(jpeg(width, height, seed, subsampling))
        paths.append(path)
    return paths

"""JPEG encoding and decoding of video frames, for storage and for models that take images."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image


def encode_jpeg(image: np.ndarray | Image.Image, quality: int = 90, *, max_side: int | None = None) -> bytes:
    """JPEG bytes of an RGB image (a uint8 ``(H, W, 3)`` array or a PIL image), downscaled first so
    its longer side is at most ``max_side`` when one is given. The caller's image is not changed."""
    picture = Image.fromarray(image) if isinstance(image, np.ndarray) else image
    if max_side is not None and max(picture.size) > max_side:
        picture = picture.copy()  # thumbnail() works in place
        picture.thumbnail((max_side, max_side), Image.Resampling.BICUBIC)
    buffer = io.BytesIO()
    picture.save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()


def decode_jpeg(data: bytes) -> np.ndarray:
    """An RGB uint8 image from JPEG bytes."""
    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert("RGB"))

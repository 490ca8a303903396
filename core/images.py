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


def longest_side_for(width: int, height: int, short_side: int, max_side: int | None = None) -> int:
    """The longest side a ``width`` x ``height`` frame gets when its short side is scaled to at
    most ``short_side`` (never up), and its longest side capped at ``max_side`` if given: "720p"
    for a 1920x1080 video is 1280 (1280x720), for a portrait 1080x1920 also 1280 (720x1280)."""
    longest, shortest = max(width, height, 1), max(min(width, height), 1)
    size = longest if shortest <= short_side else round(longest * short_side / shortest)
    return min(size, max_side) if max_side else size


def decode_jpeg(data: bytes) -> np.ndarray:
    """An RGB uint8 image from JPEG bytes."""
    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert("RGB"))


def decode_image(data: bytes) -> np.ndarray:
    """Any image file's bytes (JPEG, PNG, WebP, …) as an RGB uint8 array.

    Raises ``ValueError`` (one line) when the bytes are not an image Pillow can read.
    """
    try:
        with Image.open(io.BytesIO(data)) as picture:
            return np.asarray(picture.convert("RGB"))
    except Exception as exc:  # noqa: BLE001 - Pillow's decoders raise many types on bad bytes
        # (UnidentifiedImageError, OSError, SyntaxError, struct.error, ...; plugins registered by
        # other libraries add their own): whatever it is, these bytes are not a picture we read.
        raise ValueError("not an image file vidscope can read (JPEG, PNG, WebP, …)") from exc

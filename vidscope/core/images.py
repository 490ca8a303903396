"""JPEG encoding and decoding of video frames, for storage and for models that take images; and
pictures from users (search by image), read and decoded within bounds.

A picture from a user is untrusted: a 420 KB PNG can declare 12000x12000 pixels (2 GB once
decoded), a path can name ``/dev/zero`` (endless) or a FIFO (a read that never returns). So
:func:`read_image_file` reads only regular files, at most :data:`MAX_IMAGE_BYTES`, and
:func:`decode_image` reads the picture's header first and refuses more than
:data:`MAX_IMAGE_PIXELS` before decoding anything, decodes a JPEG at the reduced scale its format
allows, hands back at most ``max_side`` pixels a side, and decodes at most
:data:`DECODES_AT_ONCE` pictures at a time in a process (the API's, the MCP server's, the CLI's).
"""

from __future__ import annotations

import io
import os
import stat
import threading
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from PIL import Image

# Pillow is imported by the functions that code or decode: a question that looks at no frame
# does not pay for it (issue 44: a cold ``ask`` near the import floor).

#: The largest picture file read for search by image.
MAX_IMAGE_BYTES = 20 * 1024 * 1024
#: The most pixels a picture may have (after a JPEG's reduced-scale decoding): 40 Mpx is a
#: 7700x5200 photo, about 160 MB while decoded.
MAX_IMAGE_PIXELS = 40_000_000
#: The longest side of a decoded picture handed to a model (image-text models look at 224-448).
IMAGE_SIDE = 1024
#: Pictures decoded at once in a process; more wait their turn.
DECODES_AT_ONCE = 2
_decoding = threading.BoundedSemaphore(DECODES_AT_ONCE)


def encode_jpeg(image: np.ndarray | Image.Image, quality: int = 90, *, max_side: int | None = None) -> bytes:
    """JPEG bytes of an RGB image (a uint8 ``(H, W, 3)`` array or a PIL image), downscaled first so
    its longer side is at most ``max_side`` when one is given. The caller's image is not changed."""
    from PIL import Image

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
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert("RGB"))


def read_image_file(path: Path | str, max_bytes: int = MAX_IMAGE_BYTES) -> bytes:
    """The bytes of the picture file at ``path``: a regular file (a link to one is fine) of at most
    ``max_bytes``. Raises ``ValueError`` (one line) for anything else; a device or a FIFO is
    refused before it is opened, so ``/dev/zero`` is not read and a FIFO does not hang."""
    path = Path(path).expanduser()
    info = os.stat(path)  # OSError (missing, no permission) is the caller's to word
    if not stat.S_ISREG(info.st_mode):
        raise ValueError("not a regular file (a picture is read only from a file)")
    if info.st_size > max_bytes:
        raise ValueError(f"the picture is {info.st_size:,} bytes, over the {max_bytes:,} search reads")
    # O_NONBLOCK: should a FIFO be swapped in after the check, opening it does not wait for a writer.
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ValueError("not a regular file (a picture is read only from a file)")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"the picture is over the {max_bytes:,} bytes search reads")
    return data


def decode_image(
    data: bytes, *, max_side: int | None = IMAGE_SIDE, max_pixels: int = MAX_IMAGE_PIXELS
) -> np.ndarray:
    """Any image file's bytes (JPEG, PNG, WebP, …) as an RGB uint8 array, at most ``max_side``
    pixels a side (``None``: as stored).

    The size in the header is checked before anything is decoded. Raises ``ValueError`` (one line)
    when the bytes are not an image Pillow can read, or declare more than ``max_pixels`` pixels.
    """
    from PIL import Image

    try:
        with warnings.catch_warnings():  # Pillow's own bomb warning: the check below says it once
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            picture = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as exc:
        limit = f"{max_pixels / 1e6:.0f} Mpx"
        raise ValueError(f"the picture has more pixels than the {limit} search decodes") from exc
    except Exception as exc:  # noqa: BLE001 - see below
        raise _not_an_image() from exc
    with picture:
        width, height = picture.size
        if max_side is not None and picture.format == "JPEG":
            picture.draft("RGB", (max_side, max_side))  # decoded at 1/2, 1/4 or 1/8 scale when it can be
        decoded_width, decoded_height = picture.size
        if decoded_width * decoded_height > max_pixels:
            raise ValueError(
                f"the picture is {width}x{height} pixels ({width * height / 1e6:.0f} Mpx), over the "
                f"{max_pixels / 1e6:.0f} Mpx search decodes"
            )
        with _decoding:
            try:
                picture.load()
                if max_side is not None and max(picture.size) > max_side:
                    picture.thumbnail((max_side, max_side), Image.Resampling.BICUBIC)
                return np.asarray(picture.convert("RGB"))
            except Exception as exc:  # noqa: BLE001 - see below
                raise _not_an_image() from exc


def _not_an_image() -> ValueError:
    # Pillow's decoders raise many types on bad bytes (UnidentifiedImageError, OSError,
    # SyntaxError, struct.error, ...; plugins registered by other libraries add their own):
    # whatever it is, these bytes are not a picture we read.
    return ValueError("not an image file vidscope can read (JPEG, PNG, WebP, …)")

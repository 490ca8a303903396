"""Synthetic test media; the generators live in :mod:`vidscope.synthetic` (the demo uses them too)."""

from vidscope.synthetic import (  # noqa: F401
    first_frame_at,
    noise_file,
    silent_video,
    speech_wav,
    text_video,
    truncated_copy,
)

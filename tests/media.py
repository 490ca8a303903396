"""Synthetic test media; the generators live in :mod:`vidscope.core.synthetic` (the demo uses them too)."""

from vidscope.core.synthetic import (  # noqa: F401
    first_frame_at,
    narration_wav,
    noise_file,
    silent_video,
    speech_wav,
    text_video,
    truncated_copy,
)

"""``tasks/cut.py``: a time range of a video re-encoded into a file of its own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from media import first_frame_at, narration_wav, text_video

from vidscope.tasks.cut import cut_clip
from vidscope.tasks.decode import probe


def test_a_cut_starts_at_its_range_keeps_the_audio_and_leaves_nothing_half_written(tmp_path: Path) -> None:
    wav = narration_wav([(0.0, "one two three")], tmp_path / "speech.wav", duration=8.0)
    source = text_video(
        tmp_path / "source.mp4", duration=8.0, texts=[(0.0, 4.0, "FIRST"), (4.0, 8.0, "SECOND")], audio=wav
    )
    clip = tmp_path / "out" / "clip.mp4"
    duration = cut_clip(source, clip, 4.5, 7.0)
    info = probe(clip)
    assert duration == info.duration == pytest.approx(2.5, abs=0.08)
    assert info.has_audio and (info.width, info.height) == (640, 360)
    # Its first frame is the source's frame at 4.5 s (SECOND shown), not one from before the range.
    got = first_frame_at(clip, 0.0).astype(int)
    assert np.abs(got - first_frame_at(source, 4.5).astype(int)).mean() < 4
    assert np.abs(got - first_frame_at(source, 3.0).astype(int)).mean() > 4

    with pytest.raises(ValueError, match="no video frame between 20 and 25 s"):
        cut_clip(source, tmp_path / "out" / "late.mp4", 20.0, 25.0)
    with pytest.raises(ValueError, match="not a time range"):
        cut_clip(source, tmp_path / "out" / "back.mp4", 5.0, 4.0)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["clip.mp4"]

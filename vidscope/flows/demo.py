"""What ``vidscope demo`` ingests: a synthetic narrated video with on-screen text, plus the sample
videos that sit beside the repository when they are there (``../shared/videos``, CC BY 4.0)."""

from __future__ import annotations

import shutil
from pathlib import Path

from vidscope.core.synthetic import speech_wav, text_video
from vidscope.storage.files import managed_dir

DEMO_NARRATION = (
    "Welcome to the kitchen. First, heat the oven to two hundred degrees. "
    "Then mix the flour and the sugar in a large bowl. Finally, bake the cake for forty minutes."
)
# Short lines: the drawn text must fit the 640-pixel frame to be read whole.
DEMO_TEXTS = (
    (0.0, 5.0, "KITCHEN TOUR"),
    (5.0, 10.0, "OVEN 200 C"),
    (10.0, 15.0, "MIX FLOUR"),
    (15.0, 20.0, "BAKE 40 MIN"),
)
#: A question the demo answers over the synthetic video.
DEMO_QUESTION = "What temperature should the oven be preheated to?"
#: The corpus search the demo runs over everything it ingested.
DEMO_SEARCH = "mixing flour in the kitchen"


def demo_video(data_dir: Path) -> Path:
    """The synthetic demo video under the data dir (made once); narrated when espeak-ng exists."""
    folder = managed_dir(data_dir, "demo")
    path = folder / "kitchen-tour.mp4"
    if path.exists():
        return path
    audio = None
    if shutil.which("espeak-ng"):
        audio = speech_wav(DEMO_NARRATION, folder / "narration.wav", rate_wpm=150)
    partial = folder / "kitchen-tour.partial.mp4"
    text_video(partial, duration=20.0, fps=25, texts=DEMO_TEXTS, audio=audio)
    partial.replace(path)
    return path


def sample_videos() -> list[Path]:
    """The shared sample videos, if the repository sits beside them."""
    candidates = [
        Path(__file__).resolve().parents[2] / "shared" / "videos",
        Path.cwd().parent / "shared" / "videos",
    ]
    for folder in candidates:
        if folder.is_dir():
            return sorted(p for p in folder.iterdir() if p.suffix in {".mp4", ".mkv"})
    return []

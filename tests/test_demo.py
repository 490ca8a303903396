"""The README's first command: `vidscope demo` on the embedded default, end to end (slow)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vidscope.cli import app
from vidscope.cli.common import console, overrides


@pytest.mark.slow
def test_demo_ingests_answers_and_finds_the_demo_video_by_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(console, "width", 200)  # wide enough that no table folds a file name
    overrides.clear()
    result = CliRunner().invoke(app, ["--data-dir", str(tmp_path / "data"), "demo"])
    overrides.clear()
    assert result.exit_code == 0, result.output
    answer, _, searched = result.output.partition("5. searching the whole library")
    assert "Extractive answer" in answer and "200 degrees" in answer  # the oven's temperature
    hits = re.split(r"\bvideos? for\b", searched)[1]  # the hit table ("1 video for", "2 videos for")
    assert "kitchen-tour.mp4" in hits
    assert "no video matches" not in searched

"""The Python API (issue 40): ``vidscope.Library`` drives the real flows on a real store, gives the
same answers as the CLI, and its public names stay (a test fails when one disappears)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from media import text_video
from typer.testing import CliRunner

import vidscope
from vidscope.cli import app
from vidscope.cli.common import overrides
from vidscope.core.settings import ModelSettings, Settings

#: The public surface: removing or renaming one of these breaks people's scripts.
PUBLIC = {
    "Library",
    "Settings",
    "AskResult",
    "TraceStep",
    "Citation",
    "CompareResult",
    "SearchResult",
    "MomentSearch",
    "MomentFilters",
    "VideoReport",
    "VideoRecord",
    "VideoOverview",
    "Digest",
    "TranscriptLine",
    "VidscopeError",
    "BackendUnavailable",
    "VideoNotFound",
    "LibraryEmpty",
    "VisualSearchOff",
    "BundleError",
    "SqlError",
    "NotSummarized",
}
LIBRARY_METHODS = {
    "ingest",
    "videos",
    "video",
    "remove",
    "sql",
    "search",
    "search_image",
    "ask",
    "ask_library",
    "ask_steps",
    "compare",
    "summarize",
    "transcript",
    "digest",
    "export",
    "import_",
}


def test_the_public_names_stay_and_importing_vidscope_stays_cheap() -> None:
    assert set(vidscope.__all__) >= PUBLIC | {"__version__"}
    for name in PUBLIC:
        assert getattr(vidscope, name).__name__ == name
    assert {n for n in dir(vidscope.Library) if not n.startswith("_")} >= LIBRARY_METHODS
    with pytest.raises(AttributeError):
        vidscope.NoSuchThing  # noqa: B018
    # `import vidscope` loads none of the heavy parts (they come with the first use).
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, vidscope; print(sorted(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for heavy in ("lancedb", "prefect", "pyarrow", "numpy", "pydantic"):
        assert f"'{heavy}'" not in loaded, heavy


@pytest.fixture
def library(tmp_path: Path) -> vidscope.Library:
    settings = Settings(
        data_dir=tmp_path / "data", models=ModelSettings(speech_recognizer=None, image_text=None)
    )
    return vidscope.Library(settings=settings)


def test_a_script_ingests_searches_asks_and_moves_videos_like_the_cli(
    library: vidscope.Library, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    video = text_video(
        tmp_path / "menu.mp4",
        duration=8.0,
        size=(320, 180),
        texts=[(0.0, 4.0, "SOUP OF THE DAY"), (4.0, 8.0, "TOMATO BASIL")],
    )
    events: list[dict[str, object]] = []
    (report,) = library.ingest([video], progress=events.append)
    assert report.status == "ok" and report.video_id
    assert {e["event"] for e in events} >= {"started", "done", "finished"}  # the stages as they ran
    assert [v.file_name for v in library.videos()] == ["menu.mp4"]
    assert library.video("menu").video_id == report.video_id  # named as people say it

    found = library.search("tomato basil", moments=True)
    assert isinstance(found, vidscope.MomentSearch) and found.moments
    assert "TOMATO BASIL" in found.moments[0].text

    answer = library.ask("menu", "What is the soup of the day?", options=["Onion", "Tomato basil", "Pea"])
    assert isinstance(answer, vidscope.AskResult) and answer.choice == "B"
    streamed = list(library.ask_steps("menu", "What is the soup of the day?"))
    assert isinstance(streamed[-1], vidscope.AskResult)
    assert streamed[:-1] and all(isinstance(s, vidscope.TraceStep) for s in streamed[:-1])

    # The CLI gives the same answer to the same question (one implementation).
    monkeypatch.chdir(tmp_path)
    overrides.clear()
    try:
        monkeypatch.setenv("VIDSCOPE_MODELS__SPEECH_RECOGNIZER", "")
        monkeypatch.setenv("VIDSCOPE_MODELS__IMAGE_TEXT", "")
        data = str(library.settings.data_dir)
        printed = CliRunner().invoke(
            app, ["--data-dir", data, "ask", "menu", "What is the soup of the day?", "--json"]
        )
    finally:
        overrides.clear()
    assert printed.exit_code == 0, printed.output
    from_cli = json.loads(printed.output[printed.output.index("{") :])
    assert from_cli["answer"] == streamed[-1].answer
    assert [c["start"] for c in from_cli["citations"]] == [c.start for c in streamed[-1].citations]

    overview = library.summarize("menu.mp4")
    assert isinstance(overview, vidscope.VideoOverview)
    lines = library.transcript("menu")  # no speech recognizer: the texts the video shows
    assert any("SOUP OF THE DAY" in line.text for line in lines)
    assert library.digest("1d").count == 1
    with pytest.raises(ValueError):
        library.digest("yesterday")
    counted = library.sql("SELECT count(*) AS n FROM clips")
    assert counted.column("n").to_pylist()[0] >= 1
    with pytest.raises(vidscope.SqlError):
        library.sql("DELETE FROM clips")
    with pytest.raises(vidscope.VideoNotFound):
        library.ask("no-such-video", "What?")

    manifest = library.export(["menu"], tmp_path / "bundle")
    assert manifest.videos == [report.video_id]
    other = vidscope.Library(settings=library.settings.model_copy(update={"data_dir": tmp_path / "other"}))
    imported = other.import_(tmp_path / "bundle")
    assert imported.imported == [report.video_id]
    assert other.ask("menu", "What is the soup of the day?").answer == streamed[-1].answer
    assert library.remove("menu").video_id == report.video_id and library.videos() == []

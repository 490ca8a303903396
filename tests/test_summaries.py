"""Summaries, chapters and highlights without a model (the ``chapters`` stage, ``vidscope
summarize``, ``GET /api/videos/{id}/summary``).

One generated lecture in three parts of 15 s on different subjects (bread, volcanoes, football),
narrated throughout, with a title slide at the start of the first and the third part, and one
silent video without text, are ingested once by the real flow (embedded Whisper, OCR and MiniLM).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from llm_server import ScriptedLLMServer, text
from media import narration_wav, silent_video, text_video
from typer.testing import CliRunner

from vidscope.api import create_app
from vidscope.cli import app
from vidscope.cli.common import overrides
from vidscope.core.settings import Settings
from vidscope.flows.ingest import run_ingest
from vidscope.flows.summarize import (
    Chapter,
    Digest,
    DigestVideo,
    VideoOverview,
    as_markdown,
    as_webvtt,
    digest_markdown,
    parse_since,
    read_digest,
)
from vidscope.models.open_store import open_store
from vidscope.tasks.chapters import ClipInfo, Picture, Sentence, outline, picture_cuts

PART_SECONDS = 15.0
NARRATION = [
    (0.5, "Welcome to the bread baking lesson. We mix flour, water, yeast and salt into a dough."),
    (7.5, "Knead the dough for ten minutes, then let the dough rise in a warm bowl."),
    (15.5, "Now the volcano. A volcano erupts when magma and gas push through the crust."),
    (22.5, "Lava flows down the volcano slopes and the ash cloud rises high."),
    (30.5, "Finally the football match. The striker kicks the ball past the goalkeeper."),
    (37.5, "The referee blows the whistle and the team celebrates the goal."),
]
TITLE_SLIDES = [(0.0, 4.0, "BREAD BAKING"), (30.0, 34.0, "FOOTBALL MATCH")]
#: What each part's title should hold: its slide's text, else one of its own words.
PART_WORDS = [
    {"bread"},
    {"volcano", "lava", "magma", "crust", "erupt", "erupts", "ash", "slope"},
    {"football"},
]
SCENE_CUTS = [(12.0, (40, 120, 200)), (24.0, (200, 180, 40))]
LOOPBACK = {"client": ("127.0.0.1", 50000), "base_url": "http://127.0.0.1"}


@dataclass
class Library:
    settings: Settings
    lecture: Path
    silent: Path
    scenes: Path


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    root = tmp_path_factory.mktemp("summaries")
    duration = 3 * PART_SECONDS
    lecture = text_video(
        root / "lecture.mp4",
        duration=duration,
        fps=10,
        texts=TITLE_SLIDES,
        audio=narration_wav(NARRATION, root / "lecture.wav", duration=duration),
    )
    silent = silent_video(root / "silent.mp4", duration=8.0, fps=10)
    # No speech, no text: three scenes (the background's colour changes at 12 s and 24 s).
    scenes = text_video(root / "scenes.mp4", duration=36.0, fps=5, cuts=SCENE_CUTS)
    settings = Settings(data_dir=root / "data")
    reports = run_ingest([str(lecture), str(silent), str(scenes)], settings, optimize=False)
    assert all(r.status == "ok" for r in reports), reports
    stages = {s.stage: s.status for s in reports[0].stages}
    if stages["speech"] != "done":
        pytest.skip(f"speech recognition is {stages['speech']} here (Whisper base not installed)")
    assert stages["chapters"] == "done", reports[0]
    return Library(settings, lecture, silent, scenes)


def cli(library: Library, *args: str) -> tuple[int, str]:
    overrides.clear()
    result = CliRunner().invoke(app, ["--data-dir", str(library.settings.data_dir), *args])
    overrides.clear()
    assert "Traceback" not in result.output, result.output
    return result.exit_code, result.output


def summary_json(library: Library, video: Path) -> dict[str, Any]:
    code, output = cli(library, "summarize", video.name, "--json")
    assert code == 0, output
    data: dict[str, Any] = json.loads(output)
    return data


def test_chapters_start_within_3_s_of_each_part_and_are_titled_by_its_slide_or_its_words(
    library: Library,
) -> None:
    chapters = summary_json(library, library.lecture)["chapters"]
    assert len(chapters) == 3, chapters
    for i, chapter in enumerate(chapters):
        assert abs(chapter["start"] - i * PART_SECONDS) <= 3.0, chapters
        assert any(word in chapter["title"].lower() for word in PART_WORDS[i]), chapters
    assert chapters[0]["title"] == "BREAD BAKING" and chapters[2]["title"] == "FOOTBALL MATCH"
    assert chapters[-1]["end"] == pytest.approx(3 * PART_SECONDS, abs=0.1)
    assert all(a["end"] == b["start"] for a, b in zip(chapters, chapters[1:], strict=False))


def test_json_has_the_summary_chapters_and_highlights_in_the_videos_own_words(library: Library) -> None:
    data = summary_json(library, library.lecture)
    assert {"summary", "chapters", "highlights"} <= set(data)
    assert all({"start", "end", "title", "summary"} <= set(c) for c in data["chapters"])
    assert data["highlights"] and all({"start", "end", "text"} <= set(h) for h in data["highlights"])
    store = open_store(library.settings)
    said = " ".join(
        " ".join(r["text"].split())
        for r in store.rows(store.transcripts, video_id=data["video_id"]).to_pylist()
    )
    for chapter in data["chapters"]:
        assert chapter["summary"] and chapter["summary"] in said, (chapter, said)
    assert data["summary"] and all(c["summary"].split(". ")[0] in data["summary"] for c in data["chapters"])
    for highlight in data["highlights"]:
        assert highlight["text"] in said and highlight["start"] < highlight["end"]
    # The HTTP API gives the same document.
    with TestClient(create_app(library.settings), **LOOPBACK) as http:  # type: ignore[arg-type]
        response = http.get(f"/api/videos/{data['video_id'][:12]}/summary")
    assert response.status_code == 200, response.text
    assert response.json() == data


def test_md_lists_0_00_title_lines_and_vtt_is_webvtt_chapters(library: Library) -> None:
    code, md = cli(library, "summarize", library.lecture.name, "--format", "md")
    assert code == 0, md
    lines = md.splitlines()
    assert len(lines) == 3 and lines[0] == "0:00 BREAD BAKING", md
    assert all(re.fullmatch(r"\d+:\d\d \S.*", line) for line in lines), md
    code, vtt = cli(library, "summarize", library.lecture.name, "--format", "vtt")
    assert code == 0, vtt
    assert vtt.startswith("WEBVTT\n\n1\n00:00:00.000 --> 00:00:")
    cues = re.findall(r"^(\d\d:\d\d:\d\d\.\d{3}) --> (\d\d:\d\d:\d\d\.\d{3})\n(.+)$", vtt, re.M)
    assert [title for _, _, title in cues] == [line.split(" ", 1)[1] for line in lines]
    code, table = cli(library, "summarize", library.lecture.name)
    assert code == 0 and "FOOTBALL MATCH" in table and "highlights" in table


def test_a_silent_video_without_text_is_one_chapter_that_says_why(library: Library) -> None:
    data = summary_json(library, library.silent)
    assert [(c["start"], c["end"]) for c in data["chapters"]] == [(0.0, pytest.approx(8.0, abs=0.2))]
    assert data["summary"] == "" and data["highlights"] == [] and data["chapters"][0]["summary"] == ""
    assert "no audio track" in data["note"] and "no on-screen text" in data["note"], data["note"]


def test_reingest_is_up_to_date_and_a_video_not_summarised_says_so_in_one_line(library: Library) -> None:
    code, output = cli(library, "ingest", str(library.lecture))
    assert code == 0 and "1 up to date" in output, output
    store = open_store(library.settings)
    video_id = summary_json(library, library.silent)["video_id"]
    store.replace_video_rows(store.chapters, video_id, [])
    store.delete_rows(store.ledger, f"video_id = '{video_id}' AND stage = 'chapters'")
    code, output = cli(library, "summarize", library.silent.name)
    assert code == 1 and "not summarised yet" in output and len(output.strip().splitlines()) == 1, output
    with TestClient(create_app(library.settings), **LOOPBACK) as http:  # type: ignore[arg-type]
        assert http.get(f"/api/videos/{video_id}/summary").status_code == 404
    (report,) = run_ingest([str(library.silent)], library.settings, optimize=False)
    ran = [s.stage for s in report.stages if s.status not in ("cached", "skipped")]
    assert ran == ["chapters"], report.stages
    assert len(summary_json(library, library.silent)["chapters"]) == 1


def test_text_from_the_video_is_plain_text_in_every_format() -> None:
    title = "<b>Tom & Jerry</b> --> [red]\nnext"
    overview = VideoOverview(
        video_id="v" * 64,
        file="x.mp4",
        summary="",
        chapters=[Chapter(start=0.0, end=75.5, title=title, summary="")],
        highlights=[],
    )
    assert as_markdown(overview) == "0:00 <b>Tom & Jerry</b> --> [red] next\n"
    assert as_webvtt(overview).splitlines()[4] == "&lt;b&gt;Tom &amp; Jerry&lt;/b&gt; --&gt; [red] next"
    # ... and the stage stores what was said as it was said: no escaping on the way in.
    said = "[bold]Hi[/bold] <i>there</i> & the ferry"
    clips = [ClipInfo(0, 0.0, 5.0, speech=said)]
    made = outline(5.0, clips, [Sentence(0.0, 4.0, said)], [], clip_seconds=5.0, min_seconds=10.0)
    assert made.chapters[0].text == said and made.highlights[0].text == said


def test_words_alone_find_the_parts_and_no_chapter_is_shorter_than_the_minimum() -> None:
    topics = [
        "flour dough yeast bread oven loaf",
        "volcano lava magma crust eruption ash",
        "football striker goalkeeper referee goal whistle",
    ]
    clips = [
        ClipInfo(
            i,
            5.0 * i,
            5.0 * (i + 1),
            speech=" ".join(topics[i // 3].split()[i % 3 :: 2]) + " " + topics[i // 3],
        )
        for i in range(9)
    ]
    made = outline(45.0, clips, [], [], clip_seconds=5.0, min_seconds=10.0)
    assert [c.start for c in made.chapters] == [0.0, 15.0, 30.0]
    assert [c.why for c in made.chapters] == ["distinctive words"] * 3
    # 15 s parts cannot be 20 s chapters: no cut leaves both sides that long.
    longer = outline(45.0, clips, [], [], clip_seconds=5.0, min_seconds=20.0)
    assert [(c.start, c.end) for c in longer.chapters] == [(0.0, 45.0)]


# ------------------------------------------------------------------------------------ the digest


def test_digest_lists_the_videos_ingested_in_the_window_with_their_summaries_and_chapter_titles(
    library: Library,
) -> None:
    code, output = cli(library, "digest", "--json")
    assert code == 0, output
    data = json.loads(output)
    assert (data["count"], data["library"], data["not_summarized"]) == (3, 3, 0)
    by_file = {v["file"]: v for v in data["videos"]}
    lecture = by_file[library.lecture.name]
    assert lecture["chapters"][0] == "BREAD BAKING" and lecture["chapters"][2] == "FOOTBALL MATCH"
    assert lecture["summary"] == summary_json(library, library.lecture)["summary"]
    assert (
        by_file[library.silent.name]["chapters"] == ["Whole video"]
        and "no audio" in by_file[library.silent.name]["note"]
    )
    assert data["chapters"] == 7 and data["seconds"] == pytest.approx(3 * PART_SECONDS + 44.0, abs=0.5)
    # The window is the last --since: nothing was ingested more than a day before "now + 2 days".
    store = open_store(library.settings)
    later = read_digest(store, parse_since("1d"), now=datetime.now(UTC) + timedelta(days=2))
    assert (later.count, later.videos, later.library) == (0, [], 3)
    code, table = cli(library, "digest", "--since", "12h")
    assert code == 0 and "3 video(s)" in table and "3. FOOTBALL" in table, table
    # The HTTP API gives the same videos; a bad window is one line (CLI) or a 422 (API).
    with TestClient(create_app(library.settings), **LOOPBACK) as http:  # type: ignore[arg-type]
        response = http.get("/api/digest", params={"since": "2d"})
        bad = http.get("/api/digest", params={"since": "yesterday"})
    assert response.status_code == 200 and response.json()["videos"] == data["videos"], response.text
    assert bad.status_code == 422 and "since" in bad.text, bad.text
    code, output = cli(library, "digest", "--since", "forever")
    assert code == 2 and len(output.strip().splitlines()) == 1 and "'forever'" in output, output


def test_the_digest_markdown_counts_and_escapes_text_from_videos() -> None:
    digest = Digest(
        since="2026-11-26T02:00:00+00:00",
        until="2026-11-27T02:00:00+00:00",
        videos=[
            DigestVideo(
                video_id="a" * 64,
                file="talk.mp4",
                added_at="2026-11-27T01:00:00+00:00",
                duration=95.0,
                summary="Click [here](http://x) <script>alert(1)</script>",
                chapters=["<b>Intro</b>", "Results"],
            )
        ],
        count=1,
        seconds=95.0,
        chapters=2,
        not_summarized=0,
        library=7,
    )
    md = digest_markdown(digest)
    assert md.startswith("# What the library gained since 2026-11-26 02:00 UTC\n")
    assert "1 video(s), 1:35 (0.0 h), 2 chapter(s); 0 not summarised; 7 video(s) in the library." in md
    assert "## talk\\.mp4" not in md and "## talk.mp4 (1:35, aaaaaaaaaaaa)" in md
    assert "Click \\[here\\]\\(http://x\\) \\<script\\>alert\\(1\\)\\</script\\>" in md
    assert "1. \\<b\\>Intro\\</b\\>\n2. Results\n" in md and "<script>" not in md
    for bad in ("", "1", "d", "-1d", "0h", "99999w", "12x"):
        with pytest.raises(ValueError, match="--since"):
            parse_since(bad)
    assert parse_since("90s") == timedelta(seconds=90) and parse_since("2W") == timedelta(weeks=2)


# ------------------------------------------------------------------------------------ reuse


def test_search_moments_finds_a_chapter_by_its_title_and_summary(library: Library) -> None:
    code, output = cli(library, "search", "--moments", "volcano eruption", "--json")
    assert code == 0, output
    moments = json.loads(output)["moments"]
    chapters = [m for m in moments if m["kind"] == "chapter"]
    assert chapters and all(m["kind"] == "clip" for m in moments[: len(moments) - len(chapters)]), moments
    best = chapters[0]
    assert abs(best["start"] - PART_SECONDS) <= 3.0 and best["file"] == library.lecture.name, best
    assert "volcano" in best["text"].lower() and best["relevance"] >= 0.3, best
    # The moment filters hold for chapters too: none of the lecture's after its first 10 s.
    code, output = cli(library, "search", "--moments", "volcano eruption", "--to", "10", "--all", "--json")
    assert code == 0, output
    late = [m for m in json.loads(output)["moments"] if m["kind"] == "chapter" and m["start"] >= 10]
    assert late == [], late


# ------------------------------------------------------------------------------------ pictures


def test_a_video_without_speech_or_text_is_chaptered_where_its_picture_changes(library: Library) -> None:
    data = summary_json(library, library.scenes)
    starts = [c["start"] for c in data["chapters"]]
    assert len(starts) == 3 and starts[0] == 0.0, data
    assert all(abs(a - t) <= 1.0 for a, (t, _) in zip(starts[1:], SCENE_CUTS, strict=True)), starts
    assert [c["title"] for c in data["chapters"]] == ["Part 1 (0:00)", "Part 2 (0:12)", "Part 3 (0:24)"]
    assert "picture changes (colour histograms)" in data["note"] and "no on-screen text" in data["note"]
    assert data["summary"] == "" and all(c["summary"] == "" for c in data["chapters"])


def test_a_flash_or_a_short_shot_is_no_picture_chapter() -> None:
    dark, light = np.eye(64)[0], np.eye(64)[5]
    # 40 s at 2 fps: a one-frame flash at 10 s, a 3 s shot at 20 s, a lasting change at 30 s.
    pictures = [Picture(i / 2, light if i == 20 or 40 <= i < 46 or i >= 60 else dark) for i in range(80)]
    assert picture_cuts(pictures, 40.0, 10.0) == [30.0]
    assert picture_cuts(pictures[:50], 25.0, 10.0) == []


def test_dvds_global_browse_lists_the_chapters_as_its_overview(library: Library) -> None:
    from vidscope.agents.dvd.tools import global_browse
    from vidscope.agents.tools import ToolContext

    store = open_store(library.settings)
    video_id = summary_json(library, library.lecture)["video_id"]
    result = global_browse(ToolContext(library.settings, store), video_id=video_id, query="what is it about")
    assert [c.title for c in result.chapters][::2] == ["BREAD BAKING", "FOOTBALL MATCH"], result.chapters
    assert [c.start for c in result.chapters] == sorted(c.start for c in result.chapters)
    assert "volcano" in result.chapters[1].summary.lower() and result.for_model()["chapters"][0]["end"] > 0


def test_with_a_planner_the_titles_are_written_and_traceable_and_nonsense_is_marked(
    library: Library, llm_server: ScriptedLLMServer
) -> None:
    from vidscope.tasks.chapters import CHAPTERS
    from vidscope.tasks.stage import run_stage

    before = summary_json(library, library.lecture)
    options = {"openai": {"base_url": llm_server.base_url, "max_retries": 0, "timeout_s": 10}}
    planned = Settings(
        data_dir=library.settings.data_dir, models={"planner": "openai:scripted", "options": options}
    )

    def write(title: str, said: str, clips: list[int]) -> str:
        return json.dumps({"title": title, "sentences": [{"text": said, "clips": clips}]})

    llm_server.script(
        [
            text(write("Baking bread dough", "We mix flour, water, yeast and salt into a dough.", [0, 1])),
            text(json.dumps({"title": '{"clip": 4, "text": "lava"}', "sentences": []})),
            text(write("The football match", "The striker kicks the ball past the goalkeeper.", [6, 7])),
        ]
    )
    assert run_stage(CHAPTERS, before["video_id"], library.lecture, planned).status == "done"
    chapters = summary_json(library, library.lecture)["chapters"]
    assert [c["title"] for c in chapters] == [
        "Baking bread dough",
        before["chapters"][1]["title"],
        "The football match",
    ]
    assert chapters[0]["title_from"] == "model title"
    assert [(s["text"], s["clips"]) for s in chapters[0]["sources"]] == [
        ("We mix flour, water, yeast and salt into a dough.", [0, 1])
    ]
    assert chapters[1]["title_from"].startswith("extractive title (")
    assert chapters[1]["title_from"].endswith("model reply refused: the title echoed JSON")
    assert chapters[1]["summary"] == before["chapters"][1]["summary"] and chapters[1]["sources"] == []
    # Without the planner the stage runs again (its settings changed) and is extractive again.
    assert run_stage(CHAPTERS, before["video_id"], library.lecture, library.settings).status == "done"
    assert summary_json(library, library.lecture)["chapters"] == before["chapters"]

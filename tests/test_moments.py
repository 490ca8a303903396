"""Moments across the library: clip-level hybrid search, ``search --moments``, ``ask --library``.

One small library is built by production ingestion (espeak narration, drawn on-screen text,
Whisper base, RapidOCR, MiniLM): a 40 s narrated harbor tour, a 30 s narrated lighthouse lecture
and a shared sample video. Facts are said or shown in one clip of one video; the tests check they
are found at that video and time, through the CLI, the flows, the HTTP API and the agents.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from llm_server import ScriptedLLMServer, tool_call
from media import narration_wav, text_video
from typer.testing import CliRunner

from vidscope.core.settings import Settings
from vidscope.flows.ingest import run_ingest
from vidscope.models.open_store import open_store

pytestmark = pytest.mark.slow

TOUR = [
    (0.5, "Welcome to the harbor tour. Today we walk along the old quay."),
    (12.0, "The ferry to north point leaves every hour from pier three."),
    (22.0, "Tickets are sold at the kiosk by the gate."),
    (32.0, "Next we visit the fish market and the boats."),
]
TOUR_TEXT = [(0.0, 6.0, "HARBOR TOUR"), (12.0, 18.0, "PIER 3"), (22.0, 28.0, "ADULT TICKET 12 EUROS")]
LECTURE = [
    (0.5, "This short lecture is about the lighthouses of our coast."),
    (15.0, "The lighthouse was painted green in nineteen twenty."),
    (25.0, "Thank you for listening."),
]
LECTURE_TEXT = [(15.0, 21.0, "CAPE LIGHT 1920")]

#: A fact, the file it is said or shown in, and a second inside that moment.
FACTS = [
    ("ferry to north point", "harbor-tour.mp4", 13.0),
    ("price of an adult ticket", "harbor-tour.mp4", 24.0),
    ("lighthouse painted green", "lighthouse-lecture.mp4", 17.0),
]


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory, shared_videos: Path) -> Settings:
    root = tmp_path_factory.mktemp("moments")
    tour = text_video(
        root / "harbor-tour.mp4",
        duration=40.0,
        fps=10,
        texts=TOUR_TEXT,
        audio=narration_wav(TOUR, root / "tour.wav", duration=40.0),
    )
    lecture = text_video(
        root / "lighthouse-lecture.mp4",
        duration=30.0,
        fps=10,
        texts=LECTURE_TEXT,
        audio=narration_wav(LECTURE, root / "lecture.wav", duration=30.0),
    )
    settings = Settings(data_dir=root / "data")
    reports = run_ingest([str(tour), str(lecture), str(shared_videos / "book.mkv")], settings)
    assert all(r.status == "ok" for r in reports), reports
    speech = {s.stage: s.status for s in reports[0].stages}["speech"]
    if speech != "done":
        pytest.skip(f"speech recognition is {speech} here (Whisper base not installed)")
    return settings


def cli(settings: Settings, *args: str) -> tuple[int, str]:
    from vidscope.cli import app

    result = CliRunner().invoke(app, ["--data-dir", str(settings.data_dir), *args])
    return result.exit_code, result.output


def test_facts_said_or_shown_in_one_clip_are_found_at_their_video_and_time(library: Settings) -> None:
    store = open_store(library)
    assert set(store.fts_columns(store.clips)) == {"caption", "transcript_text", "ocr_text"}
    for query, file, second in FACTS:
        code, output = cli(library, "search", query, "--moments", "--k", "5", "--json")
        assert code == 0, output
        data = json.loads(output)
        assert set(data) == {"query", "moments", "seconds", "notes", "ranked_by"}
        assert all(
            set(m) == {"video_id", "file", "start", "end", "score", "relevance", "text", "kind"}
            for m in data["moments"]
        )
        best = data["moments"][0]
        assert best["file"] == file and best["start"] <= second < best["end"], (query, data)
        assert best["end"] - best["start"] <= 20.0  # a place in the video, not a 5-minute window
        scores = [m["score"] for m in data["moments"]]
        assert scores == sorted(scores, reverse=True)
    # The text that matched is what was said or shown there.
    code, output = cli(library, "search", "price of an adult ticket", "--moments", "--json")
    assert "ADULT TICKET" in json.loads(output)["moments"][0]["text"].upper()
    code, output = cli(library, "search", "lighthouse painted green", "--moments")
    assert code == 0 and "lighthouse-lecture.mp4" in output and "said or shown" in output


def test_video_hits_carry_their_best_moments_at_clip_precision(library: Settings) -> None:
    from vidscope.flows.search import run_search

    result = run_search(library, "lighthouse painted green", fusion="union", tau_soft=0.0, tau_hard=0.0)
    lecture = next(h for h in result.hits if h.file_name == "lighthouse-lecture.mp4")
    assert result.rerank == "caption"
    assert lecture.moments and all(b - a <= 20.0 for a, b in lecture.moments)
    start, end = lecture.moments[0]
    assert start <= 17.0 < end


def test_filters_restrict_videos_time_and_ingestion_date(library: Settings) -> None:
    from vidscope.agents.moments import MomentFilters
    from vidscope.flows.search import run_search_moments

    store = open_store(library)
    lecture = next(r for r in store.rows(store.videos).to_pylist() if r["file_name"].startswith("lighthouse"))
    # Filtered to the wrong video or time, the query matches weakly: --all (show_all) shows it.
    only = run_search_moments(
        library, "ferry to north point", filters=MomentFilters(videos=[lecture["video_id"]]), show_all=True
    )
    assert only.moments and {m.file for m in only.moments} == {"lighthouse-lecture.mp4"}
    late = run_search_moments(
        library, "harbor tour", filters=MomentFilters(start=20.0, end=40.0), show_all=True
    )
    assert late.moments and all(m.end > 20.0 and m.start < 40.0 for m in late.moments)
    tomorrow = datetime.now(UTC) + timedelta(days=1)
    none = run_search_moments(library, "harbor tour", filters=MomentFilters(added_after=tomorrow))
    assert none.moments == [] and "no ingested video matches the filters" in none.notes
    code, output = cli(
        library, "search", "harbor", "--moments", "--video", "lighthouse-lecture.mp4", "--all", "--json"
    )
    assert code == 0 and {m["file"] for m in json.loads(output)["moments"]} == {"lighthouse-lecture.mp4"}
    code, output = cli(library, "search", "harbor", "--moments", "--from", "30", "--to", "10")
    assert code == 2 and "time range 30–10 s is empty" in output and "Traceback" not in output
    code, output = cli(library, "search", "harbor", "--from", "10")
    assert code == 2 and "add --moments" in output


def test_moments_over_http(library: Settings) -> None:
    from vidscope.api import create_app

    with TestClient(
        create_app(library), client=("127.0.0.1", 50000), base_url="http://localhost:8000"
    ) as http:
        ok = http.get("/api/moments", params={"q": "ferry to north point", "k": 3})
        assert ok.status_code == 200, ok.text
        best = ok.json()["moments"][0]
        assert best["file"] == "harbor-tour.mp4" and best["start"] <= 13.0 < best["end"]
        filtered = http.get(
            "/api/moments", params={"q": "ferry", "video": "lighthouse-lecture.mp4", "all": True}
        )
        assert {m["file"] for m in filtered.json()["moments"]} == {"lighthouse-lecture.mp4"}
        assert http.get("/api/moments", params={"q": "ferry", "video": "nope.mp4"}).status_code == 404
        empty = http.get("/api/moments", params={"q": "x", "start": 9, "end": 3})
        assert empty.status_code == 200 and empty.json()["moments"] == []
        assert "range 9–3 s is empty" in empty.json()["notes"][0]


def test_ask_library_without_a_chat_model_answers_extractively_and_cites_video_and_time(
    library: Settings,
) -> None:
    code, output = cli(
        library, "ask", "--library", "Where does the ferry to north point leave from?", "--json"
    )
    assert code == 0, output
    data = json.loads(output)
    assert data["library"] and data["extractive"] and "Extractive answer" in data["answer"]
    best = data["citations"][0]
    assert best["verified"] and best["start"] <= 13.0 < best["end"]
    assert data["files"][best["video_id"]] == "harbor-tour.mp4"
    assert "pier" in data["answer"].lower()
    code, output = cli(library, "ask", "--library", "What colour was the lighthouse painted?")
    assert code == 0 and "lighthouse-lecture.mp4" in output and "verified" in output


def test_ask_library_runs_the_agent_with_library_wide_tools(
    library: Settings, llm_server: ScriptedLLMServer
) -> None:
    from vidscope.flows.ask import run_ask_library

    options = {"openai": {"base_url": llm_server.base_url, "max_retries": 0, "timeout_s": 20}}
    settings = library.model_copy(
        update={"models": library.models.model_copy(update={"chat": "openai:scripted", "options": options})}
    )
    store = open_store(settings)
    lecture = next(r for r in store.rows(store.videos).to_pylist() if r["file_name"].startswith("lighthouse"))
    cite = {"video_id": lecture["video_id"], "start": 15.0, "end": 20.0}
    made_up = {"video_id": lecture["video_id"], "start": 40.0, "end": 45.0}  # past its end
    llm_server.script(
        [
            tool_call("library_search", {"query": "lighthouse painted", "top_k": 3}, call_id="call_lib"),
            tool_call("finish", {"answer": "Green.", "citations": [cite, made_up]}, call_id="call_finish"),
        ]
    )
    result = run_ask_library(settings, "What colour was the lighthouse painted?")
    assert result.answer == "Green." and not result.extractive and result.library
    first = llm_server.chat_requests[0]
    assert [t["function"]["name"] for t in first["tools"]][:1] == ["library_search"]
    assert "library holds 3 videos" in first["messages"][1]["content"]
    shown = llm_server.chat_requests[1]["messages"][-1]["content"]
    assert "lighthouse-lecture.mp4" in shown and lecture["video_id"] in shown
    assert [(c.video_id, c.verified) for c in result.citations] == [
        (lecture["video_id"], True),
        (lecture["video_id"], False),
    ]
    assert result.files == {lecture["video_id"]: "lighthouse-lecture.mp4"}

"""SAMA's planner reads each video's chapter list as its overview (issue 39).

A video of three scenes (its picture changes for good at 12 s and 24 s; no speech, no text) and a
silent video of one picture are ingested by the real flow without models (the chapters stage cuts
the first where its picture changes and makes the second one chapter, "Whole video"); SAMA then
runs for real against the scripted OpenAI-compatible server, and what is checked is the request
its planner received. (Titles from a title slide or speech reach it the same way: the overview
reads the stored chapters, whatever made them; tests/test_summaries.py checks those titles.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from llm_server import ScriptedLLMServer, text, tool_call
from media import silent_video, text_video
from stores import NO_MODELS
from test_simulator_sama import planner_settings

from vidscope.agents.chapter_list import ChapterEntry, load_chapters
from vidscope.agents.sama.agent import run_sama, sama_registry
from vidscope.agents.sama.memory import estimate_tokens
from vidscope.agents.sama.overview import HEADER, OVERVIEW_TOKENS, fitted_lines
from vidscope.agents.tools import ToolContext
from vidscope.core.settings import Settings
from vidscope.flows.ingest import run_ingest
from vidscope.models import registry
from vidscope.models.open_store import open_store

CUTS = [(12.0, (40, 120, 200)), (24.0, (200, 180, 40))]
#: Half the 8,192-token context of the documented llama.cpp setup (tests/test_sama_rules.py).
FIXED_TOKENS = 4096


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    root = tmp_path_factory.mktemp("sama-chapters")
    scenes = text_video(root / "scenes.mp4", duration=36.0, fps=5, cuts=CUTS)
    silent = silent_video(root / "silent.mp4", duration=6.0, fps=5)
    reports = run_ingest([str(scenes), str(silent)], Settings(data_dir=root / "data", models=NO_MODELS))
    assert all(r.status == "ok" for r in reports), reports
    assert reports[0].video_id and reports[1].video_id
    return root / "data", reports[0].video_id, reports[1].video_id


def planner_request(
    data_dir: Path, server: ScriptedLLMServer, video_id: str, *, use_chapters: bool = True
) -> dict[str, Any]:
    """The first planner turn's request of a real SAMA run over ``video_id``."""
    server.script(
        [
            text('{"type": "reading"}'),
            tool_call(
                "answer", {"answer": "blue", "citations": [{"video_id": video_id, "start": 0, "end": 4}]}
            ),
        ]
    )
    settings = planner_settings(data_dir, server)
    ctx = ToolContext(
        settings, open_store(settings), chat=registry.chat_model(settings), registry=sama_registry()
    )
    before = len(server.chat_requests)
    answer = run_sama(ctx, "What colour is the second scene?", [video_id], use_chapters=use_chapters)
    assert answer.answer == "blue"
    request: dict[str, Any] = server.chat_requests[before + 1]  # [before] is the meta planner's
    return request


def user_turn(request: dict[str, Any]) -> str:
    content: str = request["messages"][-1]["content"]
    return content


def test_the_chapters_reach_the_planner_as_quoted_overview_within_budget(
    ingested: tuple[Path, str, str], llm_server: ScriptedLLMServer
) -> None:
    data_dir, scenes, _ = ingested
    settings = Settings(data_dir=data_dir)
    chapters = load_chapters(open_store(settings), scenes)
    assert [c.start for c in chapters] == [0.0, 12.0, 24.0], chapters
    request = planner_request(data_dir, llm_server, scenes)
    said = user_turn(request)
    assert HEADER in said and "not evidence" in said
    overview = said.split(HEADER, 1)[1]
    quoted = overview.split("<video_data>\n", 1)[1].split("\n</video_data>", 1)[0]
    lines = json.loads(quoted)[scenes]
    assert len(lines) == len(chapters)
    for chapter, line in zip(chapters, lines, strict=True):
        assert line.startswith(f"{chapter.start:.1f}-{chapter.end:.1f}s {chapter.title}"), (line, chapter)
    # After the list of videos, before the (empty) evidence memory; the rules and skills unchanged.
    assert said.index("Videos:") < said.index(HEADER) < said.index("Evidence memory:")
    assert "Strict rules:" in request["messages"][0]["content"]
    fixed = sum(estimate_tokens(m["content"]) for m in request["messages"])
    assert fixed + estimate_tokens(json.dumps(request["tools"])) <= FIXED_TOKENS
    # The ablation leaves it out; nothing else of the request changes.
    section = HEADER + overview.split("\n\n", 1)[0]  # the header and its quoted block
    without = planner_request(data_dir, llm_server, scenes, use_chapters=False)
    assert user_turn(without) == said.replace(f"\n\n{section}", "")


def test_a_video_without_chapters_gets_the_request_it_got_before(
    ingested: tuple[Path, str, str], llm_server: ScriptedLLMServer
) -> None:
    data_dir, _, silent = ingested
    # No speech, text or picture change: one chapter, "Whole video", which tells nothing.
    assert len(load_chapters(open_store(Settings(data_dir=data_dir)), silent)) == 1
    with_overview = planner_request(data_dir, llm_server, silent)
    assert HEADER not in user_turn(with_overview)
    assert (
        with_overview["messages"]
        == planner_request(data_dir, llm_server, silent, use_chapters=False)["messages"]
    )


def test_a_three_hour_video_s_chapters_stay_within_the_budget() -> None:
    """90 chapters of two minutes (what the stage makes of three hours at most): the summaries go,
    then the shortest chapters, and a line counts what is not shown."""
    entries = [
        ChapterEntry(
            start=120.0 * i,
            end=120.0 * (i + 1) + (30.0 if i % 9 == 0 else 0.0),
            title=f"Part {i} of the long lecture on harbour engineering",
            summary="The speaker explains how the harbour wall was built from local stone. " * 3,
        )
        for i in range(90)
    ]
    lines = fitted_lines(entries, OVERVIEW_TOKENS)
    assert estimate_tokens(json.dumps(lines)) <= OVERVIEW_TOKENS + 5
    assert lines[-1].endswith("shorter chapters not shown)") and ":" not in lines[0]
    shown = [line.split(" ", 1)[0] for line in lines[:-1]]
    assert "0.0-150.0s" in shown and shown == sorted(shown, key=lambda s: float(s.split("-")[0]))
    few = fitted_lines(entries[:3], OVERVIEW_TOKENS)
    assert len(few) == 3 and all(": The speaker explains" in line for line in few)

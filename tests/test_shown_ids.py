"""Video ids as models see them: the start of each id, taken back whole (agents/tools.ToolContext).

The real 1.5B planner copies the 64-hex id it is shown into every call (57 output tokens each time,
tests/real_model ask-dvd, 2026-11-29): "clip_search(video_id=8e71a6b4c922…, query=…)". Models are
now shown the first 12 characters; tools, citations and nested targets take any unique start of at
least 8 characters back as the whole id, so caches, traces and answers keep whole ids.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from test_agent_runtime import VIDEO_ID, build_store, make_settings

from vidscope.agents.citations import Evidence, parse_citations
from vidscope.agents.dvd.tools import dvd_registry
from vidscope.agents.runtime import describe_videos, format_observation
from vidscope.agents.tools import AgentConfig, ToolContext, execute_tool
from vidscope.core.settings import Settings
from vidscope.storage.store import Store

SHOWN = VIDEO_ID[:12]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, Store]:
    settings = make_settings(tmp_path_factory.mktemp("data"))
    return settings, build_store(settings)


def context(world: tuple[Settings, Store]) -> ToolContext:
    settings, store = world
    return ToolContext(settings, store, config=AgentConfig(), registry=dvd_registry())


def test_the_opening_prompt_and_observations_show_the_start_of_the_id(world: tuple[Settings, Store]) -> None:
    ctx = context(world)
    assert describe_videos(ctx, [VIDEO_ID])[0]["video_id"] == SHOWN
    outcome = execute_tool(ctx, "clip_search", {"video_id": VIDEO_ID, "query": "secret code", "top_k": 2})
    text = format_observation(outcome, ctx)
    assert SHOWN in text and VIDEO_ID not in text


@pytest.mark.parametrize("written", [SHOWN, VIDEO_ID[:8], VIDEO_ID, f" {SHOWN} "])
def test_a_call_with_the_shown_id_runs_on_the_whole_id(world: tuple[Settings, Store], written: str) -> None:
    outcome = execute_tool(context(world), "clip_search", {"video_id": written, "query": "secret code"})
    assert outcome.ok, outcome.error
    assert outcome.arguments["video_id"] == VIDEO_ID  # what the cache key and the trace hold


def test_too_short_or_unknown_starts_are_refused(world: tuple[Settings, Store]) -> None:
    ctx = context(world)
    for written in (VIDEO_ID[:7], "ffffffffffff"):
        outcome = execute_tool(ctx, "clip_search", {"video_id": written, "query": "secret code"})
        assert not outcome.ok and "unknown video_id" in (outcome.error or "")


def test_citations_name_videos_by_their_shown_id(world: tuple[Settings, Store]) -> None:
    ctx = context(world)
    search = execute_tool(ctx, "clip_search", {"video_id": SHOWN, "query": "secret code for the vault"})
    evidence = Evidence()
    assert search.result is not None
    evidence.add(search.result, "clip_search")
    [cited] = parse_citations(ctx, evidence, [{"video_id": SHOWN, "start": 35.0, "end": 40.0}], "")
    assert cited.video_id == VIDEO_ID and cited.verified


def test_two_videos_starting_alike_are_shown_whole_and_a_shared_start_is_refused(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "data")
    store = build_store(settings)
    twin = SHOWN + "f" * 52  # the same first 12 characters as VIDEO_ID
    row = store.rows(store.videos, video_id=VIDEO_ID).to_pylist()[0]
    store.upsert(store.videos, pa.Table.from_pylist([{**row, "video_id": twin}], schema=store.videos.schema))
    ctx = ToolContext(settings, store, config=AgentConfig(), registry=dvd_registry())
    assert ctx.shown_id(VIDEO_ID) == VIDEO_ID and ctx.shown_id(twin) == twin
    shared = execute_tool(ctx, "clip_search", {"video_id": SHOWN, "query": "secret code"})
    assert not shared.ok and "starts 2 videos' ids" in (shared.error or "")
    whole = execute_tool(ctx, "clip_search", {"video_id": VIDEO_ID, "query": "secret code"})
    assert whole.ok and whole.arguments["video_id"] == VIDEO_ID

"""vidscope's own tool-result cache: its files and its keys.

The store is the synthetic one of test_agent_runtime (no ingestion); tool calls go through
:func:`execute_tool` exactly as the agents make them. The same files in and out of a Prefect flow
run: tests/test_operations.py, beside the Prefect server it already runs (a temporary server of
its own cost this file 12 s).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_agent_runtime import VIDEO_ID, VideoId, build_store, make_settings

from vidscope.agents import tool_cache
from vidscope.agents.cvr.actions import visual_query
from vidscope.agents.dvd.tools import clip_search, dvd_registry, frame_inspect, global_browse
from vidscope.agents.tools import (
    AgentConfig,
    ToolContext,
    ToolError,
    ToolRegistry,
    ToolResult,
    execute_tool,
    tool,
    tool_cache_key,
)
from vidscope.core.settings import Settings
from vidscope.storage.store import Store


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, Store]:
    settings = make_settings(tmp_path_factory.mktemp("data"))
    return settings, build_store(settings)


def context(
    world: tuple[Settings, Store], registry: ToolRegistry | None = None, **config: object
) -> ToolContext:
    settings, store = world
    return ToolContext(settings, store, config=AgentConfig(**config), registry=registry or dvd_registry())


def entry(world: tuple[Settings, Store], tool_name: str, arguments: dict) -> Path:
    ctx = context(world)
    spec = ctx.registry.get(tool_name)  # type: ignore[union-attr]
    key = tool_cache_key(ctx, spec, spec.validate(arguments).model_dump(mode="json"))
    return tool_cache.cache_dir(world[0].data_dir) / tool_name / f"{key}.json"


def test_a_result_is_cached_as_a_documented_json_file(world) -> None:
    args = {"video_id": VIDEO_ID, "query": "what goes in the oven", "top_k": 2}
    first = execute_tool(context(world), "clip_search", args)
    assert first.ok and not first.cached
    path = entry(world, "clip_search", args)
    record = json.loads(path.read_text())
    assert {k: record[k] for k in ("format", "format_version", "tool", "tool_version", "kind", "type")} == {
        "format": "vidscope-tool-result",
        "format_version": 1,
        "tool": "clip_search",
        "tool_version": clip_search.version,
        "kind": "result",
        "type": "ClipSearchResult",
    }
    assert record["key"] == path.stem and record["result"] == first.result.model_dump(mode="json")
    again = execute_tool(context(world), "clip_search", args)
    assert again.cached and again.result == first.result
    # Nothing is written in Prefect's formats or places any more.
    assert not (world[0].data_dir / "prefect").exists()


def test_a_damaged_or_foreign_entry_is_a_miss_and_is_rewritten(world) -> None:
    args = {"video_id": VIDEO_ID, "query": "how is the loaf shaped", "top_k": 2}
    first = execute_tool(context(world), "clip_search", args)
    path = entry(world, "clip_search", args)
    good = path.read_text()
    for damaged in (
        "{not json",
        good.replace('"format_version":1', '"format_version":99'),
        good.replace('"type":"ClipSearchResult"', '"type":"BrowseResult"'),
        json.dumps({**json.loads(good), "result": {"clips": "not a list"}}),
    ):
        path.write_text(damaged)
        outcome = execute_tool(context(world), "clip_search", args)
        assert outcome.ok and not outcome.cached and outcome.result == first.result
        rewritten = json.loads(path.read_text())
        assert rewritten["format_version"] == 1 and rewritten["result"] == json.loads(good)["result"]


def test_an_expected_failure_is_cached_as_a_failure(world) -> None:
    calls: list[str] = []

    @tool()
    def refusing(ctx: ToolContext, video_id: VideoId) -> ToolResult:
        """Refuses, as a tool does for a range outside the video."""
        calls.append(video_id)
        raise ToolError("that range is outside the video")

    registry = ToolRegistry([refusing])
    first = execute_tool(context(world, registry), "refusing", {"video_id": VIDEO_ID})
    second = execute_tool(context(world, registry), "refusing", {"video_id": VIDEO_ID})
    assert first.error == second.error == "that range is outside the video"
    assert second.cached and len(calls) == 1
    record = json.loads(entry_for(world, registry, "refusing").read_text())
    assert (record["kind"], record["type"], record["result"]) == (
        "failure",
        "ToolFailure",
        {"error": "that range is outside the video"},
    )


def entry_for(world, registry: ToolRegistry, name: str) -> Path:  # type: ignore[no-untyped-def]
    ctx = context(world, registry)
    key = tool_cache_key(ctx, registry.get(name), {"video_id": VIDEO_ID})
    return tool_cache.cache_dir(world[0].data_dir) / name / f"{key}.json"


def test_each_agent_setting_invalidates_only_the_tools_that_read_it(world) -> None:
    calls = {
        clip_search: {"video_id": VIDEO_ID, "query": "q", "top_k": 3},
        global_browse: {"video_id": VIDEO_ID, "query": "q"},
        frame_inspect: {"video_id": VIDEO_ID, "question": "q", "time_ranges": [[1.0, 2.0]]},
        visual_query: {"targets": [{"video_id": VIDEO_ID, "t0": 1.0, "t1": 2.0}], "focus": "hands"},
    }

    def keys(**config: object) -> dict[str, str]:
        ctx = context(world, **config)
        return {spec.name: tool_cache_key(ctx, spec, args) for spec, args in calls.items()}

    base = keys()

    def changed(**config: object) -> set[str]:
        return {name for name, key in keys(**config).items() if key != base[name]}

    assert changed(cvr_frames=3) == changed(cvr_frame_side=100) == {"visual_query"}
    assert changed(max_frames=7) == changed(frame_max_side=100) == {"frame_inspect"}
    assert changed(browse_captions=5) == {"global_browse"}
    # Every tool that asks a model is keyed on the output limit and temperature it asks with.
    assert (
        changed(max_tokens=17)
        == changed(temperature=0.5)
        == {"global_browse", "frame_inspect", "visual_query"}
    )
    # Settings no tool reads change no key.
    assert changed(top_k=3, max_steps=2, tool_retries=0, cvr_max_turns=3) == set()


def test_a_cached_tool_may_read_only_the_settings_it_declares(world) -> None:
    @tool()
    def sneaky(ctx: ToolContext, video_id: VideoId) -> ToolResult:
        """Reads a setting it does not declare."""
        ctx.config.max_frames  # noqa: B018 - the read is the point
        return ToolResult()

    @tool(settings=("max_frames",))
    def honest(ctx: ToolContext, video_id: VideoId) -> ToolResult:
        """Reads the setting it declares."""
        ctx.config.max_frames  # noqa: B018
        return ToolResult()

    registry = ToolRegistry([sneaky, honest])
    failed = execute_tool(context(world, registry), "sneaky", {"video_id": VIDEO_ID})
    assert not failed.ok and "UndeclaredSetting" in failed.error and "max_frames" in failed.error
    assert execute_tool(context(world, registry), "honest", {"video_id": VIDEO_ID}).ok
    with pytest.raises(TypeError, match="not \\[agent\\] settings"):
        tool(settings=("no_such_knob",))

"""SAMA's ``temporal_grounding`` over the synthetic store of test_agent_runtime (no ingestion):
its hints span the clips as they were stored, whatever ``[ingest] clip_seconds`` says now."""

from __future__ import annotations

from pathlib import Path

from test_agent_runtime import ANSWER_CLIP, CLIP_SECONDS, VIDEO_ID, build_store, make_settings

from vidscope.agents.sama.agent import sama_registry
from vidscope.agents.tools import AgentConfig, ToolContext, execute_tool


def test_hints_span_the_stored_clips_not_the_current_clip_length(tmp_path: Path) -> None:
    store = build_store(make_settings(tmp_path / "data"))  # clips of 5 s
    # The setting changed after ingestion (a re-ingestion with it has not happened yet).
    settings = make_settings(tmp_path / "data").model_copy(deep=True)
    settings.ingest.clip_seconds = 3.0
    ctx = ToolContext(settings, store, config=AgentConfig(tool_cache=False), registry=sama_registry())
    outcome = execute_tool(ctx, "temporal_grounding", {"video_id": VIDEO_ID, "query": "secret code vault"})
    assert outcome.ok, outcome.error
    best = outcome.result.hints[0]
    answer = (ANSWER_CLIP * CLIP_SECONDS, (ANSWER_CLIP + 1) * CLIP_SECONDS)
    assert (best.start, best.end) == answer  # (35, 40), not clip 7 of 3 s: (21, 24)
    assert all(h.end - h.start == CLIP_SECONDS for h in outcome.result.hints)

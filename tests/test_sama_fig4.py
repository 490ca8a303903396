"""SAMA's conflict checks fire where the paper's do (issue 38).

SAMA's paper, Fig. 4 (as issue 38 quotes it; the figure itself could not be found here, the stored
pages hold the abstract only): the video reader says the woman carries "2 grocery bags", the scene
graph lists "1 bag"; the disagreement "triggers and resolves". We drive it end to end: the real
``run_sama`` loop, the real ``video_reader`` and ``scene_graph`` on a real ingested video, the
planner and the vision model served by the repo's scripted loopback server. Which side the paper's
re-read confirmed is not known here; our re-read sees two bags (one in each hand, one of them
hidden from the scene graph's few frames), so the reader's count is kept.

Also from the issue: time facts can conflict — two readings of one segment stating different times
of one event are compared (before, only another tool's facts were, and only video_reader stated
times) — and a re-read's time is of the same event (its question carries the event's own words).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from llm_server import ScriptedLLMServer, text, tool_call
from media import text_video
from stores import NO_MODELS

from vidscope.agents.sama.agent import _reread_question, run_sama, sama_registry
from vidscope.agents.sama.facts import Fact, comparable, same_claim
from vidscope.agents.sama.memory import EvidenceMemory, admit
from vidscope.agents.sama.tools_look import ReadResult
from vidscope.agents.tools import AgentConfig, ToolContext
from vidscope.core.settings import Settings
from vidscope.flows.ingest import run_ingest
from vidscope.models import registry
from vidscope.models.open_store import open_store

QUESTION = "How many grocery bags does the woman carry?"


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("fig4")
    path = text_video(root / "shopper.mp4", duration=6.0, texts=[(0.0, 6.0, "SHOPPER")])
    (report,) = run_ingest([str(path)], Settings(data_dir=root / "data", models=NO_MODELS))
    assert report.status == "ok", report
    return root / "data", report.video_id


def reply(**data: object) -> Any:
    return text(json.dumps(data))


def test_the_papers_fig4_conflict_fires_and_is_resolved_by_a_re_read(
    ingested: tuple[Path, str], llm_server: ScriptedLLMServer
) -> None:
    data_dir, video_id = ingested
    segment = {"video_id": video_id, "t0": 0.0, "t1": 6.0}
    llm_server.script(
        [
            text('{"type": "reading"}'),  # the meta planner
            tool_call("video_reader", {**segment, "question": QUESTION}),
            reply(found=True, answer="She carries 2 grocery bags.", counts={"grocery bags": 2}, time=None),
            tool_call("scene_graph", {**segment, "prompts": ["bag", "person"]}),
            reply(objects=[{"label": "bag", "colour": "brown"}, {"label": "person", "colour": "blue"}]),
            # The verification layer's re-read (the vision model again, not the planner).
            reply(found=True, answer="Two grocery bags, one in each hand.", counts={"bags": 2}, time=None),
            tool_call("answer", {"answer": "2", "citations": [{**segment, "start": 0.0, "end": 6.0}]}),
        ]
    )
    options = {"openai": {"base_url": llm_server.base_url, "max_retries": 0, "timeout_s": 30, "cache": False}}
    settings = Settings(
        data_dir=data_dir, models={**NO_MODELS, "chat": "openai:scripted", "options": options}
    )
    ctx = ToolContext(
        settings,
        open_store(settings),
        chat=registry.chat_model(settings),
        config=AgentConfig(),
        registry=sama_registry(),
    )
    result = run_sama(ctx, QUESTION, [video_id])

    (conflict,) = [s.observation for s in result.trace if s.kind == "conflict"]
    assert "conflict on distinct count of bag: scene_graph says 1.0, video_reader says 2.0" in conflict
    assert conflict.endswith("kept 2.0 (video_reader)"), conflict
    (verify,) = [s for s in result.trace if s.kind == "verify"]
    assert verify.tool == "video_reader" and verify.ok
    assert (verify.arguments["t0"], verify.arguments["t1"]) == (0.0, 6.0)  # the shared window
    assert "How many different bag appear over the whole segment?" in verify.arguments["question"]
    # The planner's next turn sees the verified count only, and the resolution.
    last = llm_server.chat_requests[-1]["messages"][-1]["content"]
    assert "video_reader: distinct count of grocery bags = 2.0 in [0, 6]s" in last
    assert "distinct count of bag = 1.0" not in last.split("Since your last turn")[0]
    assert "kept 2.0 (video_reader)" in last
    assert result.answer == "2" and result.usage.tool_calls == 3  # reader, graph, re-read


def test_two_readings_of_one_event_at_different_times_conflict_and_a_re_read_settles_it() -> None:
    door = "When does the door open?"
    first = ReadResult(video_id="v", t0=0.0, t1=20.0, question=door, answer="at 4 s", time=4.0)
    second = ReadResult(
        video_id="v", t0=0.0, t1=10.0, question="At what time does the door open?", answer="9 s", time=9.0
    )
    (early,), (late,) = first.facts(), second.facts()
    assert early.source == late.source == "video_reader" and comparable(early, late)
    memory = EvidenceMemory(question=door)
    assert admit(memory, [early], None, 2) == []
    asked: list[str] = []

    def reread(fact: Fact, start: float, end: float) -> list[Fact]:
        asked.append(_reread_question(fact))
        again = ReadResult(video_id="v", t0=start, t1=end, question=asked[-1], answer="4 s", time=4.2)
        return again.facts()

    (resolution,) = admit(memory, [late], reread, 2)
    # The re-read asks the event's own question, and its time is of the same event.
    assert asked == ["At what time does the door open? Look carefully; state it."]
    assert resolution.kept is not None and resolution.kept.value == 4.0
    assert [f.value for f in memory.all_facts()] == [4.0]


def test_one_call_never_conflicts_with_itself_and_unlike_subjects_are_not_compared() -> None:
    def count(subject: str, value: float, source: str = "video_reader") -> Fact:
        return Fact(
            video_id="v",
            t0=0,
            t1=6,
            kind="count",
            measure="distinct",
            subject=subject,
            value=value,
            source=source,
        )

    memory = EvidenceMemory()
    # A reading that states two counts of one subject (an odd reply) is one observation.
    assert admit(memory, [count("bag", 1), count("bags", 2)], lambda *_: [], 2) == []
    assert same_claim(count("grocery bags", 2), count("bag", 1))
    assert not same_claim(count("red car", 1), count("blue car", 2))
    assert not comparable(count("red car", 1), count("blue car", 2, "scene_graph"))

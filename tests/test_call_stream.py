"""Replies stopped once a whole call is written (models/call_stream.py, issue 44).

The real Qwen2.5-Coder 1.5B behind llama.cpp writes its DVD calls in the reply's text and goes
on: "Here's the result of the `global_browse` function: <video_data>{…" until its output limit
(question_speed.py, 2026-11-28: a call of ~60 tokens, then ~320 made-up ones, 15 s on 2 cores).
What follows a written call is dropped from the conversation, so every turn with tools is
streamed and the connection closed after the call — the first turn too: there the real model
wrote a ~250-token plan holding its call and then ~130 made-up tokens to its limit (question_speed.py,
2026-11-29, 70 s for that turn). These tests run the real ``openai`` backend against the loopback
server streaming word by word.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from llm_server import ScriptedLLMServer, text, tool_call
from test_ask import ANSWER_RANGE, QUESTION, VIDEO_ID, agent_settings, build_store, finish_call

from vidscope.flows.ask import run_ask
from vidscope.models import openai_compat
from vidscope.models.protocols.chat import ChatMessage, ToolSpec

SEARCH = ToolSpec(
    name="clip_search",
    description="Search.",
    parameters={"type": "object", "properties": {"query": {"type": "string"}}},
)
CALL = '{"name": "clip_search", "arguments": {"query": "ferry to North Point"}}'
#: What the real model wrote after its call: the tool's result, made up.
IMAGINED = (
    "\n\nHere's the result of the `clip_search` function:\n<video_data>\n"
    + '{"clips": [{"start": 0, "end": 10, "speech": "The ferry is leaving from pier three."}]} ' * 8
)


def planner(server: ScriptedLLMServer, data_dir: Path, **options: Any) -> Any:
    opts = {"planner": {"base_url": server.base_url, "retry_base_s": 0.01, "cache": False, **options}}
    return openai_compat.from_spec("planner", "scripted", opts, data_dir)


def ask(model: Any) -> Any:
    return model.chat([ChatMessage(role="user", content="Which pier?")], tools=[SEARCH], max_tokens=400)


def test_every_turn_with_tools_stops_after_its_written_call(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    llm_server.chunk_seconds = 0.01
    llm_server.script([text(CALL + IMAGINED), text(CALL + IMAGINED)])
    model = planner(llm_server, tmp_path)
    first, second = ask(model), ask(model)  # the first turn too: nothing is learned first
    assert [r.get("stream", False) for r in llm_server.chat_requests] == [True, True]
    for reply in (first, second):
        assert [(c.name, c.arguments) for c in reply.tool_calls] == [
            ("clip_search", {"query": "ferry to North Point"})
        ]
        assert not reply.text  # nothing but the call is kept
        assert reply.usage.output_tokens > 0  # the chunks received (the server counts at the end)
    for sent, written in llm_server.streams:
        assert sent < written / 2, llm_server.streams  # most of the imagined result was never written


def test_a_native_call_or_prose_in_a_stream_is_read_to_its_end(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    """Streaming changes nothing for a model that calls natively or answers in words: its call's
    arguments and its words arrive whole, with the server's usage."""
    prose = "The ferry leaves from pier seven, as the clip at 10 s says."
    llm_server.script([tool_call("clip_search", {"query": "x"}), text(prose)])
    model = planner(llm_server, tmp_path)
    called, said = ask(model), ask(model)
    assert all(r.get("stream") for r in llm_server.chat_requests)
    assert [(c.name, c.arguments) for c in called.tool_calls] == [("clip_search", {"query": "x"})]
    assert called.usage.output_tokens > 0
    assert said.text == prose and not said.tool_calls
    assert llm_server.streams[-1][0] == llm_server.streams[-1][1]  # every word was read


def test_stop_after_call_off_reads_every_reply_whole(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    llm_server.script([text(CALL + IMAGINED), text(CALL + IMAGINED)])
    model = planner(llm_server, tmp_path, stop_after_call=False)
    ask(model), ask(model)
    assert not any(r.get("stream") for r in llm_server.chat_requests)


def same_ids(requests: list[Any]) -> str:
    """The requests as JSON with each call id replaced by its order of appearance (the backend
    gives a call parsed from a JSON reply a fresh random id in every run)."""
    dumped = json.dumps(requests)
    for n, found in enumerate(dict.fromkeys(re.findall(r'"(call_[0-9a-f]{12}|text-[0-9a-f]{8})"', dumped))):
        dumped = dumped.replace(found, f"id-{n}")
    return dumped


def test_a_dvd_question_keeps_the_same_conversation_when_replies_stop_early(tmp_path: Path) -> None:
    """DVD's loop against a model writing calls and then imagining their results: the answer and
    every request the loop sends are what they would be had each reply been read to its end."""

    def written(arguments: dict[str, Any]) -> str:
        return json.dumps({"name": "clip_search", "arguments": arguments}) + IMAGINED

    script = [
        text(written({"video_id": VIDEO_ID, "query": "secret code vault", "top_k": 3})),
        text(written({"video_id": VIDEO_ID, "query": "vault code", "top_k": 2})),
        finish_call("The code is purple elephant.", [ANSWER_RANGE]),
    ]
    runs = []
    for stops in (True, False):
        server = ScriptedLLMServer().start()
        try:
            server.chunk_seconds = 0.002
            settings = agent_settings(tmp_path / f"data-{stops}", server)
            settings.models.options["openai"]["stop_after_call"] = stops
            if stops:
                build_store(settings)
            else:  # the same store, copied: a second build costs seconds
                shutil.copytree(tmp_path / "data-True", settings.data_dir)
            server.script(script)
            answer = run_ask(settings, VIDEO_ID, QUESTION)
            runs.append((answer, [r["messages"] for r in server.chat_requests], server.streams))
        finally:
            server.stop()
    (stopped, stopped_requests, streams), (whole, whole_requests, no_streams) = runs
    assert stopped.answer == whole.answer == "The code is purple elephant."
    assert same_ids(stopped_requests) == same_ids(whole_requests)
    assert no_streams == [] and streams and streams[0][0] < streams[0][1]


def test_a_server_that_refuses_to_stream_gets_whole_requests(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    """A server refusing ``stream_options`` (HTTP 400 naming it) is asked again without streaming,
    and never streamed again in this process; the turn is not lost."""
    llm_server.refuse_params = {"stream_options"}
    llm_server.script([text(CALL + IMAGINED), text(CALL), text(CALL)])
    model = planner(llm_server, tmp_path)
    replies = [ask(model), ask(model), ask(model)]
    assert all(r.tool_calls[0].name == "clip_search" for r in replies)
    # The first streamed request is refused (no reply used) and sent again whole, as every later one.
    assert [r.get("stream", False) for r in llm_server.chat_requests] == [True, False, False, False]


def test_a_list_of_calls_is_read_to_its_end(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    """A reply that opens a JSON list may hold several calls (json_tools.parse_tool_reply): it is
    not stopped after the first."""
    two = f"```json\n[{CALL}, {CALL.replace('ferry to North Point', 'pier seven')}]\n```"
    llm_server.script([text(CALL), text(two)])
    model = planner(llm_server, tmp_path)
    ask(model)
    reply = ask(model)
    assert llm_server.chat_requests[1].get("stream") and llm_server.streams[1][0] == llm_server.streams[1][1]
    assert [c.arguments["query"] for c in reply.tool_calls] == ["ferry to North Point", "pier seven"]

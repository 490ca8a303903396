"""Reasoning models behind the OpenAI-compatible backend, against the scripted loopback server:
sampling sent only when configured, a reasoning budget, thoughts kept out of the answer, replies
cut off at the output limit and context-window overflows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from llm_server import ScriptedLLMServer, cut_off, error, text, thinking, tool_call

from vidscope.core.errors import ContextLengthExceeded, ModelOutputError
from vidscope.models import openai_compat
from vidscope.models.openai_compat import CUT_OFF_NOTE, split_reasoning
from vidscope.models.protocols.chat import ChatMessage, ToolSpec

SEARCH = ToolSpec(
    name="clip_search",
    description="Find clips.",
    parameters={"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
)


def planner(server: ScriptedLLMServer, data_dir: Path, **options: Any) -> Any:
    """A planner backend on ``server`` (options in its role sub-table, as a user would write them)."""
    opts = {"planner": {"base_url": server.base_url, "retry_base_s": 0.01, "cache": False, **options}}
    return openai_compat.from_spec("planner", "reasoner", opts, data_dir)


def question() -> list[ChatMessage]:
    return [ChatMessage(role="user", content="What colour is the car?")]


def test_a_server_refusing_temperature_works_when_the_planner_sets_no_sampling(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    llm_server.refuse_params = {"temperature"}
    llm_server.script([text("Blue.")])
    reply = planner(llm_server, tmp_path, sampling={}).chat(question(), temperature=0.0)
    assert reply.text == "Blue."
    (body,) = llm_server.chat_requests
    assert "temperature" not in body


def test_without_sampling_config_a_refused_temperature_is_dropped_once_and_remembered(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    llm_server.refuse_params = {"temperature"}
    llm_server.script([text("Blue."), text("Red.")])
    model = planner(llm_server, tmp_path)
    assert model.chat(question(), temperature=0.0).text == "Blue."
    assert model.chat(question(), temperature=0.0).text == "Red."
    sent = [("temperature" in body) for body in llm_server.chat_requests]
    assert sent == [True, False, False]  # refused once, then never sent again


def test_configured_sampling_and_reasoning_budget_are_sent(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    llm_server.script([text("Blue.")])
    model = planner(
        llm_server,
        tmp_path,
        sampling={"temperature": 0.6, "top_p": 0.95, "top_k": 20},
        reasoning_tokens=4096,
        reasoning_effort="high",
        max_tokens_param="max_completion_tokens",
    )
    model.chat(question(), max_tokens=1024, temperature=0.0)
    (body,) = llm_server.chat_requests
    assert body["temperature"] == 0.6 and body["top_p"] == 0.95 and body["top_k"] == 20
    assert body["max_completion_tokens"] == 1024 + 4096 and "max_tokens" not in body
    assert body["reasoning_effort"] == "high"


@pytest.mark.parametrize(
    ("model", "sent"),
    [("o4-mini", ("max_completion_tokens", 1024 + 4096)), ("gpt-5", ("max_completion_tokens", 1024 + 4096)),
     ("qwen2.5-coder-1.5b-instruct", ("max_tokens", 1024)), ("gpt-4o-mini", ("max_tokens", 1024))],
)  # fmt: skip
def test_an_openai_reasoning_model_gets_a_thinking_budget_by_default(
    llm_server: ScriptedLLMServer, tmp_path: Path, model: str, sent: tuple[str, int]
) -> None:
    """Issue 35: an o-series planner thinks in output tokens; with the agents' 1024-token limit and
    no budget its reply was cut off before the call. By name it gets 4096 more and the limit
    parameter it wants; other models are sent what they were."""
    llm_server.script([text("Blue.")])
    opts = {"planner": {"base_url": llm_server.base_url, "retry_base_s": 0.01, "cache": False}}
    openai_compat.from_spec("planner", model, opts, tmp_path).chat(question(), max_tokens=1024)
    (body,) = llm_server.chat_requests
    name, limit = sent
    other = "max_tokens" if name == "max_completion_tokens" else "max_completion_tokens"
    assert body[name] == limit and other not in body


def test_think_blocks_stay_out_of_the_answer_and_out_of_tool_parsing(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    fake_call = '{"tool": "clip_search", "arguments": {"query": "a thought, not a call"}}'
    real_call = '{"tool": "clip_search", "arguments": {"query": "red car"}}'
    llm_server.script(
        [
            text("<think>The car looks blue in the frames.</think>\nBlue."),
            text(f"<think>Maybe {fake_call}</think>{real_call}"),
        ]
    )
    model = planner(llm_server, tmp_path)
    reply = model.chat(question())
    assert reply.text == "Blue." and reply.reasoning == "The car looks blue in the frames."
    reply = model.chat(question(), tools=[SEARCH])
    assert [c.arguments for c in reply.tool_calls] == [{"query": "red car"}]
    assert reply.reasoning is not None and "a thought, not a call" in reply.reasoning


def test_reasoning_fields_are_returned_beside_the_answer(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    llm_server.script(
        [thinking("Blue.", "Frames 3 and 4 show it."), thinking("Red.", "Checked.", field_name="reasoning")]
    )
    model = planner(llm_server, tmp_path)
    first, second = model.chat(question()), model.chat(question())
    assert (first.text, first.reasoning) == ("Blue.", "Frames 3 and 4 show it.")
    assert (second.text, second.reasoning) == ("Red.", "Checked.")


@pytest.mark.parametrize(
    ("raw", "answer", "thought"),
    [
        ("Only thought here.</think>The answer is B.", "The answer is B.", "Only thought here."),
        ("Answer first <think>then an unfinished thou", "Answer first", "then an unfinished thou"),
        ("No reasoning at all.", "No reasoning at all.", None),
    ],
)
def test_split_reasoning_handles_partial_tags(raw: str, answer: str, thought: str | None) -> None:
    assert split_reasoning(raw) == (answer, thought)


def test_a_reply_cut_off_at_the_limit_is_asked_again_with_a_larger_budget(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    llm_server.script([cut_off("<think>Let me look at every frame in turn, first"), text("Blue.")])
    reply = planner(llm_server, tmp_path).chat(question(), max_tokens=100)
    assert reply.text == "Blue."
    first, second = llm_server.chat_requests
    assert first["max_tokens"] == 100 and second["max_tokens"] == 200
    assert second["messages"][-1] == {"role": "user", "content": CUT_OFF_NOTE}


def test_a_reply_cut_off_twice_is_an_error_not_an_answer(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    # The truncated tool call would parse leniently; it must not become a call or an answer.
    llm_server.script(
        [cut_off('{"tool": "clip_search", "arguments": {"query": "re'), cut_off("The answer is")]
    )
    with pytest.raises(ModelOutputError, match="cut off at the output limit"):
        planner(llm_server, tmp_path).chat(question(), tools=[SEARCH], max_tokens=50)
    assert len(llm_server.chat_requests) == 2


@pytest.mark.parametrize(
    "message",
    [
        "This model's maximum context length is 4096 tokens. However, you requested 5120 tokens "
        "(4096 in the messages, 1024 in the completion). Please reduce the length of the messages.",
        "the request exceeds the available context size, try increasing it",
    ],
)
def test_a_context_overflow_raises_context_length_exceeded(
    llm_server: ScriptedLLMServer, tmp_path: Path, message: str
) -> None:
    llm_server.script([error(400, message), text("never reached")])
    with pytest.raises(ContextLengthExceeded, match="context window"):
        planner(llm_server, tmp_path).chat(question())
    assert len(llm_server.chat_requests) == 1  # not retried: only trimming can help


def test_other_http_400s_are_not_context_errors(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    llm_server.script([error(400, "invalid image URL")])
    with pytest.raises(openai_compat.EndpointError) as caught:
        planner(llm_server, tmp_path).chat(question())
    assert not isinstance(caught.value, ContextLengthExceeded)


def test_a_cut_off_tool_call_retry_then_a_clean_call_is_used(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    llm_server.script([cut_off("<think>I will search"), tool_call("clip_search", {"query": "car"})])
    reply = planner(llm_server, tmp_path).chat(question(), tools=[SEARCH], max_tokens=64)
    assert [c.name for c in reply.tool_calls] == ["clip_search"] and reply.finish_reason == "tool_calls"


def test_a_whole_call_written_before_the_cut_is_used_without_asking_again(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    """What a real Qwen2.5-Coder 1.5B did in AVI's Retrieve (llama.cpp, 384-token limit): its call
    written as code, then an invented tool result until the limit. Asked again with twice the limit,
    it did the same (714 more tokens, two minutes a turn on 2 cores). The call closed before the cut:
    it is used at once, and nothing the model invented after it is kept."""
    imagined = (
        'clip_search(query="lighthouse painted green")\n<video_data>\n'
        '{"clips":[{"start":20.0,"caption":"the lighthouse was painted blue in 1975","speech":"The l'
    )
    llm_server.script([cut_off(imagined)])
    reply = planner(llm_server, tmp_path).chat(question(), tools=[SEARCH], max_tokens=384)
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [
        ("clip_search", {"query": "lighthouse painted green"})
    ]
    assert reply.text is None and "blue" not in (reply.reasoning or "")
    assert len(llm_server.chat_requests) == 1
    # The same in the JSON shape, after some reasoning: the reasoning is kept, the rest is not.
    llm_server.script(
        [cut_off('I will search. {"tool": "clip_search", "arguments": {"query": "car"}} It returned')]
    )
    reply = planner(llm_server, tmp_path).chat(question(), tools=[SEARCH], max_tokens=64)
    assert [c.arguments for c in reply.tool_calls] == [{"query": "car"}] and reply.text == "I will search."
    assert len(llm_server.chat_requests) == 2


def test_a_call_not_closed_before_the_cut_is_never_used(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    llm_server.script(
        [cut_off('clip_search(query="lighthouse painted'), tool_call("clip_search", {"query": "car"})]
    )
    reply = planner(llm_server, tmp_path).chat(question(), tools=[SEARCH], max_tokens=64)
    assert [c.arguments for c in reply.tool_calls] == [{"query": "car"}]  # the second, clean reply
    assert len(llm_server.chat_requests) == 2

"""The simulated visual sub-agent answers its focus prompt: rule-based (the facts about the focus
first, an unseen focus said so), or phrased by the configured model (AgentCVR's LLM simulator,
``[agent] sim_phrasing``) over a real client and the loopback test server: also in a text-only
setup (only ``models.planner``, as the real-model tier runs), and a reply the client cannot use
leaves the facts listed."""

from __future__ import annotations

from pathlib import Path

from llm_server import ScriptedLLMServer, cut_off, text

from vidscope.agents import strategies
from vidscope.agents.environment import tool_context
from vidscope.agents.simulator.script import Event, Script, ScriptVideo, save_script
from vidscope.agents.simulator.simulator import PHRASE_MAX_TOKENS, ScriptSimulator, SimContext
from vidscope.agents.tools import execute_tool
from vidscope.core.settings import Settings
from vidscope.models import registry

KITCHEN = Script(
    script_id="kitchen",
    videos=[
        ScriptVideo(
            video_id="k1",
            duration=30.0,
            events=[
                Event(event_id="e1", start=2.0, end=6.0, label="the chef cracks two eggs"),
                Event(event_id="e2", start=4.0, end=9.0, label="a dog walks past the door"),
            ],
        )
    ],
)


def look(ctx: SimContext, focus: str) -> str:
    outcome = execute_tool(
        ctx, "visual_query", {"targets": [{"video_id": "k1", "t0": 0, "t1": 10}], "focus": focus}
    )
    # Shaped as the real look (issue 38): no structured events, the words in ``answer``.
    assert outcome.ok and outcome.result.events == []
    return outcome.result.answer


def test_the_rule_based_visual_query_answers_its_focus(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    registry_ = strategies.get("cvr").tool_registry(simulated=True)
    ctx = SimContext(settings, ScriptSimulator(KITCHEN), registry=registry_)
    about_eggs = look(ctx, "How many eggs does the chef crack?")
    first, also = about_eggs.split(" (also seen: ")
    assert "eggs" in first and "dog" not in first and "dog" in also
    assert look(ctx, "a red bicycle").startswith("nothing matching the focus is seen")
    both = look(ctx, "what happens")  # no words to match: every fact, in time order
    assert "also seen" not in both and both.index("eggs") < both.index("dog")


def test_the_llm_simulator_phrases_the_facts_for_the_focus(
    tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    path = tmp_path / "kitchen.json"
    save_script(KITCHEN, path)
    settings = Settings(
        data_dir=tmp_path / "data",
        models={
            "chat": "openai:scripted",
            "options": {"openai": {"base_url": llm_server.base_url, "max_retries": 0, "cache": False}},
        },
        agent={"environment": "sim", "script": str(path), "sim_phrasing": True},
    )
    registry.clear_cache()
    ctx = tool_context(settings, None, chat=None, config=settings.agent)
    ctx.registry = strategies.get("cvr").tool_registry(simulated=True)
    llm_server.script([text("The chef cracks two eggs between 0:02 and 0:06.")])
    assert look(ctx, "How many eggs?") == "The chef cracks two eggs between 0:02 and 0:06."
    sent = llm_server.chat_requests[-1]["messages"][-1]["content"]
    assert "Focus: How many eggs?" in sent and "a dog walks past the door" in sent
    registry.clear_cache()


def phrasing_context(tmp_path: Path, server: ScriptedLLMServer, role: str) -> SimContext:
    """A simulated cvr context with ``sim_phrasing`` and the only model configured as ``role``."""
    path = save_script(KITCHEN, tmp_path / "kitchen.json")
    settings = Settings(
        data_dir=tmp_path / "data",
        models={
            role: "openai:scripted",
            "options": {"openai": {"base_url": server.base_url, "max_retries": 0, "cache": False}},
        },
        agent={"environment": "sim", "script": str(path), "sim_phrasing": True},
    )
    registry.clear_cache()
    ctx = tool_context(settings, None, chat=None, config=settings.agent)
    ctx.registry = strategies.get("cvr").tool_registry(simulated=True)
    assert isinstance(ctx, SimContext)
    return ctx


def test_a_text_only_setup_phrases_with_the_planner(tmp_path: Path, llm_server: ScriptedLLMServer) -> None:
    """docs/models.md's text-only setup names only the planner: phrasing is text in, text out, so
    the planner phrases (it was silently rule-based: no vlm, no chat model)."""
    ctx = phrasing_context(tmp_path, llm_server, "planner")
    llm_server.script([text("Two eggs are cracked at 0:02.")])
    assert look(ctx, "How many eggs?") == "Two eggs are cracked at 0:02."
    assert llm_server.chat_requests[-1]["max_tokens"] == PHRASE_MAX_TOKENS
    registry.clear_cache()


def test_a_phrasing_reply_cut_off_twice_leaves_the_facts_listed(
    tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    ctx = phrasing_context(tmp_path, llm_server, "planner")
    llm_server.script([cut_off("The chef"), cut_off("The chef cracks")])
    answer = look(ctx, "How many eggs?")
    assert answer.startswith("2.0-6.0s") and "eggs" in answer and "also seen" in answer  # the rule's answer
    assert llm_server.pending == 0
    registry.clear_cache()

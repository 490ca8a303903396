"""The strategy registry: a strategy declared once is offered by every command, the API and the
rollouts, answers through the one signature, and the registry's help is what they show."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from test_agent_runtime import VIDEO_ID, build_store, make_settings

from vidscope.agents import strategies
from vidscope.agents.runtime import Answer
from vidscope.agents.strategies import Strategy, StrategyRequest
from vidscope.agents.tools import ToolContext, ToolRegistry

QUESTION = "What is baked today?"
LOOPBACK_CLIENT = ("127.0.0.1", 50000)

#: What the toy strategy saw of each request it answered.
SEEN: list[tuple[StrategyRequest, list[str]]] = []


def toy_run(ctx: ToolContext, request: StrategyRequest) -> Answer:
    """A strategy's run: it answers with the question and the tools it was given."""
    SEEN.append((request, ctx.registry.names if ctx.registry else []))
    return Answer(answer=f"toy: {request.question}")


def toy_tools() -> ToolRegistry:
    from vidscope.agents.dvd.tools import clip_search

    return ToolRegistry([clip_search])


@pytest.fixture
def toy() -> Iterator[Strategy]:
    """A strategy registered the way a new one is (one :func:`register` call), then removed."""
    strategy = strategies.register(
        Strategy(
            "toy",
            "Toy",
            "answers with the question itself",
            frozenset({"video", "videos"}),
            run=toy_run,
            tools=toy_tools,
            sim_tools=toy_tools,
            needs_planner=False,
        )
    )
    SEEN.clear()
    yield strategy
    del strategies.STRATEGIES["toy"]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    build_store(make_settings(tmp_path / "data"))
    return tmp_path / "data"


def test_the_registry_orders_scopes_defaults_and_help() -> None:
    assert strategies.names("video") == ("dvd", "avi")
    assert strategies.names("videos") == ("sama", "cvr")
    assert strategies.names("library") == ("dvd",)
    assert [strategies.default(s) for s in strategies.SCOPES] == ["dvd", "sama", "dvd"]
    assert "dvd: " in strategies.help_text("video") and "sama" not in strategies.help_text("video")
    with pytest.raises(ValueError, match="choose one of: sama, cvr"):
        strategies.get("avi", "videos")
    # The registry module names its strategies' code by import path: reading names imports none.
    assert all(isinstance(s.run, str) for s in strategies.STRATEGIES.values())


def test_a_registered_strategy_answers_ask_through_the_cli(
    toy: Strategy, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from vidscope.cli import app
    from vidscope.cli.common import overrides

    monkeypatch.chdir(data_dir.parent)
    overrides.clear()
    try:
        args = ["--data-dir", str(data_dir), "ask", "kitchen.mp4", QUESTION, "--json", "--agent", "toy"]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        data = json.loads(result.output[result.output.index("{") :])
        assert data["answer"] == f"toy: {QUESTION}" and data["agent"] == "toy"
        request, tools = SEEN[-1]
        assert request.scope == "video" and list(request.video_ids) == [VIDEO_ID]
        assert tools == ["clip_search"]  # the strategy's own tools, set by the one runner
        # A strategy of another scope is refused before anything runs, naming the choices.
        wrong = CliRunner().invoke(app, [*args[:-1], "sama"])
        assert wrong.exit_code == 2 and "dvd, avi, toy" in wrong.output
    finally:
        overrides.clear()


def test_a_registered_strategy_answers_ask_and_compare_through_the_api(toy: Strategy, data_dir: Path) -> None:
    from vidscope.api import create_app
    from vidscope.core.settings import Settings

    # The host too is loopback's: without a token the API answers loopback host names only.
    app = create_app(Settings(data_dir=data_dir))
    with TestClient(app, client=LOOPBACK_CLIENT, base_url="http://127.0.0.1") as client:
        listed = {s["name"]: s for s in client.get("/api/strategies").json()}
        assert listed["toy"]["scopes"] == ["video", "videos"] and listed["toy"]["help"] == toy.help
        assert listed["dvd"]["default_for"] == ["video", "library"]
        schema = client.get("/openapi.json").json()["components"]["schemas"]
        assert "toy" in schema["AskRequest"]["properties"]["agent"]["enum"]

        asked = client.post("/api/ask", json={"video": VIDEO_ID[:8], "question": QUESTION, "agent": "toy"})
        assert asked.status_code == 200, asked.text
        assert asked.json()["answer"] == f"toy: {QUESTION}" and asked.json()["agent"] == "toy"

        compared = client.post(
            "/api/compare", json={"videos": [VIDEO_ID[:8]], "question": QUESTION, "agent": "toy"}
        )
        assert compared.status_code == 200, compared.text
        assert compared.json()["agent"] == "toy" and SEEN[-1][0].scope == "videos"

        unknown = client.post("/api/ask", json={"video": VIDEO_ID[:8], "question": QUESTION, "agent": "nope"})
        assert unknown.status_code == 422 and "toy" in unknown.text


def test_a_registered_strategy_answers_through_mcp_and_eval(toy: Strategy, data_dir: Path) -> None:
    import anyio

    from vidscope.agents.environment import tool_context
    from vidscope.evaluation.items import BenchmarkItem
    from vidscope.flows.eval_agents import SUBTITLE_TEXT, answer_item
    from vidscope.mcp_server import build_server
    from vidscope.models.open_store import open_store

    settings = make_settings(data_dir)
    server = build_server(settings)
    called = anyio.run(server.call_tool, "ask", {"video": VIDEO_ID[:8], "question": QUESTION, "agent": "toy"})
    assert f"toy: {QUESTION}" in str(called)

    item = BenchmarkItem(
        benchmark="videomme", question_id="1", kind="multiple_choice", video_ids=("kitchen",),
        question=QUESTION, options=("bread", "cake"), answer="A", extra={SUBTITLE_TEXT: "we bake bread"},
    )  # fmt: skip
    ctx = tool_context(settings, open_store(settings), chat=None, config=settings.agent)
    assert answer_item("toy", ctx, item, [VIDEO_ID]).answer == f"toy: {QUESTION}"
    request, _ = SEEN[-1]
    assert list(request.options or []) == ["bread", "cake"] and "we bake bread" in request.context


def test_rollouts_offer_every_strategy_a_policy_drives_in_the_simulator(toy: Strategy) -> None:
    from vidscope.flows.training.rollout import rollout_strategies

    assert rollout_strategies() == ("dvd", "avi", "sama", "cvr", "actions")  # toy needs no planner
    strategies.register(Strategy("toy", "Toy", "", frozenset(), run=toy_run, sim_tools=toy_tools))
    assert "toy" in rollout_strategies()


def test_without_a_planner_the_extractive_answerer_stands_in(data_dir: Path) -> None:
    from vidscope.agents.environment import tool_context
    from vidscope.models.open_store import open_store

    settings = make_settings(data_dir)
    ctx = tool_context(settings, open_store(settings), chat=None, config=settings.agent)
    answer = strategies.answer("sama", ctx, StrategyRequest(QUESTION, [VIDEO_ID], "videos"))
    assert answer.extractive and answer.citations  # compare's side-by-side evidence
    assert ctx.registry is not None and "clip_search" in ctx.registry.names


def test_a_strategy_without_tools_in_an_environment_says_so() -> None:
    with pytest.raises(ValueError, match="no tools in the real environment"):
        strategies.get("actions").tool_registry(simulated=False)

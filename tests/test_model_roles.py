"""The planner and vlm roles: fallbacks to chat, where images go, cache keys, ``models --check``.

Two scripted loopback servers stand for a text-only reasoning planner and a vision model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llm_server import ScriptedLLMServer, hang, text, tool_call
from test_agent_runtime import VIDEO_ID, build_store
from typer.testing import CliRunner

from vidscope.agents.dvd.tools import dvd_registry, frame_inspect, global_browse
from vidscope.agents.runtime import run_agent
from vidscope.agents.tools import AgentConfig, ToolContext, tool_cache_key
from vidscope.agents.vision import NO_VISION_AGAIN
from vidscope.cli import app
from vidscope.core.settings import Settings
from vidscope.models import registry
from vidscope.models.probe import check_roles
from vidscope.storage.store import Store
from vidscope.tasks.stage import role_config


@pytest.fixture
def vlm_server() -> Iterator[ScriptedLLMServer]:
    """A second loopback server, for the vision model."""
    server = ScriptedLLMServer().start()
    try:
        yield server
    finally:
        server.stop()


def two_servers(
    data_dir: Path, planner: ScriptedLLMServer, vlm: ScriptedLLMServer, **models: Any
) -> Settings:
    """Settings whose planner and vlm live on two servers (role sub-tables), no plain chat model."""
    fast = {"retry_base_s": 0.01, "max_retries": 0, "cache": False}
    return Settings(
        data_dir=data_dir,
        models={
            "chat": None,
            "captioner": None,
            "speech_recognizer": None,
            "text_reader": None,
            "planner": "openai:reasoner",
            "vlm": "openai:looker",
            "options": {
                "openai": {
                    "planner": {"base_url": planner.base_url, **fast},
                    "vlm": {"base_url": vlm.base_url, **fast},
                }
            },
            **models,
        },
    )


def image_parts(body: dict[str, Any]) -> int:
    return sum(
        1
        for m in body["messages"]
        if isinstance(m.get("content"), list)
        for p in m["content"]
        if p.get("type") == "image_url"
    )


@pytest.fixture(autouse=True)
def _fresh_registry() -> Iterator[None]:
    registry.clear_cache()  # backends are per settings: servers change between tests
    yield
    registry.clear_cache()


# ---------------------------------------------------------------------------- fallbacks


def test_unset_planner_and_vlm_are_the_chat_model_and_keys_do_not_change(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    settings = Settings(
        data_dir=tmp_path,
        models={"chat": "openai:m", "options": {"openai": {"base_url": llm_server.base_url}}},
    )
    chat = registry.chat_model(settings)
    assert chat is not None
    assert registry.planner_model(settings) is chat and registry.vision_model(settings) is chat
    # A chat-only configuration keeps captioning as it was (no frames sent to the chat model).
    assert registry.captioner(settings) is None
    # The stage keys of graph/subjects name the planner now, and equal what they were for chat.
    assert role_config(settings, "planner", "chat") == {
        "chat": "openai:m",
        "options": settings.models.options["openai"],
    }


def test_an_explicit_vlm_captions_when_no_captioner_is_set(
    llm_server: ScriptedLLMServer, vlm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    import numpy as np

    settings = two_servers(tmp_path, llm_server, vlm_server)
    captioner = registry.captioner(settings)
    assert captioner is not None and role_config(settings, "captioner", "c")["c"] == "openai:looker"
    vlm_server.script([text("A red square on a table.")])
    frame = np.full((24, 32, 3), 200, dtype=np.uint8)
    assert captioner.caption([frame, frame], "") == "A red square on a table."
    assert len(vlm_server.chat_requests) == 1 and not llm_server.chat_requests


# ---------------------------------------------------------------------------- images go to the vlm


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Store]:
    data_dir = tmp_path_factory.mktemp("roles")
    settings = Settings(
        data_dir=data_dir,
        models={"chat": None, "captioner": None, "speech_recognizer": None, "text_reader": None},
    )
    return data_dir, build_store(settings)


def test_images_reach_only_the_vlm_server(
    llm_server: ScriptedLLMServer, vlm_server: ScriptedLLMServer, store_dir: tuple[Path, Store]
) -> None:
    data_dir, store = store_dir
    settings = two_servers(data_dir, llm_server, vlm_server)
    llm_server.script(
        [
            tool_call(
                "frame_inspect", {"video_id": VIDEO_ID, "question": "What code?", "time_ranges": [[35, 40]]}
            ),
            tool_call(
                "finish", {"answer": "Purple elephant.", "citations": [[35, 40]]}, call_id="call_finish"
            ),
        ]
    )
    vlm_server.script([text("The sign reads PURPLE ELEPHANT.")])
    ctx = ToolContext(
        settings,
        store,
        chat=registry.planner_model(settings),
        config=AgentConfig(tool_cache=False),
        registry=dvd_registry(),
    )
    answer = run_agent(ctx, "What is the secret code?", [VIDEO_ID])
    assert answer.answer == "Purple elephant."
    assert len(vlm_server.chat_requests) == 1 and image_parts(vlm_server.chat_requests[0]) > 0
    assert vlm_server.chat_requests[0]["model"] == "looker"
    assert len(llm_server.chat_requests) == 2
    assert all(image_parts(body) == 0 for body in llm_server.chat_requests)
    assert all(body["model"] == "reasoner" for body in llm_server.chat_requests)
    # The planner read the vlm's answer as the tool's observation.
    assert "PURPLE ELEPHANT" in str(llm_server.chat_requests[1]["messages"])


def test_tool_cache_keys_follow_the_role_each_tool_uses(
    llm_server: ScriptedLLMServer, vlm_server: ScriptedLLMServer, store_dir: tuple[Path, Store]
) -> None:
    data_dir, store = store_dir
    base = two_servers(data_dir, llm_server, vlm_server)

    def keys(settings: Settings) -> tuple[str, str]:
        ctx = ToolContext(settings, store, registry=dvd_registry())
        inspect_args = {"video_id": VIDEO_ID, "question": "q", "time_ranges": [[1.0, 2.0]]}
        return (
            tool_cache_key(ctx, frame_inspect, inspect_args),
            tool_cache_key(ctx, global_browse, {"video_id": VIDEO_ID}),
        )

    inspect0, browse0 = keys(base)
    new_vlm = base.model_copy(update={"models": base.models.model_copy(update={"vlm": "openai:other"})})
    new_planner = base.model_copy(
        update={"models": base.models.model_copy(update={"planner": "openai:other"})}
    )
    inspect1, browse1 = keys(new_vlm)
    inspect2, browse2 = keys(new_planner)
    assert inspect1 != inspect0 and browse1 == browse0  # frame_inspect depends on the vlm only
    assert inspect2 == inspect0 and browse2 != browse0  # global_browse on the planner only


# ---------------------------------------------------------------------------- models --check


def test_check_reports_what_each_endpoint_supports(
    llm_server: ScriptedLLMServer, vlm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    # The planner's server is text-only without native tools; the vlm's takes at most 4 images.
    llm_server.supports_tools = False
    llm_server.supports_images = False
    llm_server.script([text("ok")])
    vlm_server.image_limit = 4
    vlm_server.script([text("ok"), text("red")])
    settings = two_servers(tmp_path, llm_server, vlm_server, text_embedder="minilm:embedded")
    lines = {line.role: line for line in check_roles(settings, timeout_s=5)}
    # A planner that cannot call tools cannot drive an agent: a failure naming the probe and the fix.
    assert lines["planner"].ok is False and "chat: yes" in lines["planner"].summary
    assert "tools probe failed: " in lines["planner"].summary
    assert "enable-auto-tool-choice" in lines["planner"].summary
    assert 'set tool_calling = "json" in [models.options.openai.planner]' in lines["planner"].summary
    # frame_inspect would send max_images (32) frames and be refused every time.
    assert lines["vlm"].ok is False and "images probe failed: at most 4 per request" in lines["vlm"].summary
    assert "set max_images = 4 in [models.options.openai.vlm]" in lines["vlm"].summary
    assert lines["chat"].ok is None and lines["captioner"].summary == "served by vlm (not set)"
    assert lines["text_embedder"].summary == "embeddings: yes, 384-d"
    # No image was ever sent to the planner's server.
    assert all(image_parts(body) == 0 for body in llm_server.chat_requests)


def test_check_cli_one_line_per_role_and_no_traceback_when_down_or_slow(
    llm_server: ScriptedLLMServer,
    vlm_server: ScriptedLLMServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    llm_server.script([text("ok"), tool_call("report_colour", {"colour": "red"})])
    vlm_server.script([hang(5)])  # slower than the probe timeout
    config = tmp_path / "vidscope.toml"
    config.write_text(
        f"""data_dir = "{tmp_path / "data"}"
[models]
planner = "openai:reasoner"
vlm = "openai:looker"
captioner = "openai:looker"
speech_recognizer = ""
text_reader = ""
[models.options.openai]
base_url = "http://127.0.0.1:9/v1"
[models.options.openai.planner]
base_url = "{llm_server.base_url}"
[models.options.openai.vlm]
base_url = "{vlm_server.base_url}"
"""
    )
    monkeypatch.setenv("VIDSCOPE_CONFIG", str(config))
    result = CliRunner().invoke(app, ["--config", str(config), "models", "--check", "--timeout", "1"])
    out = result.output
    assert result.exit_code == 1, out
    assert "Traceback" not in out
    assert "ok planner (openai:reasoner): chat: yes; tools: yes" in out
    assert "FAIL vlm (openai:looker): chat: no (" in out and "timed out" in out
    # The captioner's server (port 9) refuses connections: one line, no retries, no traceback.
    assert "FAIL captioner (openai:looker): chat: no (" in out
    assert "raise timeout_s in [models.options.openai.vlm]" in out  # printed as text, not Rich markup
    assert "--timeout" in out
    for role in registry.ROLES:  # one line per role (a progress bar may share the first one)
        assert len(re.findall(rf"(?:ok|FAIL|-) {role}\b", out)) == 1, out


def test_a_refused_single_image_is_reported(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    llm_server.supports_images = False
    llm_server.script([text("ok"), tool_call("report_colour", {"colour": "red"})])
    settings = Settings(
        data_dir=tmp_path,
        models={
            "chat": "openai:m",
            "speech_recognizer": None,
            "text_reader": None,
            "options": {"openai": {"base_url": llm_server.base_url}},
        },
    )
    lines = {line.role: line for line in check_roles(settings, timeout_s=5)}
    # The chat model standing in for the vlm is text-only: a fact, with what follows from it.
    assert lines["chat"].ok is True
    assert lines["chat"].summary.startswith("chat: yes; tools: yes; images: no, text-only (")
    assert "does not support image input" in lines["chat"].summary
    assert "no vision model" in lines["chat"].summary
    assert lines["planner"].summary == "served by chat (not set)"


# ---------------------------------------------------------------------------- no vision model


def planner_only(data_dir: Path, planner: ScriptedLLMServer) -> Settings:
    """Only ``planner`` is set: no ``vlm``, no ``chat`` (docs/models.md: frames go to nobody)."""
    return Settings(
        data_dir=data_dir,
        models={
            "chat": None,
            "vlm": None,
            "captioner": None,
            "speech_recognizer": None,
            "text_reader": None,
            "planner": "openai:reasoner",
            "options": {"openai": {"planner": {"base_url": planner.base_url, "max_retries": 0}}},
        },
    )


def inspect_call(n: int) -> Any:
    arguments = {"video_id": VIDEO_ID, "question": "What code?", "time_ranges": [[35.0 + n, 40.0]]}
    return tool_call("frame_inspect", arguments, call_id=f"call_inspect_{n}")


def tool_observations(body: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in body["messages"] if m.get("role") == "tool"]


def test_a_planner_alone_is_never_sent_frames_nor_offered_dvds_look(
    llm_server: ScriptedLLMServer, store_dir: tuple[Path, Store]
) -> None:
    """A text-only planner is not offered frame_inspect (nothing can look: the real 1.5B model
    lost a turn to the no-vision note); a call to it anyway, as a model that read the paper's tool
    names might write, is told the tool does not exist. No frame is ever sent."""
    data_dir, store = store_dir
    settings = planner_only(data_dir, llm_server)
    llm_server.script(
        [
            inspect_call(0),
            inspect_call(1),
            tool_call("finish", {"answer": "Unknown.", "citations": []}, call_id="call_finish"),
        ]
    )
    ctx = ToolContext(
        settings,
        store,
        chat=registry.planner_model(settings),
        config=AgentConfig(tool_cache=False),
        registry=dvd_registry(),
    )
    assert ctx.vision_model() is None and not ctx.may_see()
    answer = run_agent(ctx, "What is the secret code?", [VIDEO_ID])
    assert all(image_parts(body) == 0 for body in llm_server.chat_requests)
    offered = [t["function"]["name"] for t in llm_server.chat_requests[0]["tools"]]
    assert "frame_inspect" not in offered and "clip_search" in offered
    assert not [s for s in answer.trace if s.kind == "tool" and s.tool == "frame_inspect"]
    said = json.dumps(llm_server.chat_requests[1]["messages"])
    assert "there is no tool named 'frame_inspect'" in said


def test_avi_frame_analysis_without_a_vision_model_is_an_observation(
    llm_server: ScriptedLLMServer, store_dir: tuple[Path, Store]
) -> None:
    from vidscope.agents.avi.tools_perceive import frame_analysis
    from vidscope.agents.tools import ToolRegistry, execute_tool

    data_dir, store = store_dir
    settings = planner_only(data_dir, llm_server)
    ctx = ToolContext(
        settings,
        store,
        chat=registry.planner_model(settings),
        config=AgentConfig(tool_cache=False),
        registry=ToolRegistry([frame_analysis]),
    )
    outcome = execute_tool(
        ctx, "frame_analysis", {"video_id": VIDEO_ID, "time_ranges": [[1, 5]], "question": "q"}
    )
    assert outcome.ok and outcome.result is not None
    assert outcome.result.no_vision and outcome.result.support() == []  # nothing perceived
    assert "no vision model configured" in outcome.result.answer
    assert not llm_server.chat_requests


def test_a_vlm_refusing_images_is_asked_once_then_frame_tools_say_no_vision(
    llm_server: ScriptedLLMServer, vlm_server: ScriptedLLMServer, store_dir: tuple[Path, Store]
) -> None:
    data_dir, store = store_dir
    settings = two_servers(data_dir, llm_server, vlm_server)
    vlm_server.images_refusal = "llama.cpp"  # a text-only llama.cpp build: HTTP 500 on any image
    llm_server.script(
        [
            inspect_call(0),
            inspect_call(1),
            inspect_call(2),
            tool_call("finish", {"answer": "Unknown.", "citations": []}, call_id="call_finish"),
        ]
    )
    ctx = ToolContext(
        settings,
        store,
        chat=registry.planner_model(settings),
        config=AgentConfig(tool_cache=False),
        registry=dvd_registry(),
    )
    answer = run_agent(ctx, "What is the secret code?", [VIDEO_ID])
    assert len(vlm_server.chat_requests) == 1  # refused once, remembered, never retried
    steps = [s for s in answer.trace if s.kind == "tool" and s.tool == "frame_inspect"]
    assert len(steps) == 3 and all(s.ok for s in steps)
    observations = tool_observations(llm_server.chat_requests[-1])
    assert "no vision model configured" in observations[0]
    assert all(NO_VISION_AGAIN in o and "Do not call" not in o for o in observations[1:3])
    assert ctx.vision_model() is None


def test_check_fails_naming_the_probe_when_the_tools_probe_times_out(
    llm_server: ScriptedLLMServer,
    vlm_server: ScriptedLLMServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    llm_server.script([text("ok"), hang(5)])  # the plain answer comes, the tool call never does
    vlm_server.images_refusal = "llama.cpp"  # the configured vlm is a text-only llama.cpp build
    vlm_server.script([text("ok")])
    config = tmp_path / "vidscope.toml"
    config.write_text(
        f"""data_dir = "{tmp_path / "data"}"
[models]
planner = "openai:reasoner"
vlm = "openai:looker"
speech_recognizer = ""
text_reader = ""
[models.options.openai.planner]
base_url = "{llm_server.base_url}"
[models.options.openai.vlm]
base_url = "{vlm_server.base_url}"
"""
    )
    monkeypatch.setenv("VIDSCOPE_CONFIG", str(config))
    result = CliRunner().invoke(app, ["--config", str(config), "models", "--check", "--timeout", "1"])
    out = result.output
    assert result.exit_code == 1, out
    (planner_line,) = [line for line in out.splitlines() if re.match(r"(ok|FAIL) planner ", line)]
    assert planner_line.startswith("FAIL planner (openai:reasoner): chat: yes; tools probe failed: ")
    assert "timed out" in planner_line and "--timeout" in planner_line
    (vlm_line,) = [line for line in out.splitlines() if re.match(r"(ok|FAIL) vlm ", line)]
    assert vlm_line.startswith(
        "FAIL vlm (openai:looker): chat: yes; image probe failed: the model refuses images"
    )
    assert "image input is not supported" in vlm_line
    assert len(vlm_server.chat_requests) == 2  # the 500 is not retried


def test_sama_and_cvr_visual_tools_never_send_a_planner_frames(
    llm_server: ScriptedLLMServer, store_dir: tuple[Path, Store]
) -> None:
    from vidscope.agents.cvr.actions import visual_query
    from vidscope.agents.sama.tools_look import video_reader
    from vidscope.agents.tools import ToolRegistry, execute_tool

    data_dir, store = store_dir
    settings = planner_only(data_dir, llm_server)
    ctx = ToolContext(
        settings,
        store,
        chat=registry.planner_model(settings),
        config=AgentConfig(tool_cache=False),
        registry=ToolRegistry([visual_query, video_reader]),
    )
    looked = execute_tool(
        ctx, "visual_query", {"targets": [{"video_id": VIDEO_ID, "t0": 0, "t1": 5}], "focus": "people"}
    )
    read = execute_tool(
        ctx, "video_reader", {"video_id": VIDEO_ID, "t0": 0, "t1": 5, "question": "how many?"}
    )
    assert not llm_server.chat_requests  # the planner was never asked to look (issue 28: 20 times)
    assert looked.error is not None and "no vision model configured" in looked.error
    assert read.error is not None and NO_VISION_AGAIN in read.error
    # Each names what still works without eyes (the real 1.5B master, told only "no vision",
    # answered after one refused look and never listened).
    assert "audio_query still hears the videos" in looked.error
    assert "subtitle_retriever and subtitle_extractor" in read.error

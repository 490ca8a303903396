"""Models as people run them (issue 28), through the OpenAI-compatible backend and real loopback
servers that answer the way real ones do: OpenAI's o-series refusing ``max_tokens`` and
``temperature``, a text-only llama.cpp refusing images with HTTP 500, llama.cpp's context filling
up mid-reply, two servers serving one model name."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llm_server import Reply, ScriptedLLMServer, cut_off, text

from vidscope.core.errors import ContextFull, ContextLengthExceeded, ImagesNotSupported
from vidscope.models import openai_compat
from vidscope.models.protocols.chat import ChatMessage


@pytest.fixture
def other_server() -> Iterator[ScriptedLLMServer]:
    """A second loopback server."""
    server = ScriptedLLMServer().start()
    try:
        yield server
    finally:
        server.stop()


def backend(server: ScriptedLLMServer, data_dir: Path, role: str = "planner", **options: Any) -> Any:
    """A chat backend for ``role`` on ``server`` (options in the role's sub-table, no cache unless
    asked, fast retries)."""
    table = {"base_url": server.base_url, "retry_base_s": 0.01, "cache": False, **options}
    return openai_compat.from_spec(role, "model-x", {role: table}, data_dir)


def ask(words: str = "What colour is the car?", images: int = 0) -> list[ChatMessage]:
    jpeg = _jpeg()
    return [ChatMessage(role="user", content=words, images=[jpeg] * images)]


def _jpeg() -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (16, 16), (200, 20, 20)).save(buf, "JPEG")
    return buf.getvalue()


def warnings_about(caplog: pytest.LogCaptureFixture, word: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and word in r.getMessage()]


# ---------------------------------------------------------------------------- o-series


def test_o_series_max_tokens_and_temperature_are_retried_once_remembered_and_said_once(
    llm_server: ScriptedLLMServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    llm_server.o_series = True
    llm_server.script([text("Blue."), text("Red."), text("Green.")])
    caplog.set_level(logging.INFO)
    model = backend(llm_server, tmp_path)
    assert model.chat(ask(), max_tokens=64, temperature=0.0).text == "Blue."
    first = llm_server.chat_requests
    # max_tokens refused -> max_completion_tokens; then temperature 0.0 refused -> dropped.
    assert [("max_tokens" in b, "max_completion_tokens" in b, "temperature" in b) for b in first] == [
        (True, False, True),
        (False, True, True),
        (False, True, False),
    ]
    assert first[-1]["max_completion_tokens"] == 64
    # Remembered: the next call goes out in the accepted form at once ...
    assert model.chat(ask("And the bus?"), max_tokens=64, temperature=0.0).text == "Red."
    # ... also from another role served by the same endpoint and model.
    other = backend(llm_server, tmp_path, role="chat")
    assert other.chat(ask("And the van?"), max_tokens=64, temperature=0.0).text == "Green."
    later = llm_server.chat_requests[3:]
    assert len(later) == 2
    assert all(
        "max_completion_tokens" in b and "max_tokens" not in b and "temperature" not in b for b in later
    )
    # Said once each, naming the real option.
    (limit_warning,) = warnings_about(caplog, "max_tokens")
    assert 'max_tokens_param = "max_completion_tokens"' in limit_warning
    assert len(warnings_about(caplog, "refused temperature")) == 1


def test_o_series_refusing_configured_top_p_drops_each_named_parameter_once(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    llm_server.o_series = True
    llm_server.script([text("Blue.")])
    model = backend(llm_server, tmp_path, sampling={"temperature": 0.6, "top_p": 0.95})
    assert model.chat(ask(), max_tokens=32).text == "Blue."
    last = llm_server.chat_requests[-1]
    assert "temperature" not in last and "top_p" not in last and last["max_completion_tokens"] == 32
    assert len(llm_server.chat_requests) == 4  # max_tokens, temperature, top_p: one retry each


def test_a_400_naming_a_parameter_that_was_configured_on_purpose_is_not_retried(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    llm_server.refuse_params = {"reasoning_effort"}
    model = backend(llm_server, tmp_path, reasoning_effort="high")
    with pytest.raises(RuntimeError, match="reasoning_effort"):
        model.chat(ask(), max_tokens=32)
    assert len(llm_server.chat_requests) == 1


# ---------------------------------------------------------------------------- images refused


@pytest.mark.parametrize("server_kind", ["llama.cpp", "vllm"])
def test_a_model_refusing_images_is_remembered_as_text_only(
    llm_server: ScriptedLLMServer, tmp_path: Path, caplog: pytest.LogCaptureFixture, server_kind: str
) -> None:
    llm_server.images_refusal = server_kind
    llm_server.script([text("Plain text works.")])
    caplog.set_level(logging.INFO)
    model = backend(llm_server, tmp_path, role="vlm", max_retries=3)
    with pytest.raises(ImagesNotSupported, match="does not take images"):
        model.chat(ask(images=2), max_tokens=32)
    assert len(llm_server.chat_requests) == 1  # llama.cpp's 500 is not retried
    assert not model.accepts_images
    with pytest.raises(ImagesNotSupported):
        model.chat(ask("Look again", images=1), max_tokens=32)
    assert len(llm_server.chat_requests) == 1  # known text-only: no request at all
    assert not backend(llm_server, tmp_path, role="chat").accepts_images  # per endpoint and model
    assert model.chat(ask("No images now"), max_tokens=32).text == "Plain text works."
    assert len(warnings_about(caplog, "refused images")) == 1


# ---------------------------------------------------------------------------- a full context


def test_a_full_context_is_not_an_output_limit(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    # llama.cpp with -c 60: a 50-word prompt leaves 10 tokens; the reply stops there, HTTP 200.
    llm_server.n_ctx = 60
    llm_server.script([text(" ".join(["word"] * 40))])
    model = backend(llm_server, tmp_path)
    with pytest.raises(ContextFull) as caught:
        model.chat(ask(" ".join(["long"] * 50)), max_tokens=512)
    assert isinstance(caught.value, ContextLengthExceeded)  # what the runtime already trims on
    assert (caught.value.prompt_tokens, caught.value.completion_tokens) == (50, 10)
    assert caught.value.context_tokens == 60  # read from llama.cpp's /props
    assert "max_tokens would not help" in str(caught.value)
    assert len(llm_server.chat_requests) == 1  # not re-asked with a doubled budget


def test_a_full_context_is_told_from_the_configured_window_when_the_server_reports_none(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    llm_server.n_ctx = 60
    llm_server.report_n_ctx = False
    # The reply reaches exactly the output limit too, so only the window can tell.
    llm_server.script([text(" ".join(["word"] * 40))])
    model = backend(llm_server, tmp_path, context_tokens=60)
    with pytest.raises(ContextFull):
        model.chat(ask(" ".join(["long"] * 50)), max_tokens=10)


def test_an_output_limit_is_still_asked_again_with_a_larger_budget(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    llm_server.n_ctx = 4096
    llm_server.script([cut_off("The car is"), text("Blue.")])
    model = backend(llm_server, tmp_path)
    assert model.chat(ask(), max_tokens=16).text == "Blue."
    assert [b["max_tokens"] for b in llm_server.chat_requests] == [16, 32]


def test_a_prompt_over_the_context_is_context_length_exceeded(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    llm_server.n_ctx = 20
    model = backend(llm_server, tmp_path)
    with pytest.raises(ContextLengthExceeded, match="available context size") as caught:
        model.chat(ask(" ".join(["long"] * 30)), max_tokens=16)
    assert not isinstance(caught.value, ContextFull)


# ---------------------------------------------------------------------------- response cache


def test_two_servers_behind_one_model_name_do_not_replay_each_other(
    llm_server: ScriptedLLMServer, other_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    llm_server.script([text("Answer from A.")])
    other_server.script([text("Answer from B."), text("B, warmer.")])
    on_a = backend(llm_server, tmp_path, cache=True)
    on_b = backend(other_server, tmp_path, cache=True)
    assert on_a.chat(ask(), max_tokens=32).text == "Answer from A."
    assert on_b.chat(ask(), max_tokens=32).text == "Answer from B."
    # The same request to the same server is a hit; other sampling is not.
    again = on_a.chat(ask(), max_tokens=32)
    assert again.text == "Answer from A." and again.usage.cache_hit
    assert on_b.chat(ask(), max_tokens=32, temperature=0.7).text == "B, warmer."
    assert len(llm_server.chat_requests) == 1 and len(other_server.chat_requests) == 2


def test_embeddings_of_two_servers_are_cached_apart(
    llm_server: ScriptedLLMServer, other_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    other_server.embed_dim = 8  # a different model behind the same name
    a = openai_compat.from_spec("text_embedder", "emb", {"base_url": llm_server.base_url}, tmp_path)
    b = openai_compat.from_spec("text_embedder", "emb", {"base_url": other_server.base_url}, tmp_path)
    assert a.embed(["a harbour"]).shape == (1, 16)
    assert b.embed(["a harbour"]).shape == (1, 8)
    assert len(other_server.embedding_requests) == 1


# ---------------------------------------------------------------------------- the loop on a full context


def test_the_dvd_loop_trims_observations_when_llama_cpp_fills_its_context(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    """ContextFull reaches the runtime as the overflow it is (trim the oldest observations, ask
    again), not as a cut-off reply asked again with a doubled max_tokens."""
    from llm_server import tool_call
    from test_agent_runtime import VIDEO_ID, build_store

    from vidscope.agents.dvd.tools import dvd_registry
    from vidscope.agents.runtime import TRIMMED, run_agent
    from vidscope.agents.tools import AgentConfig, ToolContext
    from vidscope.core.settings import Settings

    settings = Settings(
        data_dir=tmp_path,
        models={"chat": None, "captioner": None, "speech_recognizer": None, "text_reader": None},
    )
    store = build_store(settings)
    llm_server.n_ctx = 4096
    llm_server.script(
        [
            tool_call("clip_search", {"video_id": VIDEO_ID, "query": "secret code"}),
            # The second turn's prompt nearly fills the window; the reply stops where it is full.
            Reply("text", content="I think " * 200, prompt_tokens=4000, completion_tokens=400),
            tool_call("finish", {"answer": "Purple elephant.", "citations": [[35, 40]]}, call_id="c_fin"),
        ]
    )
    ctx = ToolContext(
        settings,
        store,
        chat=backend(llm_server, tmp_path),
        config=AgentConfig(tool_cache=False),
        registry=dvd_registry(),
    )
    answer = run_agent(ctx, "What is the secret code?", [VIDEO_ID])
    assert answer.answer == "Purple elephant."
    (step,) = [s for s in answer.trace if s.kind == "context"]
    assert "filled the context window" in step.observation
    bodies = llm_server.chat_requests
    assert len(bodies) == 3 and bodies[2]["max_tokens"] == bodies[1]["max_tokens"]  # not doubled
    assert TRIMMED in str(bodies[2]["messages"])  # the clip_search observation was trimmed

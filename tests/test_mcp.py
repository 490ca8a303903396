"""The MCP server through a real MCP client session over stdio (``vidscope mcp`` as a subprocess)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from test_api import BLUE_START, Library, shared_library

QUESTION = "Where is the blue ocean?"


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    return shared_library(tmp_path_factory)


def server_parameters(library: Library, home: Path) -> StdioServerParameters:
    """``vidscope mcp`` (the console script of this venv) over the shared library."""
    script = Path(sys.executable).parent / "vidscope"
    command, args = (
        (str(script), ["mcp"]) if script.exists() else (sys.executable, ["-m", "vidscope.mcp_server"])
    )
    env = {
        "VIDSCOPE_DATA_DIR": str(library.data_dir),
        "VIDSCOPE_CONFIG": str(home / "no-such-vidscope.toml"),
        "PREFECT_HOME": str(home / "prefect"),  # its own ephemeral Prefect database
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        # The tree under test (a worktree's PYTHONPATH), and no model fetched on first use.
        **{k: os.environ[k] for k in ("PYTHONPATH", "VIDSCOPE_MODEL_FETCH") if k in os.environ},
    }
    return StdioServerParameters(command=command, args=args, env=env, cwd=str(home))


async def converse(params: StdioServerParameters) -> dict[str, Any]:
    """List the tools, ask a question, ask about a missing video, and search."""
    with open(os.devnull, "w") as quiet:
        async with stdio_client(params, errlog=quiet) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            answer = await session.call_tool(
                "ask", {"video": "fruit and sea.mp4", "question": QUESTION}, read_timeout_seconds=180
            )
            missing = await session.call_tool("ask", {"video": "nope.mp4", "question": "anything?"})
            search = await session.call_tool(
                "search", {"query": "blue ocean", "k": 3}, read_timeout_seconds=180
            )
            by_image = await session.call_tool("search_by_image", {"path": "/no/such/picture.png"})
            digest = await session.call_tool("digest", {"since": "2w"})
    return {
        "digest": digest,
        "tools": tools.tools,
        "answer": answer,
        "missing": missing,
        "search": search,
        "by_image": by_image,
    }


def test_other_agents_can_list_the_tools_ask_and_search(library: Library, tmp_path: Path) -> None:
    result = anyio.run(converse, server_parameters(library, tmp_path))

    tools = {tool.name: tool for tool in result["tools"]}
    assert set(tools) == {"ask", "search", "search_moments", "search_by_image", "summarize", "digest"}
    assert library.video_id in [v["video_id"] for v in result["digest"].structured_content["videos"]]
    assert result["by_image"].is_error and "/no/such/picture.png" in result["by_image"].content[0].text
    ask_schema = tools["ask"].input_schema
    assert set(ask_schema["required"]) == {"video", "question"}
    assert "options" in ask_schema["properties"] and tools["ask"].description
    assert tools["search"].input_schema["required"] == ["query"]

    answer = result["answer"]
    assert not answer.is_error, answer.content
    body = answer.structured_content
    assert body["video_id"] == library.video_id and "BLUE OCEAN" in body["answer"]
    assert body["citations"][0]["start"] == BLUE_START and body["citations"][0]["verified"]
    assert body["trace"] == []  # only on request (include_trace)

    missing = result["missing"]
    assert missing.is_error and "nope.mp4" in missing.content[0].text

    search = result["search"]
    try:
        import vidscope.flows.search  # noqa: F401
    except ImportError:
        assert search.is_error and "not available" in search.content[0].text
        return
    from vidscope.models.open_store import open_store

    store = open_store(library.settings())
    if store.count(store.video_parses) == 0:
        assert search.is_error and "library is empty" in search.content[0].text
    else:
        assert not search.is_error, search.content
        assert search.structured_content["hits"][0]["video_id"] == library.video_id

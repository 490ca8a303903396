"""Cold commands stay light: what a fresh ``vidscope`` process imports and starts for each command.

Each command runs in a new Python process (as the console script would), through a small wrapper
that calls the CLI's ``main`` in-process and then reports which heavy libraries it imported and
which child processes it left running. Latency itself is measured by ``benchmarks/cold_ask.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_agent_runtime import VIDEO_ID, build_store, make_settings

#: Runs ``vidscope ARGS…`` in this process, then prints one JSON line: the exit code, which of the
#: heavy libraries were imported (LanceDB too: the store reads through the lighter ``lance``), and
#: the pids of child processes still alive.
WRAPPER = """
import json, sys
import psutil
from vidscope.cli import app
code = 0
try:
    app(sys.argv[1:])
except SystemExit as exc:
    code = exc.code or 0
heavy = ("prefect", "torch", "transformers", "sentence_transformers", "lancedb")
print(json.dumps({
    "code": code,
    "imported": sorted(m for m in heavy if m in sys.modules),
    "children": [p.pid for p in psutil.Process().children(recursive=True)],
}))
"""


def cold(*args: str, data_dir: Path, env: dict[str, str] | None = None) -> tuple[dict, str]:
    """Run ``vidscope --data-dir DATA ARGS…`` in a fresh process; (the wrapper's report, stdout)."""
    environment = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}  # no server …
    environment.update(env or {})  # … unless the test names one
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, "--data-dir", str(data_dir), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=environment,
    )
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr
    return json.loads(lines[-1]), "\n".join(lines[:-1])


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with one ingested-looking video (no chat model: answers are extractive)."""
    path = tmp_path_factory.mktemp("cold") / "data"
    build_store(make_settings(path))
    return path


@pytest.mark.parametrize(
    "args",
    [
        ("sql", "select count(*) as n from videos"),
        ("videos",),
        ("status",),
        ("status", VIDEO_ID[:8]),
        ("--help",),
    ],
)
def test_library_commands_import_neither_prefect_nor_torch(data_dir: Path, args: tuple[str, ...]) -> None:
    report, out = cold(*args, data_dir=data_dir)
    assert report["code"] == 0, out
    assert report["imported"] == [], f"vidscope {' '.join(args)} imported {report['imported']}"
    assert report["children"] == []
    if args[0] == "sql":
        assert "1" in out  # the one video
    if args[0] == "status":
        assert "frame_embed" in out  # every stage is listed, in the flow's order


def test_status_lists_the_ingestion_flows_stages_in_order() -> None:
    from vidscope.flows.ingest import STAGES
    from vidscope.storage.ledger import STAGE_NAMES

    assert tuple(s.name for s in STAGES) == STAGE_NAMES


def test_ask_without_a_server_answers_without_prefect_and_leaves_nothing_running(data_dir: Path) -> None:
    question = "What is the secret code for the vault?"
    first, out = cold("ask", VIDEO_ID[:8], question, "--json", data_dir=data_dir)
    assert first["code"] == 0, out
    answer = json.loads(out)
    assert answer["video_id"] == VIDEO_ID and answer["extractive"] and answer["citations"]
    assert answer["usage"]["tool_calls"] >= 1 and answer["usage"]["tool_cache_hits"] == 0
    # Prefect was never imported, so no temporary API server could start; no child is left.
    assert first["imported"] == [] and first["children"] == []

    # The tool cache works without Prefect: the same question in a new process repeats no tool work.
    second, out = cold("ask", VIDEO_ID[:8], question, "--json", data_dir=data_dir)
    again = json.loads(out)
    assert again["usage"]["tool_cache_hits"] == again["usage"]["tool_calls"] >= 1
    assert again["answer"] == answer["answer"] and again["citations"] == answer["citations"]
    assert second["children"] == []


def test_an_unreachable_prefect_api_url_still_gets_an_answer(data_dir: Path) -> None:
    report, out = cold(
        "ask",
        VIDEO_ID[:8],
        "Which room is shown?",
        "--json",
        data_dir=data_dir,
        env={"PREFECT_API_URL": "http://127.0.0.1:9/api"},  # nothing listens on the discard port
    )
    assert report["code"] == 0, out
    assert json.loads(out)["video_id"] == VIDEO_ID and report["children"] == []


@pytest.mark.parametrize(
    "args",
    [
        ("search", "--moments", "the secret code for the vault", "--json"),
        ("compare", VIDEO_ID[:8], "What is the secret code for the vault?", "--json"),
        ("ask", "--library", "What is the secret code for the vault?", "--json"),
    ],
)
def test_library_queries_without_a_server_answer_without_prefect(
    data_dir: Path, args: tuple[str, ...]
) -> None:
    """search --moments, compare and ask --library take ask's path (flows.runs.run_query): no
    server, so no flow run, no Prefect import, no temporary API server, nothing left running."""
    report, out = cold(*args, data_dir=data_dir)
    assert report["code"] == 0, out
    assert report["imported"] == [] and report["children"] == []
    result = json.loads(out)
    cited = result["moments"] if args[0] == "search" else result["citations"]
    assert cited and {c["video_id"] for c in cited} == {VIDEO_ID}


def test_video_search_without_a_server_answers_without_prefect(tmp_path: Path) -> None:
    """The MAVIS video search (``vidscope search``), on a parsed library, takes the same path."""
    from test_search import TRUE_MATCH, minilm_library, minilm_settings

    minilm_library(minilm_settings(tmp_path))
    report, out = cold("search", "dogs running", "--k", "1", "--json", data_dir=tmp_path / "data")
    assert report["code"] == 0, out
    assert report["imported"] == [] and report["children"] == []
    assert [h["video_id"] for h in json.loads(out)["hits"]] == [TRUE_MATCH]

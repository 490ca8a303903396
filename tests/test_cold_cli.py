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
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_agent_runtime import VIDEO_ID, build_store, make_settings

#: Runs ``vidscope ARGS…`` in this process, then prints one JSON line: the exit code, which of the
#: heavy libraries were imported (LanceDB too: the store reads through the lighter ``lance``), which
#: of the modules that answer a question in-process were, and the pids of child processes still alive.
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
answering = ("pyarrow", "vidscope.storage.store", "vidscope.flows.ask")
# Beyond the import floor, for a question that needs none of them (issue 44): PyAV (decoding a
# look's frames), onnxruntime (the image-text model, absent here), Rich (nothing is drawn for
# --json), Pillow (no picture is coded), json-repair (no model reply), lemminflect (no word
# forms), and the modules of the commands that did not run. (psutil: this wrapper imports it.)
beyond_floor = (
    "av", "onnxruntime", "rich", "PIL", "json_repair", "lemminflect",
    "vidscope.cli.ingest", "vidscope.cli.evaluate", "vidscope.cli.train", "vidscope.cli.search",
)  # fmt: skip
print(json.dumps({
    "code": code,
    "imported": sorted(m for m in heavy if m in sys.modules),
    "answering": sorted(m for m in answering if m in sys.modules),
    "beyond_floor": sorted(m for m in beyond_floor if m in sys.modules),
    "children": [p.pid for p in psutil.Process().children(recursive=True)],
    # pydantic reads every installed distribution's entry points the first time it looks for
    # plugins (vidscope.cli turns the look off): a loaded plugin table means it looked.
    "pydantic_plugins_read": getattr(sys.modules.get("pydantic.plugin._loader"), "_plugins", None)
    is not None,
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
    report = json.loads(lines[-1])
    report["stderr"] = done.stderr
    return report, "\n".join(lines[:-1])


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


def test_ask_without_a_server_answers_without_prefect_and_leaves_nothing_running(data_dir: Path) -> None:
    question = "What is the secret code for the vault?"
    first, out = cold("ask", VIDEO_ID[:8], question, "--json", data_dir=data_dir)
    assert first["code"] == 0, out
    answer = json.loads(out)
    assert answer["video_id"] == VIDEO_ID and answer["extractive"] and answer["citations"]
    assert answer["usage"]["tool_calls"] >= 1 and answer["usage"]["tool_cache_hits"] == 0
    # Prefect was never imported, so no temporary API server could start; no child is left.
    assert first["imported"] == [] and first["children"] == []
    # Nor anything of `beyond_floor` (see the wrapper), nor pydantic's search for plugins.
    assert first["beyond_floor"] == [] and not first["pydantic_plugins_read"], first

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


# ---------------------------------------------------------------------------- a running API


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running_api(data_dir: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``vidscope api`` on a free port for ``data_dir``, as a user starts it; stopped with SIGTERM."""
    import httpx

    from vidscope.cli.running_api import registration_path
    from vidscope.core.settings import Settings

    port = free_port()
    environment = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    process = subprocess.Popen(
        [sys.executable, "-m", "vidscope.cli", "--data-dir", str(data_dir), "api", "--port", str(port)],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    registration = registration_path(Settings(data_dir=data_dir))
    try:
        deadline = time.monotonic() + 120
        while (
            not registration.exists() or httpx.get(f"http://127.0.0.1:{port}/api/health").status_code != 200
        ):
            assert process.poll() is None, "vidscope api exited while starting"
            assert time.monotonic() < deadline, "vidscope api did not come up"
            time.sleep(0.2)
        assert json.loads(registration.read_text())["pid"] == process.pid
        yield process
    finally:
        process.terminate()
        process.wait(timeout=60)
    assert not registration.exists()  # a stopped API is not advertised


@pytest.fixture(scope="module")
def api_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Its own store: while its API runs, every ask about it goes there."""
    path = tmp_path_factory.mktemp("cold-api") / "data"
    build_store(make_settings(path))
    return path


def test_a_running_api_answers_the_cli_which_loads_nothing_to_answer(api_data_dir: Path) -> None:
    """``vidscope ask`` hands its question to the ``vidscope api`` registered for its data dir: the
    answer (steps, citations) is the in-process one, and the CLI loaded none of the answering code."""
    question = "What is the secret code for the vault, asked of the API?"
    alone, alone_out = cold("ask", VIDEO_ID[:8], question, "--json", data_dir=api_data_dir)
    assert alone["answering"] == ["pyarrow", "vidscope.flows.ask", "vidscope.storage.store"]
    with running_api(api_data_dir):
        report, out = cold("ask", VIDEO_ID[:8], question, "--json", data_dir=api_data_dir)
        assert report["code"] == 0, report["stderr"]
        assert report["answering"] == [] and report["imported"] == [] and report["children"] == []
        remote, local = json.loads(out), json.loads(alone_out)
        assert remote["answer"] == local["answer"] and remote["citations"] == local["citations"]
        assert "query_id" not in remote and set(remote) == set(local)

        human, out = cold("ask", VIDEO_ID[:8], "Which room holds the vault?", data_dir=api_data_dir)
        assert human["code"] == 0 and "step 1: clip_search" in out  # steps stream as they happen
        assert "answered by the vidscope API at http://127.0.0.1:" in human["stderr"]

        # The API's failure is the user's one line, with the API's error type, and exit code 1.
        missing, out = cold("ask", "nosuchvideo", "Anything?", "--json", data_dir=api_data_dir)
        assert missing["code"] == 1 and missing["answering"] == []
        failure = json.loads(out)
        assert failure["type"] == "VideoNotFound" and failure["error"].startswith("no ingested video matches")
        # A request the API refuses (one option) is answered in-process, with the CLI's own wording.
        refused, out = cold(
            "ask", VIDEO_ID[:8], "Which?", "--options", "only", "--json", data_dir=api_data_dir
        )
        assert "vidscope.flows.ask" in refused["answering"]
    after, out = cold("ask", VIDEO_ID[:8], question, "--json", data_dir=api_data_dir)
    assert after["code"] == 0 and "vidscope.flows.ask" in after["answering"]  # the API is gone


def test_a_registration_that_cannot_answer_is_passed_over(api_data_dir: Path) -> None:
    """A dead pid, another settings fingerprint, or a live process that does not serve the port:
    the CLI answers in-process, with no error and no wait."""
    from vidscope.cli.running_api import find_running_api, register, registration_path
    from vidscope.core.settings import Settings

    settings = Settings(data_dir=api_data_dir)
    path = registration_path(settings)
    register(settings, "127.0.0.1", free_port())
    record = json.loads(path.read_text())
    assert find_running_api(settings) is not None  # this process: alive, same settings
    assert find_running_api(Settings(data_dir=api_data_dir, agent={"max_steps": 3})) is None

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        path.write_text(json.dumps({**record, "pid": sleeper.pid}))  # alive, but nothing listens
        report, out = cold("ask", VIDEO_ID[:8], "Which room is shown?", "--json", data_dir=api_data_dir)
        assert report["code"] == 0 and json.loads(out)["video_id"] == VIDEO_ID
        assert "vidscope.flows.ask" in report["answering"]
        log = (api_data_dir / "logs" / "vidscope.log").read_text()
        assert f"answering in-process: http://127.0.0.1:{record['port']}" in log  # it did try
    finally:
        sleeper.kill()
        sleeper.wait()
    path.write_text(json.dumps({**record, "pid": sleeper.pid}))  # dead
    assert find_running_api(settings) is None
    path.write_text("{not json")
    assert find_running_api(settings) is None
    path.unlink()

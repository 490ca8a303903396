"""Every command exits with its real status: no abort at interpreter exit (issue 23).

Commands with a model configured used to abort at exit (SIGABRT, "PyGILState_Release … finalizing")
in about one run in four while a Prefect server ran: a LanceDB worker thread handed its last write's
result back while the interpreter was finalizing (the story is in ``vidscope/core/exits.py``). Here
``vidscope ask`` (DVD) and ``vidscope compare --agent cvr`` / ``--agent sama`` run as real
subprocesses against a real Prefect server, with the ``openai`` backend talking to a loopback
planner that answers from what it is sent, and every run must exit 0 with its answer: seven runs
of each, in the slow suite.
"""

from __future__ import annotations

import _thread
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llm_server import Reply, ScriptedLLMServer, text, tool_call
from media import text_video
from test_agent_runtime import DURATION, VIDEO_ID, build_store, make_settings

from vidscope.core import exits
from vidscope.core.settings import ServerSettings, Settings
from vidscope.deployments import server

ANSWER = [35.0, 40.0]


class Planner(ScriptedLLMServer):
    """A planner for every agent, replying from the request: a tool call first, then the answer."""

    def reply_to(self, body: dict[str, Any]) -> Reply:
        messages = body.get("messages", [])
        system = str(messages[0].get("content") or "") if messages else ""
        offered = [t["function"]["name"] for t in body.get("tools") or []]
        if "clip_search" in offered:  # DVD: search, then finish once the tool has answered
            if messages[-1].get("role") == "tool":
                return tool_call("finish", {"answer": "Purple elephant.", "citations": [ANSWER]}, call_id="f")
            return tool_call(
                "clip_search", {"video_id": VIDEO_ID, "query": "secret code", "top_k": 3}, call_id="s"
            )
        if "answer" in offered:  # SAMA: read the segment, then answer
            # The reader's result comes back under "Since your last turn" as "video_reader: …".
            if "video_reader:" in str(messages[-1].get("content")) or "video_reader" not in offered:
                cited = [{"video_id": VIDEO_ID, "start": ANSWER[0], "end": ANSWER[1]}]
                return tool_call("answer", {"answer": "A sign.", "citations": cited}, call_id="a")
            look = {"video_id": VIDEO_ID, "t0": ANSWER[0], "t1": ANSWER[1], "question": "What is shown?"}
            return tool_call("video_reader", look, call_id="r")
        if "master agent" in system:  # AgentCVR's master: one visual query, then the answer
            if len(messages) > 2:
                cited = [{"video_id": VIDEO_ID, "start": ANSWER[0], "end": ANSWER[1]}]
                return text(json.dumps({"action": "answer", "answer": "A sign.", "citations": cited}))
            query = {"action": "visual_query", "video_id": VIDEO_ID, "t0": 35, "t1": 40, "focus": "sign"}
            return text(json.dumps({"actions": [query]}))
        return text("A sign reading CODE.")  # a sub-agent or the skill classifier

    def _chat(self, handler: Any, body: dict[str, Any]) -> None:
        with self._lock:
            self._queue.append(self.reply_to(body))
        super()._chat(handler, body)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One store (the synthetic video of test_agent_runtime, with a real file to take frames from),
    the planner, a Prefect server, and the vidscope.toml the commands read."""
    root = tmp_path_factory.mktemp("exits")
    data = root / "data"
    build_store(make_settings(data))
    text_video(data / "kitchen.mp4", duration=DURATION, size=(160, 90), fps=5, texts=[(35.0, 40.0, "CODE")])
    planner = Planner().start()
    prefect = Settings(data_dir=root / "prefect-data", server=ServerSettings(port=free_port()))
    config = root / "vidscope.toml"
    config.write_text(
        f'data_dir = "{data}"\n[models]\nchat = "openai:scripted"\ncaptioner = ""\n'
        'speech_recognizer = ""\ntext_reader = ""\n[models.options.openai]\n'
        f'base_url = "{planner.base_url}"\nmax_retries = 0\ntimeout_s = 30\n'
    )
    try:
        # No worker: the commands run their flows in their own process (a worker cost the fixture
        # its start and, under the busy default suite, 15 s to stop).
        server.start(prefect, timeout=240, api=False, worker=False)
        env = {**os.environ, "VIDSCOPE_CONFIG": str(config), "PREFECT_API_URL": server.api_url(prefect)}
        yield {"data": data, "env": env}
    finally:
        server.stop(prefect)
        planner.stop()


COMMANDS = {
    "ask": ["ask", VIDEO_ID[:8], "What is the secret code?", "--json"],
    "compare-cvr": ["compare", VIDEO_ID[:8], "What sign is shown?", "--agent", "cvr", "--json"],
    "compare-sama": ["compare", VIDEO_ID[:8], "What sign is shown?", "--agent", "sama", "--json"],
}


# 7 runs of each command, in the slow suite only: an abort in one run of four (what issue 23 saw)
# escapes one command's 7 runs with probability 0.75**7 ≈ 13 %, and the three commands' 21 (it was
# in the exit path they share) with 0.75**21 ≈ 0.2 %. The default suite ran one of each until its
# cost (a Prefect server and three model commands, 40 s of a 2-process suite over its 5-minute
# budget) outweighed what a single run catches (an abort in one run of four: one chance in four).
# The real-model tier also requires every command it runs to exit 0.
RUNS = 7


@pytest.mark.slow
@pytest.mark.parametrize("command", list(COMMANDS))
def test_commands_with_a_model_exit_zero_every_time(world: dict[str, Any], command: str) -> None:
    codes, failures = [], []
    for _ in range(RUNS):
        # A cold tool cache each time: every run really calls its tools (and writes their results).
        subprocess.run(["rm", "-rf", str(world["data"] / "cache")], check=True)
        done = subprocess.run(
            [sys.executable, "-m", "vidscope.cli", *COMMANDS[command]],
            capture_output=True,
            text=True,
            timeout=300,
            env=world["env"],
        )
        codes.append(done.returncode)
        if done.returncode != 0:
            failures.append(done.stderr[:1200])  # "Fatal Python error: …" comes first
            continue
        answer = json.loads(done.stdout)
        assert answer["answer"] and not answer.get("extractive"), done.stdout
        tools = [s for s in answer.get("trace", []) if s.get("kind") == "tool" and s.get("ok")]
        assert tools or answer["usage"]["tool_calls"] >= 1, done.stdout  # the agent used a tool
    assert codes == [0] * RUNS, f"exit codes {codes}; first failure: {failures[:1]}"


def test_the_exit_waits_for_native_threads_to_leave_python() -> None:
    """A thread ``threading`` did not start (as LanceDB's workers are) that still runs Python code is
    waited for; one that has left is not."""
    inside, release = threading.Event(), threading.Event()

    def native() -> None:
        inside.set()
        release.wait(5)

    _thread.start_new_thread(native, ())
    assert inside.wait(5)
    assert len(exits.native_threads_in_python()) == 1
    assert exits.wait_for_native_threads(timeout=0.2) is False  # still inside: not done waiting
    threading.Timer(0.2, release.set).start()
    started = time.monotonic()
    assert exits.wait_for_native_threads(timeout=5) is True
    assert 0.1 < time.monotonic() - started < 4
    assert exits.native_threads_in_python() == []


def test_exit_hooks_run_in_order_before_the_wait(tmp_path: Path) -> None:
    """The usage log's flush is an exit hook: a record still buffered at exit reaches the table."""
    script = (
        "from vidscope.models import usage\n"
        "from vidscope.storage.usage import MODEL_CALLS\n"
        # As in a command: the store was in use before exit (a process that first opens LanceDB
        # after threading's shutdown cannot, since LanceDB then starts a thread pool).
        f"usage.shared_store({str(tmp_path)!r}).table(MODEL_CALLS)\n"
        f"usage.record_call({str(tmp_path)!r}, role='chat', backend='openai', model='m', endpoint='e')\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    from vidscope.storage.store import Store
    from vidscope.storage.usage import MODEL_CALLS

    assert Store(tmp_path).count(MODEL_CALLS) == 1

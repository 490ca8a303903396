"""The API under abuse (issue 27): many questions whose clients leave mid-answer, on loopback.

A slow model (the scripted loopback server, 0.4 s a reply, never finishing) keeps every question
running until it is stopped. Clients open streamed questions, plain ``/api/ask`` questions and
``/api/compare`` questions, and leave; the API's question threads, the model calls in flight and
the threads of the process must come back to what they were before, and no model call may follow.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import httpx
import pytest
from anyio._backends._asyncio import WorkerThread
from llm_server import ScriptedLLMServer, text, tool_call
from test_api import Library, serve, shared_library

from vidscope.api import create_app
from vidscope.core.settings import ApiSettings, Settings

#: Clients of each kind that leave mid-answer.
STREAMS = ASKS = 5
COMPARES = 2
#: Seconds after the last client left by which everything must be back to the baseline. Run to
#: its end, one question would go on for 15 steps x 0.4 s = 6 s, a compare for 20 turns.
SETTLE_SECONDS = 3.0


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    return shared_library(tmp_path_factory)


def question_threads() -> list[threading.Thread]:
    """The threads answering questions (named by the question routes)."""
    return [t for t in threading.enumerate() if t.name.startswith(("vidscope-ask", "vidscope-compare"))]


def busy_threads() -> int:
    """Threads of the API in this process: all of them, less the idle workers AnyIO keeps pooled
    for 10 s after use and the model server's handlers (it serves from this process too, one
    thread per keep-alive connection the model client holds open)."""
    return sum(
        not isinstance(t, WorkerThread) and not t.name.endswith("(process_request_thread)")
        for t in threading.enumerate()
    )


def wait_for(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.slow  # ~12 s: clients wait 1.5 s before leaving, then 1 s of watching for model calls
def test_questions_whose_clients_leave_stop_and_the_api_returns_to_its_baseline(
    library: Library, llm_server: ScriptedLLMServer
) -> None:
    options = {"openai": {"base_url": llm_server.base_url, "max_retries": 0, "timeout_s": 20}}
    slots = STREAMS + ASKS + COMPARES
    settings = Settings(
        data_dir=library.data_dir,
        models={"chat": "openai:scripted", "options": options},
        api=ApiSettings(video_roots=[library.root], max_questions=slots),
    )
    search = {"video_id": library.video_id, "query": "blue ocean", "top_k": 2}

    def asked(kind: str) -> dict[str, Any]:
        # Each question its own words: the response cache must not answer a model call.
        question = f"{kind} {uuid.uuid4().hex[:8]}: is there an apple?"
        if kind == "compare":
            return {"videos": [library.video_id], "question": question}
        return {"video": library.video_id, "question": question}

    with serve(create_app(settings)) as url, httpx.Client(base_url=url, timeout=30) as http:
        # One whole question first, so what loads once per process (models, store) is loaded.
        finish = {"answer": "An apple shows first.", "citations": [[0.0, 5.0]]}
        llm_server.script([tool_call("clip_search", search), tool_call("finish", finish)])
        assert http.post("/api/ask", json=asked("warm-up")).status_code == 200
        time.sleep(0.5)
        baseline = busy_threads()

        # From now on the model is slow and never finishes: each question runs until stopped.
        llm_server.default = replace(tool_call("clip_search", search), seconds=0.4)
        with contextlib.ExitStack() as streams:
            for _ in range(STREAMS):  # each shown its first step, then left
                stream = streams.enter_context(http.stream("POST", "/api/ask/stream", json=asked("stream")))
                assert stream.status_code == 200
                assert "step" in json.loads(next(stream.iter_lines()))

            def leave(path: str, body: dict[str, Any]) -> str:
                """A plain question whose client gives up after 1.5 s (its connection closes)."""
                try:
                    response = httpx.post(url + path, json=body, timeout=1.5)
                except httpx.TimeoutException:
                    return "left"
                return f"answered {response.status_code}: {response.text[:200]}"

            plain = [("/api/ask", asked("ask")) for _ in range(ASKS)]
            plain += [("/api/compare", asked("compare")) for _ in range(COMPARES)]
            with ThreadPoolExecutor(len(plain)) as clients:
                outcomes = list(clients.map(lambda args: leave(*args), plain))
            assert outcomes == ["left"] * len(plain), outcomes
            assert llm_server.in_flight > 0 or len(question_threads()) == STREAMS + len(plain)
        left = time.monotonic()

        assert wait_for(lambda: not question_threads(), SETTLE_SECONDS), (
            f"{len(question_threads())} questions still running {SETTLE_SECONDS} s after their clients left"
        )
        assert wait_for(lambda: llm_server.in_flight == 0, 1.0), llm_server.in_flight
        calls = len(llm_server.chat_requests)
        time.sleep(1.0)
        assert len(llm_server.chat_requests) == calls, "a model call was made after every client left"
        assert wait_for(lambda: busy_threads() <= baseline, 2.0), (
            busy_threads(),
            baseline,
            [t.name for t in threading.enumerate()],
        )
        settled = time.monotonic() - left
        assert settled < SETTLE_SECONDS + 3.0
        print(
            f"{STREAMS + len(plain)} questions left mid-answer: back to {busy_threads()} threads "
            f"(baseline {baseline}), {llm_server.in_flight} model calls in flight, {calls} calls made, "
            f"{settled:.1f} s after the last client left (incl. 1 s of watching)"
        )

        # Every slot is free again: as many questions as the limit are taken at once (and answered).
        llm_server.default = None
        llm_server.script([text("No apple.")] * slots * 4)
        with ThreadPoolExecutor(slots) as clients:
            codes = list(
                clients.map(lambda _: http.post("/api/ask", json=asked("after")).status_code, range(slots))
            )
        assert 429 not in codes, codes

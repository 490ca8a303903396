"""A scripted OpenAI-compatible HTTP server on 127.0.0.1 for tests (no mocks of the client).

It answers ``POST /v1/chat/completions`` (as one JSON reply, or streamed as server-sent events
when the request says ``stream``: words one chunk each, ``server.chunk_seconds`` apart, usage in a
last chunk when ``stream_options.include_usage``; ``server.streams`` records for each stream how
many of its content chunks went out before the client closed it) from a queue of scripted replies and
``POST /v1/embeddings`` with deterministic vectors derived from a hash of each text, and records
every request it receives so tests can check what a backend really sent::

    def test_something(llm_server):
        llm_server.script([rate_limited(), text("hello")])
        ...  # point a backend at llm_server.base_url
        assert len(llm_server.chat_requests) == 2

Replies are built with :func:`text`, :func:`tool_call`, :func:`error`, :func:`rate_limited`,
:func:`hang`, :func:`empty`, :func:`cut_off` (``finish_reason: "length"``), :func:`thinking`
(a ``reasoning_content``-style field beside the content) and :func:`dropped` (the connection is
closed with no answer, as a server that crashed or restarted mid-request does). When the queue
runs out the server answers ``server.default`` if set, else HTTP 418 "script exhausted", a 4xx
clients do not retry, so the test fails clearly.
Use the ``llm_server`` fixture (tests/conftest.py should import it so every test module has it).

Capabilities, checked before a scripted reply is used (a refused request consumes none), answer
HTTP 400 the way vLLM does: ``server.refuse_params`` (body keys such as ``temperature``),
``server.supports_tools = False`` (no ``--enable-auto-tool-choice``), ``server.supports_images =
False`` (a text-only model) and ``server.image_limit`` (``--limit-mm-per-prompt``).

Other real servers' behaviours, each as the server words it:

- ``server.images_refusal = "llama.cpp"``: a text-only llama.cpp build answers any image with HTTP
  500 "image input is not supported - hint: ...mmproj" (``"vllm"``: HTTP 400 "... is not a
  multimodal model"); the refusal consumes no scripted reply.
- ``server.o_series = True``: OpenAI's reasoning models: HTTP 400 "Unsupported parameter:
  'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead." and
  "Unsupported value: 'temperature' does not support 0.0 with this model. Only the default (1)
  value is supported." (likewise ``top_p``).
- ``server.n_ctx = N``: llama.cpp's context size. A prompt of N tokens or more is refused with
  HTTP 400 "the request exceeds the available context size, try increasing it"; a reply that would
  take prompt plus reply past N is cut there with HTTP 200 and ``finish_reason: "length"``, and
  ``GET /props`` reports ``default_generation_settings.n_ctx`` (``server.report_n_ctx = False``
  hides it, as other servers do).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

# ---------------------------------------------------------------------------- scripted replies


@dataclass
class Reply:
    """One scripted answer. ``kind`` is text, tool_calls, error, hang or drop; text, tool calls and
    hangs are sent after ``seconds``."""

    kind: str
    content: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    #: Overrides the finish reason the server reports ("length" for a cut-off reply).
    finish_reason: str | None = None
    #: Further fields of the assistant message (``reasoning_content``, ``reasoning``).
    message_extra: dict[str, Any] = field(default_factory=dict)


def cut_off(content: str = "The answer is") -> Reply:
    """A text reply stopped at the output limit (``finish_reason: "length"``)."""
    return Reply("text", content=content, finish_reason="length")


def thinking(content: str, reasoning: str, *, field_name: str = "reasoning_content") -> Reply:
    """A text reply with the model's reasoning in a separate message field, as vLLM's reasoning
    parsers (``reasoning_content``) or newer servers (``reasoning``) return it."""
    return Reply("text", content=content, message_extra={field_name: reasoning})


def text(content: str, *, prompt_tokens: int | None = None, completion_tokens: int | None = None) -> Reply:
    """A plain assistant message."""
    return Reply("text", content=content, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)


def empty() -> Reply:
    """An assistant message with no content and no tool calls."""
    return Reply("text", content="")


def tool_call(name: str, arguments: dict[str, Any] | str, *, call_id: str | None = None) -> Reply:
    """A native tool call; a ``str`` ``arguments`` is sent verbatim (use it for malformed JSON)."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return Reply(
        "tool_calls",
        tool_calls=[{"id": call_id or f"call_{name}", "name": name, "arguments": raw}],
    )


def error(status: int, message: str = "scripted error", headers: dict[str, str] | None = None) -> Reply:
    """An HTTP error with an OpenAI-style error body."""
    return Reply("error", content=message, status=status, headers=dict(headers or {}))


def rate_limited(retry_after: float = 0) -> Reply:
    """HTTP 429 with a ``Retry-After`` header."""
    return error(429, "rate limited", {"Retry-After": f"{retry_after:g}"})


def dropped() -> Reply:
    """No answer: the server closes the connection (a crashed or restarting model server)."""
    return Reply("drop")


def hang(seconds: float) -> Reply:
    """Answer nothing for ``seconds`` (cut short when the server stops), then a text reply."""
    return Reply("hang", content="too late", seconds=seconds)


# ---------------------------------------------------------------------------- server


def eval_config(path: Path, base_url: str) -> Path:
    """A ``vidscope.toml`` at ``path`` for an evaluation against a scripted chat server at
    ``base_url``: no stage retries, no speech recogniser, no client retries."""
    path.write_text(
        f"""
[ingest]
stage_retries = 0

[models]
chat = "openai:scripted"
speech_recognizer = ""

[models.options.openai]
base_url = "{base_url}"
max_retries = 0
timeout_s = 20
"""
    )
    return path


def _words(value: Any) -> int:
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, list):
        return sum(_words(part.get("text", "")) for part in value if isinstance(part, dict))
    return 0


def _image_count(body: dict[str, Any]) -> int:
    return sum(
        1
        for m in body.get("messages", [])
        if isinstance(m.get("content"), list)
        for part in m["content"]
        if isinstance(part, dict) and part.get("type") == "image_url"
    )


def _prompt_tokens(body: dict[str, Any]) -> int:
    """The server's token count of a request: words, plus 85 per image."""
    return sum(_words(m.get("content")) for m in body.get("messages", [])) + 85 * _image_count(body)


def hash_vector(text_value: str, dim: int) -> list[float]:
    """A deterministic unit vector for a text (the server's embedding)."""
    seed = int.from_bytes(hashlib.sha256(text_value.encode()).digest()[:8], "little")
    vec = np.random.default_rng(seed).standard_normal(dim)
    # Scaled on purpose so clients must normalise themselves to pass tests.
    return [float(x) for x in vec * 3.0]


@dataclass
class Received:
    """A request the server got: path, parsed JSON body and headers (lower-case names)."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    at: float


class ScriptedLLMServer:
    """The loopback server: :meth:`start`, then :meth:`stop` (or use the fixture)."""

    def __init__(self, embed_dim: int = 16) -> None:
        self.embed_dim = embed_dim
        self.default: Reply | None = None
        self.refuse_params: set[str] = set()
        self.supports_tools = True
        self.supports_images = True
        self.image_limit: int | None = None
        self.images_refusal: str | None = None
        self.o_series = False
        self.n_ctx: int | None = None
        self.report_n_ctx = True
        self.requests: list[Received] = []
        #: The last chat request's messages (and tools): llama.cpp's one slot keeps its prompt, so
        #: the next request's leading messages equal to them are reported as cached tokens.
        self._slot: tuple[list[Any], Any] = ([], None)
        #: Chat completions being answered right now (a reply's ``seconds`` keeps one in flight).
        self.in_flight = 0
        #: Seconds between the chunks of a streamed reply (a model writing token by token).
        self.chunk_seconds = 0.0
        #: Per streamed reply: (content chunks sent, content chunks in the reply); fewer sent than
        #: there were: the client closed the stream early.
        self.streams: list[tuple[int, int]] = []
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def _reused(self, body: dict[str, Any], prompt_tokens: int) -> int:
        """Prompt tokens a one-slot llama.cpp server would take from its cache for ``body``: those of
        the leading messages equal to the previous request's (same tools), as its prompt cache
        reuses the longest common prefix; at most all but one token (llama.cpp evaluates one)."""
        messages = list(body.get("messages", []))
        with self._lock:
            before, tools = self._slot
            self._slot = (messages, body.get("tools"))
        if tools != body.get("tools"):
            return 0  # the tools are rendered into the prompt's start: another prefix
        common = 0
        while common < min(len(before), len(messages)) and before[common] == messages[common]:
            common += 1
        if not common:
            return 0
        return max(0, min(_prompt_tokens({"messages": messages[:common]}), prompt_tokens - 1))

    # -------------------------------------------------------------- control

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL, ``http://127.0.0.1:<port>/v1``."""
        if self._httpd is None:
            raise RuntimeError("llm_server is not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def script(self, replies: Iterable[Reply]) -> None:
        """Queue replies for the next chat completions, in order."""
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        """Scripted replies not used yet."""
        with self._lock:
            return len(self._queue)

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        """Bodies of the chat-completion requests received, oldest first."""
        return [r.body for r in self.requests if r.path.endswith("/chat/completions")]

    @property
    def embedding_requests(self) -> list[dict[str, Any]]:
        """Bodies of the embedding requests received, oldest first."""
        return [r.body for r in self.requests if r.path.endswith("/embeddings")]

    def start(self) -> ScriptedLLMServer:
        """Bind 127.0.0.1 on a free port and serve from a daemon thread."""
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in separate writes; without this, Nagle's algorithm and
            # delayed ACKs add ~40 ms to every keep-alive response.
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                with server._lock:
                    server.requests.append(Received(self.path, {}, {}, time.monotonic()))
                if self.path.rstrip("/") == "/props":
                    if server.n_ctx is None or not server.report_n_ctx:
                        self._send(404, {"error": {"message": "File Not Found"}})
                    else:
                        settings = {"n_ctx": server.n_ctx, "n_predict": -1}
                        self._send(200, {"default_generation_settings": settings, "total_slots": 1})
                elif self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    self._send(400, {"error": {"message": "body is not JSON"}})
                    return
                headers = {k.lower(): v for k, v in self.headers.items()}
                with server._lock:
                    server.requests.append(Received(self.path, body, headers, time.monotonic()))
                if self.path.endswith("/chat/completions"):
                    with server._lock:
                        server.in_flight += 1
                    try:
                        server._chat(self, body)
                    finally:
                        with server._lock:
                            server.in_flight -= 1
                elif self.path.endswith("/embeddings"):
                    server._embeddings(self, body)
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def _send(
                self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
            ) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test); nothing to do

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="llm-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Wake hanging handlers, stop serving and close the socket.

        What backends learned about this server is forgotten too: the next test's server may get
        the same port and must not inherit, say, a refused temperature.
        """
        from vidscope.models import endpoint_facts

        endpoint_facts.forget_all()
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # -------------------------------------------------------------- handlers

    def _next(self) -> Reply | None:
        with self._lock:
            return self._queue.popleft() if self._queue else self.default

    def _refusal(self, body: dict[str, Any]) -> str | None:
        """Why a server with these capabilities refuses ``body`` with HTTP 400 (None: it does not)."""
        for name in sorted(self.refuse_params & set(body)):
            return f"Unsupported parameter: '{name}' is not supported with this model."
        if self.o_series:
            if "max_tokens" in body:
                return (
                    "Unsupported parameter: 'max_tokens' is not supported with this model. "
                    "Use 'max_completion_tokens' instead."
                )
            for name in ("temperature", "top_p"):
                if name in body and body[name] != 1:
                    return (
                        f"Unsupported value: '{name}' does not support {float(body[name])} with this "
                        "model. Only the default (1) value is supported."
                    )
        if body.get("tools") and not self.supports_tools:
            return '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
        images = _image_count(body)
        if images and not self.supports_images:
            return "This model does not support image input."
        if self.image_limit is not None and images > self.image_limit:
            return f"At most {self.image_limit} image(s) may be provided in one request."
        return None

    def _chat(self, handler: Any, body: dict[str, Any]) -> None:
        refused = self._refusal(body)
        if refused is not None:
            handler._send(400, {"error": {"message": refused, "type": "BadRequestError", "code": 400}})
            return
        if self.images_refusal and _image_count(body):
            if self.images_refusal == "llama.cpp":
                message = (
                    "image input is not supported - hint: if this is unexpected, you may need to "
                    "provide the mmproj"
                )
                handler._send(500, {"error": {"code": 500, "message": message, "type": "server_error"}})
            else:
                message = "Qwen2ForCausalLM is not a multimodal model"
                handler._send(400, {"error": {"message": message, "type": "BadRequestError", "code": 400}})
            return
        if self.n_ctx is not None and _prompt_tokens(body) >= self.n_ctx:
            message = "the request exceeds the available context size, try increasing it"
            handler._send(
                400, {"error": {"code": 400, "message": message, "type": "exceed_context_size_error"}}
            )
            return
        reply = self._next()
        if reply is None:
            handler._send(418, {"error": {"message": "llm_server: script exhausted", "type": "test"}})
            return
        if reply.kind == "drop":
            handler.close_connection = True
            return
        if reply.kind == "error":
            handler._send(
                reply.status,
                {"error": {"message": reply.content, "type": "scripted", "code": reply.status}},
                reply.headers,
            )
            return
        if reply.seconds:  # a hang, or a reply that takes its time (a slow model)
            self._stopping.wait(reply.seconds)
        message: dict[str, Any] = {"role": "assistant", "content": reply.content, **reply.message_extra}
        finish = "stop"
        if reply.kind == "tool_calls":
            message["content"] = None
            message["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for c in reply.tool_calls
            ]
            finish = "tool_calls"
        prompt_tokens = reply.prompt_tokens
        if prompt_tokens is None:
            prompt_tokens = _prompt_tokens(body)
        cached_tokens = self._reused(body, prompt_tokens)
        completion_tokens = reply.completion_tokens
        if completion_tokens is None:
            completion_tokens = _words(reply.content or "") + sum(
                len(c["arguments"]) // 4 + 1 for c in reply.tool_calls
            )
        limit = body.get("max_completion_tokens", body.get("max_tokens"))
        if reply.finish_reason == "length" and reply.completion_tokens is None and limit:
            completion_tokens = int(limit)  # a reply cut at the output limit used all of it
        if self.n_ctx is not None and prompt_tokens + completion_tokens >= self.n_ctx:
            # llama.cpp stops generating when the slot's context is full and says "length".
            completion_tokens = max(0, self.n_ctx - prompt_tokens)
            message["content"] = " ".join((reply.content or "").split()[:completion_tokens])
            message.pop("tool_calls", None)
            finish = "length"
        if body.get("stream"):
            # llama.cpp's last chunk reports the cached prompt tokens as its whole replies do.
            usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                     "total_tokens": prompt_tokens + completion_tokens,
                     "prompt_tokens_details": {"cached_tokens": cached_tokens}}  # fmt: skip
            self._stream(handler, body, message, reply.finish_reason or finish, usage)
            return
        handler._send(
            200,
            {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "scripted"),
                "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason or finish}],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                    "prompt_tokens_details": {"cached_tokens": cached_tokens},
                },
            },
        )

    def _stream(
        self, handler: Any, body: dict[str, Any], message: dict[str, Any], finish: str, usage: dict[str, Any]
    ) -> None:
        """``message`` as server-sent events: its words one chunk each (``chunk_seconds`` apart), its
        tool calls in one chunk, the finish reason, then the usage if asked; stops when the client
        closes the connection."""
        import re

        words = re.findall(r"\s*\S+", message.get("content") or "")
        base = {"id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": body.get("model", "scripted")}  # fmt: skip
        events: list[dict[str, Any]] = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant"}}]}]
        events += [{**base, "choices": [{"index": 0, "delta": {"content": w}}]} for w in words]
        if message.get("tool_calls"):
            calls = [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]
            events.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": calls}}]})
        events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append({**base, "choices": [], "usage": usage})
        sent = 0
        recorded = False
        try:
            handler.send_response(200)
            handler.send_header("Content-Type", "text/event-stream")
            handler.send_header("Connection", "close")
            handler.end_headers()
            handler.close_connection = True
            for event in events:
                if self.chunk_seconds:
                    self._stopping.wait(self.chunk_seconds)
                handler.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                handler.wfile.flush()
                sent += "content" in event["choices"][0]["delta"] if event["choices"] else 0
            # Recorded before the end marker: a client that read the stream to its end finds it
            # here (after the marker, a test could look before this thread got to it).
            with self._lock:
                self.streams.append((sent, len(words)))
            recorded = True
            handler.wfile.write(b"data: [DONE]\n\n")
            handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client closed the stream
        if not recorded:
            with self._lock:
                self.streams.append((sent, len(words)))

    def _embeddings(self, handler: Any, body: dict[str, Any]) -> None:
        inputs = body.get("input", [])
        if isinstance(inputs, str):
            inputs = [inputs]
        dim = int(body.get("dimensions") or self.embed_dim)
        data = [
            {"object": "embedding", "index": i, "embedding": hash_vector(str(t), dim)}
            for i, t in enumerate(inputs)
        ]
        tokens = sum(_words(str(t)) for t in inputs)
        handler._send(
            200,
            {
                "object": "list",
                "model": body.get("model", "scripted"),
                "data": data,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )


@pytest.fixture
def llm_server() -> Iterator[ScriptedLLMServer]:
    """A started :class:`ScriptedLLMServer`, stopped at teardown."""
    server = ScriptedLLMServer().start()
    try:
        yield server
    finally:
        server.stop()

"""A recording proxy between vidscope and the real model server, both on loopback.

Every request vidscope sends and every reply the server gives pass through it unchanged; it keeps
what the tier asserts on and records: how many requests, which carried images (and whether the
server had refused images before), which asked for tools, the tokens the server counted, and the
HTTP status of each reply. Nothing here interprets the model's text: that is the agents' job.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Exchange:
    """One request and its reply, as the proxy saw them."""

    path: str
    status: int
    images: int
    tools: int
    prompt_tokens: int = 0
    #: Of the prompt tokens, those llama.cpp took from its prompt cache (not processed again).
    cached_tokens: int = 0
    completion_tokens: int = 0
    refused_images: bool = False
    reply: dict[str, Any] = field(default_factory=dict)
    #: The request as sent (its messages, tools and limits), for the tier's per-command dumps.
    request: dict[str, Any] = field(default_factory=dict)
    #: Wall seconds the server took to answer (prompt processing and generation).
    seconds: float = 0.0


def _count_images(body: dict[str, Any]) -> int:
    count = 0
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            count += sum(1 for part in content if isinstance(part, dict) and part.get("type") == "image_url")
    return count


class RecordingProxy:
    """Forwards ``/v1/*`` to ``upstream`` and records each exchange (``exchanges``)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        #: Streams still being passed on: a stream vidscope closed is recorded once the proxy
        #: notices (its next write fails), which can be after the command has exited.
        self._streaming = 0
        self._idle = threading.Condition(self._lock)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                self._forward(None)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self._forward(self.rfile.read(length))

            def _forward(self, data: bytes | None) -> None:
                target = proxy.upstream + self.path.removeprefix("/v1")
                body = _json(data)
                if body.get("stream"):
                    self._forward_stream(target, body)
                    return
                request = urllib.request.Request(target, data=data, method=self.command)
                request.add_header("Content-Type", "application/json")
                started = time.monotonic()
                try:
                    with urllib.request.urlopen(request, timeout=900) as response:
                        status, payload = response.status, response.read()
                except urllib.error.HTTPError as err:
                    status, payload = err.code, err.read()
                except OSError as err:
                    status, payload = 502, json.dumps({"error": {"message": str(err)}}).encode()
                if data is not None:
                    proxy._record(self.path, data, status, payload, time.monotonic() - started)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _forward_stream(self, target: str, body: dict[str, Any]) -> None:
                """A streamed reply passed on event by event. When vidscope closes the stream
                (a reply stopped after its written call) the upstream connection is closed too,
                so llama.cpp stops generating; llama.cpp is asked for its timings in every chunk,
                so a stream closed before its usage chunk is still counted."""
                with proxy._lock:
                    proxy._streaming += 1
                try:
                    self._pass_stream(target, body)
                finally:
                    with proxy._lock:
                        proxy._streaming -= 1
                        proxy._idle.notify_all()

            def _pass_stream(self, target: str, body: dict[str, Any]) -> None:
                sent = json.dumps({**body, "timings_per_token": True}).encode()
                request = urllib.request.Request(target, data=sent, method="POST")
                request.add_header("Content-Type", "application/json")
                started = time.monotonic()
                events: list[dict[str, Any]] = []
                closed_early = False
                try:
                    with urllib.request.urlopen(request, timeout=900) as response:
                        self.send_response(response.status)
                        self.send_header("Content-Type", "text/event-stream")
                        self.send_header("Connection", "close")
                        self.end_headers()
                        self.close_connection = True
                        for line in response:
                            try:
                                self.wfile.write(line)
                                self.wfile.flush()
                            except (BrokenPipeError, ConnectionResetError):
                                closed_early = True
                                break
                            if line.startswith(b"data: ") and not line.startswith(b"data: [DONE]"):
                                events.append(_json(line[6:]))
                except urllib.error.HTTPError as err:
                    payload = err.read()
                    proxy._record(
                        self.path, json.dumps(body).encode(), err.code, payload, time.monotonic() - started
                    )
                    self.send_response(err.code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                except OSError:
                    closed_early = True
                reply = _assembled(events, closed_early)
                proxy._record(
                    self.path,
                    json.dumps(body).encode(),
                    200,
                    json.dumps(reply).encode(),
                    time.monotonic() - started,
                )

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def _record(self, path: str, data: bytes, status: int, payload: bytes, seconds: float) -> None:
        try:
            body = json.loads(data)
        except ValueError:
            body = {}
        try:
            reply = json.loads(payload)
        except ValueError:
            reply = {}
        usage = reply.get("usage") or {}
        timings = reply.get("timings") or {}
        text = json.dumps(reply.get("error", "")).lower() if status >= 400 else ""
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
        exchange = Exchange(
            path=path,
            status=status,
            images=_count_images(body),
            tools=len(body.get("tools") or []),
            # A stream closed early has no usage: llama.cpp's timings count the same tokens.
            prompt_tokens=int(
                usage.get("prompt_tokens") or (timings.get("prompt_n") or 0) + (timings.get("cache_n") or 0)
            ),
            cached_tokens=int(cached if cached is not None else timings.get("cache_n") or 0),
            completion_tokens=int(usage.get("completion_tokens") or timings.get("predicted_n") or 0),
            refused_images=status >= 400 and "image" in text,
            reply=reply,
            request=body,
            seconds=seconds,
        )
        with self._lock:
            self.exchanges.append(exchange)

    def mark(self) -> int:
        """The index of the next exchange (to slice one command's exchanges out), once no stream
        is still being passed on (at most 30 s): a reply the client stopped early is recorded when
        the server's stream ends, after the command that asked for it may have exited."""
        with self._lock:
            self._idle.wait_for(lambda: self._streaming == 0, timeout=30)
            return len(self.exchanges)

    def since(self, mark: int) -> list[Exchange]:
        """The exchanges from ``mark`` on, once no stream is still being passed on (at most 30 s)."""
        with self._lock:
            self._idle.wait_for(lambda: self._streaming == 0, timeout=30)
            return list(self.exchanges[mark:])

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _json(data: bytes | None) -> dict[str, Any]:
    try:
        found = json.loads(data or b"{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _assembled(events: list[dict[str, Any]], closed_early: bool) -> dict[str, Any]:
    """A streamed reply's events as the one reply a non-streamed request gets: the content and
    tool calls joined, the finish reason (``"closed"`` when the client stopped it), the usage and
    llama.cpp's last timings."""
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish, usage, timings = None, None, None
    for event in events:
        usage = event.get("usage") or usage
        timings = event.get("timings") or timings
        for choice in event.get("choices") or []:
            finish = choice.get("finish_reason") or finish
            delta = choice.get("delta") or {}
            content.append(delta.get("content") or "")
            for part in delta.get("tool_calls") or []:
                empty = {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                entry = calls.setdefault(part.get("index", 0), empty)
                entry["id"] = part.get("id") or entry["id"]
                function = part.get("function") or {}
                entry["function"]["name"] += function.get("name") or ""
                entry["function"]["arguments"] += function.get("arguments") or ""
    message: dict[str, Any] = {"role": "assistant", "content": "".join(content)}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    reply: dict[str, Any] = {
        "choices": [{"message": message, "finish_reason": "closed" if closed_early else finish}]
    }
    if usage:
        reply["usage"] = usage
    if timings:
        reply["timings"] = timings
    return reply


def _clip(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= limit else text[: limit // 2] + " … " + text[-limit // 2 :]


def exchange_lines(exchanges: list[Exchange], limit: int = 400) -> str:
    """One JSON line per exchange: seconds, tokens (processed = prompt - cached), the request's
    messages clipped to ``limit`` characters each, the reply's text and tool calls clipped: to read
    where a command's model time went."""
    lines = []
    for e in exchanges:
        choice = (e.reply.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        lines.append(
            json.dumps(
                {
                    "seconds": round(e.seconds, 2),
                    "prompt": e.prompt_tokens,
                    "processed": e.prompt_tokens - e.cached_tokens,
                    "output": e.completion_tokens,
                    "max_tokens": e.request.get("max_tokens"),
                    "finish": choice.get("finish_reason"),
                    "tools": e.tools,
                    "messages": [
                        {"role": m.get("role"), "content": _clip(m.get("content") or "", limit)}
                        for m in e.request.get("messages", [])
                    ],
                    "reply": _clip(message.get("content") or "", limit),
                    "calls": _clip(message.get("tool_calls") or [], limit),
                }
            )
        )
    return "\n".join(lines) + ("\n" if lines else "")

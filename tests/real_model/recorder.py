"""A recording proxy between vidscope and the real model server, both on loopback.

Every request vidscope sends and every reply the server gives pass through it unchanged; it keeps
what the tier asserts on and records: how many requests, which carried images (and whether the
server had refused images before), which asked for tools, the tokens the server counted, and the
HTTP status of each reply. Nothing here interprets the model's text: that is the agents' job.
"""

from __future__ import annotations

import json
import threading
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
                request = urllib.request.Request(target, data=data, method=self.command)
                request.add_header("Content-Type", "application/json")
                try:
                    with urllib.request.urlopen(request, timeout=900) as response:
                        status, payload = response.status, response.read()
                except urllib.error.HTTPError as err:
                    status, payload = err.code, err.read()
                except OSError as err:
                    status, payload = 502, json.dumps({"error": {"message": str(err)}}).encode()
                if data is not None:
                    proxy._record(self.path, data, status, payload)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def _record(self, path: str, data: bytes, status: int, payload: bytes) -> None:
        try:
            body = json.loads(data)
        except ValueError:
            body = {}
        try:
            reply = json.loads(payload)
        except ValueError:
            reply = {}
        usage = reply.get("usage") or {}
        text = json.dumps(reply.get("error", "")).lower() if status >= 400 else ""
        exchange = Exchange(
            path=path,
            status=status,
            images=_count_images(body),
            tools=len(body.get("tools") or []),
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            cached_tokens=int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            refused_images=status >= 400 and "image" in text,
            reply=reply,
        )
        with self._lock:
            self.exchanges.append(exchange)

    def mark(self) -> int:
        """The index of the next exchange (to slice one command's exchanges out)."""
        with self._lock:
            return len(self.exchanges)

    def since(self, mark: int) -> list[Exchange]:
        with self._lock:
            return list(self.exchanges[mark:])

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

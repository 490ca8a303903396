"""The running ``vidscope api`` that ``vidscope ask`` hands its question to, when there is one.

A cold ``ask`` pays for its process: Python, the store's libraries, the query embedder and, when a
Prefect server records the question, Prefect itself (~2 s of CPU together). An API process has paid
all of that once. So while ``vidscope api`` serves (started by hand, or by ``vidscope server up``
beside the Prefect server), it registers itself in ``<data_dir>/server/api.json``: its pid, the
address a client reaches it at, and a fingerprint of its settings. ``ask`` finds it there, sends
the question to ``POST /api/ask/stream`` and renders the steps and the answer as they arrive; the
API answers with its warm store and models and, with a Prefect server running, as a flow run the
UI shows.

A registration is used only when its process is alive and its settings are the caller's (same data
dir, models and agent settings; the ``[api]`` and ``[server]`` sections may differ). An API that
refuses the connection, the token or the request is passed over (:class:`ApiUnavailable`) and the
question is answered in-process, as without an API. This module imports only the standard library.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vidscope.core.settings import Settings

#: Seconds to wait for the API to accept the connection (a local API accepts in milliseconds).
CONNECT_TIMEOUT = 2.0
#: The address a client uses for an API bound to every interface.
_ANY_ADDRESS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


class ApiUnavailable(Exception):
    """The registered API cannot take the question (gone, refused, another token): answer locally."""


class RemoteAskFailed(Exception):
    """The API took the question and answering it failed; ``kind`` is the error's type there."""

    def __init__(self, message: str, kind: str, status: int) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status


def registration_path(settings: Settings) -> Path:
    """``<data_dir>/server/api.json``, beside the Prefect server's pid files."""
    return Path(settings.data_dir).expanduser().resolve() / "server" / "api.json"


def settings_fingerprint(settings: Settings) -> str:
    """A digest of everything in ``settings`` that can change an answer (not ``[api]``/``[server]``)."""
    data = settings.model_dump(mode="json", exclude={"api", "server"})
    data["data_dir"] = str(Path(settings.data_dir).expanduser().resolve())
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:32]


def register(settings: Settings, host: str, port: int) -> Path:
    """Record this process as the API serving ``settings`` on ``host:port``; returns the file."""
    path = registration_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "pid": os.getpid(),
        "host": _ANY_ADDRESS.get(host, host),
        "port": port,
        "settings": settings_fingerprint(settings),
    }
    partial = path.with_name(f".api.json.{os.getpid()}")
    partial.write_text(json.dumps(record) + "\n")
    partial.replace(path)  # atomic: a reader never sees half a record
    return path


def unregister(settings: Settings) -> None:
    """Remove this process's registration (another process's is left alone)."""
    path = registration_path(settings)
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
        if json.loads(path.read_text())["pid"] == os.getpid():
            path.unlink()


def forget_dead_registration(settings: Settings) -> bool:
    """Remove the registration of an API whose process is gone (killed, so it could not remove
    it itself); True when one was removed. A live API's registration is left alone."""
    path = registration_path(settings)
    try:
        text = path.read_text()
    except OSError:
        return False
    try:
        pid = int(json.loads(text)["pid"])
    except (ValueError, TypeError, KeyError):
        pid = 0  # unreadable: no API can be found through it either
    if pid > 0 and _alive(pid):
        return False
    with contextlib.suppress(OSError):
        if path.read_text() == text:  # not replaced meanwhile by an API starting up
            path.unlink()
    return True


@dataclass(frozen=True)
class RunningApi:
    """A registered API whose process is alive and whose settings match the caller's."""

    host: str
    port: int
    pid: int
    token: str | None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def ask(
        self,
        request: dict[str, Any],
        on_step: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Send ``request`` (an ``AskRequest`` body) to ``/api/ask/stream``; return the answer.

        Each step is passed to ``on_step`` as it arrives. Raises :class:`ApiUnavailable` when the
        API did not take the question (connection refused, wrong token, request rejected, or the
        connection lost before the first line) and :class:`RemoteAskFailed` when answering failed.
        """
        headers = {"Content-Type": "application/json", "Accept": "application/x-ndjson"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        connection = http.client.HTTPConnection(self.host, self.port, timeout=CONNECT_TIMEOUT)
        try:
            try:
                # The address as bytes: a str host is IDNA-encoded, which imports the codec (~15 ms).
                address = (self.host.encode(), self.port)
                connection.sock = socket.create_connection(address, CONNECT_TIMEOUT)  # type: ignore[arg-type]
                # The answer takes as long as the agent needs (model calls can take minutes), so
                # only the connection has a deadline; Ctrl-C ends the wait.
                connection.sock.settimeout(None)
                connection.request("POST", "/api/ask/stream", json.dumps(request), headers)
                response = connection.getresponse()
            except OSError as exc:
                raise ApiUnavailable(f"{self.url}: {exc}") from exc
            if response.status != 200:
                # 401/403: another token; 422: a request the local path words its own error for.
                raise ApiUnavailable(f"{self.url} answered HTTP {response.status}")
            return _read_stream(response, on_step, self.url)
        finally:
            connection.close()


def _read_stream(
    response: http.client.HTTPResponse,
    on_step: Callable[[dict[str, Any]], None] | None,
    url: str,
) -> dict[str, Any]:
    lines_read = 0
    try:
        for raw in response:
            if not raw.strip():
                continue
            event = json.loads(raw)
            lines_read += 1
            if "step" in event:
                if on_step is not None:
                    on_step(event["step"])
            elif "result" in event:
                result: dict[str, Any] = event["result"]
                return result
            elif "error" in event:
                error = event["error"]
                raise RemoteAskFailed(str(error["message"]), str(error["type"]), int(error["status"]))
    except (OSError, http.client.HTTPException, json.JSONDecodeError, KeyError, TypeError) as exc:
        if lines_read == 0:
            raise ApiUnavailable(f"{url}: {exc}") from exc
        message = f"the vidscope API at {url} stopped answering: {exc}"
        raise RemoteAskFailed(message, type(exc).__name__, 0) from exc
    if lines_read == 0:
        raise ApiUnavailable(f"{url} closed the stream without an answer")
    raise RemoteAskFailed(f"the vidscope API at {url} ended the answer early", "IncompleteAnswer", 0)


def find_running_api(settings: Settings) -> RunningApi | None:
    """The API registered for ``settings``'s data dir, if its process is alive and its settings match."""
    try:
        record = json.loads(registration_path(settings).read_text())
        pid, host, port = int(record["pid"]), str(record["host"]), int(record["port"])
        fingerprint = str(record["settings"])
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if not _alive(pid):
        forget_dead_registration(settings)
        return None
    if fingerprint != settings_fingerprint(settings):
        return None
    return RunningApi(host, port, pid, settings.api.token)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except PermissionError:  # alive, another user's: its API would not be ours to use anyway
        return False
    except OSError:
        return False
    proc = Path("/proc") / str(pid) / "stat"
    with contextlib.suppress(OSError, IndexError):  # a zombie is not serving
        return proc.read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    return True

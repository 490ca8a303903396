"""What keeps the API safe to expose: bearer-token auth, request-size limits, video-root checks."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from fastapi import HTTPException, Request, status
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: The cookie the page's log-in sets, so <video> and <img> requests (which cannot carry an
#: Authorization header) are authenticated too.
SESSION_COOKIE = "vidscope_session"


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) only accepts connections from this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


#: A ``Host`` header as RFC 9110 has it: a name or an IPv4 address, or an IPv6 address in
#: brackets, then an optional port of digits. Nothing else (no ``user@``, no spaces, no path).
_HOST_HEADER = re.compile(r"(?:\[(?P<v6>[0-9a-f:.]+)\]|(?P<name>[a-z0-9._-]+))(?::\d{0,5})?")


def host_name(header: str) -> str | None:
    """The name in a ``Host`` header, without its port: ``[::1]:8000`` → ``::1``; None when the
    header is not a host and port alone. ``127.0.0.1:80@evil.example`` is None, not ``127.0.0.1``:
    a lenient split at the first colon would read a name the request was not addressed to."""
    match = _HOST_HEADER.fullmatch(header.strip().lower())
    if match is None:
        return None
    return match["v6"] or match["name"].rstrip(".")


def session_value(token: str) -> str:
    """The cookie value standing for ``token`` (derived, so the token itself is never echoed)."""
    return hmac.new(token.encode(), b"vidscope-web-session", hashlib.sha256).hexdigest()


class TokenAuth:
    """A FastAPI dependency: with a token configured every request must present it.

    The token comes as ``Authorization: Bearer <token>`` or as the session cookie the page sets
    through ``POST /api/login``. Without a token (allowed only on loopback binds) only loopback
    clients are served: a misconfigured bind fails closed instead of open. And only requests
    addressed to a loopback name (``localhost``, ``127.0.0.1``, ``[::1]``) or one of ``hosts``:
    a web page from elsewhere whose name an attacker re-points at 127.0.0.1 (DNS rebinding)
    reaches this API from the user's own browser, on loopback, but with its own name as ``Host``.
    """

    def __init__(self, token: str | None, hosts: list[str] | None = None) -> None:
        self.token = token
        self.hosts = {name for name in map(host_name, hosts or []) if name}

    def check_token(self, candidate: str) -> bool:
        """Constant-time comparison of ``candidate`` with the configured token."""
        return self.token is not None and hmac.compare_digest(candidate.encode(), self.token.encode())

    def __call__(self, request: Request) -> None:
        if self.token is None:
            client = request.client.host if request.client else ""
            if not is_loopback(client):
                raise HTTPException(
                    status.HTTP_403_FORBIDDEN,
                    "this API has no token configured, so it only serves loopback clients",
                )
            header = request.headers.get("host", "")
            host = host_name(header)
            if host is None:
                raise HTTPException(
                    status.HTTP_403_FORBIDDEN,
                    f"this API has no token configured, so it only answers requests addressed to "
                    f"localhost or 127.0.0.1, and Host {header[:100]!r} is not a host name and port",
                )
            if not (is_loopback(host) or host in self.hosts):
                raise HTTPException(
                    status.HTTP_403_FORBIDDEN,
                    f"this API has no token configured, so it only answers requests addressed to "
                    f"localhost or 127.0.0.1, not {host[:100]!r} (add it to [api] allowed_hosts)",
                )
            return
        header = request.headers.get("authorization", "")
        scheme, _, credentials = header.partition(" ")
        if scheme.lower() == "bearer" and self.check_token(credentials.strip()):
            return
        cookie = request.cookies.get(SESSION_COOKIE, "")
        if cookie and hmac.compare_digest(cookie.encode(), session_value(self.token).encode()):
            return
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "missing or wrong bearer token",
            headers={"WWW-Authenticate": "Bearer"},
        )


class BodyLimitMiddleware:
    """Reject request bodies over ``max_bytes`` with 413, whether sized or chunked.

    A declared ``Content-Length`` over the limit is refused before anything is read. Otherwise the
    body is read (at most ``max_bytes`` + 1 bytes are buffered) and replayed to the app, so a
    chunked body that grows past the limit is refused too, before any endpoint sees it.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                too_large = int(declared) > self.max_bytes
            except ValueError:
                await _plain(send, 400, "invalid Content-Length")
                return
            if too_large:
                await _plain(send, 413, f"request body over {self.max_bytes} bytes")
                return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await _plain(send, 413, f"request body over {self.max_bytes} bytes")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _plain(send: Send, code: int, text: str) -> None:
    payload = ('{"detail": "' + text.replace('"', "'") + '"}').encode()
    await send(
        {
            "type": "http.response.start",
            "status": code,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


class PathNotAllowed(PermissionError):
    """A path lies outside every configured video root (or no root is configured)."""


class InvalidPath(ValueError):
    """A path that cannot name a file (a NUL byte, a symlink loop, an over-long name)."""


class VideoRoots:
    """The folders the API may read videos from; every check resolves symlinks first.

    ``roots`` are the configured folders. ``ingested``, when given, adds the folders of the videos
    already in the store, read again at each check (see :meth:`snapshot` to read them once): the
    default on a loopback host, where the API's user is the machine's user who ingested them.
    """

    def __init__(
        self,
        roots: list[Path],
        ingested: Callable[[], Iterable[Path]] | None = None,
        origin: str = "[api] video_roots",
    ) -> None:
        self.configured = [Path(r).expanduser().resolve() for r in roots]
        self.ingested = ingested
        #: Where the roots come from, for the reasons shown to the user.
        self.origin = origin if ingested is None else f"{origin} (unset: the folders of the ingested videos)"

    @property
    def roots(self) -> list[Path]:
        """The configured folders, then those of the ingested videos (resolved)."""
        if self.ingested is None:
            return self.configured
        return self.configured + [Path(folder).resolve() for folder in self.ingested()]

    def snapshot(self) -> VideoRoots:
        """These roots as they are now, fixed: for checking many paths at once."""
        fixed = VideoRoots(self.roots)
        fixed.origin = self.origin
        return fixed

    def allows(self, path: str | Path) -> bool:
        """Whether ``path`` (after resolving ``..`` and symlinks) lies under one of the roots."""
        try:
            resolved = Path(path).expanduser().resolve()
        except (OSError, ValueError, RuntimeError):  # NUL bytes, symlink loops, over-long names
            return False
        return any(resolved.is_relative_to(root) for root in self.roots)

    def unplayable(self, path: str | Path) -> str | None:
        """Why the stored video file ``path`` cannot be streamed, or None when it can."""
        if not self.roots:
            return f"no folder may be read: {self.origin} is empty"
        if not self.allows(path):
            return f"its file is outside {self.origin}"
        try:
            present = Path(path).resolve().is_file()
        except (OSError, ValueError, RuntimeError):
            present = False
        if not present:
            return "its file is no longer where it was ingested from (moved or deleted)"
        return None

    def resolve(self, path: str) -> Path:
        """``path`` made absolute (a relative path is looked up under each root in turn) and checked.

        Raises :class:`PathNotAllowed` when the result is outside every root and
        :class:`InvalidPath` when ``path`` cannot name a file.
        """
        roots = self.roots
        if not roots:
            raise PathNotAllowed(f"no video roots: {self.origin} is empty")
        try:
            candidate = Path(path).expanduser()
            if not candidate.is_absolute():
                options = [root / candidate for root in roots]
                candidate = next((c for c in options if c.exists()), options[0])
            resolved = candidate.resolve()
        except (OSError, ValueError, RuntimeError) as exc:
            raise InvalidPath(f"'{path}' is not a usable path: {exc}") from exc
        if not any(resolved.is_relative_to(root) for root in roots):
            raise PathNotAllowed(f"'{path}' is outside the configured video roots ({self.origin})")
        return resolved

"""TLS contexts built once per process and shared by every HTTP client vidscope makes.

An HTTP client builds its own TLS context unless it is given one, and building one reads the CA
bundle: ~25 ms of CPU, paid for each model backend and for each poll of a server's health check,
even against ``http://`` on loopback. A context holds no connection state; clients share one.
"""

from __future__ import annotations

import functools
import ssl


def httpx_tls(url: str) -> ssl.SSLContext:
    """The context for an ``httpx`` request to ``url``: what ``httpx`` verifies against by default
    (certifi's bundle, ``SSL_CERT_FILE``/``_DIR``) for ``https://``; for plain ``http://`` one
    without CAs, never used (and a redirect to ``https://`` fails to verify, never passes)."""
    return _httpx_default() if url.lower().startswith("https:") else _unused()


@functools.cache
def _httpx_default() -> ssl.SSLContext:
    import httpx

    return httpx.create_ssl_context()


@functools.cache
def _unused() -> ssl.SSLContext:
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies, and trusts no CA


@functools.cache
def openai_tls() -> ssl.SSLContext:
    """What the ``openai`` client verifies against by default: the system's CA paths through
    ``httpx2`` (openai 3), certifi's bundle through ``httpx`` (openai 1 and 2)."""
    try:
        import httpx2 as library
    except ImportError:
        import httpx as library  # type: ignore[no-redef]

    return library.create_ssl_context()

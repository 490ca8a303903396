"""TLS contexts for vidscope's one-off ``httpx`` requests (health checks, server probes).

``httpx.get`` builds a client, and the client a TLS context, which reads the CA bundle: ~25 ms of
CPU for each poll of a server's health check, even against ``http://`` on loopback. A context holds
no connection state; requests share one.
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

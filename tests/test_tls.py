"""The TLS contexts of vidscope's one-off httpx requests (vidscope/core/tls.py)."""

from __future__ import annotations

import ssl

from vidscope.core.tls import httpx_tls


def test_https_verifies_against_the_ca_bundle_built_once_and_plain_http_trusts_no_ca() -> None:
    secure = httpx_tls("https://prefect.example.org/api/health")
    assert secure is httpx_tls("HTTPS://other.example.org/")  # built once per process
    assert secure.verify_mode == ssl.CERT_REQUIRED and secure.check_hostname
    assert secure.cert_store_stats()["x509_ca"] > 0
    # Loopback http:// never shakes hands; were it redirected to https:// it could not verify.
    plain = httpx_tls("http://127.0.0.1:4200/api/health")
    assert plain is not secure and plain.verify_mode == ssl.CERT_REQUIRED and plain.check_hostname
    assert plain.cert_store_stats()["x509_ca"] == 0

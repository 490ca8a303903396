"""Where a data dir's Lance tables live: in ``<data_dir>/lance`` (the default) or in S3-compatible
object storage (``[storage] uri = "s3://bucket/prefix"``).

A data dir whose tables live in object storage says so in ``<data_dir>/tables.json`` (the URI and
the connection options, never credentials), written the first time the store is opened with a URI.
Every later opening of that data dir, with or without the setting, finds its tables there: a
process that only knows the data dir (the model-usage log, a worker on another host with the same
configuration) cannot write a second, local set of tables beside them. A data dir without the file
keeps its tables under ``lance/``, exactly as before object storage existed.

Credentials come from the environment, as every AWS client reads them (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, or the usual profile/instance chain): Lance's
object store reads them itself, so they are never written to the data dir.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

#: The file under the data dir naming the object storage its tables live in.
POINTER_FILE = "tables.json"
#: The URI schemes the store accepts for its tables (only S3 is exercised by the tests).
SCHEMES = ("s3://",)
#: Words in an object-store error that mean the server was not reached or did not answer.
_TRANSPORT = re.compile(
    r"error sending request|connection refused|connect error|dispatch failure|timed out|"
    r"connection reset|broken pipe|incomplete message|unexpected eof",
    re.IGNORECASE,
)


class LocationError(ValueError):
    """The configured table location cannot be used with this data dir (said in one line)."""


@dataclass(frozen=True)
class TableLocation:
    """The folder or object-storage prefix holding a store's ``<table>.lance`` datasets."""

    uri: str
    #: Lance/LanceDB ``storage_options`` (endpoint, region, retries); empty for a local folder.
    options: dict[str, str] = field(default_factory=dict)

    @property
    def remote(self) -> bool:
        """Whether the tables live in object storage rather than a local folder."""
        return self.uri.startswith(SCHEMES)

    @property
    def endpoint(self) -> str:
        """The object-storage server as users name it (its URL, or the URI when it is AWS's)."""
        return self.options.get("aws_endpoint") or self.uri

    def of(self, table: str) -> str:
        """The URI (or path) of the dataset of ``table``."""
        return f"{self.uri.rstrip('/')}/{table}.lance"


def storage_options(
    *,
    endpoint: str | None = None,
    region: str | None = None,
    allow_http: bool = False,
    max_retries: int | None = None,
    retry_timeout_s: float | None = None,
) -> dict[str, str]:
    """The ``storage_options`` Lance takes for S3, from the ``[storage]`` settings (no secrets)."""
    options: dict[str, str] = {}
    if endpoint:
        options["aws_endpoint"] = endpoint
    if region:
        options["aws_region"] = region
    if allow_http:
        options["allow_http"] = "true"
    if max_retries is not None:
        options["client_max_retries"] = str(max_retries)
    if retry_timeout_s is not None:
        options["client_retry_timeout"] = str(round(retry_timeout_s))
    return options


def check_uri(uri: str) -> str:
    """``uri`` without a trailing slash when it names a bucket (and an optional prefix) in a
    supported scheme; else :class:`LocationError` saying what is accepted."""
    cleaned = uri.strip().rstrip("/")
    if not cleaned.startswith(SCHEMES) or not cleaned.split("://", 1)[1].split("/", 1)[0]:
        raise LocationError(
            f"[storage] uri {uri!r} is not supported; give s3://bucket or s3://bucket/prefix "
            f"(or leave it unset to keep the tables in the data dir)"
        )
    return cleaned


def resolve(data_dir: Path, uri: str | None, options: Mapping[str, str] | None = None) -> TableLocation:
    """Where the tables of ``data_dir`` live, given the configured ``uri`` (``None``: not set).

    With a URI, the data dir is bound to it (``tables.json`` written or updated with ``options``);
    a data dir already bound to another URI, or holding local tables, is refused. Without one, the
    data dir's own binding is used, else its ``lance/`` folder.
    """
    pointer = data_dir / POINTER_FILE
    bound = _read_pointer(pointer)
    if uri is None:
        if bound is None:
            return TableLocation(str(data_dir / "lance"))
        return bound
    wanted = TableLocation(check_uri(uri), dict(options or {}))
    if bound is not None and bound.uri != wanted.uri:
        raise LocationError(
            f"data dir {data_dir} keeps its tables in {bound.uri}, not {wanted.uri}; use another "
            f"data dir for {wanted.uri} (or set [storage] uri back)"
        )
    if bound is None:
        local = data_dir / "lance"
        if local.is_dir() and any(local.glob("*.lance")):
            raise LocationError(
                f"data dir {data_dir} already holds its tables in {local}; use a new data dir for "
                f"[storage] uri = {wanted.uri!r} (vidscope export/import move videos between them)"
            )
    if bound != wanted:
        data_dir.mkdir(parents=True, exist_ok=True)
        # A name of its own per process and thread: writers opening a fresh data dir at once each
        # replace the note whole (with the same content) and never move another's half-written file.
        temporary = pointer.with_name(f".{POINTER_FILE}.{os.getpid()}.{threading.get_ident()}.tmp")
        temporary.write_text(json.dumps({"uri": wanted.uri, "options": wanted.options}, indent=2) + "\n")
        temporary.replace(pointer)
    return wanted


def _read_pointer(pointer: Path) -> TableLocation | None:
    try:
        text = pointer.read_text()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
        uri = check_uri(str(data["uri"]))
        options = {str(k): str(v) for k, v in dict(data.get("options") or {}).items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise LocationError(f"{pointer} is damaged ({exc}); it should name the tables' s3:// URI") from None
    return TableLocation(uri, options)


def storage_problem(location: TableLocation, exc: BaseException) -> str | None:
    """One line saying what is wrong with the object storage, when ``exc`` is such a failure (the
    server did not answer, the bucket is missing, no or refused credentials); else None.

    Lance reports these as a long ``LanceError(IO)`` chain naming a source file; the user needs the
    server or bucket, what went wrong and what to do.
    """
    if not location.remote:
        return None
    text = str(exc)
    bucket = location.uri.split("://", 1)[1].split("/", 1)[0]
    if "NoSuchBucket" in text:
        return f"bucket {bucket!r} does not exist on {location.endpoint}; create it first ({location.uri})"
    if "Failed to get AWS credentials" in text or "no credentials" in text.lower():
        return (
            f"no credentials for {location.uri}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
            f"(or AWS_PROFILE) in the environment"
        )
    if re.search(r"AccessDenied|InvalidAccessKeyId|SignatureDoesNotMatch|status: 403\b", text):
        return f"{location.endpoint} refused the credentials for {location.uri} (AWS_* in the environment)"
    if _TRANSPORT.search(text):
        return (
            f"object storage {location.endpoint} did not answer (nothing half-written; run again once "
            f"it does)"
        )
    return None

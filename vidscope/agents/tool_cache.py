"""The tool-result cache: one JSON file per cache key, in a format vidscope owns and documents.

Layout and format (also in docs/architecture.md, "The three caches")::

    <data_dir>/cache/tools/<tool name>/<cache key>.json
    {
      "format": "vidscope-tool-result",   # what this file is
      "format_version": 1,                # bumped when this layout changes; other versions are misses
      "key": "tool-…",                    # the cache key the file answers (checked on read)
      "tool": "clip_search",              # the tool and its declared version
      "tool_version": 1,
      "kind": "result",                   # "result", or "failure" (a ToolError: the tool's answer)
      "type": "ClipSearchResult",         # the result model's class name ("ToolFailure" for a failure)
      "created_at": "2026-11-25T14:00:00+00:00",
      "result": {…}                       # the result model as JSON (pydantic ``model_dump(mode="json")``)
    }

Why files and not a table: a tool call's result is written once and read by key, from several
threads (AgentCVR's parallel queries) and processes (the CLI, the API, flow runs) at once. A file
per key written to a temporary name and renamed into place needs no lock and no commit protocol, a
reader never sees half a result, and a cache hit is one small read. A Lance table would turn every
tool call into a commit (a new table version, conflicts between parallel writers retried) for data
nobody queries by anything but its key; SQLite would serialise writers behind one lock file. The
files are plain JSON, so ``rm -r <data_dir>/cache/tools/<tool>`` empties one tool's cache and a
person can read what a tool returned.

Why JSON and not pickle: reading a cache must never run code. A result is rebuilt by validating
its JSON against the result model the tool declares (:attr:`vidscope.agents.tools.Tool.result_type`);
a result that would not come back equal (a subclass, a NaN, a private attribute) is simply not
cached, and a file that does not validate is a miss: the tool runs again and the file is rewritten.
The cache key already holds the tool's version and result schema, so a changed tool or result
model never reads an old file.

The same files serve a question asked in-process and one asked in a Prefect flow run (where the
lookup runs inside the task that records the call); nothing here touches Prefect.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ValidationError

from vidscope.storage.files import managed_dir

log = logging.getLogger(__name__)

FORMAT = "vidscope-tool-result"
FORMAT_VERSION = 1
#: ``kind`` of a cached expected failure (a ``ToolError``), whose model is ``ToolFailure``.
FAILURE = "failure"
RESULT = "result"


def cache_dir(data_dir: Path) -> Path:
    """``<data_dir>/cache/tools``: where every tool's cached results live."""
    return managed_dir(data_dir, "cache") / "tools"


def entry_path(root: Path, tool: str, key: str) -> Path:
    """The file that holds ``key`` of ``tool`` under ``root`` (see :func:`cache_dir`)."""
    if not key or "/" in key or "/" in tool or key.startswith("."):
        raise ValueError(f"not a usable cache key: {tool!r}/{key!r}")
    return root / tool / f"{key}.json"


def read(root: Path, tool: str, key: str, models: Mapping[str, type[BaseModel]]) -> BaseModel | None:
    """The cached result of ``key``, rebuilt as ``models[kind]`` (``result``/``failure``); ``None``
    on a miss.

    A missing, unreadable or foreign file (another format version, another key or tool, a kind or
    type the caller does not expect, a result that no longer validates) is a miss, never an error.
    """
    path = entry_path(root, tool, key)
    try:
        record = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    model = models.get(str(record.get("kind")))
    if (
        model is None
        or record.get("format") != FORMAT
        or record.get("format_version") != FORMAT_VERSION
        or record.get("key") != key
        or record.get("tool") != tool
        or record.get("type") != model.__name__
    ):
        return None
    try:
        return model.model_validate(record.get("result"))
    except ValidationError as exc:
        log.debug("tool cache entry %s does not validate as %s: %s", path, model.__name__, exc)
        return None


def write(
    root: Path, tool: str, tool_version: int, key: str, result: BaseModel, *, kind: str = RESULT
) -> bool:
    """Store ``result`` under ``key``, atomically; ``False`` (nothing written) when it would not read
    back equal as its own class, so a hit is always the result the tool returned."""
    payload = result.model_dump(mode="json")
    try:
        if type(result).model_validate(json.loads(json.dumps(payload))) != result:
            log.debug("%s result of %s does not survive JSON; not cached", type(result).__name__, tool)
            return False
    except (ValidationError, ValueError, TypeError) as exc:
        log.debug("%s result of %s does not survive JSON (%s); not cached", type(result).__name__, tool, exc)
        return False
    record = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "key": key,
        "tool": tool,
        "tool_version": tool_version,
        "kind": kind,
        "type": type(result).__name__,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "result": payload,
    }
    path = entry_path(root, tool, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(record, out, separators=(",", ":"))
        os.replace(tmp, path)  # readers see the old file or the whole new one, never half of it
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return True

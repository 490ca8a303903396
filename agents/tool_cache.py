"""Tool results cached on disk in Prefect's result-record format, read and written without Prefect.

A question asked while no Prefect server runs does not start Prefect's temporary API server (7+ s):
its tool calls run in-process (:func:`vidscope.agents.tools.execute_tool`), and this module reads and
writes the very files the tools' Prefect tasks persist (``<results_dir>/<cache key>``: a JSON record
with the metadata and the base64 of a cloudpickle). A result cached by either path is a hit for the
other, so starting or stopping the server never empties the tool cache.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

#: The serializer metadata of Prefect's default result serializer (``PickleSerializer``).
_SERIALIZER = {"type": "pickle", "picklelib": "cloudpickle", "picklelib_version": None}


def _prefect_version() -> str:
    """The installed Prefect's version (the record field is required), without importing Prefect."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("prefect")
    except PackageNotFoundError:
        return "0"


def read(results_dir: Path, key: str) -> tuple[bool, Any]:
    """``(True, result)`` when ``key`` holds a readable, unexpired pickled result; else ``(False, None)``.

    A record that cannot be read (another serializer, a damaged file, a class that no longer
    unpickles) is a miss: the tool simply runs again and the record is rewritten.
    """
    try:
        record = json.loads((results_dir / key).read_bytes())
        metadata = record["metadata"]
        if metadata.get("serializer", {}).get("type") != "pickle" or metadata.get("expiration"):
            return False, None  # tool results never expire; anything else was not written by a tool
        return True, pickle.loads(base64.decodebytes(record["result"].encode()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, pickle.UnpicklingError, EOFError):
        return False, None


def write(results_dir: Path, key: str, result: Any) -> None:
    """Persist ``result`` under ``key`` as Prefect would (atomically: a reader never sees half a file)."""
    import cloudpickle  # type: ignore[import-untyped]  # what Prefect pickles with (its dependency)

    path = results_dir / key
    record = {
        "metadata": {
            "storage_key": str(path),
            "expiration": None,
            "serializer": _SERIALIZER,
            "prefect_version": _prefect_version(),
            "storage_block_id": None,
        },
        "result": base64.encodebytes(cloudpickle.dumps(result)).decode(),
    }
    results_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=results_dir, prefix=f".{key}.")
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(record, out)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise

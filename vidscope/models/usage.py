"""Model-call accounting and the persistent response cache, shared by HTTP model backends.

Every logical model call is logged once in the ``model_calls`` table with the tokens, images,
latency and (when a price table is configured) money it cost, tagged with the Prefect flow run it
ran in and the query id the caller set with :func:`query_context`. Rows are buffered and written in
batches so accounting never adds a table commit to each call; buffers are flushed every
:data:`FLUSH_EVERY` records, when older than :data:`FLUSH_AFTER_S`, before :func:`totals` reads, and
at interpreter exit (:mod:`vidscope.core.exits`).

The response cache keys a request by the SHA-256 of its normalised JSON: the endpoint (base URL)
and model name, the messages with images replaced by their hashes, the tools and every parameter
that shapes the reply (output limit, sampling, reasoning options, server-specific fields). Two
servers serving different weights under one model name never answer for each other; a hit
answers without any HTTP request.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import logging
import sys
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vidscope.core import exits
from vidscope.storage.schema import sql_quote
from vidscope.storage.store import Store
from vidscope.storage.usage import MODEL_CALLS, RESPONSE_CACHE

log = logging.getLogger(__name__)

#: Buffered usage rows are written once this many are pending …
FLUSH_EVERY = 32
#: … or when the oldest pending row is older than this (checked when a new row arrives).
FLUSH_AFTER_S = 5.0

_query_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("vidscope_query_id", default=None)

# ---------------------------------------------------------------------------- context


@contextlib.contextmanager
def query_context(query_id: str | None) -> Iterator[str | None]:
    """Tag every model call made inside the ``with`` block (this thread/task) with ``query_id``.

    Context variables do not flow into plain ``ThreadPoolExecutor`` workers; submit work there
    with ``contextvars.copy_context().run`` so its calls keep the query id.
    """
    token = _query_id.set(query_id)
    try:
        yield query_id
    finally:
        _query_id.reset(token)


def current_query_id() -> str | None:
    """The query id set by the innermost :func:`query_context`, if any."""
    return _query_id.get()


def current_flow_run_id() -> str | None:
    """The id of the Prefect flow run this code runs in, or ``None`` outside a flow."""
    # Outside Prefect there is nothing to find; importing it just to learn that costs ~1 s.
    if "prefect" not in sys.modules:
        return None
    try:
        from prefect.runtime import flow_run

        run_id = flow_run.id
    except Exception:  # noqa: BLE001 - accounting must never break a model call
        return None
    return str(run_id) if run_id else None


# ---------------------------------------------------------------------------- stores

_stores: dict[Path, Store] = {}
_stores_lock = threading.Lock()


def shared_store(data_dir: Path | str) -> Store:
    """One :class:`Store` per data directory for accounting, opened on first use."""
    path = Path(data_dir).expanduser().resolve()
    with _stores_lock:
        store = _stores.get(path)
        if store is None:
            store = _stores[path] = Store(path)
        return store


# ---------------------------------------------------------------------------- prices


def call_cost(
    model: str, input_tokens: int, output_tokens: int, prices: Mapping[str, Any] | None
) -> float | None:
    """Money a call cost, from ``prices[model] = {input_per_mtok, output_per_mtok}``; or None."""
    if not prices or model not in prices:
        return None
    price = prices[model]
    try:
        per_in = float(price.get("input_per_mtok", 0.0))
        per_out = float(price.get("output_per_mtok", 0.0))
    except (AttributeError, TypeError, ValueError) as exc:
        raise ValueError(
            f"prices for model '{model}' must be a table like "
            f"{{input_per_mtok = 0.5, output_per_mtok = 1.5}}, got {price!r}"
        ) from exc
    return (input_tokens * per_in + output_tokens * per_out) / 1_000_000


# ---------------------------------------------------------------------------- usage log


class UsageLog:
    """Buffers ``model_calls`` rows for one store and writes them in batches."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._pending: list[dict[str, Any]] = []
        self._oldest = 0.0
        self._lock = threading.Lock()

    def add(self, row: dict[str, Any]) -> None:
        """Queue one row; writes the batch when it is big or old enough."""
        with self._lock:
            if not self._pending:
                self._oldest = time.monotonic()
            self._pending.append(row)
            due = len(self._pending) >= FLUSH_EVERY or time.monotonic() - self._oldest > FLUSH_AFTER_S
        if due:
            self.flush()

    def flush(self) -> int:
        """Write every pending row now; returns how many were written."""
        with self._lock:
            rows, self._pending = self._pending, []
        if not rows:
            return 0
        try:
            return self.store.upsert(MODEL_CALLS, rows)
        except Exception as exc:  # noqa: BLE001 - losing accounting must not fail the caller's work
            log.warning(
                "could not write %d model-call records to %s: %s",
                len(rows),
                self.store.data_dir,
                exc,
            )
            return 0


_logs: dict[Path, UsageLog] = {}
_logs_lock = threading.Lock()


def usage_log(data_dir: Path | str) -> UsageLog:
    """The process-wide buffered usage log of ``data_dir``."""
    store = shared_store(data_dir)
    with _logs_lock:
        found = _logs.get(store.data_dir)
        if found is None:
            found = _logs[store.data_dir] = UsageLog(store)
        return found


def flush_all() -> None:
    """Write every buffered usage record of this process (also runs at interpreter exit)."""
    with _logs_lock:
        logs = list(_logs.values())
    for item in logs:
        item.flush()


# At exit, before the interpreter finalizes and before the wait for LanceDB's native threads to hand
# the write's result back (core/exits.py: a write finishing during finalization aborted the process).
exits.at_exit(flush_all)


def record_call(
    data_dir: Path | str,
    *,
    role: str,
    backend: str,
    model: str,
    endpoint: str,
    input_tokens: int = 0,
    output_tokens: int = 0,
    images: int = 0,
    latency_s: float = 0.0,
    cache_hit: bool = False,
    requests: int = 0,
    prices: Mapping[str, Any] | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    """Log one model call (flow run and query id are taken from the context); returns the row."""
    row = {
        "call_id": uuid.uuid4().hex,
        "at": datetime.now(UTC),
        "role": role,
        "backend": backend,
        "model": model,
        "endpoint": endpoint,
        "input_tokens": int(input_tokens),
        "output_tokens": int(output_tokens),
        "images": int(images),
        "latency_s": float(latency_s),
        "cache_hit": bool(cache_hit),
        "requests": int(requests),
        "cost_usd": call_cost(model, input_tokens, output_tokens, prices),
        "flow_run_id": current_flow_run_id(),
        "query_id": current_query_id(),
        "error": error,
    }
    usage_log(data_dir).add(row)
    return row


def totals(store: Store, query_id: str | None = None, *, flow_run_id: str | None = None) -> dict[str, Any]:
    """Sums over ``model_calls`` (all of them, or one query's / one flow run's).

    Keys: ``calls``, ``errors``, ``requests``, ``input_tokens``, ``output_tokens``, ``images``,
    ``cache_hits``, ``latency_s``, ``cost_usd`` (``None`` when no call had a price) and
    ``by_model`` (the same sums per model).
    """
    with _logs_lock:
        pending = _logs.get(store.data_dir)
    if pending is not None:
        pending.flush()
    filters = []
    if query_id is not None:
        filters.append(f"query_id = {sql_quote(query_id)}")
    if flow_run_id is not None:
        filters.append(f"flow_run_id = {sql_quote(flow_run_id)}")
    rows = store.rows(MODEL_CALLS, where=" AND ".join(filters) or None).to_pylist()

    def summarise(items: list[dict[str, Any]]) -> dict[str, Any]:
        costs = [r["cost_usd"] for r in items if r["cost_usd"] is not None]
        return {
            "calls": len(items),
            "errors": sum(1 for r in items if r["error"]),
            "requests": sum(r["requests"] for r in items),
            "input_tokens": sum(r["input_tokens"] for r in items),
            "output_tokens": sum(r["output_tokens"] for r in items),
            "images": sum(r["images"] for r in items),
            "cache_hits": sum(1 for r in items if r["cache_hit"]),
            "latency_s": sum(r["latency_s"] for r in items),
            "cost_usd": sum(costs) if costs else None,
        }

    result = summarise(rows)
    models = sorted({r["model"] for r in rows})
    result["by_model"] = {m: summarise([r for r in rows if r["model"] == m]) for m in models}
    return result


#: Roles whose calls during ingestion look at frames: the captioner, or the vlm serving it.
VISION_ROLES = ("captioner", "vlm")


def ingestion_per_hour(store: Store, roles: tuple[str, ...] = VISION_ROLES) -> dict[str, Any]:
    """What ingestion's model calls of ``roles`` (calls outside any query) cost per hour of the
    videos in the store: ``hours`` ingested and, per hour, ``calls``, ``images``,
    ``input_tokens`` and ``output_tokens`` (``None`` each when nothing is ingested)."""
    with _logs_lock:
        pending = _logs.get(store.data_dir)
    if pending is not None:
        pending.flush()
    seconds = sum(
        float(d or 0.0) for d in store.rows(store.videos, columns=["duration"]).column(0).to_pylist()
    )
    hours = seconds / 3600
    listed = ", ".join(sql_quote(r) for r in roles)
    rows = store.rows(
        MODEL_CALLS,
        where=f"query_id IS NULL AND role IN ({listed})",
        columns=["images", "input_tokens", "output_tokens"],
    ).to_pylist()
    sums = {
        "calls": len(rows),
        "images": sum(r["images"] for r in rows),
        "input_tokens": sum(r["input_tokens"] for r in rows),
        "output_tokens": sum(r["output_tokens"] for r in rows),
    }
    per_hour = {k: (v / hours if hours > 0 else None) for k, v in sums.items()}
    return {"hours": hours, "totals": sums, "per_hour": per_hour}


# ---------------------------------------------------------------------------- response cache


def request_key(endpoint: str, model: str, kind: str, request: Any) -> str:
    """SHA-256 of the canonical JSON of a normalised request to ``model`` at ``endpoint`` (its base
    URL; callers hash images first). The endpoint is part of the key because a model name does not
    identify weights: two local servers both serving ``"qwen"`` are different models."""
    where = endpoint.rstrip("/")
    payload = json.dumps([where, model, kind, request], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def image_digest(data: bytes) -> str:
    """How an image appears in a normalised request: its SHA-256, never its bytes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


class ResponseCache:
    """Persistent request -> answer cache in the ``response_cache`` table of one store.

    A small in-process LRU sits in front of the table so repeated hits cost no table scan.
    """

    def __init__(self, data_dir: Path | str, memory_items: int = 256) -> None:
        self.data_dir = Path(data_dir)
        self._memory: OrderedDict[str, Any] = OrderedDict()
        self._memory_items = memory_items
        self._lock = threading.Lock()

    def _remember(self, key: str, value: Any) -> None:
        with self._lock:
            self._memory[key] = value
            self._memory.move_to_end(key)
            while len(self._memory) > self._memory_items:
                self._memory.popitem(last=False)

    def get(self, key: str) -> Any | None:
        """The cached answer for ``key`` (decoded JSON), or ``None``."""
        with self._lock:
            if key in self._memory:
                self._memory.move_to_end(key)
                return self._memory[key]
        try:
            table = shared_store(self.data_dir).rows(
                RESPONSE_CACHE, where=f"key = {sql_quote(key)}", columns=["key", "response_json"]
            )
        except Exception as exc:  # noqa: BLE001 - a broken cache means a miss, not a failure
            log.warning("response cache in %s unreadable (%s); asking the model", self.data_dir, exc)
            return None
        if table.num_rows == 0:
            return None
        value = json.loads(table.column("response_json")[0].as_py())
        self._remember(key, value)
        return value

    def put(self, key: str, *, model: str, kind: str, value: Any) -> None:
        """Store the answer for ``key`` (written through, so other processes see it too)."""
        self._remember(key, value)
        row = {
            "key": key,
            "model": model,
            "kind": kind,
            "created_at": datetime.now(UTC),
            "response_json": json.dumps(value),
        }
        try:
            shared_store(self.data_dir).upsert(RESPONSE_CACHE, [row])
        except Exception as exc:  # noqa: BLE001 - the answer is still valid without the cache
            log.warning("could not write the response cache in %s: %s", self.data_dir, exc)

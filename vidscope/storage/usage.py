"""Tables for model-call accounting: the usage log and the persistent response cache.

``model_calls`` holds one row per logical model call (a chat turn, a caption, an embedding
batch), including calls answered from the cache and calls that failed, so a question's or a
flow run's cost can be summed afterwards. ``response_cache`` maps the SHA-256 of a normalised
request to the answer that was used, so an identical request never reaches the server twice.

These tables are not part of :attr:`Store.specs` (they hold no per-video rows); code writes them
with ``Store.upsert(spec, rows)`` and reads them with ``Store.rows(spec, ...)``.
"""

from __future__ import annotations

import pyarrow as pa

from vidscope.storage.schema import TableSpec, versioned

MODEL_CALLS = TableSpec(
    name="model_calls",
    schema=versioned(
        [
            pa.field("call_id", pa.string(), nullable=False),  # uuid4 hex
            pa.field("at", pa.timestamp("us", tz="UTC"), nullable=False),
            pa.field("role", pa.string(), nullable=False),  # chat, captioner, text_embedder
            pa.field("backend", pa.string(), nullable=False),  # backend kind, e.g. "openai"
            pa.field("model", pa.string(), nullable=False),
            pa.field("endpoint", pa.string(), nullable=False),  # URL (or "local")
            pa.field("input_tokens", pa.int64(), nullable=False),
            pa.field("output_tokens", pa.int64(), nullable=False),
            pa.field("images", pa.int32(), nullable=False),
            pa.field("latency_s", pa.float64(), nullable=False),
            pa.field("cache_hit", pa.bool_(), nullable=False),
            # HTTP requests the call needed: retries and corrective re-asks count; 0 on a cache hit.
            pa.field("requests", pa.int32(), nullable=False),
            pa.field("cost_usd", pa.float64()),  # null when the model has no price configured
            pa.field("flow_run_id", pa.string()),
            pa.field("query_id", pa.string()),
            pa.field("error", pa.string()),  # null when the call succeeded
        ]
    ),
    keys=("call_id",),
)

RESPONSE_CACHE = TableSpec(
    name="response_cache",
    schema=versioned(
        [
            pa.field("key", pa.string(), nullable=False),  # sha256 of the normalised request
            pa.field("model", pa.string(), nullable=False),
            pa.field("kind", pa.string(), nullable=False),  # "chat" or "embeddings"
            pa.field("created_at", pa.timestamp("us", tz="UTC"), nullable=False),
            pa.field("response_json", pa.string(), nullable=False),
        ]
    ),
    keys=("key",),
)

#: Both accounting tables, for code that maintains them (optimize, export).
USAGE_SPECS = (MODEL_CALLS, RESPONSE_CACHE)

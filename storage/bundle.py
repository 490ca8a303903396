"""Portable databases: ingested videos as a folder of Parquet files plus a manifest.

Captioning a library is the expensive part of ingestion; a bundle lets a team build it once and
share it. :func:`export_videos` writes every per-video table's rows of the chosen videos (one
Parquet file per table, the ledger with its stage versions and fingerprints included), the part
of the concept vocabulary their index uses, and ``manifest.json`` naming the schema version, the
embedding sizes and the model that served each role. :func:`import_bundle` writes a bundle into
a store, refusing one built with another embedding model or size: its vectors would be compared
with query vectors from a different space, and every search would be silently wrong.

This is storage-level (not part of ``evaluation``) because it is a copy of tables, used by the CLI
and anyone sharing a database, and the store is the only writer under the data directory.

On import a video already in the store is replaced by the bundle's copy. The ledger rows are
written last (and the old ones removed first), so an import cut short leaves those videos with no
ledger, and the next ingestion of their files redoes them instead of trusting partial rows. The
videos keep the path they had on the exporting machine until their files are ingested here: the
content hash is the same, so ingestion only records the new path and finds every stage current
when this machine's configuration matches the bundle's.

Vocabulary: concepts new to the store are added; for a concept the store already knows, its
aliases gain the bundle's and its embedding stays (both were made by the same embedder, which the
model check guarantees).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel

from vidscope.core.settings import Settings
from vidscope.storage.schema import SCHEMA_VERSION, sql_quote
from vidscope.storage.store import Store, StoreError

MANIFEST = "manifest.json"
#: Version of the bundle layout (files and manifest fields), independent of the table schemas.
BUNDLE_FORMAT = 1
#: Model roles whose vectors are stored, so a bundle must match the store on them.
EMBEDDING_ROLES = ("text_embedder", "image_text")


class BundleError(StoreError):
    """A bundle that cannot be written into this store (other embedding model, damaged, …)."""


class BundleManifest(BaseModel):
    """What ``manifest.json`` records about a bundle."""

    format: int = BUNDLE_FORMAT
    schema_version: int = SCHEMA_VERSION
    created_at: str
    text_dim: int
    image_dim: int
    #: Absent from bundles written before the ``video_text`` role existed (they hold no clip video
    #: vectors, so any size fits).
    video_dim: int | None = None
    #: The model spec serving each role where the bundle was built (``{"captioner": "openai:…"}``).
    models: dict[str, str | None]
    #: The embedders named on the exported clips' vectors: what actually made them.
    clip_embed_models: list[str]
    videos: list[str]
    #: Rows per table file (``{"clips": 12}``); tables without rows have no file.
    tables: dict[str, int]
    #: ``{video_id: {stage: stage_version}}`` from the exported ledger.
    stages: dict[str, dict[str, int]]


def configured_models(settings: Settings) -> dict[str, str | None]:
    """Role → model spec of a configuration, as bundles record and compare them."""
    return settings.models.model_dump(exclude={"options"})


def _distinct(table: pa.Table, column: str) -> list[str]:
    return sorted({v for v in table.column(column).to_pylist() if v is not None})


def export_videos(
    store: Store, video_ids: Sequence[str], folder: Path | str, *, models: Mapping[str, str | None]
) -> BundleManifest:
    """Write the given videos' rows, vocabulary and ledger to ``folder`` (created; must be empty).

    ``models`` is the configuration the store was built with (:func:`configured_models`).
    """
    folder = Path(folder).expanduser().resolve()
    if folder.exists() and any(folder.iterdir()):
        raise BundleError(f"{folder} is not empty; export into a new folder")
    wanted = sorted(set(video_ids))
    if not wanted:
        raise BundleError("no videos to export")
    known = set(store.rows_of_videos(store.videos, wanted, columns=["video_id"]).column(0).to_pylist())
    unknown = [v for v in wanted if v not in known]
    if unknown:
        raise BundleError(f"{len(unknown)} videos are not in the store, e.g. {unknown[0]}")
    folder.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    tables: dict[str, pa.Table] = {}
    for spec in store.specs:
        rows = store.rows_of_videos(spec, wanted, columns=spec.schema.names, order_by=spec.keys)
        tables[spec.name] = rows
        counts[spec.name] = rows.num_rows
        if rows.num_rows:
            pq.write_table(rows.cast(spec.schema), folder / f"{spec.name}.parquet")
    used = tables[store.concept_index.name]
    pairs = set(zip(used.column("dimension").to_pylist(), used.column("concept").to_pylist(), strict=True))
    vocabulary = store.rows(store.concepts)
    if vocabulary.num_rows:
        keep = [
            (d, c) in pairs
            for d, c in zip(
                vocabulary.column("dimension").to_pylist(),
                vocabulary.column("concept").to_pylist(),
                strict=True,
            )
        ]
        vocabulary = vocabulary.filter(pa.array(keep, pa.bool_()))
    counts[store.concepts.name] = vocabulary.num_rows
    if vocabulary.num_rows:
        pq.write_table(vocabulary.cast(store.concepts.schema), folder / f"{store.concepts.name}.parquet")
    stages: dict[str, dict[str, int]] = {}
    for row in tables[store.ledger.name].to_pylist():
        stages.setdefault(row["video_id"], {})[row["stage"]] = row["stage_version"]
    manifest = BundleManifest(
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        text_dim=store.text_dim,
        image_dim=store.image_dim,
        video_dim=store.video_dim,
        models=dict(models),
        clip_embed_models=_distinct(tables[store.clips.name], "embed_model"),
        videos=wanted,
        tables=counts,
        stages=stages,
    )
    (folder / MANIFEST).write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return manifest


def read_manifest(folder: Path | str) -> BundleManifest:
    """The manifest of the bundle in ``folder``; a clear error when it is not a bundle."""
    path = Path(folder).expanduser() / MANIFEST
    if not path.is_file():
        raise BundleError(f"{Path(folder)} is not a vidscope bundle (no {MANIFEST})")
    try:
        manifest = BundleManifest.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, TypeError) as exc:
        raise BundleError(f"{path} is damaged: {str(exc).splitlines()[0]}") from exc
    if manifest.format != BUNDLE_FORMAT or manifest.schema_version != SCHEMA_VERSION:
        raise BundleError(
            f"{Path(folder)} has bundle format {manifest.format}, schema {manifest.schema_version}; "
            f"this vidscope reads format {BUNDLE_FORMAT}, schema {SCHEMA_VERSION}"
        )
    return manifest


def check_compatible(store: Store, manifest: BundleManifest, models: Mapping[str, str | None]) -> None:
    """Refuse (one line, :class:`BundleError`) a bundle embedded by another model or size."""
    for role, bundle_dim, store_dim in (
        ("text_embedder", manifest.text_dim, store.text_dim),
        ("image_text", manifest.image_dim, store.image_dim),
        ("video_text", manifest.video_dim, store.video_dim),
    ):
        theirs, ours = manifest.models.get(role), models.get(role)
        if bundle_dim is not None and bundle_dim != store_dim:
            raise BundleError(
                f"bundle {role} is {theirs} ({bundle_dim}-d) but this store is {ours} ({store_dim}-d); "
                f"import into a data dir configured with {theirs}"
            )
        # A role unset on one side stores no vectors there, so only two different models clash.
        if theirs and ours and theirs != ours:
            raise BundleError(
                f"bundle {role} is {theirs} but this store uses {ours}; "
                f"import into a data dir configured with {theirs}"
            )
    present = _distinct(
        store.rows(store.clips, where="embed_model IS NOT NULL", columns=["embed_model"]), "embed_model"
    )
    foreign = [m for m in present if manifest.clip_embed_models and m not in manifest.clip_embed_models]
    if foreign:
        raise BundleError(
            f"this store's clips are embedded with {', '.join(foreign)} but the bundle's with "
            f"{', '.join(manifest.clip_embed_models)}; import into a new data dir"
        )


def _read(folder: Path, name: str, rows: int) -> pa.Table | None:
    if not rows:
        return None
    path = folder / f"{name}.parquet"
    if not path.is_file():
        raise BundleError(f"{folder} lacks {path.name} ({rows} rows in the manifest)")
    table = pq.read_table(path)
    if table.num_rows != rows:
        raise BundleError(f"{path} has {table.num_rows} rows, the manifest says {rows}")
    return table


def _in_videos(video_ids: Sequence[str]) -> str:
    return f"video_id IN ({', '.join(sql_quote(v) for v in video_ids)})"


def import_bundle(store: Store, folder: Path | str, *, models: Mapping[str, str | None]) -> BundleManifest:
    """Write the bundle in ``folder`` into ``store`` (configured with ``models``); its videos'
    existing rows are replaced. Raises :class:`BundleError` before writing anything when the
    bundle does not fit the store."""
    folder = Path(folder).expanduser().resolve()
    manifest = read_manifest(folder)
    check_compatible(store, manifest, models)
    data = {spec.name: _read(folder, spec.name, manifest.tables.get(spec.name, 0)) for spec in store.specs}
    vocabulary = _read(folder, store.concepts.name, manifest.tables.get(store.concepts.name, 0))
    videos = manifest.videos
    # Ledger out first and in last: an interrupted import leaves no "done" over partial rows.
    store.delete_rows(store.ledger, _in_videos(videos))
    if vocabulary is not None:
        store.upsert(store.concepts, _merge_vocabulary(store, vocabulary))
    for spec in store.specs:
        store.delete_rows(spec, _in_videos(videos))
        rows = data[spec.name]
        if rows is not None:
            store.upsert(spec, rows)
    return manifest


def _merge_vocabulary(store: Store, incoming: pa.Table) -> list[dict[str, Any]]:
    """The bundle's concepts, with aliases joined to those the store already has for the same one."""
    existing = {(r["dimension"], r["concept"]): r for r in store.rows(store.concepts).to_pylist()}
    merged = []
    for row in incoming.to_pylist():
        known = existing.get((row["dimension"], row["concept"]))
        if known is None:
            merged.append(row)
            continue
        aliases = list(dict.fromkeys([*(known["aliases"] or []), *(row["aliases"] or [])]))
        merged.append({**known, "aliases": aliases})
    return merged

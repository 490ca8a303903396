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

A bundle is untrusted input. :mod:`vidscope.storage.bundle_files` checks all of it (manifest,
files, schemas, sizes, that every row belongs to a video the manifest names, unique keys) before
the first write; a bundle that fails any check changes nothing. A video the store already holds
is left alone unless the import names it in ``replace``. Each table then gets one atomic commit
holding the rows of every imported video (a merge that also deletes the replaced videos' rows the
bundle no longer has), so a table never shows half a video, and other videos' rows are never
touched: their keys all start with their own ``video_id``. A replaced video's ledger rows are
removed first and the bundle's written last, so an import cut short leaves those videos with no
ledger, and the next ingestion of their files redoes them instead of trusting partial rows.

A bundle only *claims* that its rows describe the file with that content hash: anyone can write
a bundle naming the hash of a file they never had, with rows of their choosing. So every ledger row
an import writes is marked as imported (:func:`~vidscope.storage.ledger.mark_imported`), and the
videos are searchable and answerable as the bundle describes them until a file with their hash is
ingested here: that ingestion replaces every row of the video with the file's own (all stages run
again, :func:`~vidscope.storage.ledger.earned`), so identity by content hash is earned by content.

Vocabulary: concepts new to the store are added; for a concept the store already knows, its
aliases gain the bundle's and its embedding stays (both were made by the same embedder, which the
model check guarantees).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from vidscope.core.settings import BundleSettings, Settings
from vidscope.storage.bundle_files import (
    BUNDLE_FORMAT,
    MANIFEST,
    BundleError,
    BundleManifest,
    ByteBudget,
    check_rows,
    check_table_names,
    read_manifest,
    read_table_file,
)
from vidscope.storage.ledger import mark_imported
from vidscope.storage.schema import sql_quote
from vidscope.storage.store import Store

__all__ = [
    "BUNDLE_FORMAT",
    "EMBEDDING_ROLES",
    "MANIFEST",
    "BundleError",
    "BundleManifest",
    "ImportReport",
    "check_compatible",
    "configured_models",
    "export_videos",
    "import_bundle",
    "read_manifest",
    "resolve_replace",
]

#: Model roles whose vectors are stored, so a bundle must match the store on them.
EMBEDDING_ROLES = ("text_embedder", "image_text")


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
    if folder.exists() and not folder.is_dir():
        raise BundleError(f"{folder} is not a folder; export into a new folder")
    try:
        if folder.exists() and any(folder.iterdir()):
            raise BundleError(f"{folder} is not empty; export into a new folder")
    except OSError as exc:
        raise BundleError(f"cannot use {folder}: {exc.strerror or exc}") from exc
    wanted = sorted(set(video_ids))
    if not wanted:
        raise BundleError("no videos to export")
    known = set(store.rows_of_videos(store.videos, wanted, columns=["video_id"]).column(0).to_pylist())
    unknown = [v for v in wanted if v not in known]
    if unknown:
        raise BundleError(f"{len(unknown)} videos are not in the store, e.g. {unknown[0]}")
    try:
        return _write_bundle(store, wanted, folder, models)
    except OSError as exc:
        raise BundleError(f"cannot write the bundle to {folder}: {exc.strerror or exc}") from exc


def _write_bundle(
    store: Store, wanted: list[str], folder: Path, models: Mapping[str, str | None]
) -> BundleManifest:
    folder.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    tables: dict[str, pa.Table] = {}
    for spec in store.specs:
        rows = store.rows_of_videos(spec, wanted, columns=spec.schema.names, order_by=spec.keys)
        tables[spec.name] = rows
        counts[spec.name] = rows.num_rows
        if rows.num_rows:
            pq.write_table(rows.cast(spec.schema), folder / f"{spec.name}.parquet")
    vocabulary = store.rows(store.concepts)
    if vocabulary.num_rows:
        vocabulary = _concepts_used(vocabulary, _concept_pairs(tables[store.concept_index.name]))
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


def _in_videos(video_ids: Sequence[str]) -> str:
    return f"video_id IN ({', '.join(sql_quote(v) for v in video_ids)})"


@dataclass(frozen=True)
class ImportReport:
    """What an import did: the videos written (``replaced`` among them) and those left alone."""

    manifest: BundleManifest
    imported: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)


def resolve_replace(manifest: BundleManifest, refs: Collection[str]) -> list[str]:
    """The bundle's videos that ``refs`` (ids or unique id prefixes) name; one line when one does
    not name exactly one of them."""
    chosen = []
    for ref in refs:
        matches = [v for v in manifest.videos if v.startswith(ref.strip().lower())] if ref.strip() else []
        if len(matches) != 1:
            problem = "names none" if not matches else f"names {len(matches)}"
            raise BundleError(f"--replace {ref!r} {problem} of the bundle's {len(manifest.videos)} videos")
        chosen.append(matches[0])
    return sorted(set(chosen))


def import_bundle(
    store: Store,
    folder: Path | str,
    *,
    models: Mapping[str, str | None],
    replace: Collection[str] = (),
    limits: BundleSettings | None = None,
) -> ImportReport:
    """Write the bundle in ``folder`` into ``store`` (configured with ``models``).

    Videos the store already has are left alone unless ``replace`` (video ids of the bundle)
    names them. Raises :class:`BundleError`, before writing anything, when any part of the bundle
    is damaged, breaks ``limits``, or does not fit the store.
    """
    limits = limits or BundleSettings()
    folder = Path(folder).expanduser().resolve()
    manifest = read_manifest(folder, limits)
    check_table_names(manifest, [*store.specs, store.concepts], folder)
    check_compatible(store, manifest, models)
    strangers = sorted(set(replace) - set(manifest.videos))
    if strangers:
        raise BundleError(f"--replace names {strangers[0][:12]}, which the bundle does not hold")
    data, vocabulary = _read_bundle(store, folder, manifest, limits)

    existing = set(
        store.rows(store.videos, where=_in_videos(manifest.videos), columns=["video_id"])
        .column(0)
        .to_pylist()
    )
    chosen = [v for v in manifest.videos if v not in existing or v in replace]
    report = ImportReport(
        manifest,
        imported=chosen,
        replaced=[v for v in chosen if v in existing],
        kept=[v for v in manifest.videos if v not in chosen],
    )
    if chosen:
        _write(store, chosen, report.replaced, data, vocabulary, origin=str(folder))
    return report


def _read_bundle(
    store: Store, folder: Path, manifest: BundleManifest, limits: BundleSettings
) -> tuple[dict[str, pa.Table], pa.Table | None]:
    """Every table of the bundle, checked (see :mod:`~vidscope.storage.bundle_files`)."""
    budget = ByteBudget(limits.max_bytes)
    data: dict[str, pa.Table] = {}
    for spec in store.specs:
        rows = manifest.tables.get(spec.name, 0)
        if rows:
            table = read_table_file(folder, spec, rows, budget, limits, len(manifest.videos))
            check_rows(folder / f"{spec.name}.parquet", spec, table, manifest.videos, limits)
            data[spec.name] = table
    described = (
        set(data[store.videos.name].column("video_id").to_pylist()) if store.videos.name in data else set()
    )
    undescribed = [v for v in manifest.videos if v not in described]
    if undescribed:
        raise BundleError(f"{folder} names video {undescribed[0][:12]} but holds no videos row for it")
    vocabulary = None
    rows = manifest.tables.get(store.concepts.name, 0)
    if rows:
        path = folder / f"{store.concepts.name}.parquet"
        vocabulary = read_table_file(folder, store.concepts, rows, budget, limits, len(manifest.videos))
        check_rows(path, store.concepts, vocabulary, manifest.videos, limits)
        index = data.get(store.concept_index.name)
        used = set() if index is None else _concept_pairs(index)
        if not _concept_pairs(vocabulary) <= used:
            raise BundleError(f"{path} holds concepts none of the bundle's videos use")
    return data, vocabulary


def _rows_pairs(table: pa.Table) -> list[tuple[str, str]]:
    """The (dimension, concept) of each row of ``table``, in row order."""
    return list(zip(table.column("dimension").to_pylist(), table.column("concept").to_pylist(), strict=True))


def _concept_pairs(table: pa.Table) -> set[tuple[str, str]]:
    return set(_rows_pairs(table))


def _concepts_used(vocabulary: pa.Table, used: set[tuple[str, str]]) -> pa.Table:
    """The rows of ``vocabulary`` whose (dimension, concept) is in ``used``."""
    return vocabulary.filter(pa.array([pair in used for pair in _rows_pairs(vocabulary)], pa.bool_()))


def _write(
    store: Store,
    chosen: list[str],
    replaced: list[str],
    data: Mapping[str, pa.Table],
    vocabulary: pa.Table | None,
    *,
    origin: str,
) -> None:
    """Write the checked rows of the ``chosen`` videos: one commit per table, their ledger rows
    marked as brought from ``origin``."""
    keep = pa.array(chosen, pa.string())

    def of_chosen(table: pa.Table) -> pa.Table:
        return table.filter(pc.is_in(table.column("video_id"), value_set=keep))

    # Ledger out first and in last: an interrupted import leaves no "done" over partial rows.
    if replaced:
        store.delete_rows(store.ledger, _in_videos(replaced))
    index = data.get(store.concept_index.name)
    if vocabulary is not None and index is not None:
        concepts = _concepts_used(vocabulary, _concept_pairs(of_chosen(index)))
        if concepts.num_rows:
            store.upsert(store.concepts, _merge_vocabulary(store, concepts))
    for spec in store.specs:
        table = data.get(spec.name)
        rows = of_chosen(table) if table is not None else spec.schema.empty_table()
        if spec.name == store.ledger.name:
            rows = _marked_imported(rows, origin)
        if rows.num_rows or replaced:
            store.replace_rows_of_videos(spec, chosen if rows.num_rows else replaced, rows)


def _marked_imported(ledger: pa.Table, origin: str) -> pa.Table:
    """``ledger`` with every row's details marked as imported from ``origin``."""
    column = ledger.schema.get_field_index("details_json")
    marked = [mark_imported(details, origin) for details in ledger.column(column).to_pylist()]
    return ledger.set_column(column, ledger.schema.field(column), pa.array(marked, pa.string()))


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

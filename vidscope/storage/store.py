"""The one storage API: LanceDB tables as the system of record, DuckDB SQL over them.

Every write goes through :class:`Store`. Writes are idempotent upserts on each table's natural key;
replacing a video's rows in a table is a single atomic commit (merge-insert that also deletes that
video's rows the new data no longer contains), so a failure half-way never leaves a video with
partial or duplicated rows. Nothing else in vidscope writes under the data directory.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from vidscope.core.hashing import stable_hash
from vidscope.storage.chapters import CHAPTERS
from vidscope.storage.clips import clip_videos_spec, clips_spec
from vidscope.storage.detections import DETECTIONS
from vidscope.storage.frames import frames_spec
from vidscope.storage.graph import (
    GRAPH_EDGES,
    GRAPH_EXTRACTIONS,
    GRAPH_MENTIONS,
    GRAPH_SUPERNODES,
    graph_nodes_spec,
)
from vidscope.storage.ledger import LEDGER
from vidscope.storage.location import LocationError, resolve, storage_problem
from vidscope.storage.ocr import CLOCK_READINGS, OCR_ITEMS
from vidscope.storage.row_ids import VideoRowIds
from vidscope.storage.schema import SCHEMA_VERSION, SCHEMA_VERSION_KEY, TableSpec, sql_quote
from vidscope.storage.semantic import CONCEPT_INDEX, concepts_spec, video_parses_spec
from vidscope.storage.subjects import SUBJECTS
from vidscope.storage.transcripts import TRANSCRIPT_SEGMENTS
from vidscope.storage.usage import USAGE_SPECS
from vidscope.storage.videos import VIDEOS, VideoRecord

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Text embedding size of the embedded MiniLM model, the default.
DEFAULT_TEXT_DIM = 384
#: Image embedding size of CLIP ViT-B/32, the default image–text model family.
DEFAULT_IMAGE_DIM = 512
#: Video–text embedding size of X-CLIP base (patch32/patch16), the default video encoder family.
DEFAULT_VIDEO_DIM = 512
#: Corpus-wide ANN indexes are only worth building above this many vectors; below it, flat search.
ANN_MIN_ROWS = 20_000
#: The refine factor of corpus-wide ANN queries, chosen on 1M clustered 384-d clip vectors
#: (benchmarks/clip_ann.py, RESULTS.md): with 32 probes, 20 kept recall@16 at 0.99.
ANN_REFINE_FACTOR = 20
#: Share of a corpus ANN index's IVF partitions a query probes (:func:`ann_probes`). Recall follows
#: the share of the vectors the probes read, not their count: at 10M synthetic clips (IVF-RQ,
#: 1,809 partitions after Lance's optimize) 32 probes found 0.43 of the exact 50 nearest, a quarter
#: of the partitions 0.87, half 0.97 (ANN 43 ms p50), 70 % 0.99 (51 ms, and moment search's p95
#: just over 100 ms); on real MiniLM vectors of 18,843 video-moment sentences a quarter found 0.95
#: (benchmarks/search_scale.py, benchmarks/real_vectors.py; RESULTS.md, issue 44).
ANN_PROBE_SHARE = 0.5
#: Fewest partitions a query probes (every one when the index has fewer): the fixed count used
#: before the share, which small indexes keep.
ANN_MIN_PROBES = 32
#: Vectors per IVF partition of a corpus ANN index (:func:`ann_partitions`). At 10M synthetic
#: clips, 32 probes of √N = 3,008 partitions found 0.22 of the exact 50 nearest, 32 of 549
#: partitions 0.48 for ~5 ms more (benchmarks/RESULTS.md, issue 44; √N was the rule before).
VECTORS_PER_PARTITION = 16_384
#: Bytes of index data (full-text posting lists, IVF partitions, BTree pages) and of file metadata
#: that one store keeps in memory between its reads: every dataset it opens shares one
#: ``lance.Session``. Without it, each read opened its dataset with empty caches and loaded the
#: indexes again (moment search over 2M clips: the full-text ranking 55 ms a query instead of 16,
#: benchmarks/RESULTS.md, issue 44). The caps bound a long-running process's memory.
INDEX_CACHE_BYTES = 2 << 30
METADATA_CACHE_BYTES = 256 << 20
#: From this many videos on, :meth:`Store.rows_of_videos` takes their rows by row id
#: (:class:`~vidscope.storage.row_ids.VideoRowIds`) rather than filtering ``video_id IN (...)``.
TAKE_MIN_VIDEOS = 256
#: Ids per ``IN (...)`` filter. One filter over all ids reads faster than several (at 100k videos:
#: 6,000 ids in one filter 134 ms, in chunks of 2,000 151 ms); the cap only keeps a pathological
#: id set from building one enormous SQL string.
IN_CHUNK = 20_000


class StoreError(RuntimeError):
    """A storage problem the user can act on (wrong schema version, mismatched dimensions, …)."""


class Store:
    """The vidscope store under ``data_dir``: LanceDB tables plus in-process DuckDB for SQL.

    Safe to share between threads of one process. Several processes may write the same store: Lance
    commits are optimistic and conflicting commits are retried here.

    The tables live in ``data_dir/lance`` unless ``tables_uri`` (``[storage] uri``) puts them in
    S3-compatible object storage, opened with ``storage_options`` (see
    :mod:`vidscope.storage.location`: the data dir remembers that choice).
    """

    def __init__(
        self,
        data_dir: Path | str,
        *,
        text_dim: int = DEFAULT_TEXT_DIM,
        image_dim: int = DEFAULT_IMAGE_DIM,
        video_dim: int = DEFAULT_VIDEO_DIM,
        tables_uri: str | None = None,
        storage_options: Mapping[str, str] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir).expanduser().resolve()
        try:
            self.location = resolve(self.data_dir, tables_uri, storage_options)
        except LocationError as exc:
            raise StoreError(str(exc)) from None
        self.lance_dir = self.data_dir / "lance"
        if not self.location.remote:
            self.lance_dir.mkdir(parents=True, exist_ok=True)
        self.text_dim = text_dim
        self.image_dim = image_dim
        self.video_dim = video_dim
        self.videos = VIDEOS
        self.clips = clips_spec(text_dim)
        self.frames = frames_spec(image_dim)
        self.clip_videos = clip_videos_spec(video_dim)
        self.transcripts = TRANSCRIPT_SEGMENTS
        self.ocr = OCR_ITEMS
        self.clock_readings = CLOCK_READINGS
        self.detections = DETECTIONS
        self.subjects = SUBJECTS
        self.graph_extractions = GRAPH_EXTRACTIONS
        self.graph_nodes = graph_nodes_spec(text_dim)
        self.graph_edges = GRAPH_EDGES
        self.graph_mentions = GRAPH_MENTIONS
        self.graph_supernodes = GRAPH_SUPERNODES
        self.video_parses = video_parses_spec(text_dim)
        self.concept_index = CONCEPT_INDEX
        self.concepts = concepts_spec(text_dim)
        self.chapters = CHAPTERS
        self.ledger = LEDGER
        self._connection: Any = None
        self._lock = threading.Lock()
        self._checked: set[str] = set()
        self._lance_session: Any = None
        #: Partitions of each corpus ANN index, by its segments' ids (:meth:`ann_partitions_of`).
        self._index_partitions: dict[tuple[str, ...], int] = {}

    # ------------------------------------------------------------------ tables

    @property
    def _db(self) -> Any:
        """The LanceDB connection, made on first use: importing lancedb costs ~1 s, which
        ``vidscope sql`` (Lance datasets read by DuckDB, :meth:`dataset`) never pays."""
        if self._connection is None:
            import lancedb

            if self.location.remote:
                with self._reaching():
                    self._connection = lancedb.connect(
                        self.location.uri, storage_options=self.location.options
                    )
            else:
                self._connection = lancedb.connect(str(self.lance_dir))
        return self._connection

    @property
    def _session(self) -> Any:
        """The ``lance.Session`` every dataset of this store is opened with (its index and
        metadata caches, :data:`INDEX_CACHE_BYTES`), made on first use."""
        if self._lance_session is None:
            import lance

            with self._lock:
                if self._lance_session is None:
                    self._lance_session = lance.Session(
                        index_cache_size_bytes=INDEX_CACHE_BYTES,
                        metadata_cache_size_bytes=METADATA_CACHE_BYTES,
                    )
        return self._lance_session

    @contextlib.contextmanager
    def _reaching(self) -> Iterator[None]:
        """Turn an object-storage failure (no answer, no bucket, no or refused credentials) into
        one :class:`StoreError` line."""
        try:
            yield
        except (OSError, RuntimeError, ValueError) as exc:
            line = storage_problem(self.location, exc)
            if line is None:
                raise
            raise StoreError(line) from exc

    def _committed(self, write: Callable[[], T], what: str) -> T:
        """Run a write with the conflict retries of :func:`_retry_conflicts`, storage errors said plainly."""
        with self._reaching():
            return _retry_conflicts(write, what)

    def _remote_dataset(self, spec: TableSpec, *, create: bool) -> Any | None:
        """The dataset of ``spec`` in object storage; when it was never written, created empty
        through LanceDB if ``create``, else ``None``."""
        import lance

        with self._reaching():
            try:
                dataset = lance.dataset(
                    self.location.of(spec.name), storage_options=self.location.options, session=self._session
                )
            except (ValueError, OSError) as exc:
                if "not found" not in str(exc).lower():
                    raise
                return self.table(spec).to_lance() if create else None
        if spec.name not in self._checked:
            self._check_schema(spec, dataset.schema)
            self._checked.add(spec.name)
        return dataset

    def existing_dataset(self, spec: TableSpec) -> Any | None:
        """The Lance dataset of ``spec`` for a read, or ``None`` when the table was never written.

        Reads (:meth:`rows`, :meth:`count`, :meth:`nearest`) go through the ``lance`` package, not
        LanceDB: importing LanceDB costs ~1.2 s of CPU more than ``lance`` (it imports its remote
        namespace client eagerly), which a cold ``vidscope ask``, ``videos`` or ``status`` should
        not pay. Both read the same files; a dataset opened here is at the latest version, so it
        sees every committed write. A table that does not exist reads as empty, without creating
        it (creating needs LanceDB).
        """
        if self.location.remote:
            return self._remote_dataset(spec, create=False)
        if not (self.lance_dir / f"{spec.name}.lance").is_dir():
            return None
        return self.dataset(spec)

    def dataset(self, spec: TableSpec) -> Any:
        """The Lance dataset of ``spec`` for reading, opened without LanceDB when it exists."""
        if self.location.remote:
            return self._remote_dataset(spec, create=True)
        path = self.lance_dir / f"{spec.name}.lance"
        if not path.is_dir():
            return self.table(spec).to_lance()  # created empty (and checked) through LanceDB
        import lance

        try:
            dataset = lance.dataset(str(path), session=self._session)
        except (ValueError, OSError) as exc:
            if "not found" not in str(exc).lower():
                raise
            # The folder exists but its first commit does not yet: another thread is creating the
            # table. Opening it through LanceDB waits for that (creation holds the store's lock).
            return self.table(spec).to_lance()
        if spec.name not in self._checked:
            self._check_schema(spec, dataset.schema)
            self._checked.add(spec.name)
        return dataset

    @property
    def specs(self) -> tuple[TableSpec, ...]:
        """Every per-video table of the store, the video table first and the ledger last."""
        return (
            self.videos,
            self.clips,
            self.frames,
            self.clip_videos,
            self.transcripts,
            self.ocr,
            self.clock_readings,
            self.detections,
            self.subjects,
            self.graph_extractions,
            self.graph_nodes,
            self.graph_edges,
            self.graph_mentions,
            self.graph_supernodes,
            self.video_parses,
            self.concept_index,
            self.chapters,
            self.ledger,
        )

    @property
    def library_specs(self) -> tuple[TableSpec, ...]:
        """Tables shared by the whole library rather than owned by one video (the vocabulary)."""
        return (self.concepts,)

    @property
    def all_specs(self) -> tuple[TableSpec, ...]:
        """Every table, including the vocabulary, the model-usage log and the response cache."""
        return (*self.specs, *self.library_specs, *USAGE_SPECS)

    def _existing_names(self) -> set[str]:
        result = self._db.list_tables()
        names = getattr(result, "tables", result)
        return set(names)

    def table(self, spec: TableSpec) -> Any:
        """The LanceDB table for ``spec``, created empty on first use; its schema is checked once."""
        with self._lock, self._reaching():
            if spec.name not in self._existing_names():
                try:
                    return self._db.create_table(spec.name, schema=spec.schema)
                except (ValueError, OSError, RuntimeError) as exc:
                    if "already exists" not in str(exc):
                        raise
            try:
                table = self._db.open_table(spec.name)
            except ValueError as exc:
                if "was not found" not in str(exc):
                    raise
                # Listed, yet never committed: a creation cut short (its process killed, or the
                # object storage lost, before the first commit) left files but no version. Creating
                # it now succeeds, or says "already exists" when another writer has committed it.
                try:
                    return self._db.create_table(spec.name, schema=spec.schema)
                except (ValueError, OSError, RuntimeError) as again:
                    if "already exists" not in str(again):
                        raise
                table = self._db.open_table(spec.name)
            if spec.name not in self._checked:
                self._check_schema(spec, table.schema)
                self._checked.add(spec.name)
            return table

    def _check_schema(self, spec: TableSpec, actual: pa.Schema) -> None:
        version = (actual.metadata or {}).get(SCHEMA_VERSION_KEY, b"?").decode()
        if version != str(SCHEMA_VERSION):
            raise StoreError(
                f"table '{spec.name}' in {self.location.uri} has schema version {version}, this vidscope "
                f"expects {SCHEMA_VERSION}; ingest into a new data directory (--data-dir) or remove "
                f"the old one"
            )
        for field in spec.schema:
            if field.name not in actual.names:
                raise StoreError(f"table '{spec.name}' lacks column '{field.name}'; the store is damaged")
            if actual.field(field.name).type != field.type:
                raise StoreError(
                    f"table '{spec.name}' column '{field.name}' is {actual.field(field.name).type}, "
                    f"the configuration needs {field.type} (a different embedding model?); use another "
                    f"data directory or `vidscope remove` every video first"
                )

    # ------------------------------------------------------------------ writes

    def _to_arrow(self, spec: TableSpec, rows: pa.Table | Sequence[dict[str, Any]]) -> pa.Table:
        if isinstance(rows, pa.Table):
            missing = [n for n in spec.schema.names if n not in rows.column_names]
            for name in missing:
                rows = rows.append_column(
                    spec.schema.field(name), pa.nulls(rows.num_rows, spec.schema.field(name).type)
                )
            return rows.select(spec.schema.names).cast(spec.schema)
        return pa.Table.from_pylist([dict(r) for r in rows], schema=spec.schema)

    def upsert(self, spec: TableSpec, rows: pa.Table | Sequence[dict[str, Any]]) -> int:
        """Insert or update ``rows`` by the table's natural key. Returns the number of rows given."""
        data = self._to_arrow(spec, rows)
        if data.num_rows == 0:
            return 0
        self._check_unique_keys(spec, data)

        def write() -> None:
            (
                self.table(spec)
                .merge_insert(list(spec.keys))
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute(data, on_bad_vectors="null")
            )

        self._committed(write, f"upsert into {spec.name}")
        return data.num_rows

    def update_columns(self, spec: TableSpec, rows: pa.Table | Sequence[dict[str, Any]]) -> int:
        """Update only the columns present in ``rows`` (plus the key) of existing rows.

        Lets a stage fill its own columns (a clip's caption, its embedding) without reading and
        rewriting the others, so stages writing different columns never undo each other.
        Rows whose key does not exist are ignored.
        """
        if not isinstance(rows, pa.Table):
            rows = [dict(r) for r in rows]
            if not rows:
                return 0
            names = list(rows[0])
            schema = pa.schema([spec.schema.field(n) for n in names])
            rows = pa.Table.from_pylist(rows, schema=schema)
        else:
            rows = rows.cast(pa.schema([spec.schema.field(n) for n in rows.column_names]))
        if rows.num_rows == 0:
            return 0
        missing_keys = [k for k in spec.keys if k not in rows.column_names]
        if missing_keys:
            raise ValueError(f"update_columns({spec.name}): rows lack key columns {missing_keys}")
        self._check_unique_keys(spec, rows)
        data = rows

        def write() -> None:
            (
                self.table(spec)
                .merge_insert(list(spec.keys))
                .when_matched_update_all()
                .execute(data, on_bad_vectors="null")
            )

        self._committed(write, f"update columns of {spec.name}")
        return data.num_rows

    def replace_video_rows(
        self, spec: TableSpec, video_id: str, rows: pa.Table | Sequence[dict[str, Any]]
    ) -> int:
        """Make ``rows`` exactly the rows ``video_id`` has in ``spec``, in one atomic commit."""
        return self.replace_rows_of_videos(spec, [video_id], rows)

    def replace_rows_of_videos(
        self, spec: TableSpec, video_ids: Sequence[str], rows: pa.Table | Sequence[dict[str, Any]]
    ) -> int:
        """Make ``rows`` exactly the rows the videos ``video_ids`` have in ``spec``, in one atomic
        commit: other videos' rows are never touched, and a failure changes nothing."""
        data = self._to_arrow(spec, rows)
        wanted = sorted(set(video_ids))
        if not wanted:
            raise ValueError(f"replace_rows_of_videos({spec.name}): no videos given")
        if data.num_rows and not set(data.column("video_id").to_pylist()) <= set(wanted):
            raise ValueError(f"replace_rows_of_videos({spec.name}): rows must all belong to {wanted}")
        self._check_unique_keys(spec, data)
        where = f"video_id IN ({', '.join(sql_quote(v) for v in wanted)})"
        video_id = wanted[0] if len(wanted) == 1 else f"{len(wanted)} videos"

        def write() -> None:
            table = self.table(spec)
            if data.num_rows == 0:
                table.delete(where)
                return
            (
                table.merge_insert(list(spec.keys))
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .when_not_matched_by_source_delete(where)
                .execute(data, on_bad_vectors="null")
            )

        self._committed(write, f"replace rows of {video_id[:12]} in {spec.name}")
        return data.num_rows

    def delete_rows(self, spec: TableSpec, where: str) -> None:
        """Delete the rows of ``spec`` matching the Lance SQL filter ``where``."""
        self._committed(lambda: self.table(spec).delete(where), f"delete from {spec.name}")

    def delete_video(self, video_id: str) -> None:
        """Remove every row of ``video_id`` from every table (the ledger last)."""
        where = f"video_id = {sql_quote(video_id)}"
        for spec in self.specs[1:]:
            self.delete_rows(spec, where)
        self.delete_rows(self.videos, where)

    @staticmethod
    def _check_unique_keys(spec: TableSpec, data: pa.Table) -> None:
        keys = list(zip(*(data.column(k).to_pylist() for k in spec.keys), strict=True))
        if len(keys) != len(set(keys)):
            raise ValueError(f"{spec.name}: duplicate natural keys {spec.keys} in one write")

    # ------------------------------------------------------------------ reads

    def rows(
        self,
        spec: TableSpec,
        *,
        video_id: str | None = None,
        where: str | None = None,
        columns: Iterable[str] | None = None,
        order_by: Sequence[str] | None = None,
    ) -> pa.Table:
        """Rows of ``spec`` (optionally of one video and/or a Lance SQL filter), sorted by key."""
        filters = []
        if video_id is not None:
            filters.append(f"video_id = {sql_quote(video_id)}")
        if where:
            filters.append(f"({where})")
        # One scan that reads only the requested columns (frames hold JPEG blobs).
        dataset = self.existing_dataset(spec)
        selected = list(columns) if columns is not None else None
        if dataset is None:
            result = spec.schema.empty_table()
            result = result.select(selected) if selected is not None else result
        else:
            with self._reaching():
                result = dataset.to_table(columns=selected, filter=" AND ".join(filters) or None)
        sort_keys = [k for k in (order_by or spec.keys) if k in result.column_names]
        if sort_keys and result.num_rows:
            result = result.sort_by([(k, "ascending") for k in sort_keys])
        return result

    def video_record(self, video_id: str) -> VideoRecord | None:
        """The ``videos`` row of ``video_id`` as a record; ``None`` when it is not registered."""
        rows = self.rows(self.videos, video_id=video_id).to_pylist()
        return VideoRecord(**rows[0]) if rows else None

    def rows_of_videos(
        self,
        spec: TableSpec,
        video_ids: Iterable[str],
        *,
        columns: Sequence[str],
        not_null: str | None = None,
        order_by: Sequence[str] = (),
    ) -> pa.Table:
        """The rows of many videos in one projected read (only those with ``not_null`` set).

        From :data:`TAKE_MIN_VIDEOS` videos on the rows are taken by Lance row id, else filtered
        with ``video_id IN (...)``; both give the same rows, sorted by ``order_by`` when given.
        """
        wanted = sorted(set(video_ids))
        if not wanted:
            return pa.table({c: pa.array([], spec.schema.field(c).type) for c in columns})
        if len(wanted) >= TAKE_MIN_VIDEOS:
            table = self.table(spec)
            rows = VideoRowIds.of(table, (self.location.uri, spec.name)).of_videos(wanted)
            result = table.take_row_ids(rows).select(list(columns)).to_arrow() if rows else None
            if result is None:
                return self.rows_of_videos(spec, [], columns=columns)
            if not_null:
                result = result.filter(pc.is_valid(result.column(not_null)))
        else:
            extra = f" AND {not_null} IS NOT NULL" if not_null else ""
            parts = [
                self.rows(
                    spec,
                    where=f"video_id IN ({', '.join(sql_quote(v) for v in wanted[i : i + IN_CHUNK])}){extra}",
                    columns=columns,
                    order_by=(),
                )
                for i in range(0, len(wanted), IN_CHUNK)
            ]
            result = pa.concat_tables(parts)
        if order_by and result.num_rows:
            result = result.sort_by([(k, "ascending") for k in order_by])
        return result

    def nearest(
        self,
        spec: TableSpec,
        vector: Sequence[float],
        k: int,
        *,
        video_id: str | None = None,
        where: str | None = None,
        columns: Sequence[str] | None = None,
        nprobes: int | None = None,
        refine_factor: int = ANN_REFINE_FACTOR,
    ) -> list[dict[str, Any]]:
        """The ``k`` rows whose vector is closest (cosine) to ``vector``, nearest first.

        Within one video, or under a Lance SQL filter ``where``, the search is exact: an ANN index
        with a selective filter can return fewer than ``k`` rows, so the index is bypassed and the
        matching rows are scanned (fast with the BTree index on ``video_id``). Across the corpus
        the ANN index is used when one exists (``nprobes`` partitions, by default
        :data:`ANN_PROBE_SHARE` of them, :func:`ann_probes`; candidates re-ranked by exact distance
        ``refine_factor`` x ``k`` deep), with no filter at all: rows without a vector
        (clips not embedded yet) never match a vector query, and a ``IS NOT NULL`` prefilter made
        Lance scan every row, which cost the index nearly all of its speed at 1M clips.
        """
        if spec.vector_column is None:
            raise ValueError(f"table {spec.name} has no vector column")
        column = spec.vector_column
        dataset = self.existing_dataset(spec)
        if dataset is None:
            return []
        # Lance's own vector search (see existing_dataset), as LanceDB's query builder words it:
        # cosine distance in ``_distance``, nearest first.
        nearest: dict[str, Any] = {
            "column": column,
            "q": np.asarray(vector, dtype=np.float32),
            "k": k,
            "metric": "cosine",
        }
        filter_sql = None
        if video_id is not None or where:
            filters = [f"{column} IS NOT NULL"]
            if video_id is not None:
                filters.append(f"video_id = {sql_quote(video_id)}")
            if where:
                filters.append(f"({where})")
            filter_sql = " AND ".join(filters)
            nearest["use_index"] = False  # exact: scan the rows the prefilter keeps
        else:
            if nprobes is None:
                nprobes = ann_probes(self._partitions(dataset, column) or ANN_MIN_PROBES)
            # Partitions searched on every core (Lance's default reads them one after another): at
            # 10M clips, 904 probes took 40 / 55 ms p50 / p95 on one, 38 / 40 ms on both.
            nearest.update(nprobes=nprobes, refine_factor=refine_factor, query_parallelism=-1)
        found = dataset.to_table(
            columns=[*columns, "_distance"] if columns is not None else None,
            nearest=nearest,
            filter=filter_sql,
            prefilter=filter_sql is not None,
        )
        rows: list[dict[str, Any]] = found.to_pylist()
        return rows

    def ann_partitions_of(self, spec: TableSpec) -> int | None:
        """The IVF partitions of ``spec``'s corpus ANN index (the most of any of its segments), or
        None without one. Lance's ``optimize`` splits partitions it finds too large (at 90k
        synthetic clips the 5 asked for became 18), so the number asked for at build time is not
        it. Read once per index (its segments' ids), without the centroids (~1 ms; with them, 40 ms
        at 2M clips)."""
        dataset = self.existing_dataset(spec)
        return (
            None
            if dataset is None or spec.vector_column is None
            else self._partitions(dataset, spec.vector_column)
        )

    def _partitions(self, dataset: Any, column: str) -> int | None:
        segments = [
            ix
            for ix in dataset.list_indices()
            if list(ix.get("fields") or []) == [column] and str(ix.get("type", "")).startswith("IVF")
        ]
        if not segments:
            return None
        key = tuple(sorted(str(ix.get("uuid")) for ix in segments))
        partitions = self._index_partitions.get(key)
        if partitions is None:
            os.environ.setdefault("LANCE_INCLUDE_VECTOR_CENTROIDS", "false")  # read by index_stats
            stats = dataset.stats.index_stats(segments[0]["name"])
            partitions = max(int(index.get("num_partitions") or 1) for index in stats["indices"])
            self._index_partitions[key] = partitions
        return partitions

    def text_search(
        self,
        spec: TableSpec,
        query: str,
        k: int,
        *,
        where: str | None = None,
        columns: Sequence[str] | None = None,
    ) -> list[dict[str, Any]]:
        """The ``k`` rows whose text columns best match ``query`` (BM25, Lance FTS), best first.

        Searches every text column of ``spec`` that has a full-text index (built by
        :meth:`optimize`); rows added since the index was built are searched too, unindexed. Each
        row carries its BM25 ``_score``. Empty when no column is indexed yet or the query has no
        searchable word; ``where`` is a Lance SQL prefilter.
        """
        indexed = self.fts_columns(spec)
        if not indexed or not query.strip():
            return []
        from lance.query import MatchQuery

        # Lance's own full-text search (see existing_dataset): BM25 in ``_score``, best first. A
        # row's score over several columns is its best column's, as Lance's MultiMatchQuery
        # scores it; a row among the k best by that score is among its best column's k best, so
        # one k-deep match query per column, merged, gives the same rows (up to ties at the k-th
        # score). It is cheaper: at 10M clips the multi-column query took 29 ms p50 / 139 ms p95
        # against 20 / 53 for the three single ones (benchmarks/RESULTS.md, issue 44).
        dataset = self.dataset(spec)
        best: dict[int, dict[str, Any]] = {}
        for column in indexed:
            found = dataset.to_table(
                full_text_query=MatchQuery(query, column),
                columns=[*columns, "_score"] if columns is not None else None,
                filter=where or None,
                prefilter=bool(where),
                limit=k,
                with_row_id=True,
            )
            for row in found.to_pylist():
                row_id = row.pop("_rowid")
                if row_id not in best or row["_score"] > best[row_id]["_score"]:
                    best[row_id] = row
        return sorted(best.values(), key=lambda row: -row["_score"])[:k]

    def fts_columns(self, spec: TableSpec) -> list[str]:
        """The text columns of ``spec`` that have a full-text index."""
        if not spec.text_columns:
            return []
        dataset = self.existing_dataset(spec)
        if dataset is None:
            return []
        indexed = {
            ix.field_names[0]
            for ix in dataset.describe_indices()
            if ix.index_type == "Inverted" and len(ix.field_names) == 1  # Lance's name for FTS
        }
        return [c for c in spec.text_columns if c in indexed]

    def count(self, spec: TableSpec, video_id: str | None = None) -> int:
        """Number of rows of ``spec`` (of one video when given)."""
        where = f"video_id = {sql_quote(video_id)}" if video_id is not None else None
        dataset = self.existing_dataset(spec)
        if dataset is None:
            return 0
        with self._reaching():
            return int(dataset.count_rows(filter=where))

    def video_version(self, video_id: str) -> str:
        """A short hash that changes whenever any ingestion stage rewrites ``video_id``'s data.

        Built from the video's ledger rows (stage, version, config hash, status, finish time), so
        caches keyed on it (agent tool calls) are invalidated by re-ingestion and by removal.
        """
        ledger = self.rows(
            self.ledger,
            video_id=video_id,
            columns=["stage", "stage_version", "config_hash", "status", "finished_at"],
        ).to_pylist()
        return stable_hash(video_id, ledger)

    def table_version(self, spec: TableSpec) -> int:
        """The Lance version number of ``spec``'s table (grows with every commit)."""
        dataset = self.existing_dataset(spec)
        # A table never written is created (through LanceDB) so that it has a version to report.
        return int(dataset.version if dataset is not None else self.table(spec).version)

    # ------------------------------------------------------------------ indexes

    def optimize(self, *, ann_min_rows: int = ANN_MIN_ROWS) -> dict[str, str]:
        """Compact tables and (re)build indexes after ingestion; returns what was done per table.

        Every table gets a BTree index on ``video_id`` (or its first key column) so per-video reads,
        exact per-video vector search and cache look-ups stay fast (``concept_index`` also one on
        ``concept``, for the search library's look-ups); the clips' text columns get full-text
        (BM25) indexes, kept current by ``table.optimize()``; the clip vector column gets an ANN
        index once the corpus is large enough for one to beat a flat scan (so do the clips' video–text
        vectors, ``clip_videos``).
        """
        done: dict[str, str] = {}
        for spec in self.all_specs:
            table = self.table(spec)
            rows = table.count_rows()
            if rows == 0:
                continue
            actions = []
            indexed = {tuple(ix.columns) for ix in table.list_indices()}
            lookup_column = "video_id" if "video_id" in spec.schema.names else spec.keys[0]
            # The search library looks the inverted index up by concept (agents/mavis/search.py).
            lookups = (lookup_column, "concept") if spec is self.concept_index else (lookup_column,)
            for column in lookups:
                if (column,) not in indexed:
                    table.create_scalar_index(column, index_type="BTREE", replace=True)
                    actions.append(f"btree({column})")
            if spec is self.clips:
                # Moment search (agents/moments.py) and clip_search (agents/evidence.py, one video)
                # rank clips by BM25 over these columns.
                for column in spec.text_columns:
                    if (column,) not in indexed:
                        table.create_index(column, config=lancedb_index().FTS(), replace=True)
                        actions.append(f"fts({column})")
            corpus_vectors = spec is self.clips or spec is self.clip_videos  # searched library-wide
            if spec.vector_column and corpus_vectors and rows >= ann_min_rows:
                action = self._ann_index(table, spec.vector_column, ann_min_rows)
                if action:
                    actions.append(action)
            self._committed(table.optimize, f"optimize {spec.name}")
            actions.append("optimize")
            done[spec.name] = ", ".join(actions)
        return done

    @staticmethod
    def _ann_index(table: Any, column: str, min_rows: int) -> str | None:
        """Build the corpus ANN index on ``column``, or rebuild it once the corpus has grown.

        ``table.optimize()`` (run right after) adds new rows to an existing index, but its
        partitions stay those trained on the corpus it was built for; once the vectors have doubled
        since, the index is trained again so partitions keep their size. The index's name records
        how many vectors it was trained on (``text_embedding_ivfrq_<n>``; an IVF-PQ index of an
        earlier version, ``text_embedding_ivfpq_<n>``, is kept until the corpus doubles).

        The index is IVF-RQ (RaBitQ: one bit a dimension and a few factors per vector, candidates
        re-ranked by exact distance). At 2M synthetic clips it matched IVF-PQ's recall at every
        probe count, probed every partition in 26 ms against PQ's 29.5 and was built in 20 s
        against 66; at 10M, half of its partitions gave recall@50 0.97 at ~40 ms (build 722 s:
        Lance's optimize split its 549 partitions into 1,809; benchmarks/RESULTS.md, issue 44).
        """
        vectors = table.count_rows(f"{column} IS NOT NULL")
        if vectors < min_rows:
            return None
        existing = next((ix for ix in table.list_indices() if list(ix.columns) == [column]), None)
        if existing is not None:
            trained = existing.name.rpartition("_")[2]
            trained_on = (
                int(trained) if trained.isdigit() else table.index_stats(existing.name).num_indexed_rows
            )
            if vectors < 2 * trained_on:
                return None
            table.drop_index(existing.name)
        table.create_index(
            column,
            config=lancedb_index().IvfRq(distance_type="cosine", num_partitions=ann_partitions(vectors)),
            name=f"{column}_ivfrq_{vectors}",
        )
        return f"ivf_rq({column}, {vectors:,} vectors)" + (" rebuilt" if existing is not None else "")


def lancedb_index() -> Any:
    """``lancedb.index`` (index configurations), imported where an index is built."""
    import lancedb.index

    return lancedb.index


def ann_partitions(vectors: int) -> int:
    """IVF partitions for a corpus of ``vectors``: one per :data:`VECTORS_PER_PARTITION`."""
    return max(1, vectors // VECTORS_PER_PARTITION)


def ann_probes(partitions: int) -> int:
    """Partitions a corpus ANN query probes in an index of ``partitions``: :data:`ANN_PROBE_SHARE`
    of them, at least :data:`ANN_MIN_PROBES` (all when there are fewer)."""
    return min(partitions, max(ANN_MIN_PROBES, math.ceil(ANN_PROBE_SHARE * partitions)))


def _retry_conflicts(write: Callable[[], T], what: str, attempts: int = 8) -> T:
    """Run a Lance write, retrying optimistic-commit conflicts with jittered backoff."""
    for attempt in range(1, attempts + 1):
        try:
            return write()
        except (OSError, RuntimeError, ValueError) as exc:
            message = str(exc).lower()
            retryable = "conflict" in message or "retryable" in message or "concurrent" in message
            if not retryable or attempt == attempts:
                raise
            delay = min(2.0, 0.05 * 2**attempt) * (0.5 + random.random())
            log.debug("%s: commit conflict (%s), retry %d in %.2fs", what, exc, attempt, delay)
            time.sleep(delay)
    raise AssertionError("unreachable")

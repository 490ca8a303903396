"""The Python API: a video library to ingest into, search, ask and compare, from a notebook or a
program.

    >>> import vidscope
    >>> lib = vidscope.Library("~/vidscope-data")           # or Library(settings=Settings(...))
    >>> lib.ingest(["talk.mp4"])                             # [VideoReport(status='ok', ...)]
    >>> lib.search("oven temperature", moments=True).moments[0]
    >>> answer = lib.ask("talk", "When is the oven heated?")
    >>> answer.answer, answer.citations[0].verified
    >>> for step in lib.ask_steps("talk", "When is the oven heated?"): print(step)

Each method is the one implementation of its command: the CLI, the HTTP API and MCP call the same
flows functions (``vidscope.flows.*``) this class binds to one data dir, and return the same
pydantic models their ``--json`` output prints. Questions run as Prefect flow runs when a Prefect
server is running (``vidscope server up``), in this process otherwise; ingestion likewise.

Errors are exceptions, documented per method: :class:`VideoNotFound` (a reference matching no
video, or several), :class:`LibraryEmpty` (nothing ingested yet), :class:`BackendUnavailable` (a
configured model that cannot be loaded), :class:`BundleError`, :class:`SqlError`,
:class:`VisualSearchOff`, :class:`NotSummarized`, and ``ValueError`` for bad arguments (an empty
question, unknown agent).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

from vidscope.core.settings import Settings

if TYPE_CHECKING:
    import pyarrow as pa

    from vidscope.agents.answers import AskResult, TraceStep
    from vidscope.agents.mavis.search import SearchResult
    from vidscope.agents.moments import MomentFilters, MomentSearch
    from vidscope.flows.compare import CompareResult
    from vidscope.flows.ingest_plan import VideoReport
    from vidscope.flows.summarize import Digest, TranscriptLine, VideoOverview
    from vidscope.storage.bundle import BundleManifest, ImportReport
    from vidscope.storage.store import Store
    from vidscope.storage.videos import VideoRecord

#: What :meth:`Library.ingest` passes its ``progress`` callback: one event of a video's ingestion
#: (``{"video_id", "stage", "event", ...}``; ``event`` is started, progress, done, skipped, cached,
#: failed, blocked or unavailable for a stage, and "finished" with the video's ``report``).
ProgressEvent = dict[str, Any]


class Library:
    """One vidscope data dir: its videos, and every command over them.

    ``Library(data_dir)`` reads the configuration as the CLI does (``vidscope.toml``, the
    ``VIDSCOPE_*`` environment) with the data dir set; ``Library(settings=...)`` takes a
    :class:`~vidscope.core.settings.Settings` object as given. Nothing is opened until used.
    """

    def __init__(self, data_dir: str | Path | None = None, *, settings: Settings | None = None) -> None:
        if settings is None:
            settings = Settings() if data_dir is None else Settings(data_dir=Path(data_dir).expanduser())
        elif data_dir is not None:
            settings = settings.model_copy(update={"data_dir": Path(data_dir).expanduser()})
        self.settings: Settings = settings

    def __repr__(self) -> str:
        return f"Library({str(self.settings.data_dir)!r})"

    @property
    def store(self) -> Store:
        """The LanceDB store of this data dir (opened once per process and data dir)."""
        from vidscope.models.open_store import open_store

        return open_store(self.settings)

    # ------------------------------------------------------------------ ingest and browse

    def ingest(
        self, paths: Iterable[str | Path], *, progress: Callable[[ProgressEvent], None] | None = None
    ) -> list[VideoReport]:
        """Ingest video files, folders and globs; one report per file (``status`` "ok", "warning",
        "partial", "failed", "duplicate" or "up to date" when nothing changed). A file that fails is
        its report's ``error``, not an exception; ``progress`` sees each stage event as it happens."""
        from vidscope.flows.ingest import run_ingest
        from vidscope.tasks.progress import listen

        names = [str(p) for p in paths]
        if progress is None:
            return run_ingest(names, self.settings)
        with listen(progress):
            return run_ingest(names, self.settings)

    def videos(self) -> list[VideoRecord]:
        """Every ingested video, oldest first."""
        from vidscope.storage.videos import VideoRecord

        rows = self.store.rows(self.store.videos).to_pylist()
        return [VideoRecord(**row) for row in sorted(rows, key=lambda r: r["added_at"])]

    def video(self, ref: str) -> VideoRecord:
        """The video ``ref`` names: an id or id prefix (6+ characters), a path, or a file name with
        or without its extension. Raises :class:`VideoNotFound`."""
        from vidscope.storage.videos import find_video

        return find_video(self.store, ref)

    def remove(self, video: str) -> VideoRecord:
        """Remove a video and every row derived from it (the file is not touched); returns it."""
        record = self.video(video)
        self.store.delete_video(record.video_id)
        return record

    def sql(self, query: str) -> pa.Table:
        """A read-only DuckDB query over the store's tables, as an Arrow table (``.to_pandas()``
        for pandas). Raises :class:`SqlError` for a refused or failing query."""
        import pyarrow as pa

        from vidscope.storage.sql import query as run_sql

        columns, rows = run_sql(self.store, query)
        return pa.table({name: [row[i] for row in rows] for i, name in enumerate(columns)})

    # ------------------------------------------------------------------ search

    @overload
    def search(
        self,
        query: str,
        *,
        moments: Literal[False] = False,
        k: int | None = None,
        filters: None = None,
        show_all: Literal[False] = False,
        fusion: str | None = None,
        tau_soft: float | None = None,
        tau_hard: float | None = None,
    ) -> SearchResult: ...

    @overload
    def search(
        self,
        query: str,
        *,
        moments: Literal[True],
        k: int | None = None,
        filters: MomentFilters | None = None,
        show_all: bool = False,
    ) -> MomentSearch: ...

    def search(
        self,
        query: str,
        *,
        moments: bool = False,
        k: int | None = None,
        filters: MomentFilters | None = None,
        show_all: bool = False,
        fusion: str | None = None,
        tau_soft: float | None = None,
        tau_hard: float | None = None,
    ) -> SearchResult | MomentSearch:
        """Whole videos ranked for ``query`` (MAVIS; a :class:`SearchResult`), or with
        ``moments=True`` the best moments of every video (a :class:`MomentSearch`; ``filters``
        and ``show_all`` apply to moments only; ``fusion``, ``tau_soft`` and ``tau_hard`` to whole
        videos only, each ``None`` read from ``[search]``). Raises :class:`LibraryEmpty`,
        :class:`BackendUnavailable` (no text embedder), ``ValueError``."""
        if moments:
            if fusion is not None or tau_soft is not None or tau_hard is not None:
                raise ValueError("fusion, tau_soft and tau_hard are for whole videos: leave moments off")
            from vidscope.flows.search import run_search_moments

            return run_search_moments(self.settings, query, k=k or 10, filters=filters, show_all=show_all)
        if filters is not None or show_all:
            raise ValueError("filters and show_all are for moments: pass moments=True")
        from vidscope.flows.search import run_search

        return run_search(self.settings, query, k=k, fusion=fusion, tau_soft=tau_soft, tau_hard=tau_hard)

    def search_image(
        self,
        picture: str | Path | bytes,
        *,
        k: int = 10,
        filters: MomentFilters | None = None,
        label: str | None = None,
    ) -> MomentSearch:
        """Moments whose frames look like ``picture`` (a file path or the image's bytes), named
        ``label`` in the result (default: the file name, or "image"). Raises
        :class:`VisualSearchOff` without a usable image–text model, ``ValueError`` for data that is
        not a picture (or has more pixels than search decodes), ``OSError`` for a file that cannot
        be read, :class:`LibraryEmpty`."""
        from vidscope.core.images import decode_image, read_image_file
        from vidscope.flows.search import run_search_moments_by_image

        data = picture if isinstance(picture, bytes) else read_image_file(Path(picture).expanduser())
        if label is None:
            label = "image" if isinstance(picture, bytes) else Path(picture).name
        return run_search_moments_by_image(
            self.settings, decode_image(data), k=k, filters=filters, label=label
        )

    # ------------------------------------------------------------------ questions

    def ask(
        self,
        video: str,
        question: str,
        *,
        options: Sequence[str] | None = None,
        agent: str | None = None,
        on_step: Callable[[TraceStep], None] | None = None,
    ) -> AskResult:
        """Answer ``question`` about one video with the agent ``agent`` (``vidscope.agents.strategies``:
        dvd, avi, extractive…; the default without a chat model is extractive). ``options`` makes
        it multiple choice (the answer's ``choice`` is a letter); ``on_step`` sees each step live.
        Raises :class:`VideoNotFound`, ``ValueError``."""
        from vidscope.flows.ask import run_ask

        listed = list(options) if options is not None else None
        return run_ask(self.settings, video, question, listed, on_step, agent=agent)

    def ask_library(
        self, question: str, *, agent: str | None = None, on_step: Callable[[TraceStep], None] | None = None
    ) -> AskResult:
        """Answer ``question`` over every ingested video. Raises ``ValueError`` (an empty library,
        an unknown agent)."""
        from vidscope.flows.ask import run_ask_library

        return run_ask_library(self.settings, question, on_step, agent=agent)

    def ask_steps(
        self, video: str, question: str, *, options: Sequence[str] | None = None, agent: str | None = None
    ) -> Iterator[TraceStep | AskResult]:
        """:meth:`ask` as a stream: each step as it happens, then the :class:`AskResult` last. An
        error is raised from the iterator; leaving the loop early lets the question finish in the
        background thread and drops its steps."""
        return _stream(
            lambda on_step: self.ask(video, question, options=options, agent=agent, on_step=on_step)
        )

    def compare(
        self,
        videos: Sequence[str],
        question: str,
        *,
        options: Sequence[str] | None = None,
        agent: str | None = None,
        on_step: Callable[[TraceStep], None] | None = None,
        use_skills: bool = True,
        conflict_check: bool = True,
    ) -> CompareResult:
        """Answer ``question`` across ``videos`` with a multi-video agent (sama, cvr…); SAMA's
        skills and conflict check can be turned off (its ablations). Raises :class:`VideoNotFound`,
        ``ValueError``."""
        from vidscope.flows.compare import run_compare

        return run_compare(
            self.settings,
            list(videos),
            question,
            options=list(options) if options is not None else None,
            agent=agent,
            use_skills=use_skills,
            conflict_check=conflict_check,
            on_step=on_step,
        )

    # ------------------------------------------------------------------ overviews

    def summarize(self, video: str) -> VideoOverview:
        """The video's summary, chapters (start, end, title, summary) and highlights, as the
        ``chapters`` stage stored them. Raises :class:`VideoNotFound`, :class:`NotSummarized`
        (the stage has not run or failed; the reason in one line)."""
        from vidscope.flows.summarize import read_summary

        return read_summary(self.store, self.video(video))

    def transcript(self, video: str) -> list[TranscriptLine]:
        """What the video says, line by line in time order (for a video without speech: the texts
        it shows; empty when neither). Raises :class:`VideoNotFound`."""
        from vidscope.flows.summarize import read_transcript

        return read_transcript(self.store, self.video(video))

    def digest(self, since: str | timedelta = "1d") -> Digest:
        """What the library gained in the last ``since`` ("1d", "12h", "2w", or a timedelta).
        Raises ``ValueError`` for a window it cannot read."""
        from vidscope.flows.summarize import parse_since, read_digest

        window = since if isinstance(since, timedelta) else parse_since(since)
        return read_digest(self.store, window)

    # ------------------------------------------------------------------ bundles

    def export(self, videos: Sequence[str], to: str | Path) -> BundleManifest:
        """Write the videos' rows, vocabulary, ledger and model ids into the new folder ``to``.
        Raises :class:`VideoNotFound`, :class:`BundleError`."""
        from vidscope.storage.bundle import configured_models, export_videos

        ids = [self.video(ref).video_id for ref in videos]
        return export_videos(self.store, ids, Path(to), models=configured_models(self.settings))

    def import_(self, folder: str | Path, *, replace: Sequence[str] = ()) -> ImportReport:
        """Import a bundle written by :meth:`export`; nothing is written unless all of it checks
        out. Videos already here are kept unless ``replace`` names them. Raises :class:`BundleError`."""
        from vidscope.storage.bundle import configured_models, import_bundle, read_manifest, resolve_replace

        config = self.settings
        names = resolve_replace(read_manifest(Path(folder), config.bundle), list(replace))
        return import_bundle(
            self.store, Path(folder), models=configured_models(config), replace=names, limits=config.bundle
        )


def _stream(run: Callable[[Callable[[Any], None]], Any]) -> Iterator[Any]:
    """Run ``run(on_step)`` in a thread; yield each step it reports, then its result (or raise)."""
    events: queue.Queue[tuple[str, Any]] = queue.Queue()
    stopped = threading.Event()

    def on_step(step: Any) -> None:
        if not stopped.is_set():
            events.put(("step", step))

    def work() -> None:
        try:
            events.put(("result", run(on_step)))
        except BaseException as exc:  # handed to the caller's thread
            events.put(("error", exc))

    threading.Thread(target=work, name="vidscope-ask-steps", daemon=True).start()
    try:
        while True:
            kind, value = events.get()
            if kind == "error":
                raise value
            yield value
            if kind == "result":
                return
    finally:
        stopped.set()

"""The ``evaluate`` flow: run an agent (or the retrieval pipeline) over a benchmark, resumably.

One run lives in a run directory (:mod:`vidscope.evaluation.runs`). The flow:

1. loads the benchmark and finds its videos under the root (missing ones are listed, never fatal);
   an item that shows segments of a video as clips (CrossVid PSS) gets them cut into the run's
   ``segments/`` folder (:mod:`vidscope.evaluation.segments`) and is asked about those clips;
2. ingests the videos that are not in the store yet, one task per video (the same ingestion
   ``vidscope ingest`` runs; the ledger skips whatever is current);
3. answers every question that has no answer in ``predictions.jsonl`` yet, each as its own task:
   retried on failure, at most ``concurrency`` at once; each answer is appended the moment it
   finishes, so an interrupted run resumes without asking a finished question again. A question that gets no
   answer (its video failed ingestion, its clip could not be cut, the agent raised after its
   retries) is appended as failed, with the stage and the error, and asked again on resume;
4. scores what was attempted and writes ``summary.json``, ``report.md``, ``samples.jsonl`` and
   the PNG plots, and publishes the report as a Prefect artifact. :func:`run_evaluate` then says
   whether more than ``max_failed`` of the attempted questions failed (the CLI exits 1).

One implementation, run two ways (as ``vidscope ingest`` and the queries are): when a Prefect
server answers, or the run is a subflow, the ``evaluate`` flow runs it and each video and question
is a Prefect task (the UI shows them; a question's result is also cached, keyed on the run, the
question and the store version of its videos); otherwise the same steps run on a thread pool of
this process (:class:`EvalRunner`) and no temporary Prefect server is started for a run whose
records would be thrown away with it. ``predictions.jsonl`` is what resuming reads either way.

Multiple-choice, open-ended and grounding items go to the chosen strategy (any of
:mod:`vidscope.agents.strategies`, asked as :mod:`vidscope.flows.eval_agents` words it);
grounding reads the answer's interval (the AVI agent's "when" answer, else the first cited
range). Retrieval items (MSR-VTT style) run the MAVIS search
over the library and keep the benchmark's videos in the order found.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import inspect
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.futures import as_completed
from prefect.task_runners import ThreadPoolTaskRunner
from pydantic import BaseModel, Field, ValidationError

from vidscope.agents import strategies
from vidscope.agents.environment import is_simulated, tool_context
from vidscope.agents.grounding import parse_interval
from vidscope.agents.mavis.search import SearchResult, search_library, thresholds_for
from vidscope.agents.runtime import Answer
from vidscope.core.errors import BackendUnavailable
from vidscope.core.hashing import stable_hash
from vidscope.core.settings import SearchSettings, Settings, disable_telemetry
from vidscope.evaluation.identity import (
    code_identity,
    differences,
    identity_hash,
    model_identity,
    provenance,
    run_identity,
    settings_identity,
)
from vidscope.evaluation.items import AnnotationError, BenchmarkItem
from vidscope.evaluation.loaders import BENCHMARKS, load_benchmark
from vidscope.evaluation.metrics import phase_passes, phase_seconds, reasoning_iterations
from vidscope.evaluation.protocol import Protocol, apply_protocol, split_options
from vidscope.evaluation.report import RunSummary, report_markdown, summarise, write_report
from vidscope.evaluation.runs import (
    Prediction,
    RunError,
    RunSpec,
    append_prediction,
    failed_prediction,
    read_predictions,
    read_spec,
    read_videos,
    save_spec,
    write_spec,
    write_videos,
)
from vidscope.evaluation.scoring import Judge
from vidscope.evaluation.segments import FOLDER as SEGMENTS
from vidscope.evaluation.segments import cut_segments
from vidscope.evaluation.videos import VideoLookup, locate_videos, read_subtitles
from vidscope.flows.eval_agents import (
    ALLOW_SELF_JUDGE,
    SUBTITLE_TEXT,
    JudgeChoice,
    answer_item,
    choose_judge,
    judge_of,
)
from vidscope.flows.ingest import (
    VideoReport,
    hash_task,
    ingest_one,
    ingest_one_direct,
    optimize_store,
    optimize_task,
    patient_prefect,
)
from vidscope.flows.runs import publish_markdown, publish_table, retried
from vidscope.models import registry
from vidscope.models.open_store import open_store
from vidscope.models.protocols.image_text import ImageTextEmbedder
from vidscope.models.usage import query_context, totals
from vidscope.storage import Store
from vidscope.storage.ledger import STATUS_FAILED
from vidscope.tasks.probe import content_hash
from vidscope.tasks.stage import CURRENT_STATUSES, STATUS_UNAVAILABLE, is_current, ledger_rows
from vidscope.tasks.stages import stages

__all__ = [
    "EvalOutcome",
    "EvalProgress",
    "evaluate",
    "prepare_run",
    "repeats_warning",
    "run_evaluate",
    "too_many_failed",
]

#: Prefect retries of one question (a model timeout, a dropped connection) before it counts as failed.
QUESTION_RETRIES = 2
#: The share of attempted questions that may fail before a run is reported as failed (exit 1):
#: above it the numbers say more about the setup (videos that do not decode, a model server that
#: is down) than about the agent. ``--max-failed`` sets it; 1 never fails a run for this.
MAX_FAILED = 0.2
#: Where runs live, under the data dir.
RUNS_FOLDER = "eval"
#: A run's name is one folder under ``<data dir>/eval``: no separators, no ``..``, no hidden names.
RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class EvalProgress(BaseModel):
    """One progress event: a video ingested or a question answered (``done`` of ``total``)."""

    phase: str  # "ingest" | "answer"
    done: int
    total: int
    name: str
    ok: bool = True


class EvalOutcome(BaseModel):
    """What one ``evaluate`` run did, and the report it wrote."""

    run_dir: str
    summary: RunSummary
    answered_now: list[str] = Field(default_factory=list)
    reused: int = Field(0, description="Questions answered by an earlier run (their JSONL lines).")
    failures: dict[str, str] = Field(default_factory=dict, description="Question id -> last error.")
    ingested: list[str] = Field(default_factory=list, description="Videos ingested by this run.")
    ingest_failures: dict[str, str] = Field(default_factory=dict)
    missing_videos: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)
    nothing_scored: str | None = Field(None, description="Why no score came out, when none did.")
    too_many_failed: str | None = Field(
        None, description="More than the allowed share of questions failed: how many, and why (one line)."
    )


# The progress callback cannot be a flow parameter (Prefect serialises those): a context variable.
_on_progress: contextvars.ContextVar[Callable[[EvalProgress], None] | None] = contextvars.ContextVar(
    "vidscope_eval_progress", default=None
)


def _judge(
    settings: Settings, spec: RunSpec, items: Sequence[BenchmarkItem]
) -> tuple[Judge | None, JudgeChoice]:
    """The LLM judge of free-form answers (the ``judge`` role; the answering model only with
    ``--allow-self-judge``) and who it is; a run that may not judge leaves those answers
    unscored, with the reason in the report."""
    try:
        choice = choose_judge(settings, items, bool(spec.options.get(ALLOW_SELF_JUDGE)))
    except ValueError as exc:  # configured away since the run was prepared
        return None, JudgeChoice(None, note_text=str(exc))
    return judge_of(settings, choice), choice


def _progress(event: EvalProgress) -> None:
    callback = _on_progress.get()
    if callback is not None:
        callback(event)


# ============================================================================ preparing a run


#: The name a retrieval run records as its agent: retrieval items run the MAVIS search pipeline.
RETRIEVAL_AGENT = "mavis"


def _load_items(benchmark: str, annotations: Path, options: dict[str, Any]) -> list[BenchmarkItem]:
    """The benchmark's items, with what goes wrong reading the file as one line naming it."""
    try:  # the options the loader takes, told apart from what goes wrong reading the file
        inspect.signature(BENCHMARKS[benchmark].load).bind(annotations, **options)
    except TypeError as exc:
        raise ValueError(f"{benchmark}: bad loader option ({exc})") from exc
    try:
        return load_benchmark(benchmark, annotations, **options)
    except AnnotationError:
        raise
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "an item"
        raise ValueError(f"{benchmark}: cannot read {annotations} ({where}: {first['msg']})") from exc
    except (OSError, LookupError, TypeError, ValueError, AttributeError) as exc:
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
        raise ValueError(f"{benchmark}: cannot read {annotations} ({reason})") from exc


def _check_agent(
    settings: Settings, agent: str | None, items: Sequence[BenchmarkItem], benchmark: str
) -> str:
    """The agent the run records: ``mavis`` for retrieval, else a strategy that can run here."""
    if items and all(i.kind == "retrieval" for i in items):
        if agent not in (None, RETRIEVAL_AGENT):
            raise ValueError(
                f"{benchmark} is a retrieval benchmark: it is ranked by the MAVIS search pipeline, not "
                f"by the {agent!r} agent; give --agent {RETRIEVAL_AGENT} or leave --agent out"
            )
        if registry.effective_spec(settings, "text_embedder") is None:
            raise ValueError("retrieval needs a text embedder: set [models] text_embedder")
        return RETRIEVAL_AGENT
    if agent == RETRIEVAL_AGENT:
        raise ValueError(
            f"--agent {RETRIEVAL_AGENT} ranks videos: {benchmark} asks questions, choose an agent"
        )
    agent = agent or strategies.default("video")
    strategy = strategies.get(agent)
    # The planner answers (models.planner, else models.chat), as for ask: a planner-only config is
    # enough (issue 24).
    if strategy.needs_planner and not registry.effective_spec(settings, "planner"):
        raise ValueError(
            f"agent {agent!r} needs a planner: set [models] planner or chat (or use --agent extractive)"
        )
    if (strategy.sim_tools if is_simulated(settings.agent) else strategy.tools) is None:
        raise ValueError(f"agent {agent!r} does not run in this environment ([agent] environment)")
    return agent


def run_protocol(
    settings: Settings, benchmark: str, options: dict[str, Any], items: Sequence[BenchmarkItem]
) -> dict[str, Any]:
    """The run's protocol as recorded: the loader's, with the run's switches, and the budgets the
    settings give (frames an agent may look at, frames sampled per second at ingestion)."""
    protocol = BENCHMARKS[benchmark].protocol.resolved(options)
    kinds = sorted({i.kind for i in items})
    return {
        **protocol.model_dump(),
        "kinds": kinds,
        "frame_budget": settings.agent.max_frames,
        "frame_fps": settings.ingest.frame_fps,
        "speech_recognizer": apply_protocol(settings, protocol).models.speech_recognizer or None,
    }


def run_settings(settings: Settings, spec: RunSpec) -> Settings:
    """The settings the run ingests and answers with: the protocol applied (no transcripts: no
    speech recogniser)."""
    return apply_protocol(settings, Protocol.model_validate(_protocol_fields(spec.protocol)))


def _protocol_fields(recorded: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in recorded.items() if k in Protocol.model_fields}


def prepare_run(
    settings: Settings,
    benchmark: str,
    annotations: Path | str,
    root: Path | str,
    agent: str | None,
    *,
    options: dict[str, Any] | None = None,
    name: str | None = None,
    ablations: Sequence[str] = (),
    repeat: int = 1,
) -> Path:
    """The run directory for this evaluation: created, or the existing one to resume.

    The default name is ``<benchmark>-<agent>-<hash>`` of the run's identity
    (:mod:`vidscope.evaluation.identity`: root, annotations, agent, options, protocol, models with
    their options, settings), so repeating a command resumes its run and changing anything the
    answers depend on starts a new one; a named run (``name``) that exists with another identity
    is refused, saying what differs. ``agent`` None: the default strategy (``mavis``, the search
    pipeline, for retrieval). Raises ``ValueError`` (one line) for an unknown benchmark or agent,
    an agent that does not fit the benchmark, or one needing a chat model that is not configured.
    ``ablations`` (``avi:no-review``, ...; :func:`vidscope.agents.strategies.parse_ablations`)
    switch parts of the agent off; they are part of the run's identity (an unknown one: ValueError).
    ``repeat`` k > 1 is the k-th repeat of the same evaluation: a run of its own (``-r<k>`` after a
    given name), its number in the identity.
    """
    if benchmark not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {benchmark!r}; known: {', '.join(sorted(BENCHMARKS))}")
    annotations = Path(annotations).expanduser().resolve()
    if not annotations.exists():
        raise ValueError(f"annotation file not found: {annotations}")
    options = {k: v for k, v in (options or {}).items() if v is not None}
    if name is not None and not RUN_NAME.fullmatch(name):
        raise ValueError(
            f"run name {name[:80]!r}: use letters, digits, '.', '_' and '-' (it names a folder under "
            f"<data dir>/{RUNS_FOLDER}, never a path)"
        )
    loader_options, _ = split_options(options)
    # Read once here, so a bad file is one line before any flow run starts.
    items = _load_items(benchmark, annotations, loader_options)
    agent = _check_agent(settings, agent, items, benchmark)
    choose_judge(settings, items, bool(options.get(ALLOW_SELF_JUDGE)))  # refuses a self-judging run
    switched_off = sorted(strategies.parse_ablations(agent, ablations)) if ablations else []
    protocol = run_protocol(settings, benchmark, options, items)
    resolved_root = Path(root).expanduser().resolve()
    answering = apply_protocol(settings, Protocol.model_validate(_protocol_fields(protocol)))
    identity = run_identity(
        answering,
        benchmark=benchmark,
        annotations=annotations,
        root=resolved_root,
        agent=agent,
        options=options,
        protocol=protocol,
    )
    if switched_off:  # only when any: runs without ablations keep their identity
        identity["ablations"] = switched_off
    if repeat > 1:  # the first repeat is the run itself
        identity["repeat"] = repeat
        name = f"{name}-r{repeat}" if name else None
    fingerprint = identity_hash(identity)
    name = name or f"{benchmark}-{agent}-{fingerprint[:8]}"
    runs = Path(settings.data_dir).expanduser().resolve() / RUNS_FOLDER
    run_dir = (runs / name).resolve()
    if run_dir.parent != runs:  # a folder of that name linked elsewhere
        raise ValueError(f"run {name!r} would be written outside {runs}")
    spec = RunSpec(
        name=name,
        benchmark=benchmark,
        annotations=str(annotations),
        root=str(resolved_root),
        agent=agent,
        options=options,
        settings_fingerprint=fingerprint,
        models={role: entry["spec"] for role, entry in identity["models"].items()},
        protocol=protocol,
        identity=identity,
        ablations=switched_off,
        created_at=_now(),
        provenance=provenance(),
        retrieval=_retrieval_setup(answering) if agent == RETRIEVAL_AGENT else {},
    )
    write_spec(run_dir, spec)
    return run_dir


def _retrieval_setup(settings: Settings) -> dict[str, Any]:
    """What a retrieval run is set up to rank with (``run.json``): the thresholds and where they
    came from, with the warning an uncalibrated text embedder gets, and the fine-stage models
    configured (whether they load shows per query: ``rerank`` and ``rerank_wanted``)."""
    _, thresholds = thresholds_for(settings.search, registry.effective_spec(settings, "text_embedder"))
    return {
        "thresholds": thresholds.model_dump(),
        "fine_stage_models": {
            role: registry.effective_spec(settings, role) for role in ("video_text", "image_text")
        },
        "gallery_only": True,
    }


def repeats_warning(settings: Settings, repeats: int) -> str | None:
    """One line when ``repeats`` runs of one evaluation would be replays: the answering models'
    response cache is on, so every repeat gets the first run's replies and their spread is zero.
    DVD (App. B.1) reports the variance over three runs; that needs fresh samples."""
    if repeats <= 1:
        return None
    cached: list[str] = []
    for role in ("planner", "vlm"):
        spec = registry.effective_spec(settings, role)
        if not spec or registry.parse_spec(spec)[0] != "openai":  # only HTTP backends cache replies
            continue
        options = registry.backend_options(settings, spec)
        own = options.get(role)
        table: dict[str, Any] = own if isinstance(own, dict) else {}
        if table.get("cache", options.get("cache", True)):
            cached.append(spec)
    if not cached:
        return None
    return (
        f"--repeats {repeats} with the response cache on ({', '.join(dict.fromkeys(cached))}): the "
        "repeats replay the first run's replies, so their spread says nothing; set cache = false under "
        "[models.options.openai] to sample each run afresh (DVD B.1 reports the variance over three runs)"
    )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


# ============================================================================ videos


def _is_ingested(store: Store, settings: Settings, video_id: str) -> bool:
    """Every stage is current for the run's ``settings``: done with the fingerprint (version,
    models, options, upstream rows) it would have now, as ``vidscope ingest`` decides. A stage whose
    model is not installed (``unavailable``) under the same fingerprint is not retried here."""
    rows = ledger_rows(store, video_id)
    for stage in stages():
        row = rows.get(stage.name)
        fingerprint = stage.fingerprint(settings, rows)
        if is_current(row, stage, fingerprint):
            continue
        unavailable = (
            row is not None
            and row["status"] == STATUS_UNAVAILABLE
            and row["stage_version"] == stage.version
            and row["config_hash"] == fingerprint
        )
        if not unavailable:
            return False
    return True


def optional_failures(store: Store, video_id: str) -> list[str]:
    """The optional stages of ``video_id`` that failed (``stage: reason``, from the ledger) or could
    not run because one they need failed; the video is answered without their rows."""
    rows = ledger_rows(store, video_id)
    out: list[str] = []
    failed: set[str] = set()
    for stage in stages():
        row = rows.get(stage.name)
        if not stage.optional or (row is not None and row["status"] in CURRENT_STATUSES):
            continue
        if row is not None and row["status"] == STATUS_FAILED:
            failed.add(stage.name)
            out.append(f"{stage.name}: {row['error'] or 'failed'}")
        elif blocked := [n for n in stage.needs if n in failed]:
            failed.add(stage.name)
            out.append(f"{stage.name}: not run (needs {', '.join(blocked)})")
    return out


def _store_ids(
    run: EvalRunner, run_dir: Path, found: dict[str, Path], names: Sequence[str]
) -> tuple[dict[str, str], dict[str, str]]:
    """Store ids of the benchmark videos ``names`` (hashing only files new or changed since the last
    run); returns (ids, errors) by benchmark name."""
    known = read_videos(run_dir)
    ids: dict[str, str] = {}
    errors: dict[str, str] = {}
    hashing: dict[str, Callable[[], str]] = {}
    for name in names:
        path = found[name]
        stat = path.stat()
        record = known.get(name, {})
        if (
            record.get("path") == str(path)
            and record.get("size") == stat.st_size
            and record.get("mtime") == stat.st_mtime
        ):
            ids[name] = record["video_id"]
        else:
            hashing[name] = run.hash(path)
    for name, hashed in hashing.items():
        try:
            ids[name] = hashed()
        except Exception as exc:  # noqa: BLE001 - an unreadable video fails its questions, not the run
            errors[name] = str(exc)
        else:
            stat = found[name].stat()
            known[name] = {
                "path": str(found[name]),
                "size": stat.st_size,
                "mtime": stat.st_mtime,
                "video_id": ids[name],
            }
    write_videos(run_dir, known)
    return ids, errors


def _ingest_missing(
    run: EvalRunner, store: Store, settings: Settings, found: dict[str, Path], ids: dict[str, str]
) -> tuple[list[str], dict[str, str]]:
    """Ingest the videos not current for the run's settings (new videos, and videos ingested with
    other models or settings), one task each; returns (ingested, failures) by name."""
    missing = [name for name, video_id in ids.items() if not _is_ingested(store, settings, video_id)]
    if not missing:
        return [], {}
    # Load the embedder before the ingestion threads do: two threads importing transformers at
    # once can see a half-initialised module.
    registry.text_embedder(settings)
    reports = {name: run.ingest(found[name], ids[name], settings) for name in missing}
    ingested: list[str] = []
    failures: dict[str, str] = {}
    for done, (name, reported) in enumerate(reports.items(), 1):
        report: VideoReport = reported()
        if report.failed:
            failures[name] = report.error or "; ".join(
                f"{s.stage}: {s.error}" for s in report.stages if s.status == "failed"
            )
        else:
            ingested.append(name)
        _progress(
            EvalProgress(phase="ingest", done=done, total=len(missing), name=name, ok=not report.failed)
        )
    if ingested:
        run.optimize(settings)
    return ingested, failures


# ============================================================================ one question


def with_subtitles(items: Sequence[BenchmarkItem], lookup: VideoLookup) -> list[BenchmarkItem]:
    """``items`` with the text of their subtitle file (when named and found) in
    ``extra[SUBTITLE_TEXT]``; the agents get it before the question as quoted data."""
    texts: dict[str, str] = {}
    out: list[BenchmarkItem] = []
    for item in items:
        name = item.subtitles
        path = lookup.subtitles.get(name) if name else None
        if name is None or path is None:
            out.append(item)
            continue
        if name not in texts:
            try:
                texts[name] = read_subtitles(path)
            except OSError:
                texts[name] = ""
        text = texts[name]
        out.append(item.model_copy(update={"extra": {**item.extra, SUBTITLE_TEXT: text}}) if text else item)
    return out


def _interval_of(answer: Answer) -> tuple[float, float] | None:
    """A grounding answer's interval: the agent's own, else one in its text, else its first citation."""
    if answer.interval is not None:
        return (answer.interval.start, answer.interval.end)
    parsed = parse_interval(answer.answer)
    if parsed is not None:
        return (float(parsed[0]), float(parsed[1]))
    if answer.citations:
        return (answer.citations[0].start, answer.citations[0].end)
    return None


def retrieval_options(settings: Settings, gallery: int) -> SearchSettings:
    """The search options a retrieval item ranks with: ``vidscope search``'s, with the thresholds
    calibrated for the text embedder in use, and enough results to rank the benchmark's gallery."""
    spec = registry.effective_spec(settings, "text_embedder")
    options = settings.search.for_embedder(spec)
    return options.model_copy(update={"k": max(options.k, 10, gallery)})


def _retrieve(
    store: Store, settings: Settings, item: BenchmarkItem, names: dict[str, str]
) -> tuple[list[str], dict[str, Any]]:
    """Benchmark video names ranked by the MAVIS search for the item's caption, over the
    benchmark's gallery only (``names``: store id -> name; other videos in the data dir are never
    candidates), and how it ranked (:func:`retrieval_provenance`)."""
    embedder = registry.text_embedder(settings)
    if embedder is None:
        raise ValueError("retrieval needs a text embedder: set [models] text_embedder")
    options = retrieval_options(settings, len(names))
    _, thresholds = thresholds_for(settings.search, registry.effective_spec(settings, "text_embedder"))
    unloaded: list[str] = []
    result = search_library(
        store,
        item.question,
        embedder=embedder,
        options=options,
        chat=registry.planner_model(settings),
        image_text=_image_text(settings, unloaded),
        video_text=registry.video_text(settings),
        frame_seconds=1.0 / settings.ingest.frame_fps,
        thresholds=thresholds,
        gallery=list(names),
    )
    ranking = [names[hit.video_id] for hit in result.hits if hit.video_id in names]
    return ranking, retrieval_provenance(result, unloaded)


def retrieval_provenance(result: SearchResult, unloaded: Sequence[str] = ()) -> dict[str, Any]:
    """How one retrieval query ranked, as its prediction records it: the fine stage actually used
    (and the one configured, when it could not be), the thresholds and their source, the pool and
    |V_contro| (the candidates surviving the veto, MAVIS Tab. 2 and 4), the gallery's size."""
    wanted = result.rerank_wanted or (unloaded[0] if unloaded else None)
    thresholds = result.thresholds
    return {
        "rerank": result.rerank,
        "rerank_wanted": wanted,
        "tau_soft": thresholds.tau_soft if thresholds else None,
        "tau_hard": thresholds.tau_hard if thresholds else None,
        "thresholds": thresholds.source if thresholds else None,
        "warning": thresholds.warning if thresholds else None,
        "pool": result.pool_size,
        "v_contro": result.v_contro,
        "gallery": result.gallery,
    }


#: Where the answers' traces go, in the run directory.
TRACES_FOLDER = "traces"


def _write_trace(trace_dir: Path, question_id: str, answer: Answer) -> str:
    """Write ``answer`` as JSON to a file named after the question; its path relative to the run."""
    safe_name = re.sub(r"[^A-Za-z0-9._-]", "_", question_id)[:80]
    path = trace_dir / f"{safe_name}-{stable_hash(question_id)[:8]}.json"
    trace_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(answer.model_dump_json(indent=1) + "\n", encoding="utf-8")
    return f"{trace_dir.name}/{path.name}"


def _image_text(settings: Settings, unloaded: list[str] | None = None) -> ImageTextEmbedder | None:
    """The image–text model when it can be had (offline the default's cannot: captions rerank);
    one that is configured but did not load is named in ``unloaded`` (the run records it)."""
    try:
        return registry.image_text(settings)
    except BackendUnavailable:
        spec = registry.effective_spec(settings, "image_text")
        if unloaded is not None and spec:
            unloaded.append(f"image-text:{spec} (not loaded)")
        return None


def _cache_key(context: Any, parameters: dict[str, Any]) -> str:
    return str(parameters["cache_key"])


@task(
    name="eval-question",
    task_run_name="question · {item.question_id}",
    cache_key_fn=_cache_key,
    persist_result=True,
)
def answer_question(
    item: BenchmarkItem,
    video_ids: list[str],
    agent: str,
    settings: Settings,
    cache_key: str,
    names: dict[str, str] | None = None,
    ablations: Sequence[str] = (),
    trace_dir: Path | None = None,
) -> Prediction:
    """Answer one benchmark item with ``agent`` (retrieval items: the MAVIS search over ``names``,
    store id -> benchmark name, of the benchmark's videos), parts named in ``ablations`` switched
    off; the whole answer (steps, citations) is written to a file in ``trace_dir``."""
    started = time.perf_counter()
    store = open_store(settings)
    query_id = f"eval-{cache_key[:24]}"
    with query_context(query_id):
        if item.kind == "retrieval":
            ranking, provenance_of_query = _retrieve(store, settings, item, names or {})
            prediction = Prediction(
                question_id=item.question_id,
                kind=item.kind,
                video_ids=list(video_ids),
                answer=", ".join(ranking[:10]),
                ranking=ranking,
                retrieval=provenance_of_query,
            )
        else:
            chat = registry.planner_model(settings) if strategies.get(agent).needs_planner else None
            ctx = tool_context(settings, store, chat=chat, config=settings.agent)
            answer = answer_item(agent, ctx, item, video_ids, ablations)
            trace = [step.model_dump() for step in answer.trace]
            prediction = Prediction(
                question_id=item.question_id,
                kind=item.kind,
                video_ids=list(video_ids),
                answer=answer.answer,
                choice=answer.choice,
                choice_source=answer.choice_source,
                interval=_interval_of(answer) if item.kind == "grounding" else None,
                steps=len(answer.trace),
                iterations=reasoning_iterations(trace),
                phase_passes=phase_passes(trace),
                phase_seconds=phase_seconds(trace),
                model_calls=answer.usage.model_calls,
                model_http_calls=answer.usage.model_http_calls,
                input_tokens=answer.usage.input_tokens,
                output_tokens=answer.usage.output_tokens,
                tool_calls=answer.usage.tool_calls,
                extractive=answer.extractive,
                forced=answer.forced,
                fallback=answer.fallback,
                perceived=answer.perceived,
                skipped=answer.skipped,
                support=[
                    [f"{s.tool} (call {s.call}): {s.found}" for s in c.support] for c in answer.citations
                ],
                evidence=dict(Counter(c.evidence for c in answer.citations)),
                citations=[(c.video_id, c.start, c.end) for c in answer.citations],
            )
            if trace_dir is not None:
                prediction.trace = _write_trace(trace_dir, item.question_id, answer)
    prediction.cost_usd = totals(store, query_id)["cost_usd"]
    prediction.seconds = round(time.perf_counter() - started, 3)
    return prediction


# ============================================================================ the run

#: One question to answer: the item, and the arguments of :func:`answer_question` for it.
QuestionJob = tuple[BenchmarkItem, tuple[Any, ...]]


@dataclass(frozen=True)
class EvalRunner:
    """How a run's steps run: as Prefect tasks of the ``evaluate`` flow (:func:`prefect_runner`) or
    on a thread pool of this process (:func:`direct_runner`). ``hash`` and ``ingest`` start their
    work and hand back what waits for its result (raising what it raised); ``answers`` starts
    every question and yields each item with its prediction, or the error that ended its retries,
    as it finishes."""

    hash: Callable[[Path], Callable[[], str]]
    ingest: Callable[[Path, str, Settings], Callable[[], VideoReport]]
    optimize: Callable[[Settings], object]
    answers: Callable[[list[QuestionJob]], Iterator[tuple[BenchmarkItem, Prediction | BaseException]]]


def prefect_runner(run_dir: Path, retries: int) -> EvalRunner:
    """Each video and question a task of the current flow run (its task runner sets how many at
    once); a question is retried ``retries`` times and its result cached under ``run_dir``."""
    question = answer_question.with_options(
        retries=retries, retry_delay_seconds=1, result_storage=run_dir / "cache"
    )

    def answers(jobs: list[QuestionJob]) -> Iterator[tuple[BenchmarkItem, Prediction | BaseException]]:
        futures = {question.submit(*args): item for item, args in jobs}
        for future in as_completed(list(futures)):
            try:
                yield futures[future], future.result()
            except Exception as exc:  # noqa: BLE001 - a question that failed its retries is reported
                yield futures[future], exc

    return EvalRunner(
        hash=lambda path: hash_task.submit(path).result,
        ingest=lambda path, video_id, settings: ingest_one.submit(path, video_id, settings).result,
        optimize=optimize_task,
        answers=answers,
    )


def direct_runner(pool: concurrent.futures.ThreadPoolExecutor, retries: int) -> EvalRunner:
    """The same steps on ``pool`` (its size is the run's concurrency), without Prefect: a question
    is retried ``retries`` times one second apart, as the task's Prefect retries do."""

    def submit(work: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        return pool.submit(contextvars.copy_context().run, work, *args)

    def answers(jobs: list[QuestionJob]) -> Iterator[tuple[BenchmarkItem, Prediction | BaseException]]:
        futures = {submit(retried, partial(answer_question.fn, *args), retries): item for item, args in jobs}
        for future in concurrent.futures.as_completed(futures):
            error = future.exception()
            yield futures[future], future.result() if error is None else error

    return EvalRunner(
        hash=lambda path: submit(content_hash, path).result,
        ingest=lambda path, video_id, settings: submit(ingest_one_direct, path, video_id, settings).result,
        optimize=optimize_store,
        answers=answers,
    )


@flow(name="evaluate", flow_run_name="evaluate {run_dir.name}", validate_parameters=False, log_prints=False)
def evaluate(
    run_dir: Path,
    settings: Settings,
    limit: int | None = None,
    retries: int = QUESTION_RETRIES,
) -> EvalOutcome:
    """The run as a Prefect flow: :func:`evaluate_run` with each video and question a task."""
    return evaluate_run(Path(run_dir), settings, limit, prefect_runner(Path(run_dir), retries))


def evaluate_run(run_dir: Path, settings: Settings, limit: int | None, run: EvalRunner) -> EvalOutcome:
    """Evaluate the run in ``run_dir`` (made by :func:`prepare_run`): ingest, answer what is left,
    report, each step the way ``run`` runs it. ``limit`` caps the questions (the first ``limit``
    with videos) this run covers."""
    run_dir = Path(run_dir)
    spec = read_spec(run_dir)
    settings = run_settings(settings, spec)
    _check_settings(spec, settings)
    session = {"started_at": _now(), **provenance()}
    spec.sessions.append(session)
    save_spec(run_dir, spec)
    items = load_benchmark(spec.benchmark, spec.annotations, **split_options(spec.options)[0])
    lookup = locate_videos(items, spec.root, BENCHMARKS[spec.benchmark].aliases)
    ready = lookup.items_ready(items)
    chosen = ready[:limit] if limit is not None else ready
    # Failed questions are asked again: only answers are done.
    done = {q: p for q, p in read_predictions(run_dir).items() if not p.failed}
    # CrossVid PSS: each segment becomes a clip of its own, asked about as one of the item's videos.
    clips = cut_segments([i for i in chosen if i.question_id not in done], lookup.found, run_dir / SEGMENTS)
    lookup.found.update(clips.found)
    todo = clips.items

    store = open_store(settings)
    retrieval = any(i.kind == "retrieval" for i in todo)
    # Retrieval ranks the whole gallery, so every found video is needed; otherwise only todo's.
    needed = sorted(lookup.found) if retrieval else sorted({name for i in todo for name in i.video_ids})
    ids, hash_errors = _store_ids(run, run_dir, lookup.found, needed)
    ingested, ingest_failures = _ingest_missing(run, store, settings, lookup.found, ids)
    ingest_failures.update(hash_errors)

    failures: dict[str, str] = {}
    by_id = {i.question_id: i for i in chosen}

    def fail(item: BenchmarkItem, stage: str, error: str) -> None:
        """Record that ``item`` got no answer: in the outcome, and as a failed line of the run."""
        failures[item.question_id] = error
        append_prediction(run_dir, failed_prediction(item, stage, error))

    for question_id, error in clips.failures.items():
        fail(by_id[question_id], "segment", error)
    names = {video_id: name for name, video_id in ids.items() if name not in ingest_failures}
    jobs: list[QuestionJob] = []
    # Optional stages that failed on a video (issue 37): its questions are answered without them,
    # and each prediction says which were missing.
    degraded = {video_id: missing for video_id in names if (missing := optional_failures(store, video_id))}
    for item in with_subtitles(todo, lookup):
        broken = [name for name in item.video_ids if name in ingest_failures]
        if broken:
            fail(item, "ingest", f"video {broken[0]} could not be ingested: {ingest_failures[broken[0]]}")
            continue
        video_ids = [ids[name] for name in item.video_ids]
        versions = [store.video_version(v) for v in video_ids]
        key = stable_hash(spec.name, spec.settings_fingerprint, item.question_id, versions)
        gallery = names if item.kind == "retrieval" else None
        traces = run_dir / TRACES_FOLDER
        jobs.append((item, (item, video_ids, spec.agent, settings, key, gallery, spec.ablations, traces)))

    answered: list[str] = []
    for n, (item, prediction) in enumerate(run.answers(jobs), 1):
        if isinstance(prediction, BaseException):
            exc = prediction
            fail(item, "answer", f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}".rstrip(": "))
        else:
            prediction.optional_failed = [
                f"{name}: {missing}" for name in item.video_ids for missing in degraded.get(ids[name], [])
            ]
            append_prediction(run_dir, prediction)
            answered.append(item.question_id)
        ok = item.question_id not in failures
        _progress(EvalProgress(phase="answer", done=n, total=len(jobs), name=item.question_id, ok=ok))

    predictions = read_predictions(run_dir)
    judge, judged_by = _judge(settings, spec, ready)
    summary = summarise(spec, items, ready, predictions, failures, lookup.missing, judge)
    summary.judge_model, summary.judge_note = judged_by.spec, judged_by.note
    ordered = [predictions[i.question_id] for i in ready if i.question_id in predictions]
    files = write_report(run_dir, summary, ordered)
    _publish(summary)
    session["finished_at"] = _now()
    save_spec(run_dir, spec)
    return EvalOutcome(
        run_dir=str(run_dir),
        summary=summary,
        answered_now=answered,
        reused=sum(i.question_id in done for i in chosen),
        failures=failures,
        ingested=ingested,
        ingest_failures=ingest_failures,
        missing_videos=lookup.missing,
        files=[str(f) for f in files],
        nothing_scored=_why_nothing_scored(summary, items, lookup, ingest_failures, failures),
    )


def _check_settings(spec: RunSpec, settings: Settings) -> None:
    """Refuse to continue ``spec``'s run with models, settings or agent code other than its own."""
    recorded = {k: spec.identity.get(k) for k in ("models", "settings", "code")}
    # The code too (issue 37): a resumed run never mixes answers of two prompt versions.
    now = {
        "models": model_identity(settings),
        "settings": settings_identity(settings),
        "code": code_identity(),
    }
    differs = differences(recorded, now)
    if differs:
        raise RunError(
            f"run {spec.name} was made with another {differs}; choose another --run name to start a new run"
        )


def _why_nothing_scored(
    summary: RunSummary,
    items: Sequence[BenchmarkItem],
    lookup: VideoLookup,
    ingest_failures: dict[str, str],
    failures: dict[str, str],
) -> str | None:
    """Why the run has no score at all (None when it has one): the first cause that applies."""
    if summary.scores or summary.rule_scores:
        return None
    if not items:
        return "the annotation file holds no question for these options"
    if summary.unusable and len(summary.unusable) == len(items):
        return f"none of the {len(items)} questions could be asked ({next(iter(summary.unusable.values()))})"
    if not lookup.found:
        return f"none of the {len(lookup.missing)} videos the questions need was found under the root"
    if summary.ready and len(ingest_failures) >= len(lookup.found):
        return f"no video could be ingested ({next(iter(ingest_failures.values()))})"
    if failures and summary.answered == 0:
        return f"every question attempted failed ({next(iter(failures.values()))})"
    if summary.unscored and summary.answered:
        return "the answered questions have no gold answer to score against"
    if summary.judge_unscored and summary.answered == len(summary.judge_unscored):
        return "free-form answers need an LLM judge: set [models] judge to score them"
    if summary.open_ended and summary.answered == summary.open_ended:
        return "open-ended answers have no automatic score"
    return "no question was answered"


def _publish(summary: RunSummary) -> None:
    """The report (Markdown) and the per-category scores (table) as Prefect artifacts."""
    key = f"eval-{summary.benchmark}-{summary.agent}".replace("_", "-").lower()
    publish_markdown(key, report_markdown(summary), f"evaluation {summary.run}")
    if summary.by_category:
        rows = [{"category": k, **g.model_dump()} for k, g in summary.by_category.items()]
        publish_table(f"{key}-categories", rows, f"accuracy per category, run {summary.run}")


#: Failure causes named in the one line of :func:`too_many_failed` (the rest are counted).
CAUSES_SHOWN = 3


def too_many_failed(summary: RunSummary, max_failed: float = MAX_FAILED) -> str | None:
    """One line when more than ``max_failed`` (a share, 0-1) of the run's attempted questions
    failed: how many, of how many, and why (grouped by stage and error, most first); else None."""
    failed = len(summary.failed)
    attempted = failed + summary.answered
    if not failed or failed <= max_failed * attempted:
        return None
    causes = list(summary.failure_groups.items())
    why = "; ".join(f"{n} × {reason}" for reason, n in causes[:CAUSES_SHOWN])
    if len(causes) > CAUSES_SHOWN:
        why += f"; and {len(causes) - CAUSES_SHOWN} more causes (report.md)"
    return (
        f"{failed} of {attempted} questions failed ({100 * failed / attempted:.0f} %, more than "
        f"--max-failed {100 * max_failed:g} %): {why}"
    )


def run_evaluate(
    settings: Settings,
    run_dir: Path,
    *,
    limit: int | None = None,
    concurrency: int = 2,
    retries: int = QUESTION_RETRIES,
    max_failed: float = MAX_FAILED,
    on_progress: Callable[[EvalProgress], None] | None = None,
) -> EvalOutcome:
    """Evaluate the run in ``run_dir`` with at most ``concurrency`` questions (and videos) at once:
    as the ``evaluate`` flow when a Prefect server answers (or as a subflow), else in-process;
    ``on_progress`` sees each video ingested and each question answered. The outcome's
    ``too_many_failed`` says when more than ``max_failed`` of the attempted questions failed."""
    disable_telemetry()
    if limit is not None and limit < 1:
        raise ValueError("--limit must be at least 1")
    if concurrency < 1:
        raise ValueError("--concurrency must be at least 1")
    if not 0 <= max_failed <= 1:
        raise ValueError(f"--max-failed is a share of the questions, from 0 to 1 (got {max_failed:g})")
    from vidscope.agents.tools import in_flow_run
    from vidscope.flows.prefect_api import reachable_api

    token = _on_progress.set(on_progress)
    subflow = in_flow_run()
    api = None if subflow else reachable_api(settings)
    try:
        if api is None and not subflow:  # nobody records flow runs: no temporary server for one
            pool = concurrent.futures.ThreadPoolExecutor(concurrency, thread_name_prefix="vidscope-eval")
            try:
                outcome = evaluate_run(run_dir, settings, limit, direct_runner(pool, retries))
            finally:  # interrupted: start no more questions
                pool.shutdown(wait=True, cancel_futures=True)
        else:
            runner: Any = ThreadPoolTaskRunner(max_workers=concurrency)
            with patient_prefect(api):
                outcome = evaluate.with_options(task_runner=runner)(run_dir, settings, limit, retries)
    finally:
        _on_progress.reset(token)
    outcome.too_many_failed = too_many_failed(outcome.summary, max_failed)
    return outcome

"""An evaluation run on disk: its spec, its predictions (JSON Lines) and the videos it used.

A run directory (``<data dir>/eval/<run name>/``) holds:

* ``run.json``: the :class:`RunSpec`, what was evaluated and how: its identity (benchmark,
  annotation file, video root, agent, options, protocol, models with their options, settings; see
  :mod:`vidscope.evaluation.identity`), the vidscope version and commit, the machine, and when
  each session started and ended;
* ``predictions.jsonl``: one :class:`Prediction` per finished question, appended as each finishes:
  answered, or failed with the stage and the error (its video could not be ingested, the agent
  raised after its retries). It is the record a resumed run reads: an answered question is never
  asked again, a failed one is (its new line replaces the old). Lines written before statuses were
  recorded read as answered (failures were not written then);
* ``samples.jsonl``: one line per question of the benchmark with everything a reviewer needs
  (written with the report; :mod:`vidscope.evaluation.samples`);
* ``videos.json``: the benchmark's video names mapped to the files and store ids they resolved to;
* ``traces/``: one JSON file per answered question (the agent's whole answer: steps, citations);
* the report (``report.md``, ``summary.json``, PNG plots) written by :mod:`vidscope.evaluation.report`.

This module only reads and writes those files; the ``evaluate`` flow decides what to run.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from vidscope.evaluation.items import BenchmarkItem, ItemKind

SPEC_FILE = "run.json"
PREDICTIONS_FILE = "predictions.jsonl"
VIDEOS_FILE = "videos.json"

_append_lock = threading.Lock()

#: How a question ended when it was asked: answered (an answer came back, readable or not), or
#: failed (no answer: its video could not be ingested, a segment could not be cut, the agent
#: raised after its retries).
PredictionStatus = Literal["answered", "failed"]


class RunError(ValueError):
    """A run directory that cannot be used (missing, damaged, or made for another evaluation)."""


class RunSpec(BaseModel):
    """What a run evaluates; a resumed run must match it."""

    name: str
    benchmark: str
    annotations: str
    root: str
    agent: str
    options: dict[str, Any] = Field(default_factory=dict, description="Loader options (split, ...).")
    settings_fingerprint: str = Field(description="The hash of ``identity``.")
    models: dict[str, str | None] = Field(default_factory=dict, description="The spec serving each role.")
    ablations: list[str] = Field(
        default_factory=list, description="Parts of the agent switched off (``avi:no-review``, ...)."
    )
    protocol: dict[str, Any] = Field(
        default_factory=dict, description="Transcripts, subtitles, answer format, frame budget, sampling."
    )
    identity: dict[str, Any] = Field(
        default_factory=dict, description="Everything the answers depend on; a resumed run must match it."
    )
    created_at: str
    provenance: dict[str, Any] = Field(
        default_factory=dict, description="vidscope version and commit, machine (platform, CPUs, Python)."
    )
    retrieval: dict[str, Any] = Field(
        default_factory=dict,
        description="Retrieval runs: the thresholds and their source (calibrated / explicit / "
        "defaulted, with its warning) and the fine-stage models configured; what each query really "
        "used is in its prediction and the report.",
    )
    sessions: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Each time the run was (re)started: started_at, finished_at, version and commit.",
    )


class Prediction(BaseModel):
    """The outcome of one question: what the agent said, how it scored, what it cost."""

    question_id: str
    kind: ItemKind
    video_ids: list[str]
    answer: str = Field(description="The agent's answer, as it gave it.")
    choice: str | None = Field(None, description="The option letter the agent chose, if it named one.")
    choice_source: Literal["given", "read"] | None = Field(
        None,
        description="given: the agent gave the choice (its answer action's choice argument); read: "
        "our lenient rules read it from the answer's words. None with a choice: a run before this "
        "was recorded (taken as given).",
    )
    interval: tuple[float, float] | None = Field(None, description="Grounding: the predicted [start, end].")
    ranking: list[str] = Field(
        default_factory=list, description="Retrieval: benchmark video names, best first."
    )
    steps: int = Field(0, description="Trace steps (tool calls one by one, nudges and refusals too).")
    iterations: int = Field(
        0,
        description="Reasoning iterations as the papers count them: model replies that called tools "
        "or answered, one per reply (DVD Tab. 7; evaluation.metrics.reasoning_iterations).",
    )
    phase_passes: dict[str, int] = Field(
        default_factory=dict, description="A phased agent's (AVI) entries into each phase."
    )
    phase_seconds: dict[str, float] = Field(
        default_factory=dict, description="A phased agent's (AVI) seconds in each phase."
    )
    model_calls: int = 0
    model_http_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tool_calls: int = 0
    cost_usd: float | None = None
    seconds: float = 0.0
    extractive: bool = False
    forced: bool = False
    fallback: bool = Field(
        False, description="The agent reached no answer in words: the extractive answer stood in."
    )
    perceived: bool | None = Field(None, description="AVI: the answer's citations were perceived.")
    skipped: list[str] = Field(
        default_factory=list, description="Steps of the agent's paper protocol the run skipped (AVI)."
    )
    evidence: dict[str, int] = Field(
        default_factory=dict,
        description="The answer's citations per evidence level (perceived, retrieved, …).",
    )
    citations: list[tuple[str, float, float]] = Field(
        default_factory=list, description="The answer's cited ranges: (store video id, start, end)."
    )
    support: list[list[str]] = Field(
        default_factory=list,
        description="Per citation, the tool calls that found something there and what (empty: none).",
    )
    trace: str | None = Field(None, description="The answer's trace file, relative to the run directory.")
    status: PredictionStatus = Field(
        "answered", description="answered, or failed (no answer; asked again when the run resumes)."
    )
    stage: str | None = Field(
        None, description="Where a failed question failed: ingest, segment (cutting its clips), answer."
    )
    error: str | None = Field(None, description="Why it failed, in one line.")
    retrieval: dict[str, Any] | None = Field(
        None,
        description="Retrieval: how the query ranked (rerank used and wanted, tau_soft, tau_hard and "
        "their source, pool, v_contro = |V_contro|, gallery).",
    )
    optional_failed: list[str] = Field(
        default_factory=list,
        description="Optional ingestion stages that failed on its videos, as 'video: stage: reason' "
        "(the question was answered without their rows).",
    )

    @property
    def failed(self) -> bool:
        """The question has no answer: it failed before or while it was asked."""
        return self.status == "failed"

    @property
    def response(self) -> str:
        """What answer extraction reads: the explicit choice when the agent gave one, else its text."""
        return self.choice or self.answer

    def reply(self, strict: bool) -> str:
        """The reply a score reads: :attr:`response`; strictly (CrossVid's string comparison), the
        choice only when the agent gave it (its answer action's choice), else its words as they
        are: a choice our lenient rules read from the words is not the reply."""
        if strict and self.choice_source == "read":
            return self.answer
        return self.response


def read_spec(run_dir: Path) -> RunSpec:
    """The spec of the run in ``run_dir``."""
    path = Path(run_dir) / SPEC_FILE
    if not path.is_file():
        raise RunError(f"{run_dir} is not an evaluation run (no {SPEC_FILE})")
    try:
        return RunSpec.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise RunError(f"{path} is damaged: {str(exc).splitlines()[0]}") from exc


def write_spec(run_dir: Path, spec: RunSpec) -> RunSpec:
    """Create ``run_dir`` with ``spec``, or check that the run already there is the same evaluation
    (the same identity); returns the spec on disk. A mismatch is one line saying what differs."""
    from vidscope.evaluation.identity import differences

    run_dir = Path(run_dir)
    if (run_dir / SPEC_FILE).is_file():
        existing = read_spec(run_dir)
        if not existing.identity:
            raise RunError(
                f"run {existing.name} was made by an older vidscope that did not record everything its "
                "answers depend on; choose another --run name to start a new run"
            )
        differs = differences(existing.identity, spec.identity)
        if differs:
            raise RunError(
                f"run {existing.name} was made with another {differs}; "
                "choose another --run name to start a new run"
            )
        return existing
    run_dir.mkdir(parents=True, exist_ok=True)
    save_spec(run_dir, spec)
    return spec


def save_spec(run_dir: Path, spec: RunSpec) -> None:
    """Write ``run.json`` (whole, then renamed into place: an interruption leaves the old one)."""
    path = Path(run_dir) / SPEC_FILE
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(spec.model_dump_json(indent=2) + "\n", encoding="utf-8")
    temporary.replace(path)


def failed_prediction(item: BenchmarkItem, stage: str, error: str) -> Prediction:
    """The line recording that ``item`` got no answer: where (``stage``) and why (``error``)."""
    return Prediction(
        question_id=item.question_id,
        kind=item.kind,
        video_ids=[],
        answer="",
        status="failed",
        stage=stage,
        error=(error.splitlines() or ["unknown error"])[0][:500],
    )


def read_predictions(run_dir: Path) -> dict[str, Prediction]:
    """Finished questions by id, answered or failed (the last line of a question wins). A torn last
    line (the process died mid-write) is ignored."""
    path = Path(run_dir) / PREDICTIONS_FILE
    found: dict[str, Prediction] = {}
    if not path.is_file():
        return found
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            prediction = Prediction.model_validate_json(line)
        except ValueError as exc:
            if number == len(lines):
                break  # cut off by an interruption: that question is simply asked again
            raise RunError(f"{path}:{number} is not a prediction: {str(exc).splitlines()[0]}") from exc
        found[prediction.question_id] = prediction
    return found


def append_prediction(run_dir: Path, prediction: Prediction) -> None:
    """Add one finished question to ``predictions.jsonl`` (one whole line per write, thread-safe)."""
    path = Path(run_dir) / PREDICTIONS_FILE
    line = prediction.model_dump_json() + "\n"
    with _append_lock:
        # A torn line left by an earlier interruption must not swallow this one.
        torn = path.is_file() and path.stat().st_size and not path.read_bytes().endswith(b"\n")
        with path.open("a", encoding="utf-8") as handle:
            handle.write(("\n" if torn else "") + line)
            handle.flush()


def read_videos(run_dir: Path) -> dict[str, dict[str, Any]]:
    """``{benchmark video name: {"path", "size", "mtime", "video_id"}}`` recorded by earlier runs."""
    path = Path(run_dir) / VIDEOS_FILE
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return dict(data) if isinstance(data, dict) else {}


def write_videos(run_dir: Path, videos: dict[str, dict[str, Any]]) -> None:
    """Record where each benchmark video was found and which store id it has."""
    text = json.dumps(videos, indent=2, sort_keys=True) + "\n"
    (Path(run_dir) / VIDEOS_FILE).write_text(text, encoding="utf-8")

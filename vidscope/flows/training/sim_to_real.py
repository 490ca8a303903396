"""Sim-to-real: do the simulated tools lead an agent where the real tools do, on the same video?

Two comparisons. :func:`compare_master` measures the *agent's* decisions: the same questions run by
AgentCVR's master (``run_cvr``, the loop ``compare --agent cvr`` runs and ``train grpo`` trains)
with the same policy on the ingested video and on the script imported from it; per question the
overlap of the actions it took (which sub-agent, which video, which clips), the IoU of the time
its queries covered, and whether the two answers agree (:func:`write_master_report`: Markdown and
a plot). :func:`compare` measures one tool alone:

For each query about an ingested video, ``clip_search`` is run in both environments (the real one
over the store and embedder, the simulated one over the script imported from that store) and the
answers are compared on two measures: *decision overlap* — the Jaccard overlap of the clips each
returns (would the agent look at the same moments?) and whether the best clip agrees — and
*interval IoU* — the overlap of the time each answer covers. The report is Markdown with a plot.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from vidscope.agents import strategies
from vidscope.agents.dvd.tools import dvd_registry
from vidscope.agents.evidence import ClipSearchResult
from vidscope.agents.runtime import Answer
from vidscope.agents.simulator.script import Script
from vidscope.agents.simulator.simulator import ScriptSimulator, SimContext
from vidscope.agents.simulator.tools import sim_dvd_registry
from vidscope.agents.strategies import StrategyRequest
from vidscope.agents.tools import ToolContext, execute_tool
from vidscope.core.settings import Settings
from vidscope.evaluation.metrics import interval_of, within_tolerance
from vidscope.flows.training.rollout import WITHIN_SECONDS
from vidscope.models.protocols.chat import ChatModel
from vidscope.storage.store import Store


class QueryComparison(BaseModel):
    """One query answered by the real and the simulated clip_search."""

    video_id: str
    query: str
    real_clips: list[int]
    sim_clips: list[int]
    decision_overlap: float
    best_agrees: bool
    interval_iou: float


class SimToRealReport(BaseModel):
    """Every comparison and their means."""

    comparisons: list[QueryComparison]

    @property
    def mean_overlap(self) -> float:
        """Mean decision overlap over the queries."""
        return sum(c.decision_overlap for c in self.comparisons) / max(1, len(self.comparisons))

    @property
    def mean_iou(self) -> float:
        """Mean interval IoU over the queries."""
        return sum(c.interval_iou for c in self.comparisons) / max(1, len(self.comparisons))


def covered(intervals: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of ``intervals`` as sorted disjoint intervals."""
    merged: list[tuple[float, float]] = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def interval_iou(first: Sequence[tuple[float, float]], second: Sequence[tuple[float, float]]) -> float:
    """Intersection over union of the time two sets of intervals cover (1.0 when both are empty)."""
    a, b = covered(first), covered(second)
    inter = sum(max(0.0, min(x1, y1) - max(x0, y0)) for x0, x1 in a for y0, y1 in b)
    union = sum(x1 - x0 for x0, x1 in a) + sum(y1 - y0 for y0, y1 in b) - inter
    return 1.0 if union <= 0 else inter / union


def _search(ctx: ToolContext, video_id: str, query: str, top_k: int) -> ClipSearchResult:
    outcome = execute_tool(ctx, "clip_search", {"video_id": video_id, "query": query, "top_k": top_k})
    if not isinstance(outcome.result, ClipSearchResult):
        raise RuntimeError(f"clip_search failed on {video_id!r} for {query!r}: {outcome.error}")
    return outcome.result


def compare(
    settings: Settings, store: Store, script: Script, queries: Sequence[tuple[str, str]], *, top_k: int = 3
) -> SimToRealReport:
    """Real vs simulated ``clip_search`` for each (video_id, query); ``script`` imported from ``store``."""
    config = settings.agent.model_copy(update={"tool_cache": False})
    real = ToolContext(settings, store, config=config, registry=dvd_registry())
    simulator = ScriptSimulator(script, clip_seconds=settings.ingest.clip_seconds)
    sim = SimContext(settings, simulator, config=config, registry=sim_dvd_registry())
    comparisons = []
    for video_id, query in queries:
        r, s = _search(real, video_id, query, top_k), _search(sim, video_id, query, top_k)
        r_set, s_set = {c.clip_index for c in r.clips}, {c.clip_index for c in s.clips}
        best_r, best_s = r.by_relevance(), s.by_relevance()
        comparisons.append(
            QueryComparison(
                video_id=video_id,
                query=query,
                real_clips=sorted(r_set),
                sim_clips=sorted(s_set),
                decision_overlap=len(r_set & s_set) / len(r_set | s_set) if r_set | s_set else 1.0,
                best_agrees=bool(best_r and best_s and best_r[0].clip_index == best_s[0].clip_index),
                interval_iou=interval_iou(
                    [(c.start, c.end) for c in r.clips], [(c.start, c.end) for c in s.clips]
                ),
            )
        )
    return SimToRealReport(comparisons=comparisons)


def write_report(report: SimToRealReport, directory: Path | str) -> Path:
    """``sim_to_real.md`` and its plot ``sim_to_real.png`` in ``directory``; the Markdown's path."""

    directory = Path(directory)
    items = report.comparisons
    _overlap_plot(
        directory / "sim_to_real.png",
        [c.query for c in items],
        [c.decision_overlap for c in items],
        [c.interval_iou for c in items],
        "clip_search: simulated vs real",
    )
    best = sum(c.best_agrees for c in items)
    lines = [
        "# Sim-to-real: clip_search on the same video",
        "",
        f"{len(items)} queries · mean decision overlap {report.mean_overlap:.2f} · "
        f"mean interval IoU {report.mean_iou:.2f} · best clip agrees {best}/{len(items)}",
        "",
        "![decision overlap and interval IoU per query](sim_to_real.png)",
        "",
        "| video | query | real clips | simulated clips | overlap | IoU | best agrees |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in items:
        query = c.query.replace("|", "\\|")
        lines.append(
            f"| {c.video_id[:12]} | {query} | {c.real_clips} | {c.sim_clips} | "
            f"{c.decision_overlap:.2f} | {c.interval_iou:.2f} | {'yes' if c.best_agrees else 'no'} |"
        )
    path = directory / "sim_to_real.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# ============================================================================ the master's decisions


class AskedQuestion(BaseModel):
    """A question put to the master in both environments."""

    text: str
    video_ids: list[str]
    options: list[str] | None = None


class Decision(BaseModel):
    """One sub-agent query the master made."""

    tool: str
    video_id: str
    t0: float
    t1: float


class MasterComparison(BaseModel):
    """One question answered by the master in the real and the simulated environment."""

    question: str
    real_decisions: list[Decision]
    sim_decisions: list[Decision]
    decision_overlap: float = Field(description="Jaccard overlap of the actions (tool, video, clips).")
    interval_iou: float = Field(description="IoU of the time the queries covered, per video.")
    real_answer: str
    sim_answer: str
    real_choice: str | None
    sim_choice: str | None
    answers_agree: bool


class MasterReport(BaseModel):
    """Every question's comparison and their means."""

    comparisons: list[MasterComparison]

    def mean(self, field: str) -> float:
        """Mean of a numeric or boolean field over the questions."""
        values = [float(getattr(c, field)) for c in self.comparisons]
        return sum(values) / max(1, len(values))


def decisions(answer: Answer) -> list[Decision]:
    """The sub-agent queries of a master's run, from its trace (a refused call included)."""
    made = []
    for step in answer.trace:
        args = step.arguments or {}
        if step.kind != "tool" or not step.tool:
            continue
        # A visual_query names several ranges ({"targets": [{video_id, t0, t1, frames}, ...]}):
        # each is a decision, as an audio_query's one range is.
        targets = args.get("targets")
        ranges = targets if isinstance(targets, list) else [args]
        for target in ranges:
            if not isinstance(target, dict) or not {"video_id", "t0", "t1"} <= set(target):
                continue
            try:
                made.append(
                    Decision(
                        tool=step.tool,
                        video_id=str(target["video_id"]),
                        t0=float(target["t0"]),
                        t1=float(target["t1"]),
                    )
                )
            except (TypeError, ValueError):
                continue
    return made


def decision_overlap(first: Sequence[Decision], second: Sequence[Decision], clip_seconds: float) -> float:
    """Jaccard overlap of two runs' actions, each as (tool, video, clips spanned); 1.0 when both
    made none."""

    def keys(made: Sequence[Decision]) -> set[tuple[str, str, int, int]]:
        return {
            (d.tool, d.video_id, math.floor(d.t0 / clip_seconds), math.ceil(d.t1 / clip_seconds))
            for d in made
        }

    a, b = keys(first), keys(second)
    return len(a & b) / len(a | b) if a | b else 1.0


def covered_iou(first: Sequence[Decision], second: Sequence[Decision]) -> float:
    """IoU of the time two runs' queries covered, video by video (weighted by covered time)."""
    videos = {d.video_id for d in [*first, *second]}
    inter = union = 0.0
    for video in videos:
        a = covered([(d.t0, d.t1) for d in first if d.video_id == video])
        b = covered([(d.t0, d.t1) for d in second if d.video_id == video])
        i = sum(max(0.0, min(x1, y1) - max(x0, y0)) for x0, x1 in a for y0, y1 in b)
        inter += i
        union += sum(x1 - x0 for x0, x1 in a) + sum(y1 - y0 for y0, y1 in b) - i
    return 1.0 if union <= 0 else inter / union


def answers_agree(real: Answer, sim: Answer, tolerance: float = WITHIN_SECONDS) -> bool:
    """Whether the master answered the same in both environments: the same choice; two interval
    answers (FSA) within ``tolerance`` seconds of each other at both ends (the reward's optional
    ``within`` zone; two runs over different inputs rarely agree to the second); else the same
    words (case and spacing ignored)."""
    if real.choice is not None or sim.choice is not None:
        return real.choice == sim.choice
    intervals = interval_of(real.answer), interval_of(sim.answer)
    if intervals[0] is not None and intervals[1] is not None:
        return within_tolerance(intervals[0], intervals[1], tolerance)
    return " ".join(real.answer.lower().split()) == " ".join(sim.answer.lower().split())


def compare_master(
    settings: Settings,
    store: Store,
    script: Script,
    questions: Sequence[AskedQuestion],
    policy: Callable[[], ChatModel],
) -> MasterReport:
    """Each question run by the master on the real store and on ``script`` (imported from it),
    each run with a fresh ``policy()`` (a seeded policy starts the same in both)."""
    config = settings.agent.model_copy(update={"tool_cache": False})
    clip_seconds = settings.ingest.clip_seconds
    comparisons = []
    for q in questions:
        scope: strategies.Scope = "video" if len(q.video_ids) == 1 else "videos"
        request = StrategyRequest(q.text, q.video_ids, scope, q.options)
        real_ctx = ToolContext(settings, store, chat=policy(), config=config)
        real = strategies.answer("cvr", real_ctx, request)
        sim_ctx = SimContext(
            settings, ScriptSimulator(script, clip_seconds=clip_seconds), chat=policy(), config=config
        )
        sim = strategies.answer("cvr", sim_ctx, request)
        r, s = decisions(real), decisions(sim)
        comparisons.append(
            MasterComparison(
                question=q.text,
                real_decisions=r,
                sim_decisions=s,
                decision_overlap=decision_overlap(r, s, clip_seconds),
                interval_iou=covered_iou(r, s),
                real_answer=real.answer,
                sim_answer=sim.answer,
                real_choice=real.choice,
                sim_choice=sim.choice,
                answers_agree=answers_agree(real, sim),
            )
        )
    return MasterReport(comparisons=comparisons)


def write_master_report(report: MasterReport, directory: Path | str) -> Path:
    """``sim_to_real_master.md`` and its plot ``sim_to_real_master.png`` in ``directory``."""

    directory = Path(directory)
    items = report.comparisons
    _overlap_plot(
        directory / "sim_to_real_master.png",
        [c.question for c in items],
        [c.decision_overlap for c in items],
        [c.interval_iou for c in items],
        "AgentCVR master: simulated vs real decisions",
    )

    def cell(text: str) -> str:
        return " ".join(text.split()).replace("|", "\\|")[:80]

    def actions(made: list[Decision]) -> str:
        return "; ".join(f"{d.tool} {d.t0:g}-{d.t1:g}s" for d in made) or "none"

    lines = [
        "# Sim-to-real: the AgentCVR master's decisions on the same videos",
        "",
        f"{len(items)} questions · mean decision overlap {report.mean('decision_overlap'):.2f} · "
        f"mean interval IoU {report.mean('interval_iou'):.2f} · "
        f"answers agree {sum(c.answers_agree for c in items)}/{len(items)}",
        "",
        "![decision overlap and interval IoU per question](sim_to_real_master.png)",
        "",
        "| question | real actions | simulated actions | overlap | IoU | real answer | simulated answer "
        "| agree |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in items:
        lines.append(
            f"| {cell(c.question)} | {cell(actions(c.real_decisions))} | {cell(actions(c.sim_decisions))} | "
            f"{c.decision_overlap:.2f} | {c.interval_iou:.2f} | {cell(c.real_choice or c.real_answer)} | "
            f"{cell(c.sim_choice or c.sim_answer)} | {'yes' if c.answers_agree else 'no'} |"
        )
    path = directory / "sim_to_real_master.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _overlap_plot(
    path: Path, labels: list[str], overlaps: list[float], ious: list[float], title: str
) -> None:
    """Decision overlap and interval IoU per item, side by side, as a PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers and in tests
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(labels)), 3.2))
    xs = range(len(labels))
    ax.bar([x - 0.2 for x in xs], overlaps, width=0.4, label="decision overlap")
    ax.bar([x + 0.2 for x in xs], ious, width=0.4, label="interval IoU")
    ax.set_xticks(list(xs), [label[:18] for label in labels], rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)

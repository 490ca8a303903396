"""The answerer used when no chat model is configured: it returns evidence, not a generated answer.

For one video it runs the same clip search the agent uses (as a cached tool call), reports the best-matching
moments with their speech, on-screen text and captions, and says plainly that the answer is
extractive. For multiple choice it ranks the options by how well each agrees with the evidence:
embedding similarity with the top clips' texts plus keyword overlap, weighted by each clip's
relevance to the question. For several videos it puts the best clip of each side by side. For
the whole library it runs the library agent's ``library_search`` and cites the best moments of
any video. :func:`run` is the ``extractive`` strategy, which also stands in for any strategy when
no planner is configured.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from vidscope.agents import prompts
from vidscope.agents.citations import Evidence
from vidscope.agents.evidence import ClipHit, ClipSearchResult, load_clips, search_clips
from vidscope.agents.runtime import Answer, StepCallback, TraceStep, UsageTotals
from vidscope.agents.strategies import StrategyRequest
from vidscope.agents.tools import ToolContext, ToolError, execute_tool
from vidscope.core.lexicon import keywords
from vidscope.core.timecodes import fmt_time
from vidscope.core.wording import plural

#: Clips reported as evidence (and used to rank options).
EVIDENCE_CLIPS = 3
#: Secondary evidence must score at least this fraction of the best clip's fused score.
RELATIVE_EVIDENCE = 0.6
#: Clips whose texts are compared with each option.
OPTION_CLIPS = 5

PREFIX = (
    "Extractive answer (no chat model is configured, so this is the best matching evidence, "
    "not a generated answer)."
)
#: What an agent's answer says when it reached none and the extractive answer stands in.
FALLBACK_PREFIX = (
    "The best matching evidence for the question stands in (extractive, not a generated answer)."
)


def _quote(text: str | None, limit: int = 240) -> str:
    text = " ".join((text or "").split())
    return f'"{text[:limit]}{"…" if len(text) > limit else ""}"'


def describe(hit: ClipHit) -> str:
    """One evidence line: the clip's time range and what it holds."""
    parts = []
    if hit.speech:
        parts.append(f"speech {_quote(hit.speech)}")
    if hit.on_screen_text:
        parts.append(f"on screen {_quote(hit.on_screen_text)}")
    if hit.caption and not parts:
        parts.append(f"caption {_quote(hit.caption)}")
    return f"{fmt_time(hit.start)}–{fmt_time(hit.end)} ({hit.start:.1f}–{hit.end:.1f}s): " + "; ".join(parts)


def at_clock_time(ctx: ToolContext, question: str, video_id: str) -> tuple[str, ClipSearchResult] | None:
    """When ``question`` names a clock time and the video's burned-in clock shows it: a sentence
    saying where, and the clips there (found by time, not by words); else ``None``."""
    from vidscope.tasks.clock import load_runs, named_clock_time, video_spans

    named = named_clock_time(question)
    if named is None:
        return None
    spans = video_spans(load_runs(ctx.store, [video_id]), *named)
    if not spans:
        return None
    _, t0, t1 = spans[0]
    clips = [c for c in load_clips(ctx, video_id) if c["end"] > t0 and c["start"] <= t1]
    if not clips:
        return None
    label = named[0].isoformat(timespec="seconds" if named[0].second else "minutes")
    hits = [
        ClipHit(
            start=float(c["start"]),
            end=float(c["end"]),
            clip_index=int(c["clip_index"]),
            score=0.0,
            caption=c["caption"],
            speech=c["transcript_text"] or None,
            on_screen_text=c["ocr_text"] or None,
        )
        for c in clips
    ]
    said = f"The on-screen clock shows {label} at {fmt_time(t0)} of the video ({t0:.1f} s)."
    return said, ClipSearchResult(
        video_id=video_id, query=f"clock {label}", clips=hits, searched_clips=len(clips)
    )


def rank_options(
    ctx: ToolContext, options: Sequence[str], evidence: Sequence[ClipHit]
) -> tuple[list[float], list[int]]:
    """A score per option, and per option the index into ``evidence`` of the clip agreeing most."""
    if not evidence:
        return [0.0] * len(options), [0] * len(options)
    embedder = ctx.embedder()
    texts = [hit.text() for hit in evidence]
    vectors = embedder.embed(list(options) + texts)
    opt_vecs, ev_vecs = vectors[: len(options)], vectors[len(options) :]
    similarity = opt_vecs @ ev_vecs.T  # rows are L2-normalised: cosine
    top = max(hit.score for hit in evidence) or 1.0
    relevance = np.array([0.5 + 0.5 * hit.score / top for hit in evidence])
    ev_tokens = [set(keywords(t)) for t in texts]
    scores, best = [], []
    for i, option in enumerate(options):
        opt_tokens = set(keywords(option))
        overlap = np.array(
            [len(opt_tokens & et) / len(opt_tokens) if opt_tokens else 0.0 for et in ev_tokens]
        )
        agreement = (similarity[i] + overlap) * relevance
        best.append(int(agreement.argmax()))
        scores.append(float(agreement.max()))
    return scores, best


def answer_extractively(
    ctx: ToolContext,
    question: str,
    video_id: str,
    *,
    options: Sequence[str] | None = None,
    on_step: StepCallback | None = None,
) -> Answer:
    """Answer ``question`` about ``video_id`` from the best evidence clips, without a chat model."""
    started = time.perf_counter()
    outcome = execute_tool(
        ctx, "clip_search", {"video_id": video_id, "query": question, "top_k": ctx.config.top_k}
    )
    usage = UsageTotals(tool_calls=1, tool_cache_hits=int(outcome.cached))
    step = TraceStep(
        index=1,
        kind="tool",
        tool="clip_search",
        arguments=outcome.arguments,
        ok=outcome.ok,
        latency_s=outcome.latency_s,
        tool_cached=outcome.cached,
        observation=outcome.result.summary() if outcome.result else str(outcome.error),
    )
    trace = [step]
    if on_step is not None:
        on_step(step)
    if not isinstance(outcome.result, ClipSearchResult) or not outcome.result.clips:
        reason = outcome.error or "no clip matched the question"
        return Answer(
            answer=f"{PREFIX} Nothing was found: {reason}.",
            extractive=True,
            trace=trace,
            usage=usage,
        )

    ranked = outcome.result.by_relevance()
    evidence = Evidence()
    evidence.add(outcome.result, outcome.tool)
    lines = [PREFIX]
    cited: list[ClipHit] = []
    if not options and (at := at_clock_time(ctx, question, video_id)) is not None:
        # "What happened at 14:32?": the clips the video's burned-in clock places at that time.
        said, found = at
        evidence.add(found, "clock")
        lines.append(said)
        cited += found.clips[:EVIDENCE_CLIPS]
    choice = None
    if options:
        letters = prompts.option_letters(len(options))
        pool = ranked[:OPTION_CLIPS]
        scores, best = rank_options(ctx, options, pool)
        winner = int(np.argmax(scores))
        choice = letters[winner]
        lines.append(f"Option {choice} ({_quote(options[winner], 120)}) agrees best with the evidence.")
        cited.append(pool[best[winner]])
        ranking = ", ".join(f"{letters[i]} {scores[i]:.2f}" for i in np.argsort(scores)[::-1])
        lines.append(f"Option agreement scores: {ranking}.")
    for position, hit in enumerate(ranked):
        if len(cited) >= EVIDENCE_CLIPS:
            break
        # The best clip is always evidence; weaker ones only when close to it (a clip found by
        # meaning alone scores about half of one found by meaning and keywords).
        if hit not in cited and (position == 0 or hit.score >= RELATIVE_EVIDENCE * ranked[0].score):
            cited.append(hit)
    lines.append("Best matching moments:")
    lines += [f"- {describe(hit)}" for hit in cited]
    citations = [evidence.check(ctx, video_id, hit.start, hit.end) for hit in cited]
    final = TraceStep(
        index=2,
        kind="extractive",
        observation=f"{plural(len(cited), 'moment')} cited" + (f", option {choice}" if choice else ""),
        latency_s=time.perf_counter() - started,
    )
    trace.append(final)
    if on_step is not None:
        on_step(final)
    return Answer(
        answer="\n".join(lines),
        choice=choice,
        choice_source="given" if choice else None,  # the ranking picked it; no words were read
        citations=citations,
        extractive=True,
        trace=trace,
        usage=usage,
    )


def answer_library_extractively(
    ctx: ToolContext, question: str, *, on_step: StepCallback | None = None
) -> Answer:
    """Answer ``question`` about the whole library from its best moments, without a chat model.

    Runs the ``library_search`` tool (``ctx.registry`` must allow it) and cites the best moment and
    the others scoring close to it, each as (video, start, end).
    """
    started = time.perf_counter()
    outcome = execute_tool(ctx, "library_search", {"query": question, "top_k": ctx.config.top_k})
    usage = UsageTotals(tool_calls=1, tool_cache_hits=int(outcome.cached))
    trace = [
        TraceStep(
            index=1,
            kind="tool",
            tool="library_search",
            arguments=outcome.arguments,
            ok=outcome.ok,
            latency_s=outcome.latency_s,
            tool_cached=outcome.cached,
            observation=outcome.result.summary() if outcome.result else str(outcome.error),
        )
    ]
    if on_step is not None:
        on_step(trace[0])
    # Imported here: a question about one video never reads the library (and its moment search's
    # models cost a cold `ask` ~10 ms to build; issue 44).
    from vidscope.agents.tools_library import LibrarySearchResult

    if not isinstance(outcome.result, LibrarySearchResult) or not outcome.result.moments:
        reason = outcome.error or "no moment of the library matched the question"
        return Answer(
            answer=f"{PREFIX} Nothing was found: {reason}.", extractive=True, trace=trace, usage=usage
        )
    moments = outcome.result.moments
    evidence = Evidence()
    evidence.add(outcome.result, outcome.tool)
    cited = [m for i, m in enumerate(moments) if i == 0 or m.score >= RELATIVE_EVIDENCE * moments[0].score]
    cited = cited[:EVIDENCE_CLIPS]
    lines = [PREFIX, "Best matching moments in the library:"]
    lines += [
        f"- {m.file} {fmt_time(m.start)}–{fmt_time(m.end)} ({m.start:.1f}–{m.end:.1f}s): {_quote(m.text)}"
        for m in cited
    ]
    final = TraceStep(
        index=2,
        kind="extractive",
        observation=f"{plural(len(cited), 'moment')} cited from "
        + plural(len({m.video_id for m in cited}), "video"),
        latency_s=time.perf_counter() - started,
    )
    trace.append(final)
    if on_step is not None:
        on_step(final)
    return Answer(
        answer="\n".join(lines),
        citations=[evidence.check(ctx, m.video_id, m.start, m.end) for m in cited],
        extractive=True,
        trace=trace,
        usage=usage,
    )


def compare_extractively(ctx: ToolContext, question: str, video_ids: Sequence[str]) -> Answer:
    """The best clip of each video for ``question``, side by side, cited."""
    evidence = Evidence()
    lines, citations = [], []
    for video_id in video_ids:
        name = ctx.video(video_id).file_name
        try:
            found = search_clips(ctx, video_id, question, 1)
        except ToolError as exc:
            lines.append(f"{name}: {exc}")
            continue
        evidence.add(found, "clip_search")
        if not found.clips:
            lines.append(f"{name}: nothing relevant found")
            continue
        best = found.by_relevance()[0]
        # As ask's extractive answer words it: what is said and shown, the caption only without
        # them (a missing captioner leaves a placeholder caption that is no evidence).
        lines.append(f"{name} {describe(best)}")
        citations.append(evidence.check(ctx, video_id, best.start, best.end))
    return Answer(answer="\n".join(lines), citations=citations, extractive=True)


def run(ctx: ToolContext, request: StrategyRequest) -> Answer:
    """The ``extractive`` strategy's run, by scope: one video's best evidence (searched with the
    question alone: an evaluation's subtitles would drown it), each video's best clip side by
    side, or the library's best moments."""
    if request.scope == "library":
        return answer_library_extractively(ctx, request.question, on_step=request.on_step)
    if request.scope == "videos":
        return compare_extractively(ctx, request.question, request.video_ids)
    return answer_extractively(
        ctx, request.question, request.video_ids[0], options=request.options, on_step=request.on_step
    )

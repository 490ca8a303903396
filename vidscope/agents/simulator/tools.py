"""Simulated tools: the real tools' names, signatures and result models, answered from a script.

Each simulated tool is declared with ``@simulates(real_tool)``
(:func:`~vidscope.agents.tools.simulates`): exactly the parameters of its real counterpart, offered
under the real tool's name and description, so the model sees the same tool specs in both
environments and a policy trained here meets nothing new on real videos. Results are the real
result models, filled from the script slice of the requested interval. The real tools never import
this module.

Also here: ``visual_query`` and ``audio_query``, AgentCVR's two perception actions ("what is seen"
and "what is heard" in [t0, t1] of a video; the real ones are :mod:`vidscope.agents.cvr.actions`),
which the "actions" strategy offers next to ``clip_search`` and ``finish``.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from vidscope.agents.avi.tools import frame_analysis as real_frame_analysis
from vidscope.agents.avi.tools import object_detect as real_object_detect
from vidscope.agents.avi.tools import text_extract as real_text_extract
from vidscope.agents.avi.tools_perceive import (
    FrameAnalysisResult,
    ObjectDetectResult,
    ObjectSummary,
    TextExtractResult,
    TextItem,
)
from vidscope.agents.avi.tools_retrieve import clip_retrieve as real_clip_retrieve
from vidscope.agents.cvr.actions import audio_query as real_audio_query
from vidscope.agents.cvr.actions import visual_query as real_visual_query
from vidscope.agents.cvr.results import (
    AudioQueryResult,
    HeardLine,
    LookedRange,
    VisualQueryResult,
    VisualTarget,
    frame_plan,
)
from vidscope.agents.dvd.tools import (
    BrowseResult,
    CaptionSample,
    FrameInspectResult,
    SubjectEntry,
    finish,
)
from vidscope.agents.dvd.tools import clip_search as real_clip_search
from vidscope.agents.dvd.tools import frame_inspect as real_frame_inspect
from vidscope.agents.dvd.tools import global_browse as real_global_browse
from vidscope.agents.evidence import ClipHit, ClipSearchResult, keyword_scores, sample_evenly
from vidscope.agents.perception import TimeRange
from vidscope.agents.simulator.script import Event
from vidscope.agents.simulator.simulator import (
    NO_EVIDENCE,
    describe_event,
    describe_line,
    focus_matches,
    simulator_of,
)
from vidscope.agents.tools import ToolContext, ToolError, ToolRegistry, simulates

#: Simulated frames are the 2 fps samples ingestion stores.
SIM_FPS = 2.0


# ============================================================================ AgentCVR's actions


@simulates(real_visual_query, version=3)
def visual_query(
    ctx: ToolContext,
    targets: Annotated[
        list[VisualTarget],
        "The ranges to look at side by side: [{video_id, t0, t1, frames}], at most 128 frames in all.",
    ],
    focus: Annotated[str, "What to look for (an action, object, person, colour, count...)."],
) -> VisualQueryResult:
    """Simulated visual_query: the script's events in each target, answered in words for the focus,
    with the same frame budget (and note) as the real look.

    Shaped as the real result (issue 38: the real visual agent returns ``events: []`` and prose):
    no structured events, the words in ``answer``, ``found`` (whether anything matches the focus,
    as the real look's structured reply says) and ``seen_at`` (when the matching events start, as
    the real reply's ``when``)."""
    sim = simulator_of(ctx)
    checked, counts, note = frame_plan(targets, ctx.config.cvr_frames)
    looked: list[LookedRange] = []
    seen = []  # (video_id, event)
    for target, count in zip(checked, counts, strict=True):
        start, end = sim.check_interval(target.video_id, target.t0, target.t1)
        looked.append(LookedRange(video_id=target.video_id, t0=start, t1=end, frames=count))
        seen += [(target.video_id, e) for e in sim.events(target.video_id, start, end)]
    events = [e for _, e in seen]
    facts = [describe_event(e) for e in events]
    if len(looked) > 1:  # several ranges side by side: each fact names its video, as the real look does
        facts = [f"video {video}: {fact}" for (video, _), fact in zip(seen, facts, strict=True)]
    answer, usage = sim.phrase(focus, facts, answer_focus=True)
    matching = [e for e in events if focus_matches(focus, describe_event(e))]
    return VisualQueryResult(
        targets=looked,
        focus=focus,
        answer=answer,
        usage=usage,
        note=note,
        found=bool(matching),
        seen_at=_seen_at(matching, looked[0]) if len(looked) == 1 else [],
    )


def _seen_at(events: list[Event], looked: LookedRange) -> list[float]:
    """The frame times a viewer would name for ``events``: each one's start, middle and end, inside
    the looked range."""
    times = {round(t, 2) for e in events for t in (e.start, (e.start + e.end) / 2, e.end)}
    return sorted(t for t in times if looked.t0 <= t <= looked.t1)


@simulates(real_audio_query, version=2)
def audio_query(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video."],
    t0: Annotated[float, "Start of the interval, in seconds."],
    t1: Annotated[float, "End of the interval, in seconds."],
) -> AudioQueryResult:
    """Listen to [t0, t1] of a video and report what is said or heard there, with times. Says
    "no evidence" when nothing is heard there."""
    sim = simulator_of(ctx)
    start, end = sim.check_interval(video_id, t0, t1)
    # Lines heard strictly inside the interval, as the real agent reads the stored transcript (a
    # line starting where the interval ends is not heard in it).
    lines = [a for a in sim.lines(video_id, start, end) if a.start < end and a.end > start]
    answer, _ = (
        sim.phrase("what is said", [describe_line(a) for a in lines]) if lines else (NO_EVIDENCE, None)
    )
    return AudioQueryResult(
        video_id=video_id,
        t0=start,
        t1=end,
        answer=answer,
        lines=[HeardLine(**a.model_dump()) for a in lines],
    )


# ============================================================================ DVD tools


def _search(ctx: ToolContext, video_id: str, query: str, top_k: int) -> ClipSearchResult:
    """Clips ranked by keyword overlap with ``query`` (the simulator has no embeddings)."""
    clips = simulator_of(ctx).clips(video_id)
    scores = keyword_scores(query, [c.text() for c in clips])
    best = sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: (-scores[i], i))[:top_k]
    hits = [
        ClipHit(
            start=clips[i].start,
            end=clips[i].end,
            clip_index=clips[i].clip_index,
            score=round(scores[i], 3),
            caption=clips[i].caption,
            speech=clips[i].speech,
            on_screen_text=clips[i].on_screen_text,
        )
        for i in best
    ]
    hits.sort(key=lambda h: h.start)
    return ClipSearchResult(video_id=video_id, query=query, clips=hits, searched_clips=len(clips))


@simulates(real_clip_search, version=1)
def clip_search(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video to search."],
    query: Annotated[str, "What to look for: words spoken or shown, objects, actions, scenes."],
    top_k: Annotated[int, Field(description="How many clips to return (1-50).", ge=1, le=50)] = 16,
) -> ClipSearchResult:
    """Simulated clip_search (keyword match over the script's clips)."""
    return _search(ctx, video_id, query, top_k)


@simulates(real_global_browse, version=1)
def global_browse(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video to browse."],
    query: Annotated[str, "What the overview should focus on (the question, or a part of it)."],
) -> BrowseResult:
    """Simulated global_browse (captions sampled evenly, subjects from the script's events)."""
    sim = simulator_of(ctx)
    video = sim.video(video_id)
    clips = [c for c in sim.clips(video_id) if c.caption]
    picked = [clips[i] for i in sample_evenly(len(clips), ctx.config.browse_captions)]
    subjects: dict[str, SubjectEntry] = {}
    for event in video.events:
        if event.subject is None:
            continue
        entry = subjects.setdefault(event.subject, SubjectEntry(name=event.subject))
        entry.mentions += 1
        entry.spans.append([event.start, event.end])
        action = event.label.removeprefix(f"the {event.subject} ")
        if action not in entry.actions:
            entry.actions.append(action)
    return BrowseResult(
        video_id=video_id,
        query=query,
        duration=video.duration,
        total_clips=len(clips),
        captions=[CaptionSample(start=c.start, end=c.end, caption=c.caption or "") for c in picked],
        subjects=sorted(subjects.values(), key=lambda s: (-s.mentions, s.spans[0][0])),
    )


@simulates(real_frame_inspect, version=1)
def frame_inspect(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video."],
    question: Annotated[str, "What to look for in the frames."],
    time_ranges: Annotated[
        list[list[float]],
        Field(
            description="Time ranges [[start, end], ...] in seconds to take frames from.",
            min_length=1,
            max_length=8,
        ),
    ],
) -> FrameInspectResult:
    """Simulated frame_inspect (the script's visible events in the ranges)."""
    sim = simulator_of(ctx)
    ranges: list[list[float]] = []
    for pair in time_ranges:
        if len(pair) != 2:
            raise ToolError(f"each time range must be [start, end], got {pair}")
        ranges.append(list(sim.check_interval(video_id, pair[0], pair[1])))
    seen = {e.event_id: e for a, b in ranges for e in sim.events(video_id, a, b)}
    facts = [describe_event(e) for e in sorted(seen.values(), key=lambda e: e.start)]
    answer, usage = sim.phrase(question, facts)
    times = sorted({round(a + i / SIM_FPS, 2) for a, b in ranges for i in range(int((b - a) * SIM_FPS) + 1)})
    step = max(1, len(times) // max(1, ctx.config.max_frames))
    return FrameInspectResult(
        video_id=video_id,
        question=question,
        answer=answer,
        frame_times=times[::step][: ctx.config.max_frames],
        ranges=ranges,
        usage=usage,
    )


# ============================================================================ AVI tools


@simulates(real_clip_retrieve, version=1)
def clip_retrieve(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video to search."],
    query: Annotated[str, "What to look for: an event, object, action, scene, words spoken or shown."],
    k: Annotated[int, Field(description="How many clips to return (1-50).", ge=1, le=50)] = 16,
) -> ClipSearchResult:
    """Simulated clip_retrieve (keyword match over the script's clips)."""
    return _search(ctx, video_id, query, k)


@simulates(real_text_extract, version=1)
def text_extract(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video."],
    time_range: TimeRange,
) -> TextExtractResult:
    """Simulated text_extract (the script's text events in the range)."""
    sim = simulator_of(ctx)
    start, end = sim.check_interval(video_id, time_range[0], time_range[1])
    shown = sim.events(video_id, start, end, kinds=("text",))
    return TextExtractResult(
        video_id=video_id,
        time_range=[start, end],
        source="script",
        frames_read=int((end - start) * SIM_FPS) + 1,
        items=[
            TextItem(text=str(e.attributes.get("text", e.label)), start=e.start, end=e.end, score=1.0)
            for e in shown
        ],
    )


@simulates(real_object_detect, version=1)
def object_detect(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video."],
    time_range: TimeRange,
    objects: Annotated[
        list[str] | None,
        Field(
            description="Object kinds to count (e.g. ['person', 'car']); omit to count every kind.",
            max_length=20,
        ),
    ] = None,
) -> ObjectDetectResult:
    """Simulated object_detect (the script's object events, counted per subject)."""
    sim = simulator_of(ctx)
    start, end = sim.check_interval(video_id, time_range[0], time_range[1])
    frames = int((end - start) * SIM_FPS) + 1
    wanted = [o.lower() for o in objects or []]
    found: dict[str, ObjectSummary] = {}
    for event in sim.events(video_id, start, end, kinds=("object",)):
        label = (event.subject or event.label).lower()
        if wanted and label not in wanted:
            continue
        count = int(event.attributes.get("count", 1))
        seen = max(1, int((min(end, event.end) - max(start, event.start)) * SIM_FPS))
        summary = found.get(label)
        if summary is None:
            found[label] = ObjectSummary(
                label=label,
                frames_seen=seen,
                max_count=count,
                mean_count=round(count * seen / frames, 3),
                first_seen=max(start, event.start),
                last_seen=min(end, event.end),
            )
        else:
            summary.frames_seen += seen
            summary.max_count = max(summary.max_count, count)
            summary.mean_count = round(summary.mean_count + count * seen / frames, 3)
            summary.last_seen = min(end, event.end)
    return ObjectDetectResult(
        video_id=video_id,
        time_range=[start, end],
        source="script",
        frames_checked=frames,
        objects=list(found.values()),
        not_found=[w for w in wanted if w not in found],
    )


@simulates(real_frame_analysis, version=2)
def frame_analysis(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video."],
    time_ranges: Annotated[
        list[TimeRange],
        Field(description="Time ranges [[start, end], ...] in seconds (1-8).", min_length=1, max_length=8),
    ],
    question: Annotated[str, "What to find out from the frames."],
    frames: Annotated[
        int,
        Field(
            description="How many frames to look at in all, spread over the ranges by length (1-64).",
            ge=1,
            le=64,
        ),
    ] = 64,  # the real tool's default: AVI's 64-frame budget
) -> FrameAnalysisResult:
    """Simulated frame_analysis (the script's visible events in the ranges)."""
    sim = simulator_of(ctx)
    ranges = [sim.check_interval(video_id, r[0], r[1]) for r in time_ranges]
    events = [e for start, end in ranges for e in sim.events(video_id, start, end)]
    answer, usage = sim.phrase(question, [describe_event(e) for e in dict.fromkeys(events)])
    total = sum(end - start for start, end in ranges) or 1.0
    times: list[float] = []
    for start, end in ranges:
        count = max(1, min(round(frames * (end - start) / total), int((end - start) * SIM_FPS) + 1))
        step = (end - start) / count
        times += [round(start + step * (i + 0.5), 2) for i in range(count)]
    return FrameAnalysisResult(
        video_id=video_id,
        question=question,
        answer=answer,
        time_ranges=[[start, end] for start, end in ranges],
        frame_times=sorted(times)[:frames],
        usage=usage,
    )


#: The DVD agent's tools, simulated, in the real registry's order.
SIM_DVD_TOOLS = (global_browse, clip_search, frame_inspect, finish)
#: AgentCVR's actions plus clip search and finish as native tool calls (the `actions` strategy).
SIM_CVR_TOOLS = (visual_query, audio_query, clip_search, finish)


def sim_dvd_registry() -> ToolRegistry:
    """The DVD agent's allow-list, answered by the simulator."""
    return ToolRegistry(SIM_DVD_TOOLS)


def sim_avi_registry() -> ToolRegistry:
    """The AVI agent's allow-list (retrieve, then perceive), answered by the simulator (the tools
    that need an entity graph or image embeddings — clip_merge, global_explore, graph_retrieve,
    boundary_detect — have no script counterpart yet)."""
    return ToolRegistry(
        [clip_retrieve, object_detect, text_extract, frame_analysis, visual_query, audio_query]
    )


def sim_cvr_registry() -> ToolRegistry:
    """AgentCVR's action space over the simulator (visual/audio query, clip search, finish)."""
    return ToolRegistry(SIM_CVR_TOOLS)

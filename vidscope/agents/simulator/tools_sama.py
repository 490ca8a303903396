"""SAMA's nine tools, simulated: the real ``sama_registry()``'s names, arguments and result
models, answered from a script.

What each one reads of the script:

* ``video_reader`` — the events of the segment; for the things the question names (an event's
  label, an object's subject) the counts, colours and time the real vision model is asked to state.
* ``object_tracker`` — one track per object of an object event (its ``count`` attribute) and one
  per acting subject; counts per 2 fps frame. A script has no positions: trajectories are empty.
* ``scene_graph`` — per frame the visible objects and subjects with their ``colour`` attribute and
  the script's relations between events visible together; boxes are empty (no positions).
* ``visual_similarity`` — events of the two segments compared by label, events linked by a
  ``same_subject`` or ``same_time`` relation counting as the same (the cross-video relations).
* ``scene_detector`` — the times inside the interval where the ``scene`` events shown change (a
  scene event is a shot; two adjacent ones described alike, as imported clip captions may be,
  are one shot).
* ``temporal_grounding`` — the script's clips ranked by keyword overlap with the description.
* ``subtitle_retriever`` / ``subtitle_extractor`` — the script's audio lines, by keywords or by
  interval.
* ``answer`` — the real terminal tool.

Intervals outside a video are refused (:meth:`ScriptSimulator.check_interval`); a reading of a
segment in which nothing happens says :data:`NO_EVIDENCE`. The verification layer's re-reads
(``run_sama`` calls ``video_reader`` through the registry) are answered here too.
"""

from __future__ import annotations

from typing import Annotated

import numpy as np
from pydantic import Field

from vidscope.agents.avi.tools_perceive import matching_object
from vidscope.agents.evidence import keyword_scores
from vidscope.agents.multi_video import answer
from vidscope.agents.perception import TimeRange
from vidscope.agents.sama import tools_find, tools_look, tools_scenes
from vidscope.agents.sama.agent import sama_registry
from vidscope.agents.sama.facts import subject_key
from vidscope.agents.sama.tools_find import (
    GROUNDING_HINTS,
    SUBTITLE_HITS,
    GroundingResult,
    SimilarityResult,
    SubtitleLine,
    SubtitleResult,
    TimeHint,
)
from vidscope.agents.sama.tools_look import (
    GRAPH_FRAMES,
    READER_FRAMES,
    TRACK_FPS,
    TRACK_FRAMES,
    GraphFrame,
    GraphObject,
    ReadResult,
    SceneGraphResult,
    Track,
    TrackResult,
)
from vidscope.agents.sama.tools_scenes import SceneBoundary, ScenesResult
from vidscope.agents.simulator.script import Event
from vidscope.agents.simulator.simulator import NO_EVIDENCE, ScriptSimulator, describe_event, simulator_of
from vidscope.agents.simulator.tools import _search
from vidscope.agents.tools import ToolContext, ToolError, ToolRegistry, simulates
from vidscope.core.lexicon import tokens

#: Where the simulated results say they come from.
SOURCE = "script"
#: Relations under which two events of different videos show the same thing.
SAME = ("same_subject", "same_time")


def sample_times(start: float, end: float, fps: float, budget: int) -> list[float]:
    """Frame times in [start, end] at ``fps``, thinned evenly to at most ``budget``."""
    count = int((end - start) * fps) + 1
    times = [round(start + i / fps, 2) for i in range(count)]
    if len(times) <= budget:
        return times
    return [times[round(i * (len(times) - 1) / max(1, budget - 1))] for i in range(budget)]


def _phrase(text: str) -> str:
    return " " + " ".join(tokens(text)) + " "


def asked_about(sim: ScriptSimulator, question: str) -> tuple[set[str], set[str]]:
    """(event labels, subjects) of the script that ``question`` names: a label when its words occur
    in the question in order, a subject when its canonical form is one of the question's words."""
    words = _phrase(question)
    forms = {subject_key(w) for w in tokens(question)}
    labels, subjects = set(), set()
    for video in sim.script.videos:
        for event in video.events:
            if _phrase(event.label) in words:
                labels.add(event.label)
            if event.subject and subject_key(event.subject) in forms:
                subjects.add(event.subject)
    return labels, subjects


def _colour(event: Event) -> str | None:
    value = event.attributes.get("colour", event.attributes.get("color"))
    return str(value) if value is not None else None


# ============================================================================ video_reader


def read(sim: ScriptSimulator, video_id: str, t0: float, t1: float, question: str) -> ReadResult:
    """The simulated reading of [t0, t1]: the segment's events as the answer; for what the question
    names, the count of each asked-about event label (times it happens) and object (its ``count``
    attribute summed; 0 when not in the segment), colours, and the time the asked-about event is
    first seen (an event named by its label before one of a named subject)."""
    start, end = sim.check_interval(video_id, t0, t1)
    events = sim.events(video_id, start, end)
    labels, subjects = asked_about(sim, question)
    counts: dict[str, float] = {label: 0.0 for label in sorted(labels)}
    counts.update({s: 0.0 for s in sorted(subjects) if _is_object(sim, s)})
    colours: dict[str, str] = {}
    for event in events:
        if event.label in labels:
            counts[event.label] += 1
        if event.subject in subjects and event.kind == "object":
            counts[event.subject] += int(event.attributes.get("count", 1))
        if event.subject in subjects and _colour(event) is not None:
            colours.setdefault(event.subject, str(_colour(event)))
    # The asked-about event: one the question names by its label, else one of a named subject.
    seen = [e for e in events if e.label in labels] or [e for e in events if e.subject in subjects]
    time = round(max(seen[0].start, start), 2) if seen else None
    answer_text, usage = sim.phrase(question, [describe_event(e) for e in events])
    return ReadResult(
        video_id=video_id,
        t0=start,
        t1=end,
        question=question,
        answer=answer_text,
        counts=counts,
        colours=colours,
        time=time,
        frame_times=sample_times(start, end, TRACK_FPS, READER_FRAMES),
        note=None if events else "nothing in the script happens in this segment",
        usage=usage,
    )


def _is_object(sim: ScriptSimulator, subject: str) -> bool:
    return any(e.subject == subject and e.kind == "object" for v in sim.script.videos for e in v.events)


@simulates(tools_look.video_reader, version=1)
def video_reader(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video."],
    t0: Annotated[float, "Start of the segment, in seconds."],
    t1: Annotated[float, "End of the segment, in seconds."],
    question: Annotated[str, "What to find out from the segment's frames."],
) -> ReadResult:
    """Simulated video_reader (the script's events in the segment)."""
    return read(simulator_of(ctx), video_id, t0, t1, question)


# ============================================================================ object_tracker


@simulates(tools_look.object_tracker, version=1)
def object_tracker(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video."],
    t0: Annotated[float, "Start of the segment, in seconds."],
    t1: Annotated[float, "End of the segment, in seconds."],
    target: Annotated[str, "The kind of object to follow (e.g. 'person', 'bag')."],
) -> TrackResult:
    """Simulated object_tracker (object events' counts, acting subjects, per 2 fps frame)."""
    sim = simulator_of(ctx)
    start, end = sim.check_interval(video_id, t0, t1)
    spans: list[tuple[float, float]] = []  # one per tracked object
    acting: dict[str, tuple[float, float]] = {}
    for event in sim.events(video_id, start, end):
        if not event.subject or matching_object(event.subject, [target]) is None:
            continue
        seen = (max(start, event.start), min(end, event.end))
        if event.kind == "object":
            spans += [seen] * int(event.attributes.get("count", 1))
        else:  # the same subject acting again is the same individual
            first, last = acting.get(event.subject, seen)
            acting[event.subject] = (min(first, seen[0]), max(last, seen[1]))
    spans += list(acting.values())
    times = sample_times(start, end, TRACK_FPS, TRACK_FRAMES)
    per_frame = [[t, float(sum(1 for a, b in spans if a <= t <= b))] for t in times]
    tracks = [
        Track(
            track_id=i + 1,
            label=target,
            first_seen=round(a, 2),
            last_seen=round(b, 2),
            frames_seen=sum(1 for t in times if a <= t <= b),
        )
        for i, (a, b) in enumerate(spans)
    ]
    return TrackResult(
        video_id=video_id,
        t0=start,
        t1=end,
        target=target,
        source=f"{SOURCE} (no positions: trajectories are empty)",
        tracked=True,
        tracks=tracks,
        per_frame=per_frame,
        peak_count=int(max((c for _, c in per_frame), default=0)),
        distinct_count=len(tracks),
    )


# ============================================================================ scene_graph


@simulates(tools_look.scene_graph, version=1)
def scene_graph(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video."],
    t0: Annotated[float, "Start of the segment, in seconds."],
    t1: Annotated[float, "End of the segment, in seconds."],
    prompts: Annotated[
        list[str] | None,
        Field(description="Object kinds to focus on (e.g. ['person', 'bag']); omit for all.", max_length=20),
    ] = None,
) -> SceneGraphResult:
    """Simulated scene_graph (visible objects, subjects and relations from the script)."""
    sim = simulator_of(ctx)
    start, end = sim.check_interval(video_id, t0, t1)
    wanted = [p for p in (prompts or []) if p.strip()]
    events = sim.events(video_id, start, end)
    frames = []
    for t in sample_times(start, end, TRACK_FPS, GRAPH_FRAMES):
        objects: list[GraphObject] = []
        index: dict[str, str] = {}  # event id -> the node naming it in this frame's relations
        for event in events:
            if not event.subject or not event.start <= t <= event.end:
                continue
            if wanted and matching_object(event.subject, wanted) is None:
                continue
            index[event.event_id] = f"{event.subject}#{len(objects)}"
            copies = int(event.attributes.get("count", 1)) if event.kind == "object" else 1
            objects += [
                GraphObject(label=event.subject, box=[], colour=_colour(event)) for _ in range(copies)
            ]
        relations = [
            [index[r.source.event_id], r.kind, index[r.target.event_id]]
            for r in sim.script.relations
            if r.source.video_id == r.target.video_id == video_id
            and r.source.event_id in index
            and r.target.event_id in index
        ]
        frames.append(GraphFrame(t=t, objects=objects, relations=relations))
    return SceneGraphResult(
        video_id=video_id,
        t0=start,
        t1=end,
        source=SOURCE,
        frames=frames,
        note=None if events else NO_EVIDENCE,
    )


# ============================================================================ temporal_grounding


@simulates(tools_find.temporal_grounding, version=1)
def temporal_grounding(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video."],
    query: Annotated[str, "The event or scene to locate, in words."],
) -> GroundingResult:
    """Simulated temporal_grounding (keyword match over the script's clips)."""
    found = _search(ctx, video_id, query, GROUNDING_HINTS).by_relevance()
    return GroundingResult(
        video_id=video_id,
        query=query,
        hints=[
            TimeHint(start=c.start, end=c.end, score=c.score or 0.0, found_by=["clip search"]) for c in found
        ],
        notes=[f"{SOURCE}: keyword match over the clips' events, speech and text (no frames)"],
    )


# ============================================================================ scene_detector


@simulates(tools_scenes.scene_detector, version=2)
def scene_detector(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video."],
    t0: Annotated[float, "Start of the interval, in seconds."],
    t1: Annotated[float, "End of the interval, in seconds."],
    fps: tools_scenes.FpsArgument = tools_scenes.FPS,
    threshold: tools_scenes.ThresholdArgument = tools_scenes.THRESHOLD,
) -> ScenesResult:
    """Simulated scene_detector (the script's scene events begin and end at shot changes; a cut
    is placed half a frame interval either side of its time, the frames at ``fps``; a script's
    cut is always clear, so ``threshold`` changes nothing)."""
    sim = simulator_of(ctx)
    start, end = sim.check_interval(video_id, t0, t1)
    scenes = sim.events(video_id, start, end, kinds=("scene",))

    def shown(t: float) -> set[str]:
        return {e.label for e in scenes if e.start <= t < e.end}

    # A cut where what is shown changes: an edge between two clips captioned alike is no cut.
    ends = sorted({round(t, 2) for e in scenes for t in (e.start, e.end) if start < t < end})
    cuts = [t for t in ends if shown(t - 0.01) != shown(t)]
    edges = [start, *cuts, end]
    return ScenesResult(
        video_id=video_id,
        t0=start,
        t1=end,
        boundaries=[
            SceneBoundary(
                t=t,
                before=max(start, round(t - 0.5 / fps, 2)),
                after=min(end, round(t + 0.5 / fps, 2)),
                change=1.0,
            )
            for t in cuts
        ],
        scenes=[[round(a, 2), round(b, 2)] for a, b in zip(edges, edges[1:], strict=False)],
        frames_compared=int((end - start) * fps) + 1,
        fps=fps,
        threshold=threshold,
        source=f"{SOURCE} (scene events)",
    )


# ============================================================================ visual_similarity


def _identities(sim: ScriptSimulator, video_id: str, events: list[Event]) -> dict[str, str]:
    """event id -> what the event shows: its label, or the label of the first event (in script
    order) it is linked to by a same-subject or same-time relation."""
    linked: dict[tuple[str, str], str] = {}
    for relation in sim.script.relations:
        if relation.kind in SAME:
            source = sim.video(relation.source.video_id).event(relation.source.event_id)
            for ref in (relation.source, relation.target):
                linked.setdefault((ref.video_id, ref.event_id), source.label)
    return {e.event_id: linked.get((video_id, e.event_id), e.label) for e in events}


@simulates(tools_find.visual_similarity, version=2)
def visual_similarity(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the reference video."],
    time_range: TimeRange,
    other_video_id: Annotated[str, "Id of the video to compare with."],
    other_range: TimeRange,
) -> SimilarityResult:
    """Simulated visual_similarity (events compared by label and cross-video relations)."""
    sim = simulator_of(ctx)
    start, end = sim.check_interval(video_id, time_range[0], time_range[1])
    o_start, o_end = sim.check_interval(other_video_id, other_range[0], other_range[1])
    mine = sim.events(video_id, start, end)
    theirs = sim.events(other_video_id, o_start, o_end)
    a = _identities(sim, video_id, mine)
    b = _identities(sim, other_video_id, theirs)
    shared = set(a.values()) & set(b.values())
    union = set(a.values()) | set(b.values())
    matched = [e for e in theirs if b[e.event_id] in shared]
    best = (
        [max(o_start, min(e.start for e in matched)), min(o_end, max(e.end for e in matched))]
        if matched
        else [o_start, o_end]
    )
    # On the real tool's calibrated scale: 0 nothing shared (as unrelated footage), 1 the same events.
    similarity = round(len(shared) / len(union), 4) if union else 0.0
    return SimilarityResult(
        video_id=video_id,
        time_range=[start, end],
        other_video_id=other_video_id,
        other_range=[o_start, o_end],
        cosine=similarity,
        unrelated_cosine=0.0,
        similarity=similarity,
        above_unrelated=1.0 if shared else 0.0,
        judgement=tools_find.judge(similarity, np.zeros(1))[2]
        if shared
        else "no more alike than unrelated footage",
        best_match=[round(x, 2) for x in best],
        source=f"{SOURCE} (events and cross-video relations)",
        unrelated_source=f"{SOURCE} (events shared with nothing score 0)",
    )


# ============================================================================ subtitles


@simulates(tools_find.subtitle_retriever, version=1)
def subtitle_retriever(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video."],
    query: Annotated[str, "What is said that you are looking for."],
) -> SubtitleResult:
    """Simulated subtitle_retriever (keyword match over the script's audio lines)."""
    lines = simulator_of(ctx).video(video_id).audio
    if not lines:
        raise ToolError(f"video {video_id} has no speech transcript (no speech, or not transcribed)")
    scores = keyword_scores(query, [a.text for a in lines])
    top = sorted(i for i in sorted(range(len(lines)), key=lambda i: -scores[i])[:SUBTITLE_HITS] if scores[i])
    return SubtitleResult(
        video_id=video_id,
        query=query,
        lines=[
            SubtitleLine(
                start=lines[i].start, end=lines[i].end, text=lines[i].text, score=round(scores[i], 3)
            )
            for i in top
        ],
    )


@simulates(tools_find.subtitle_extractor, version=1)
def subtitle_extractor(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video."],
    t0: Annotated[float, "Start of the interval, in seconds."],
    t1: Annotated[float, "End of the interval, in seconds."],
) -> SubtitleResult:
    """Simulated subtitle_extractor (the script's audio lines heard in the interval)."""
    sim = simulator_of(ctx)
    start, end = sim.check_interval(video_id, t0, t1)
    return SubtitleResult(
        video_id=video_id,
        time_range=[start, end],
        lines=[SubtitleLine(start=a.start, end=a.end, text=a.text) for a in sim.lines(video_id, start, end)],
    )


# ============================================================================ the registry


#: SAMA's tools, simulated, in the real registry's (declared) order.
SIM_SAMA_TOOLS = (
    video_reader,
    temporal_grounding,
    scene_detector,
    scene_graph,
    object_tracker,
    visual_similarity,
    subtitle_retriever,
    subtitle_extractor,
    answer,
)


def sim_sama_registry() -> ToolRegistry:
    """``sama_registry()`` answered by the simulator (checked to offer the same tools in order)."""
    registry = ToolRegistry(SIM_SAMA_TOOLS)
    if registry.names != sama_registry().names:
        raise TypeError("the simulated SAMA tools differ from the real ones")
    return registry

"""SAMA's tools that look at one segment of a video: video_reader (the vision model over its
frames), object_tracker (tracked objects, counts and trajectories) and scene_graph (objects,
boxes, dominant colours and spatial relations).

Each result lists the structured :class:`~vidscope.agents.sama.facts.Fact` s it states (counts,
colours, times), which the verification layer compares across tools.
"""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, Field

from vidscope.agents.answers import Support
from vidscope.agents.avi.tools_perceive import matching_object
from vidscope.agents.evidence import sample_evenly
from vidscope.agents.looks import found_flag, look_support, reports_nothing, times_inside
from vidscope.agents.multi_video import json_object, look, segment_frames, vision_model
from vidscope.agents.perception import perception_backend, range_frames
from vidscope.agents.sama.facts import Fact, event_of, majority
from vidscope.agents.tools import ToolContext, ToolError, ToolResult, tool
from vidscope.core.errors import BackendUnavailable
from vidscope.core.images import decode_jpeg
from vidscope.models import registry
from vidscope.models.protocols.chat import Usage

#: Frames video_reader shows the vision model at most.
READER_FRAMES = 16
#: Frames object_tracker and scene_graph run the detector on at most (2 per second).
TRACK_FRAMES, TRACK_FPS = 32, 2.0
GRAPH_FRAMES = 4
#: Trajectory points kept per track.
TRAJECTORY_POINTS = 12

READER_SYSTEM = (
    "You look at frames of one segment of a video and answer a question about them. Reply with "
    'one JSON object only: {"found": <true or false: whether the frames show what is asked '
    'about>, "answer": "<plain words>", "counts": {"<object>": <number>}, '
    '"colours": {"<object>": "<colour>"}, "time": <seconds or null>}. Put in "counts" and '
    '"colours" only the objects the question asks about; "time" is when the asked-about event '
    "happens, if it does."
)

GRAPH_SYSTEM = (
    "You describe the objects in frames of a video and how they relate. Reply with one JSON "
    'object only: {"objects": [{"label": "<object>", "colour": "<dominant colour>"}], '
    '"relations": [["<object>", "<relation>", "<object>"]]}.'
)


# ============================================================================ video_reader


class ReadResult(ToolResult):
    """The vision model's reading of one segment, with the counts, colours and time it stated."""

    video_id: str
    t0: float
    t1: float
    question: str
    answer: str
    counts: dict[str, float] = Field(default_factory=dict)
    colours: dict[str, str] = Field(default_factory=dict)
    time: float | None = None
    frame_times: list[float] = Field(default_factory=list)
    note: str | None = None
    usage: Usage | None = None
    #: Whether the reader saw what was asked (its ``found``, and its words); ``None``: read from
    #: ``answer``.
    found: bool | None = None

    def support(self) -> list[Support]:
        # A reading supports where it saw something ("time" when it said, else the segment); a
        # reading that found nothing ("I cannot find any boat") only echoes the segment.
        if not self.frame_times:
            return []
        seen = times_inside([self.time], [[self.t0, self.t1]]) if self.time is not None else []
        return look_support(
            self.video_id,
            [[self.t0, self.t1]],
            found=self.found if self.found is not None else not reports_nothing(self.answer),
            what=self.answer,
            seen_at=seen,
        )

    def summary(self) -> str:
        return f"{len(self.frame_times)} frames of [{self.t0:g}, {self.t1:g}]s: {self.answer[:80]}"

    def model_usage(self) -> Usage | None:
        return self.usage

    def for_model(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude={"usage"})

    def facts(self) -> list[Fact]:
        """The counts, colours and time the reading states."""
        base = {"video_id": self.video_id, "t0": self.t0, "t1": self.t1, "source": "video_reader"}
        # The reader is asked how many there are in the segment: a count of different objects (or
        # occurrences) over it, like the tracker's distinct count, not its per-frame peak.
        found = [
            Fact(kind="count", measure="distinct", subject=k, value=v, **base) for k, v in self.counts.items()
        ]
        found += [Fact(kind="colour", subject=k, value=v, **base) for k, v in self.colours.items()]
        if self.time is not None:  # of the event asked about (a re-read's note is not part of it)
            found.append(Fact(kind="time", subject=event_of(self.question), value=self.time, **base))
        return found


def read_segment(
    ctx: ToolContext, video_id: str, t0: float, t1: float, question: str, *, budget: int = READER_FRAMES
) -> ReadResult:
    """The body of :func:`video_reader` (also used by the verification layer's re-reads)."""
    model = vision_model(
        ctx, "video_reader", instead="subtitle_retriever and subtitle_extractor still read what is said."
    )
    start, end, frames = segment_frames(ctx, video_id, t0, t1, budget=budget)
    reply = look(model, ctx, READER_SYSTEM, f"Question: {question}", frames)
    text = (reply.text or "").strip()
    data = json_object(text)
    result = ReadResult(
        video_id=video_id,
        t0=start,
        t1=end,
        question=question,
        answer=text,
        frame_times=[round(t, 2) for t in frames.times],
        usage=reply.usage,
    )
    if data is None:
        result.note = "the vision model did not reply with JSON; no counts, colours or time were read"
        result.found = not reports_nothing(text)
        return result
    result.answer = str(data.get("answer") or "").strip() or text
    # Not found when it says so, or when its words say the thing is absent.
    result.found = found_flag(data.get("found")) is not False and not reports_nothing(result.answer)
    problems = []
    for name, value in (data.get("counts") or {}).items() if isinstance(data.get("counts"), dict) else ():
        try:
            result.counts[str(name)] = float(value)
        except (TypeError, ValueError):
            problems.append(f"count of {name!r} is not a number")
    if isinstance(data.get("colours"), dict):
        result.colours = {str(k): str(v) for k, v in data["colours"].items() if v}
    if data.get("time") is not None:
        try:
            result.time = float(data["time"])
        except (TypeError, ValueError):
            problems.append("time is not a number")
    if problems:
        result.note = "; ".join(problems)
    return result


@tool(  # v2: read by the vlm (else chat), never the planner
    version=2, uses_models=("vlm",), settings=("max_tokens", "temperature")
)
def video_reader(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video."],
    t0: Annotated[float, "Start of the segment, in seconds."],
    t1: Annotated[float, "End of the segment, in seconds."],
    question: Annotated[str, "What to find out from the segment's frames."],
) -> ReadResult:
    """Watch frames of one segment of a video and answer a question about it; states counts,
    colours and the time of the asked-about event when it can. Use it to read what happens,
    who or what is there, how many, what colour."""
    return read_segment(ctx, video_id, t0, t1, question)


# ============================================================================ object_tracker


class Track(BaseModel):
    """One tracked object: its id, when it is seen and where (box centres over time)."""

    track_id: int
    label: str
    first_seen: float
    last_seen: float
    frames_seen: int
    trajectory: list[list[float]] = Field(
        default_factory=list, description="[t, x, y] box centres (pixels), a few per track."
    )


class TrackResult(ToolResult):
    """Objects matching a target followed through a segment."""

    video_id: str
    t0: float
    t1: float
    target: str
    source: str
    tracked: bool = Field(description="Whether the detections carry track ids (else counts are per frame).")
    tracks: list[Track] = Field(default_factory=list)
    per_frame: list[list[float]] = Field(default_factory=list, description="[t, count] per checked frame.")
    peak_count: int = 0
    distinct_count: int = Field(
        0, description="Distinct tracked objects (peak per-frame count if untracked)."
    )

    def support(self) -> list[Support]:
        # Each track supports when it is seen; seeing none only echoes the segment.
        if self.peak_count <= 0:
            said = f"no {self.target} found"
            return [Support(video_id=self.video_id, start=self.t0, end=self.t1, level="echoed", found=said)]
        if not self.tracks:  # counted per frame, untracked: where in the segment is not kept
            said = f"{self.target}: up to {self.peak_count} per frame"
            return [
                Support(
                    video_id=self.video_id,
                    start=self.t0,
                    end=self.t1,
                    level="perceived",
                    found=said,
                    localized=False,
                )
            ]
        return [
            Support(
                video_id=self.video_id,
                start=t.first_seen,
                end=t.last_seen,
                level="perceived",
                found=f"{t.label} #{t.track_id}",
            )
            for t in self.tracks
        ]

    def summary(self) -> str:
        return (
            f"{self.target}: {self.distinct_count} distinct, peak {self.peak_count} per frame ({self.source})"
        )

    def facts(self) -> list[Fact]:
        """The most target objects seen in one frame (``peak``) and, when the detections carry
        track ids, the distinct objects over the segment (``distinct``)."""
        if not self.per_frame:
            return []
        base = {"video_id": self.video_id, "t0": self.t0, "t1": self.t1, "kind": "count"}
        found = [
            Fact(**base, subject=self.target, measure="peak", value=self.peak_count, source="object_tracker")
        ]
        if self.tracked:
            found.append(
                Fact(
                    **base,
                    subject=self.target,
                    measure="distinct",
                    value=self.distinct_count,
                    source="object_tracker",
                )
            )
        return found


Detected = tuple[str, tuple[float, ...], int | None]


def detections_in(
    ctx: ToolContext, video_id: str, start: float, end: float, prompts_: list[str] | None, *, budget: int
) -> tuple[str, list[float], list[list[Detected]], list[np.ndarray] | None]:
    """(source, frame times, per-frame (label, box, track id), images or None) in [start, end]:
    stored detections of the ``detect`` stage when there are any, else the configured detector
    run (tracking) over the segment's frames."""
    store = ctx.store
    window = f"t >= {start!r} AND t <= {end!r}"
    if store.count(store.detections, video_id) > 0:
        times = {
            int(r["frame_index"]): float(r["t"])
            for r in store.rows(
                store.frames, video_id=video_id, where=window, columns=["frame_index", "t"]
            ).to_pylist()
        }
        rows = store.rows(
            store.detections,
            video_id=video_id,
            where=window,
            columns=["frame_index", "t", "label", "box", "track_id"],
        ).to_pylist()
        for r in rows:
            times.setdefault(int(r["frame_index"]), float(r["t"]))
        order = sorted(times, key=lambda i: times[i])
        position = {index: k for k, index in enumerate(order)}
        per_frame: list[list[Detected]] = [[] for _ in order]
        for r in rows:
            per_frame[position[int(r["frame_index"])]].append((r["label"], tuple(r["box"]), r["track_id"]))
        return "stored detections (ingest detect stage)", [times[i] for i in order], per_frame, None
    detector = perception_backend(ctx, "object_detector", registry.object_detector)
    if detector is None:
        raise ToolError(
            "no object detector is configured (models.object_detector) and this video has no stored "
            "detections"
        )
    record = ctx.video(video_id)
    frames = range_frames(ctx, record, start, end, budget=budget, fps=TRACK_FPS, prefer_file=False)
    open_vocabulary = bool(getattr(detector, "open_vocabulary", False))
    try:
        found = detector.detect(
            frames.images, track=True, prompts=prompts_ if open_vocabulary and prompts_ else None
        )
    except (ValueError, BackendUnavailable) as exc:
        raise ToolError(f"object detection failed: {exc}") from exc
    detected = [[(d.label, tuple(d.box), d.track_id) for d in dets] for dets in found]
    return f"detector {detector.name} on {frames.source}", frames.times, detected, frames.images


@tool(version=1, uses_models=("object_detector",))
def object_tracker(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video."],
    t0: Annotated[float, "Start of the segment, in seconds."],
    t1: Annotated[float, "End of the segment, in seconds."],
    target: Annotated[str, "The kind of object to follow (e.g. 'person', 'bag')."],
) -> TrackResult:
    """Follow objects of one kind through a segment: their track ids, when each is seen, box-centre
    trajectories, the count per frame, the peak count and the number of distinct objects. Use it
    for "how many", "does it move", "where does it go"."""
    start, end, _ = segment_frames(ctx, video_id, t0, t1, budget=1)
    source, times, per_frame, _images = detections_in(
        ctx, video_id, start, end, [target], budget=TRACK_FRAMES
    )
    counts: list[list[float]] = []
    tracks: dict[int, dict[str, Any]] = {}
    tracked = False
    for t, found in zip(times, per_frame, strict=True):
        matching = [(box, tid) for label, box, tid in found if matching_object(label, [target])]
        counts.append([round(t, 2), float(len(matching))])
        for box, tid in matching:
            if tid is None:
                continue
            tracked = True
            entry = tracks.setdefault(int(tid), {"times": [], "centres": []})
            entry["times"].append(t)
            entry["centres"].append([(box[0] + box[2]) / 2, (box[1] + box[3]) / 2])
    peak = int(max((c for _, c in counts), default=0))
    result_tracks = []
    for tid, entry in sorted(tracks.items()):
        picks = np.linspace(0, len(entry["times"]) - 1, min(TRAJECTORY_POINTS, len(entry["times"])))
        trajectory = [
            [round(entry["times"][i], 2), round(entry["centres"][i][0], 1), round(entry["centres"][i][1], 1)]
            for i in sorted({int(round(p)) for p in picks})
        ]
        result_tracks.append(
            Track(
                track_id=tid,
                label=target,
                first_seen=round(min(entry["times"]), 2),
                last_seen=round(max(entry["times"]), 2),
                frames_seen=len(entry["times"]),
                trajectory=trajectory,
            )
        )
    return TrackResult(
        video_id=video_id,
        t0=start,
        t1=end,
        target=target,
        source=source,
        tracked=tracked,
        tracks=result_tracks,
        per_frame=counts,
        peak_count=peak,
        distinct_count=len(result_tracks) if tracked else peak,
    )


# ============================================================================ scene_graph


#: Reference colours for naming a box's dominant colour.
NAMED_COLOURS: dict[str, tuple[int, int, int]] = {
    "black": (20, 20, 20),
    "white": (235, 235, 235),
    "grey": (128, 128, 128),
    "red": (200, 30, 30),
    "orange": (240, 140, 20),
    "yellow": (230, 220, 40),
    "green": (40, 170, 60),
    "blue": (30, 60, 210),
    "purple": (130, 50, 170),
    "pink": (240, 140, 190),
    "brown": (120, 75, 35),
}


def dominant_colour(image: np.ndarray, box: tuple[float, ...]) -> str:
    """The named colour nearest to the median pixel inside ``box`` of ``image``."""
    h, w = image.shape[:2]
    x1, y1 = max(0, int(box[0])), max(0, int(box[1]))
    x2, y2 = min(w, int(np.ceil(box[2]))), min(h, int(np.ceil(box[3])))
    patch = image[y1:y2, x1:x2] if x2 > x1 and y2 > y1 else image
    median = np.median(patch.reshape(-1, 3), axis=0)
    return min(NAMED_COLOURS, key=lambda n: float(np.sum((median - np.array(NAMED_COLOURS[n])) ** 2)))


def relation(a: tuple[float, ...], b: tuple[float, ...]) -> str:
    """The spatial relation of box ``a`` to box ``b`` (image coordinates)."""
    if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]:
        return "overlaps"
    dx = (a[0] + a[2]) / 2 - (b[0] + b[2]) / 2
    dy = (a[1] + a[3]) / 2 - (b[1] + b[3]) / 2
    if abs(dx) >= abs(dy):
        return "left of" if dx < 0 else "right of"
    return "above" if dy < 0 else "below"


class GraphObject(BaseModel):
    """An object in one frame: label, box x1,y1,x2,y2 (pixels) and dominant colour."""

    label: str
    box: list[int]
    colour: str | None = None


class GraphFrame(BaseModel):
    """One frame's objects and their pairwise spatial relations [a, relation, b] (by index)."""

    t: float
    objects: list[GraphObject]
    relations: list[list[str]] = Field(default_factory=list)


class SceneGraphResult(ToolResult):
    """Per-frame objects, attributes and relations of a segment, from the detector and the vlm."""

    video_id: str
    t0: float
    t1: float
    source: str
    frames: list[GraphFrame]
    vlm_objects: list[dict[str, str]] = Field(default_factory=list)
    vlm_relations: list[list[str]] = Field(default_factory=list)
    note: str | None = None
    usage: Usage | None = None

    def support(self) -> list[Support]:
        # Detected objects support their frames; the vision model's objects (no times) the segment;
        # nothing found only echoes it.
        found = [
            Support(
                video_id=self.video_id,
                start=f.t,
                end=f.t,
                level="perceived",
                found=", ".join(sorted({o.label for o in f.objects})),
            )
            for f in self.frames
            if f.objects
        ]
        if not found and self.vlm_objects:
            said = ", ".join(o.get("label", "") for o in self.vlm_objects)
            found = [
                Support(
                    video_id=self.video_id,
                    start=self.t0,
                    end=self.t1,
                    level="perceived",
                    found=said,
                    localized=False,
                )
            ]
        if not found:
            return [
                Support(
                    video_id=self.video_id, start=self.t0, end=self.t1, level="echoed", found="no objects"
                )
            ]
        return found

    def summary(self) -> str:
        labels = sorted({o.label for f in self.frames for o in f.objects})
        return f"{len(self.frames)} frames: {', '.join(labels[:6]) or 'no objects'}"

    def model_usage(self) -> Usage | None:
        return self.usage

    def for_model(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude={"usage"})

    def facts(self) -> list[Fact]:
        """All stated by ``scene_graph`` (one call: never compared with each other). Dominant
        colours measured from pixels, each label's majority over its sightings (none when no colour
        has a majority, e.g. a red and a blue car), and the vision model's colours; per detected
        label its peak count (the most seen in one of the frames looked at); per label the vision
        model lists, how many it lists — the different objects it saw over the segment, compared
        with the reader's "how many" (the paper's Fig. 4: the reader's 2 grocery bags against the
        scene graph's 1 bag)."""
        seen: dict[str, list[str]] = {}
        peaks: dict[str, int] = {}
        for frame in self.frames:
            in_frame: dict[str, int] = {}
            for obj in frame.objects:
                in_frame[obj.label] = in_frame.get(obj.label, 0) + 1
                if obj.colour:
                    seen.setdefault(obj.label, []).append(obj.colour)
            for label, n in in_frame.items():
                peaks[label] = max(peaks.get(label, 0), n)
        colours = {label: c for label, values in seen.items() if (c := majority(values)) is not None}
        base = {"video_id": self.video_id, "t0": self.t0, "t1": self.t1}
        found = [
            Fact(kind="colour", subject=k, value=v, source="scene_graph", **base) for k, v in colours.items()
        ]
        found += [
            Fact(kind="colour", subject=o["label"], value=o["colour"], source="scene_graph", **base)
            for o in self.vlm_objects
            if o.get("label") and o.get("colour")
        ]
        listed: dict[str, int] = {}
        for o in self.vlm_objects:
            if o.get("label", "").strip():
                listed[o["label"].strip()] = listed.get(o["label"].strip(), 0) + 1
        found += [
            Fact(kind="count", measure="distinct", subject=k, value=v, source="scene_graph", **base)
            for k, v in listed.items()
        ]
        found += [
            Fact(kind="count", measure="peak", subject=k, value=v, source="scene_graph", **base)
            for k, v in peaks.items()
        ]
        return found


def _stored_images(ctx: ToolContext, video_id: str, times: list[float]) -> list[np.ndarray | None]:
    """The stored frames of ``video_id`` at exactly ``times`` (those the detections were made
    on); ``None`` where no frame is stored at that time."""
    where = " OR ".join(f"t = {t!r}" for t in times)
    rows = ctx.store.rows(ctx.store.frames, video_id=video_id, where=f"({where})", columns=["t", "jpeg"])
    by_time = {float(r["t"]): r["jpeg"] for r in rows.to_pylist()}
    return [decode_jpeg(by_time[t]) if t in by_time else None for t in times]


@tool(  # v3: the vlm looks, never the planner
    version=3, uses_models=("object_detector", "vlm"), settings=("max_tokens", "temperature")
)
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
    """The scene of a segment as a graph: per frame, the objects (label, box, dominant colour) and
    their spatial relations (left of, right of, above, below, overlaps), plus the objects,
    colours and relations the vision model sees. Use it for "what is next to", "what colour"."""
    start, end, frames = segment_frames(ctx, video_id, t0, t1, budget=GRAPH_FRAMES)
    wanted = [p for p in (prompts or []) if p.strip()]
    graph_frames: list[GraphFrame] = []
    source = "no detector"
    note: str | None = None
    try:
        source, times, per_frame, images = detections_in(
            ctx, video_id, start, end, wanted or None, budget=GRAPH_FRAMES
        )
    except ToolError as exc:
        times, per_frame, images, note = [], [], None, str(exc)
    if per_frame:
        # Stored detections cover every frame of the window: describe GRAPH_FRAMES spread over
        # it (not its first ones), measuring colours on exactly those stored frames.
        keep = sample_evenly(len(times), GRAPH_FRAMES)
        times, per_frame = [times[i] for i in keep], [per_frame[i] for i in keep]
        pictures = _stored_images(ctx, video_id, times) if images is None else [images[i] for i in keep]
        for t, found, image in zip(times, per_frame, pictures, strict=True):
            kept = [(label, box) for label, box, _ in found if not wanted or matching_object(label, wanted)]
            objects = [
                GraphObject(
                    label=label,
                    box=[int(round(v)) for v in box],
                    colour=None if image is None else dominant_colour(image, box),
                )
                for label, box in kept
            ]
            relations = [
                [f"{a.label}#{i}", relation(tuple(a.box), tuple(b.box)), f"{b.label}#{j}"]
                for i, a in enumerate(objects)
                for j, b in enumerate(objects)
                if i < j
            ]
            graph_frames.append(GraphFrame(t=round(t, 2), objects=objects, relations=relations))
    result = SceneGraphResult(
        video_id=video_id, t0=start, t1=end, source=source, frames=graph_frames, note=note
    )
    model = ctx.vision_model()
    if model is None:
        return result
    focus = f"Focus on: {', '.join(wanted)}." if wanted else "Describe every object."
    try:
        reply = look(model, ctx, GRAPH_SYSTEM, focus, frames)
    except ToolError as exc:  # the model refused images: the detector's graph still stands
        result.note = "; ".join(filter(None, [result.note, str(exc)]))
        return result
    result.usage = reply.usage
    data = json_object(reply.text)
    if data is None:
        result.note = "; ".join(filter(None, [result.note, "the vision model did not reply with JSON"]))
        return result
    result.vlm_objects = [
        {"label": str(o.get("label", "")), "colour": str(o.get("colour", ""))}
        for o in data.get("objects") or []
        if isinstance(o, dict)
    ]
    result.vlm_relations = [
        [str(x) for x in r] for r in data.get("relations") or [] if isinstance(r, list) and len(r) == 3
    ]
    return result

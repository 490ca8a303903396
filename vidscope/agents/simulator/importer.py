"""A script from an ingested video: what ingestion stored becomes timed events and audio.

Clip captions become ``scene`` events, transcript segments audio lines, OCR items ``text`` events
and runs of detections of one label ``object`` events (with the largest count seen in a frame), so
the simulator and the real tools can be asked the same questions about the same video.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from vidscope.agents.simulator.script import AudioLine, Event, Script, ScriptVideo
from vidscope.storage.schema import sql_quote
from vidscope.storage.store import Store

#: Detections of one label further apart than this (seconds) start a new object event.
DETECTION_GAP = 1.0


def _clamp(value: float, duration: float) -> float:
    return round(min(max(0.0, float(value)), duration), 3)


def _object_events(rows: list[dict[str, Any]], duration: float) -> list[tuple[float, float, str, int]]:
    """(start, end, label, max count per frame) of each run of one label's detections."""
    per_frame: dict[tuple[str, float], int] = defaultdict(int)
    for row in rows:
        per_frame[(row["label"], float(row["t"]))] += 1
    runs: list[tuple[float, float, str, int]] = []
    by_label: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for (label, t), count in sorted(per_frame.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        by_label[label].append((t, count))
    for label, seen in by_label.items():
        start, end, most = seen[0][0], seen[0][0], seen[0][1]
        for t, count in seen[1:]:
            if t - end > DETECTION_GAP:
                runs.append((start, end, label, most))
                start, most = t, 0
            end, most = t, max(most, count)
        runs.append((start, end, label, most))
    return [(_clamp(a, duration), _clamp(b, duration), label, n) for a, b, label, n in runs]


def import_video(store: Store, video_id: str) -> ScriptVideo:
    """The stored captions, transcript, OCR and detections of ``video_id`` as a script video."""
    rows = store.rows(store.videos, where=f"video_id = {sql_quote(video_id)}").to_pylist()
    if not rows:
        raise KeyError(f"video {video_id} is not in the store")
    video = rows[0]
    duration = float(video["duration"])
    found: list[tuple[float, float, str, str, str | None, dict[str, Any]]] = []
    clips = store.rows(
        store.clips, video_id=video_id, columns=["start", "end", "caption"], order_by=["start"]
    )
    for clip in clips.to_pylist():
        if clip["caption"]:
            start, end = _clamp(clip["start"], duration), _clamp(clip["end"], duration)
            found.append((start, end, "scene", clip["caption"], None, {}))
    for item in store.rows(store.ocr, video_id=video_id, order_by=["t"]).to_pylist():
        start, end = _clamp(item["t"], duration), _clamp(item["t_end"], duration)
        found.append((start, end, "text", item["text"], "text", {"text": item["text"]}))
    detections = store.rows(store.detections, video_id=video_id, columns=["t", "label"]).to_pylist()
    for start, end, label, count in _object_events(detections, duration):
        found.append((start, end, "object", f"{count} {label}", label, {"count": count}))
    found.sort(key=lambda f: (f[0], f[1], f[2], f[3]))
    events = [
        Event(event_id=f"e{i}", start=a, end=b, kind=kind, label=label, subject=subject, attributes=attrs)
        for i, (a, b, kind, label, subject, attrs) in enumerate(found)
    ]
    spoken = [
        s
        for s in store.rows(store.transcripts, video_id=video_id, order_by=["start"]).to_pylist()
        if s["text"].strip()
    ]
    audio = [
        AudioLine(start=_clamp(s["start"], duration), end=_clamp(s["end"], duration), text=s["text"].strip())
        for s in spoken
    ]
    # The language the speech stage detected (the real audio agent's when it reads the transcript).
    language = next((str(s["language"]) for s in spoken if s.get("language")), None)
    return ScriptVideo(
        video_id=video_id,
        file_name=video["file_name"],
        duration=duration,
        language=language,
        events=events,
        audio=audio,
    )


def import_script(store: Store, video_ids: list[str], script_id: str | None = None) -> Script:
    """A script of the stored videos ``video_ids`` (no questions: ask your own, or generate)."""
    videos = [import_video(store, v) for v in video_ids]
    return Script(script_id=script_id or "imported-" + "-".join(v[:8] for v in video_ids), videos=videos)

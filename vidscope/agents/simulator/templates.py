"""Scripts and questions written from templates, with known answers, reproducible from a seed.

Each generated script has two videos of timed actions, objects and spoken lines, laid out so that
every question has exactly one correct option: counting (how often an action happens), ordering
(which of several events comes first), temporal alignment (what is said while an event happens) and
comparison (which video shows more of an object, across videos). The evidence of each answer is
recorded, so a policy can be checked to find its answer where the script says it is.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from vidscope.agents.simulator.script import (
    AudioLine,
    Event,
    EventRef,
    Evidence,
    Question,
    Relation,
    Script,
    ScriptVideo,
)

SUBJECTS = ("man", "woman", "dog", "child", "cyclist", "chef", "teacher", "robot")
ACTIONS = (
    "opens a door",
    "waves",
    "picks up a cup",
    "jumps",
    "sits down",
    "rings a bell",
    "writes on a board",
    "claps",
    "drops a ball",
    "turns on a lamp",
)
OBJECTS = ("car", "bicycle", "umbrella", "balloon", "box", "chair")
COLOURS = ("red", "blue", "green", "yellow", "white", "black")
LINES = (
    "Welcome, everyone",
    "Let's get started",
    "Watch this closely",
    "That was quick",
    "See you tomorrow",
    "Is anybody there",
    "Mind the step",
    "Here it comes",
    "Not again",
    "Well done",
    "Time for lunch",
    "Look over there",
)

#: Events per video (besides the object sighting) and the seconds each slot of the timeline spans.
EVENTS_PER_VIDEO = (7, 10)
SLOT_SECONDS = (6.0, 10.0)


def generate_script(seed: int, *, script_id: str | None = None) -> Script:
    """A validated two-video script with one question of each kind, the same for the same seed."""
    rng = random.Random(seed)
    sid = script_id or f"gen-{seed}"
    obj = rng.choice(OBJECTS)
    counts = rng.sample(range(1, 6), 2)  # distinct, so "which video shows more" has one answer
    videos = [_video(rng, f"{sid}-v{i + 1}", f"scene_{i + 1}.mp4", obj, counts[i]) for i in range(2)]
    first, second = videos
    questions = [
        _counting(rng, sid, first),
        _ordering(rng, sid, second),
        _alignment(rng, sid, first),
        _comparison(rng, sid, videos, obj),
    ]
    sightings = [next(e for e in v.events if e.kind == "object") for v in videos]
    relations = [
        Relation(
            kind="same_subject",
            source=EventRef(video_id=first.video_id, event_id=sightings[0].event_id),
            target=EventRef(video_id=second.video_id, event_id=sightings[1].event_id),
            note=f"the same kind of {obj} in both videos",
        )
    ]
    return Script(script_id=sid, videos=videos, relations=relations, questions=questions)


def generate_scripts(count: int, seed: int) -> list[Script]:
    """``count`` scripts; script ``i`` is ``generate_script(seed * 100_003 + i)``."""
    return [generate_script(seed * 100_003 + i, script_id=f"gen-{seed}-{i}") for i in range(count)]


# ============================================================================ videos


def _video(rng: random.Random, video_id: str, file_name: str, obj: str, obj_count: int) -> ScriptVideo:
    """Events in consecutive slots: one action repeated 2-3 times (for counting), distinct actions
    otherwise, one object sighting; a spoken line inside every distinct action (and some repeats)."""
    n = rng.randint(*EVENTS_PER_VIDEO)
    subjects = rng.sample(SUBJECTS, 3)
    repeated = f"the {subjects[0]} {rng.choice(ACTIONS)}"
    repeats = rng.randint(2, 3)
    singles = [f"the {s} {a}" for s in subjects for a in ACTIONS if f"the {s} {a}" != repeated]
    labels = [repeated] * repeats + rng.sample(singles, n - repeats)
    rng.shuffle(labels)
    obj_slot = rng.randrange(n + 1)
    lines = list(LINES)
    rng.shuffle(lines)
    events: list[Event] = []
    audio: list[AudioLine] = []
    t = rng.uniform(1.0, 3.0)
    for slot in range(n + 1):
        width = rng.uniform(*SLOT_SECONDS)
        start = round(t + rng.uniform(0.0, 1.0), 1)
        end = round(start + rng.uniform(2.0, width - 2.0), 1)
        if slot == obj_slot:
            colour = rng.choice(COLOURS)
            events.append(
                Event(
                    event_id=f"e{slot}",
                    start=start,
                    end=end,
                    kind="object",
                    label=f"{obj_count} {colour} {obj}{'s' if obj_count > 1 else ''}",
                    subject=obj,
                    attributes={"count": obj_count, "colour": colour},
                )
            )
        else:
            label = labels.pop()
            events.append(
                Event(
                    event_id=f"e{slot}",
                    start=start,
                    end=end,
                    label=label,
                    subject=label.split()[1],
                )
            )
            if label != repeated or rng.random() < 0.5:
                # A line inside the event: what temporal-alignment questions ask about.
                mid = (start + end) / 2
                audio.append(AudioLine(start=round(mid - 0.5, 1), end=round(mid + 0.5, 1), text=lines.pop()))
        t += width
    duration = round(t + rng.uniform(2.0, 5.0), 1)
    return ScriptVideo(video_id=video_id, file_name=file_name, duration=duration, events=events, audio=audio)


def _unique_action_events(video: ScriptVideo) -> list[Event]:
    labels = [e.label for e in video.events]
    return [e for e in video.events if e.kind == "action" and labels.count(e.label) == 1]


def _options(rng: random.Random, answer: str, others: Sequence[str], count: int = 4) -> list[str]:
    """``answer`` and up to ``count - 1`` distinct ``others`` in random order."""
    pool = sorted({o for o in others if o != answer})
    options = [answer, *rng.sample(pool, min(count - 1, len(pool)))]
    rng.shuffle(options)
    return options


# ============================================================================ questions


def _counting(rng: random.Random, sid: str, video: ScriptVideo) -> Question:
    labels = [e.label for e in video.events if e.kind == "action"]
    label = max(set(labels), key=lambda x: (labels.count(x), x))
    hits = [e for e in video.events if e.label == label]
    answer = str(len(hits))
    options = _options(rng, answer, [str(n) for n in range(1, 7)])
    return Question(
        question_id=f"{sid}-count",
        kind="counting",
        text=f"In video {video.file_name}, how many times does this happen: {label}?",
        video_ids=[video.video_id],
        options=options,
        answer=answer,
        evidence=[Evidence(video_id=video.video_id, start=e.start, end=e.end) for e in hits],
        focus=[label],
    )


def _ordering(rng: random.Random, sid: str, video: ScriptVideo) -> Question:
    picked = rng.sample(_unique_action_events(video), 3)
    first = min(picked, key=lambda e: e.start)
    options = [e.label for e in picked]
    rng.shuffle(options)
    return Question(
        question_id=f"{sid}-order",
        kind="ordering",
        text=f"In video {video.file_name}, which of these happens first?",
        video_ids=[video.video_id],
        options=options,
        answer=first.label,
        evidence=[Evidence(video_id=video.video_id, start=e.start, end=e.end) for e in picked],
        focus=options,
    )


def _alignment(rng: random.Random, sid: str, video: ScriptVideo) -> Question:
    # An event heard over by exactly one line, which no other event overlaps.
    candidates = []
    for event in _unique_action_events(video):
        heard = [a for a in video.audio if a.overlaps(event.start, event.end)]
        if len(heard) == 1:
            candidates.append((event, heard[0]))
    if not candidates:
        raise ValueError(f"video {video.video_id} has no event with one line spoken during it")
    event, line = rng.choice(candidates)
    options = _options(rng, line.text, [a.text for a in video.audio] + list(LINES))
    return Question(
        question_id=f"{sid}-align",
        kind="temporal_alignment",
        text=f"In video {video.file_name}, what is said while {event.label}?",
        video_ids=[video.video_id],
        options=options,
        answer=line.text,
        evidence=[Evidence(video_id=video.video_id, start=event.start, end=event.end)],
        focus=[event.label],
    )


def _comparison(rng: random.Random, sid: str, videos: list[ScriptVideo], obj: str) -> Question:
    sightings = [next(e for e in v.events if e.kind == "object") for v in videos]
    counts = [int(e.attributes["count"]) for e in sightings]
    answer = videos[counts.index(max(counts))].file_name
    # Shuffled, so the answer's letter says nothing (listed in order it would always be A or B).
    options = [v.file_name for v in videos] + ["both show the same number"]
    rng.shuffle(options)
    return Question(
        question_id=f"{sid}-compare",
        kind="comparison",
        text=f"Which video shows more {obj}s: {videos[0].file_name} or {videos[1].file_name}?",
        video_ids=[v.video_id for v in videos],
        options=options,
        answer=answer,
        evidence=[
            Evidence(video_id=v.video_id, start=e.start, end=e.end)
            for v, e in zip(videos, sightings, strict=True)
        ],
        focus=[obj],
    )

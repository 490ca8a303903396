"""SAMA's evidence memory and verification layer.

The memory holds, per video id, the verified facts (counts, colours, times) and distilled notes of
what tools returned; the planner sees this memory instead of the whole conversation. A new fact
that disagrees with a known one about the same subject and time is a conflict: the layer re-reads
the segment over a narrowed window (:func:`narrowed`) with the vision model until one side is
confirmed or the re-read budget is spent; only the confirmed value is kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import BaseModel

from vidscope.agents.sama.facts import Fact, agree, conflicts

#: Characters a note keeps; longer evidence is distilled to its first sentences within this.
NOTE_CHARS = 400


class Note(BaseModel):
    """A distilled observation: which tool, over which interval, what it found."""

    tool: str
    t0: float | None = None
    t1: float | None = None
    text: str


def distil(text: str, limit: int = NOTE_CHARS) -> str:
    """``text`` cut at a sentence end within ``limit`` characters (whole if short enough)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = max(text.rfind(". ", 0, limit), text.rfind("; ", 0, limit))
    return (text[: cut + 1] if cut > limit // 3 else text[: limit - 1]) + "…"


@dataclass
class VideoMemory:
    """What is known about one video."""

    facts: list[Fact] = field(default_factory=list)
    unresolved: list[tuple[Fact, Fact]] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)


@dataclass
class EvidenceMemory:
    """Verified evidence keyed by video id (what the planner sees)."""

    videos: dict[str, VideoMemory] = field(default_factory=dict)

    def of(self, video_id: str) -> VideoMemory:
        """The memory of one video (created empty)."""
        return self.videos.setdefault(video_id, VideoMemory())

    def all_facts(self) -> list[Fact]:
        """Every kept fact, over all videos."""
        return [f for m in self.videos.values() for f in m.facts]

    def note(
        self, video_id: str, tool: str, text: str, t0: float | None = None, t1: float | None = None
    ) -> None:
        """Keep a distilled note of a tool's output."""
        self.of(video_id).notes.append(Note(tool=tool, t0=t0, t1=t1, text=distil(text)))

    def keep(self, fact: Fact) -> None:
        """Keep ``fact``, replacing an agreeing one with the same key and interval."""
        memory = self.of(fact.video_id)
        memory.facts = [
            f for f in memory.facts if not (f.key() == fact.key() and f.overlaps(fact) and agree(f, fact))
        ]
        memory.facts.append(fact)

    def drop(self, fact: Fact) -> None:
        """Forget a fact (one side of a resolved conflict)."""
        memory = self.of(fact.video_id)
        memory.facts = [f for f in memory.facts if f != fact]

    def render(self) -> dict[str, object]:
        """The memory as JSON-able data for the planner."""
        return {
            video_id: {
                "verified_facts": [f.describe() for f in m.facts],
                "unresolved_conflicts": [f"{a.describe()} VS {b.describe()}" for a, b in m.unresolved],
                "notes": [n.model_dump(exclude_none=True) for n in m.notes],
            }
            for video_id, m in self.videos.items()
        }


def narrowed(a: Fact, b: Fact, round_: int) -> tuple[float, float]:
    """The window a re-read looks at: the overlap of the two facts' intervals, halved around its
    centre once per earlier round (at least 1 s)."""
    start, end = max(a.t0, b.t0), min(a.t1, b.t1)
    for _ in range(round_):
        centre, half = (start + end) / 2, max(0.5, (end - start) / 4)
        start, end = centre - half, centre + half
    return start, end


#: A re-read: (fact in conflict, window start, window end) -> the facts the re-read states.
Reread = Callable[[Fact, float, float], list[Fact]]


@dataclass
class Resolution:
    """What the verification of one conflict did."""

    conflict: tuple[Fact, Fact]
    rereads: list[tuple[float, float, list[Fact]]]
    kept: Fact | None

    def describe(self) -> str:
        """One line for the trace and the planner."""
        new, old = self.conflict
        windows = ", ".join(f"[{a:.1f}, {b:.1f}]s" for a, b, _ in self.rereads)
        outcome = f"kept {self.kept.value} ({self.kept.source})" if self.kept else "unresolved"
        return (
            f"conflict on {new.kind} of {new.subject}: {new.source} says {new.value}, {old.source} "
            f"says {old.value}; re-read {windows or 'not possible'}; {outcome}"
        )


def admit(
    memory: EvidenceMemory, new: list[Fact], reread: Reread | None, max_rereads: int
) -> list[Resolution]:
    """Add ``new`` facts to ``memory``, checking each against what is kept.

    Without ``reread`` (the conflict-check ablation) facts are kept as they come. A conflict is
    re-read over narrowing windows: the side the re-read agrees with is kept and the other dropped;
    after ``max_rereads`` without agreement both are dropped and the conflict is listed unresolved.
    """
    resolutions = []
    for fact in new:
        found = conflicts([fact], memory.all_facts()) if reread is not None else []
        if not found or reread is None:
            memory.keep(fact)
            continue
        _, known = found[0]
        rereads: list[tuple[float, float, list[Fact]]] = []
        kept = None
        for round_ in range(max_rereads):
            start, end = narrowed(fact, known, round_)
            seen = [f for f in reread(fact, start, end) if f.key() == fact.key()]
            rereads.append((start, end, seen))
            votes = [side for side in (fact, known) if any(agree(side, s) for s in seen)]
            if len(votes) == 1:
                kept = votes[0]
                break
        memory.drop(known)
        if kept is not None:
            memory.keep(kept)
        else:
            memory.of(fact.video_id).unresolved.append((fact, known))
        resolutions.append(Resolution((fact, known), rereads, kept))
    return resolutions

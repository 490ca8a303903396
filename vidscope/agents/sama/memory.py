"""SAMA's evidence memory and verification layer.

The memory holds, per video id, the verified facts (counts, colours, times) and notes of what tools
returned; the planner sees this memory instead of the whole conversation. The latest tool result
is shown in full (``latest``, within ``result_tokens``, :func:`within_tokens`); earlier results stay
as notes, each whole while the notes fit ``memory_tokens`` and distilled to the tool's one-line
summary, oldest first, once they do not — so a detail (a date, a name, a colour) a tool reported
is never cut at a fixed number of characters. A distilled note keeps, beside the summary, the one
line of the result that bears most on the question (:func:`best_line`), not its first: the
summary of a reading is its first words, and the line that answers may come last. A new fact
that disagrees with a known one about the same subject and time is a conflict: the layer re-reads
the segment over a narrowed window (:func:`narrowed`) with the vision model until one side is
confirmed or the re-read budget is spent; only the confirmed value is kept.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import BaseModel

from vidscope.agents.sama.facts import Fact, agree, conflicts, same_claim
from vidscope.core.lexicon import keywords

#: Characters per token of the estimate below (English text and JSON average about four for the
#: BPE tokenizers of the planners we run; the budget is a guard, not an exact count).
CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """A rough token count of ``text`` (at least 1 for non-empty text)."""
    return -(-len(text) // CHARS_PER_TOKEN)


def within_tokens(text: str, budget: int) -> str:
    """``text`` whole if it fits ``budget`` tokens, else its start with a line saying how much was
    left out and how to see it (ask for a narrower interval)."""
    if estimate_tokens(text) <= budget:
        return text
    keep = budget * CHARS_PER_TOKEN
    left = estimate_tokens(text[keep:])
    return f"{text[:keep]} […about {left} more tokens not shown: ask for a narrower interval]"


class Note(BaseModel):
    """An earlier tool result: which tool, over which interval, what it found (``text``, whole)
    and its one-line ``summary`` (the distilled form shown when the notes exceed their budget)."""

    tool: str
    t0: float | None = None
    t1: float | None = None
    text: str
    summary: str = ""
    #: Position over all videos' notes (the order in which results arrived).
    seq: int = 0
    #: A result of the last turn, not yet shown to the planner: rendered in full under ``latest``.
    fresh: bool = True


@dataclass
class VideoMemory:
    """What is known about one video."""

    facts: list[Fact] = field(default_factory=list)
    unresolved: list[tuple[Fact, Fact]] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)


def best_line(text: str, question: str) -> str:
    """The line (sentence, or quoted string of a JSON result) of ``text`` sharing the most
    keywords with ``question``, the earliest on a tie; empty when none shares one."""
    pieces = [p.strip(' ,:[]{}"') for p in _LINES.split(text)]
    wanted = set(keywords(question))
    best, score = "", 0
    for piece in pieces:
        hits = len(wanted & set(keywords(piece)))
        if hits > score:
            best, score = piece, hits
    return best


#: Where a result's text is split into lines: sentence ends, line breaks and JSON string bounds.
_LINES = re.compile(r'(?<=[.!?])\s+|\n+|"\s*[,:]\s*"|",\s*|\s*\{\s*"|"\s*\}')


@dataclass
class EvidenceMemory:
    """Verified evidence keyed by video id (what the planner sees)."""

    videos: dict[str, VideoMemory] = field(default_factory=dict)
    #: The question asked (a distilled note keeps the line that bears most on it).
    question: str = ""
    #: Tool calls whose facts were admitted so far (numbers each call's facts).
    calls: int = 0

    def of(self, video_id: str) -> VideoMemory:
        """The memory of one video (created empty)."""
        return self.videos.setdefault(video_id, VideoMemory())

    def all_facts(self) -> list[Fact]:
        """Every kept fact, over all videos."""
        return [f for m in self.videos.values() for f in m.facts]

    def note(
        self,
        video_id: str,
        tool: str,
        text: str,
        summary: str = "",
        t0: float | None = None,
        t1: float | None = None,
    ) -> None:
        """Keep a note of a tool's output (whole; :meth:`render` distils it when over budget)."""
        seq = sum(len(m.notes) for m in self.videos.values())
        note = Note(tool=tool, t0=t0, t1=t1, text=" ".join(text.split()), summary=summary, seq=seq)
        self.of(video_id).notes.append(note)

    def keep(self, fact: Fact) -> None:
        """Keep ``fact``, replacing an agreeing one of the same claim and interval."""
        memory = self.of(fact.video_id)
        memory.facts = [
            f for f in memory.facts if not (same_claim(f, fact) and f.overlaps(fact) and agree(f, fact))
        ]
        memory.facts.append(fact)

    def drop(self, fact: Fact) -> None:
        """Forget a fact (one side of a resolved conflict)."""
        memory = self.of(fact.video_id)
        memory.facts = [f for f in memory.facts if f != fact]

    def settle(self) -> None:
        """The fresh results have been shown: from now on they are notes like the others."""
        for m in self.videos.values():
            for n in m.notes:
                n.fresh = False

    def render(self, note_tokens: int | None = None, result_tokens: int | None = None) -> dict[str, object]:
        """The memory as JSON-able data for the planner.

        Per video: ``latest``, the results not yet shown, each in full within its share of
        ``result_tokens``; ``notes``, the earlier ones, whole while all of them fit
        ``note_tokens`` (no limit when None) and past it distilled to their summaries, oldest
        first over all videos, until the rest fits."""
        every = [(video_id, i, n) for video_id, m in self.videos.items() for i, n in enumerate(m.notes)]
        fresh = sum(1 for _, _, n in every if n.fresh)
        share = None if result_tokens is None else max(100, result_tokens // max(fresh, 1))
        notes = [item for item in every if not item[2].fresh]
        notes.sort(key=lambda item: item[2].seq)
        total = sum(estimate_tokens(n.text) for _, _, n in notes)
        distilled: set[tuple[str, int]] = set()
        for video_id, i, n in notes:  # oldest first
            if note_tokens is None or total <= note_tokens:
                break
            if n.summary:
                distilled.add((video_id, i))
                total -= estimate_tokens(n.text) - estimate_tokens(n.summary)

        def shown(video_id: str, i: int, n: Note) -> dict[str, object]:
            if n.fresh:
                text = n.text if share is None else within_tokens(n.text, share)
            elif (video_id, i) in distilled:
                line = best_line(n.text, self.question)
                text = n.summary if not line or line in n.summary else f"{n.summary} … {line}"
            else:
                text = n.text
            note: dict[str, object] = {"tool": n.tool, "text": text}
            if n.t0 is not None:
                note["t0"], note["t1"] = n.t0, n.t1
            return note

        return {
            video_id: {
                "verified_facts": [f.describe() for f in m.facts],
                "unresolved_conflicts": [f"{a.describe()} VS {b.describe()}" for a, b in m.unresolved],
                "notes": [shown(video_id, i, n) for i, n in enumerate(m.notes) if not n.fresh],
                "latest": [shown(video_id, i, n) for i, n in enumerate(m.notes) if n.fresh],
            }
            for video_id, m in self.videos.items()
        }


def narrowed(a: Fact, b: Fact, round_: int) -> tuple[float, float]:
    """The window a re-read looks at: the two facts' shared window. For a time it is halved
    around the two stated times once per earlier round (at least 1 s); a count or a colour is
    re-read over the same window, since a shorter one may rightly hold fewer objects."""
    start, end = max(a.t0, b.t0), min(a.t1, b.t1)
    if a.kind != "time":
        return start, end
    for _ in range(round_):
        centre = (float(a.value) + float(b.value)) / 2
        half = max(0.5, (end - start) / 4)
        start, end = max(start, centre - half), min(end, centre + half)
    return start, end


#: A re-read: (fact in conflict, window start, window end) -> the facts the re-read states.
Reread = Callable[[Fact, float, float], list[Fact]]


@dataclass
class Resolution:
    """What the verification of one conflict did."""

    conflict: tuple[Fact, Fact]
    rereads: list[tuple[float, float, list[Fact]]]
    kept: Fact | None
    #: Whether the kept value is the re-reads' own (both sides were wrong).
    by_reread: bool = False

    def describe(self) -> str:
        """One line for the trace and the planner."""
        new, old = self.conflict
        windows = ", ".join(f"[{a:.1f}, {b:.1f}]s" for a, b, _ in self.rereads)
        if self.kept is None:
            outcome = "unresolved"
        elif self.by_reread:
            outcome = f"kept {self.kept.value} (the re-reads agree; neither side did)"
        else:
            outcome = f"kept {self.kept.value} ({self.kept.source})"
        what = f"{new.measure} {new.kind}" if new.measure else new.kind
        return (
            f"conflict on {what} of {new.subject}: {new.source} says {new.value}, {old.source} "
            f"says {old.value}; re-read {windows or 'not possible'}; {outcome}"
        )


def admit(
    memory: EvidenceMemory, new: list[Fact], reread: Reread | None, max_rereads: int
) -> list[Resolution]:
    """Add ``new`` facts to ``memory``, checking each against what is kept.

    ``new`` are the facts of one tool call: they are numbered as one call (never compared with
    each other) and each is checked against every kept fact, from any tool and any earlier call.
    Without ``reread`` (the conflict-check ablation) facts are kept as they come. A conflict is
    re-read (:func:`narrowed`) and resolved toward what the re-read sees: the side it agrees with
    is kept and the other dropped; when it agrees with neither side but two re-reads agree with
    each other, their value is kept; else, after ``max_rereads``, both are dropped and the
    conflict is listed unresolved.
    """
    resolutions = []
    new = [f.model_copy(update={"call": memory.calls}) for f in new]
    memory.calls += 1
    for fact in new:
        found = conflicts([fact], memory.all_facts()) if reread is not None else []
        if not found or reread is None:
            memory.keep(fact)
            continue
        _, known = found[0]
        rereads: list[tuple[float, float, list[Fact]]] = []
        kept, by_reread = None, False
        for round_ in range(max_rereads):
            start, end = narrowed(fact, known, round_)
            seen = [f for f in reread(fact, start, end) if same_claim(f, fact)]
            rereads.append((start, end, seen))
            votes = [side for side in (fact, known) if any(agree(side, s) for s in seen)]
            if len(votes) == 1:
                kept = votes[0]
                break
            earlier = [f for _, _, found in rereads[:-1] for f in found]
            confirmed = [f for f in seen if any(agree(f, e) for e in earlier)]
            if not votes and confirmed:
                kept, by_reread = confirmed[0], True
                break
        memory.drop(known)
        if kept is not None:
            memory.keep(kept)
        else:
            memory.of(fact.video_id).unresolved.append((fact, known))
        resolutions.append(Resolution((fact, known), rereads, kept, by_reread))
    return resolutions

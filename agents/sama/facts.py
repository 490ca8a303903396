"""Structured facts that SAMA's tools state about a video, and when two of them disagree.

A fact is one checkable statement — a count, a colour or a time — about one subject in one
interval of one video, stated by one tool. The verification layer compares like with like
(:func:`comparable`): facts about the same subject from different tools, counts of the same
measure (the most seen at once, ``peak``, with another peak; different objects over the window,
``distinct``, with distinct ones) over the same window, colours over the same window (each
tool's colour of a label is its majority over frames), and times only when each tool could have
seen the other's time.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from vidscope.core.lexicon import canonical_form

FactKind = Literal["count", "colour", "time"]

#: Two times of the same event further apart than this (seconds) disagree.
TIME_TOLERANCE = 3.0

#: Counts and colours are compared only over the same window: intervals whose overlap is at least
#: this share of their union (a count over a longer stretch may rightly be higher).
SAME_WINDOW = 0.8

#: What a count counts: ``peak``, the most seen together in one frame (the tracker's per-frame
#: peak); ``distinct``, different objects (or occurrences) over the whole window (the tracker's
#: tracked ids, the reader's answer to "how many").
CountMeasure = Literal["peak", "distinct"]

#: Colour words mapped to a family, so "crimson" and "red" agree and "red" and "blue" do not.
COLOUR_FAMILIES = {
    "red": "red",
    "crimson": "red",
    "maroon": "red",
    "scarlet": "red",
    "orange": "orange",
    "yellow": "yellow",
    "gold": "yellow",
    "green": "green",
    "olive": "green",
    "lime": "green",
    "blue": "blue",
    "navy": "blue",
    "cyan": "blue",
    "teal": "blue",
    "purple": "purple",
    "violet": "purple",
    "magenta": "purple",
    "pink": "pink",
    "brown": "brown",
    "tan": "brown",
    "black": "black",
    "white": "white",
    "grey": "grey",
    "gray": "grey",
    "silver": "grey",
}


class Fact(BaseModel):
    """One structured statement of a tool about ``subject`` in [t0, t1] of ``video_id``."""

    video_id: str
    t0: float
    t1: float
    kind: FactKind
    subject: str
    value: float | str
    source: str
    #: For a count, what it counts (see :data:`CountMeasure`); empty for colours and times.
    measure: str = ""

    def key(self) -> tuple[str, str, str, str]:
        """(video, kind, canonical subject, measure): facts with the same key may be compared."""
        return self.video_id, self.kind, subject_key(self.subject), self.measure

    def overlaps(self, other: Fact) -> bool:
        """Whether the two intervals share time."""
        return self.t0 <= other.t1 and other.t0 <= self.t1

    def same_window(self, other: Fact) -> bool:
        """Whether the two intervals are (nearly) the same: overlap / union >= SAME_WINDOW."""
        overlap = min(self.t1, other.t1) - max(self.t0, other.t0)
        union = max(self.t1, other.t1) - min(self.t0, other.t0)
        if union <= 0:
            return self.t0 == other.t0
        return overlap / union >= SAME_WINDOW

    def describe(self) -> str:
        """The fact in words, for prompts and traces."""
        what = f"{self.measure} {self.kind}" if self.measure else self.kind
        return f"{self.source}: {what} of {self.subject} = {self.value} in [{self.t0:g}, {self.t1:g}]s"


def subject_key(subject: str) -> str:
    """The canonical (singular, lower-case) form of a subject ("bags" and "bag" are one)."""
    return canonical_form(subject, "object") or " ".join(subject.lower().split())


def colour_family(value: str) -> str:
    """The family of a colour phrase ("dark red" -> "red"); the phrase itself if unknown."""
    words = value.lower().replace("-", " ").split()
    for word in reversed(words):
        if word in COLOUR_FAMILIES:
            return COLOUR_FAMILIES[word]
    return " ".join(words)


def agree(a: Fact, b: Fact) -> bool:
    """Whether two facts with the same key state the same thing."""
    if a.kind == "count":
        return round(float(a.value)) == round(float(b.value))
    if a.kind == "time":
        return abs(float(a.value) - float(b.value)) <= TIME_TOLERANCE
    return colour_family(str(a.value)) == colour_family(str(b.value))


def comparable(a: Fact, b: Fact) -> bool:
    """Whether two facts from different tools can conflict: same key (subject, kind, measure);
    counts and colours over the same window; times only when each lies inside both windows (a
    tool that did not look at a moment says nothing about it)."""
    if a.key() != b.key() or a.source == b.source:
        return False
    if a.kind == "time":
        start, end = max(a.t0, b.t0), min(a.t1, b.t1)
        return all(start <= float(f.value) <= end for f in (a, b))
    return a.same_window(b)


def conflicts(new: list[Fact], known: list[Fact]) -> list[tuple[Fact, Fact]]:
    """Pairs (new fact, known fact) that are :func:`comparable` and disagree."""
    return [(f, o) for f in new for o in known if comparable(f, o) and not agree(f, o)]


def majority(values: list[str]) -> str | None:
    """The colour most of ``values`` name (by family; the first-seen phrase of it), if one colour
    holds more than half of them; None for no values or no majority."""
    if not values:
        return None
    families = [colour_family(v) for v in values]
    best = max(set(families), key=families.count)
    if families.count(best) * 2 <= len(families):
        return None
    return values[families.index(best)]

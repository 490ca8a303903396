"""Structured facts that SAMA's tools state about a video, and when two of them disagree.

A fact is one checkable statement — a count, a colour or a time — about one subject in one
interval of one video, stated by one tool. The verification layer compares facts about the same
subject from different tools over overlapping intervals (:func:`conflicts`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from vidscope.core.lexicon import canonical_form

FactKind = Literal["count", "colour", "time"]

#: Two times of the same event further apart than this (seconds) disagree.
TIME_TOLERANCE = 3.0

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

    def key(self) -> tuple[str, str, str]:
        """(video, kind, canonical subject): facts with the same key may be compared."""
        return self.video_id, self.kind, subject_key(self.subject)

    def overlaps(self, other: Fact) -> bool:
        """Whether the two intervals share time."""
        return self.t0 <= other.t1 and other.t0 <= self.t1

    def describe(self) -> str:
        """The fact in words, for prompts and traces."""
        return f"{self.source}: {self.kind} of {self.subject} = {self.value} in [{self.t0:g}, {self.t1:g}]s"


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


def conflicts(new: list[Fact], known: list[Fact]) -> list[tuple[Fact, Fact]]:
    """Pairs (new fact, known fact) about the same subject and overlapping time, from different
    tools, that disagree."""
    found = []
    for fact in new:
        for other in known:
            if (
                fact.key() == other.key()
                and fact.source != other.source
                and fact.overlaps(other)
                and not agree(fact, other)
            ):
                found.append((fact, other))
    return found

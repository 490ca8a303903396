"""Structured facts that SAMA's tools state about a video, and when two of them disagree.

A fact is one checkable statement — a count, a colour or a time — about one subject in one
interval of one video, stated by one tool. The verification layer compares like with like
(:func:`comparable`): facts about the same subject from different tool calls, counts of the same
measure (the most seen at once, ``peak``, with another peak; different objects over the window,
``distinct``, with distinct ones) over the same window, colours over the same window (each
tool's colour of a label is its majority over frames), and times only when each tool could have
seen the other's time.

What may conflict follows SAMA's paper as issue 38 reads it (its App. B/C text could not be found
here, only its abstract): a fact may conflict with any other tool's fact *and* with the same tool's
fact from another call — two readings of one segment that state different times or counts are
exactly what the verification layer is for — but never with a fact of the same call (one
``scene_graph`` call states its detector's and its vision model's colours; they are one
observation). Subjects are matched by meaning, not spelling: "grocery bags" and "bag" are one
subject (same head noun, one's words inside the other's: the paper's Fig. 4 pits the reader's
"2 grocery bags" against the scene graph's "1 bag"), "red car" and "blue car" are not; a time's
subject is the event asked about, compared by its content words ("When does the door open?" and a
re-read of it are one event).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from vidscope.core.lexicon import STOP_WORDS, canonical_form, singular, tokens, verb_lemma, word_set

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

#: What a re-read adds to its question (stripped again when the event of a time is read from it).
REREAD_NOTE = "Look carefully; state it."

#: Words of asking about a time, not of the event asked about.
TIME_WORDS = word_set(
    "when time times moment moments happen happens happened happening exactly second seconds "
    "minute minutes point look carefully state begin begins start starts occur occurs how many much"
)

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
    #: The tool call that stated it (numbered by the memory, :func:`memory.admit`); facts of one
    #: call are never compared with each other. -1: not numbered (compared with every other).
    call: int = -1

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


def event_of(question: str) -> str:
    """The event a time question asks about: the question without a re-read's note."""
    return " ".join(question.replace(REREAD_NOTE, " ").split())


def subject_words(fact: Fact) -> tuple[str, ...]:
    """The words a subject is matched by: for a time, the content words of the event (verbs and
    nouns in their base form, without the words of asking about time); else the canonical form's
    words (singular, lower case), the head noun last."""
    if fact.kind == "time":
        words = [w for w in tokens(fact.subject) if w not in STOP_WORDS and w not in TIME_WORDS]
        return tuple(sorted({verb_lemma(w) or singular(w) for w in words}))
    return tuple(subject_key(fact.subject).split())


def same_subject(a: Fact, b: Fact) -> bool:
    """Whether two facts speak of the same subject: for a time, the same event (one's content
    words among the other's, at least two of them, or the same words); else the same head noun
    with one's words among the other's ("bag" and "grocery bag", not "red car" and "blue car")."""
    wa, wb = subject_words(a), subject_words(b)
    if not wa or not wb:
        return False
    small, large = sorted((set(wa), set(wb)), key=len)
    if a.kind == "time":
        return small == large or (len(small) >= 2 and small <= large)
    return wa[-1] == wb[-1] and small <= large


def same_claim(a: Fact, b: Fact) -> bool:
    """Whether two facts state the same kind of thing (video, kind, measure) of the same subject."""
    return (a.video_id, a.kind, a.measure) == (b.video_id, b.kind, b.measure) and same_subject(a, b)


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
    """Whether two facts can conflict: stated by different calls (of any tools), the same claim
    (:func:`same_claim`); counts and colours over the same window; times only when each lies
    inside both windows (a tool that did not look at a moment says nothing about it)."""
    if (a.call >= 0 and a.call == b.call) or not same_claim(a, b):
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

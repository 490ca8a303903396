"""What a look at frames found: a vision model's reply read as *found* or *not found*, what, and when.

Every frame tool (DVD's ``frame_inspect``, AVI's ``frame_analysis``, AgentCVR's ``visual_query``,
SAMA's ``video_reader``) asks its model for a structured reply
(:data:`~vidscope.agents.prompts.LOOK_FORMAT`): whether the frames show what was asked, what the
model sees (or what is missing), and the times of the frames that show it. :func:`read_look`
reads that reply; a model that ignores the format (free prose, as small and older vision models
write) is read by :func:`reports_nothing`, a classifier of replies that found nothing, refused or
say the thing is absent, in English and the languages people ask in.

Why it matters: a look supports the ranges it saw something in (:mod:`vidscope.agents.citations`),
and a look that saw nothing supports nothing — "Cannot find corresponding result in the given time
range.", "No lighthouse is visible in these frames.", "I cannot find any boat" never verify a
citation. The classifier errs towards *nothing found*: a positive reply it misreads leaves a
citation unverified (honest), the reverse would verify a range nobody saw anything in.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from vidscope.agents.answers import Support
from vidscope.agents.tools import ToolResult
from vidscope.models.protocols.chat import Usage

#: Phrases that say a look found nothing, refused, or that the thing asked about is absent. Read
#: on lower-cased text. English first, then the languages a multilingual vision model answers in
#: when asked in them (Chinese, Japanese, Korean, Spanish, French, German, Portuguese, Italian,
#: Dutch, Russian). Matching any of them in the reply's opening sentences makes it *nothing found*.
_NOTHING_PATTERNS = (
    # English
    r"\b(?:can ?not|can'?t|could ?not|couldn'?t|unable to|not able to|did ?not|didn'?t|do ?not|"
    r"don'?t|does ?not|doesn'?t|fail(?:ed)? to)\s+(?:\w+\s+)?(?:find|see|locate|identify|detect|"
    r"spot|observe|determine|tell|make out|confirm|show|contain|depict|include|appear)\b",
    r"\bno\s+(?:[\w'-]+\s+){0,4}(?:is|are|was|were|can be|could be|appears?|seems?)\s+(?:clearly\s+)?"
    r"(?:visible|seen|shown|present|found|detected|observed|depicted|displayed|apparent|identifiable|"
    r"there|in (?:the|these|this|any))\b",
    r"\b(?:is|are|was|were|be)\s+(?:not|never)\s+(?:\w+\s+)?(?:visible|seen|shown|present|found|"
    r"detected|observed|depicted|displayed|apparent|identifiable|there)\b",
    r"\b(?:isn'?t|aren'?t|wasn'?t|weren'?t)\s+(?:\w+\s+)?(?:visible|seen|shown|present|found|detected|"
    r"observed|depicted|displayed|there|any)\b",
    r"\bthere (?:is|are|was|were|appears to be|seems to be) (?:no|none)\b",
    r"\bnothing\b(?:\s+\w+){0,4}\s+(?:is |was |are )?(?:visible|seen|shown|found|relevant|matching|"
    r"happens|happening|appears|detected|resembl\w*|like)\b",
    r"\bno (?:visual |clear |such |matching |corresponding |relevant |sign |trace |indication )*"
    r"(?:evidence|sign|signs|trace|indication|result|results|match|matches|instance|occurrence)\b",
    r"\bnot (?:found|present|visible|shown|seen|detected|in (?:the|these|this) (?:frames?|images?|"
    r"video|clip|segment|range))\b",
    r"\b(?:none|neither) of (?:the|these|them)\b",
    r"\b(?:sorry|apologi[sz]e|as an ai)\b",
    r"\b(?:impossible|unclear|not possible|hard|difficult) to (?:tell|see|determine|say|identify)\b",
    r"\b(?:do ?n[o']t|does ?n[o']t|did ?n[o']t) know\b|\bnot sure\b|\bunsure\b",
    r"\b(?:absent|absence of|no vision model|without any)\b",
    r"^\W*(?:error|no|none|nothing|n/a|unknown)\b",
    # Chinese
    r"没有|未(?:找到|发现|看到|出现|检测到|显示)|找不到|看不到|无法|不存在|不可见|并无",
    # Japanese
    r"見(?:つかりません|つからない|当たりません|えません|えない)|ありません|いません|確認できません|できません",
    # Korean
    r"없습니다|없어요|없음|찾을 수 없|보이지 않|확인할 수 없",
    # Spanish
    r"\bno (?:se )?(?:ve[ns]?|veo|encontr\w*|aparece\w*|hay|puedo|es visible|est[aá]n? visible\w*)\b|"
    r"\bning[uú]n[ao]?\b|\bnada\b",
    # French
    r"\bne (?:vois|voit|trouve|peux|peut|montre\w*|figure\w*)\b|\bn'(?:y a|est|appara[iî]t|ai)\b|"
    r"\baucun\w*|\brien\b|\bintrouvable\b|\bpas visible\b",
    # German
    r"\bkein(?:e|en|er|es|em)?\b|\bnicht (?:zu sehen|sichtbar|gefunden|erkennbar|vorhanden|finden|sehen)\b|"
    r"\bnichts\b",
    # Portuguese
    r"\bn[aã]o (?:h[aá]|vejo|encontr\w*|[eé] vis[ií]vel|aparece\w*|consigo)\b|\bnenhum\w*|\bnada\b",
    # Italian
    r"\bnon (?:vedo|trovo|c'[eè]|ci sono|[eè] visibile|appare|si vede)\b|\bnessun\w*|\bniente\b",
    # Dutch
    r"\bgeen\b|\bniet (?:zichtbaar|gevonden|te zien)\b|\bniets\b",
    # Russian
    r"\bнет\b|\bне (?:вижу|найден\w*|видно|обнаружен\w*|удалось)\b|\bничего\b|\bотсутству\w*",
)


@functools.cache
def _nothing() -> re.Pattern[str]:
    """:data:`_NOTHING_PATTERNS` as one pattern, compiled at the first look read (~6 ms: a
    question that makes no look does not pay it)."""
    return re.compile("|".join(f"(?:{p})" for p in _NOTHING_PATTERNS), re.IGNORECASE)


#: Sentence ends, in Latin and CJK punctuation.
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|[。！？；\n]+")
#: How many opening sentences the classifier reads: a look states what it found first.
_OPENING_SENTENCES = 2
_OBJECT = re.compile(r"\{.*\}", re.DOTALL)
_MARKDOWN = re.compile(r"\*\*|__|`+")


@dataclass(frozen=True)
class Look:
    """A vision model's reply, read: whether it found what was asked, what it says, and the times
    (seconds) of the frames it says show it (empty when it did not say)."""

    found: bool
    what: str
    when: tuple[float, ...] = field(default_factory=tuple)
    #: Whether the reply followed the structured format (else the classifier read it).
    structured: bool = False


def reports_nothing(text: str | None) -> bool:
    """Whether a free-form reply found nothing, refused, or says the thing asked about is absent
    (its opening sentences, in any of the languages of :data:`_NOTHING_PATTERNS`). An empty reply
    found nothing."""
    words = _MARKDOWN.sub("", text or "").strip()
    if not words:
        return True
    opening = [s for s in _SENTENCE_END.split(words) if s.strip()][:_OPENING_SENTENCES]
    return any(_nothing().search(sentence.strip()) for sentence in opening)


def found_flag(value: object) -> bool | None:
    """A reply's ``found`` field as a bool (true/false, yes/no as text too); None when it is neither."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "false", "no"):
        return value.strip().lower() in ("true", "yes")
    return None


def _times(value: object) -> tuple[float, ...]:
    """Seconds from a ``when`` field: numbers, or [start, end] pairs (both ends kept)."""
    items = value if isinstance(value, list) else [value]
    times: list[float] = []
    for item in items:
        for number in item if isinstance(item, list) else [item]:
            if isinstance(number, int | float) and not isinstance(number, bool) and number >= 0:
                times.append(float(number))
    return tuple(times)


def read_look(text: str | None) -> Look:
    """The reply of a frame tool's vision model, read: structured when it followed
    :data:`~vidscope.agents.prompts.LOOK_FORMAT` (a ``found`` field), else by
    :func:`reports_nothing`. A structured reply that says ``found: true`` while its words say the
    thing is absent is read as found nothing."""
    raw = (text or "").strip()
    match = _OBJECT.search(raw)
    if match is not None:
        try:
            data = json.loads(match.group(0))
        except ValueError:
            data = None
        if isinstance(data, dict) and (found := found_flag(data.get("found"))) is not None:
            what = str(data.get("what") or data.get("answer") or "").strip()
            seen = found and not (what and reports_nothing(what))
            return Look(found=seen, what=what or raw, when=_times(data.get("when")), structured=True)
    return Look(found=not reports_nothing(raw), what=raw)


def times_inside(
    times: Sequence[float], ranges: Sequence[Sequence[float]], slack: float = 0.5
) -> list[float]:
    """The ``times`` that lie in one of ``ranges`` (give or take ``slack`` seconds): a model's
    ``when`` outside what it was shown is not a place it saw anything."""
    return [t for t in times if any(a - slack <= t <= b + slack for a, b in ranges)]


#: What a support says it found, at most this many characters.
FOUND_CHARS = 160
#: A look that says when it saw something supports this many seconds either side of each time it
#: names (within the range it looked at): a clip's length (5 s) either side, so a citation of the
#: clip or event around a sighting is covered (a reader's "time" is when the event starts), and a
#: sighting at 37 s does not vouch for a 30-s range.
LOOK_WINDOW_SECONDS = 5.0


def look_support(
    video_id: str,
    ranges: Sequence[Sequence[float]],
    *,
    found: bool,
    what: str,
    seen_at: Sequence[float] = (),
) -> list[Support]:
    """What one look supports: nothing but echoes of its ranges when it found nothing; else the
    moments it said show the thing (``seen_at``, :data:`LOOK_WINDOW_SECONDS` either side, within
    the looked range), or, when it did not say when, its whole looked ranges (``localized=False``:
    such looks over the whole video verify nothing)."""
    said = " ".join(what.split())[:FOUND_CHARS]
    if not found:
        return [
            Support(video_id=video_id, start=a, end=b, level="echoed", found=said, localized=False)
            for a, b in ranges
        ]
    if seen_at:
        supports = []
        for t in seen_at:
            a, b = next(
                ((a, b) for a, b in ranges if a <= t <= b), (t - LOOK_WINDOW_SECONDS, t + LOOK_WINDOW_SECONDS)
            )
            start, end = max(a, t - LOOK_WINDOW_SECONDS, 0.0), min(b, t + LOOK_WINDOW_SECONDS)
            supports.append(Support(video_id=video_id, start=start, end=end, level="perceived", found=said))
        return supports
    return [
        Support(video_id=video_id, start=a, end=b, level="perceived", found=said, localized=False)
        for a, b in ranges
    ]


class FrameLook(ToolResult):
    """A vision model's answer about frames of some time ranges (``frame_inspect``,
    ``frame_analysis``): what it said, the frames it saw, whether it saw what was asked, and so
    what it supports. Subclasses name their looked ranges (:meth:`looked`)."""

    video_id: str
    question: str
    answer: str
    frame_times: list[float]
    usage: Usage | None = None
    #: No model could look at frames (none configured, or it refused images): ``answer`` says so,
    #: and nothing was perceived.
    no_vision: bool = False
    #: Whether the model saw what was asked (its structured reply); ``None``: read from ``answer``
    #: (:func:`read_look`).
    found: bool | None = None
    #: The frame times the model said show it (empty: it did not say).
    seen_at: list[float] = Field(default_factory=list)

    def looked(self) -> list[list[float]]:
        """The time ranges the frames were taken from."""
        raise NotImplementedError

    def support(self) -> list[Support]:
        # A look supports where it saw something; a look that found nothing only echoes its ranges.
        if self.no_vision or not self.frame_times:
            return []
        return look_support(
            self.video_id,
            self.looked(),
            found=self.found if self.found is not None else read_look(self.answer).found,
            what=self.answer,
            seen_at=self.seen_at,
        )

    def model_usage(self) -> Usage | None:
        return self.usage

    def for_model(self) -> dict[str, Any]:
        if self.no_vision:  # nothing was looked at: only the note matters to the model
            return {"video_id": self.video_id, "no_vision": True, "note": self.answer}
        return self.model_dump(mode="json", exclude={"usage"})

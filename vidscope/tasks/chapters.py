"""Chapters, highlights and a summary of every video, without a model (the ``chapters`` stage).

What a video is about, made from what the store already holds: each clip's speech and on-screen
text (:func:`~vidscope.tasks.caption.clip_texts`), a model's clip captions when one wrote them,
and the clips' MiniLM text vectors (the ``embed`` stage). Nothing here calls a model except the
text embedder, for at most :data:`SENTENCE_CANDIDATES` sentences per chapter.

1. **Boundaries** where the topic changes (:mod:`vidscope.tasks.topic_tiling`: TextTiling depth
   scores over the text clips' words and vectors), at least ``[ingest] chapter_min_seconds`` apart.
   A cut found between two clips is placed at the start of what comes after it: text appearing on
   screen while nobody speaks (a title slide), else the sentence after the longest pause, else the
   clip's start.
2. **Titles**: the largest on-screen text appearing in the chapter's first seconds and shown in no
   other chapter (a title slide), else the chapter's three most distinctive words (TF-IDF against
   the rest of the video, nouns first).
3. **Summaries**: per chapter, the sentence (speech, else on-screen text) closest to the chapter's
   mean vector among the sentences of its most central clips (lexical overlap without vectors);
   the video's summary is those sentences in order.
4. **Highlights**: per chapter its most distinctive clip (rare words, far from the video's mean
   vector), as the whole sentences said in it, with the words that make it stand out.

A video without speech, on-screen text or captions gets chapters where its picture changes for
good (:func:`picture_cuts` over frame vectors or colour histograms; titled by their start time, with
no summary), or is one chapter whose note says why; nothing is made up. Where it fails: a topic
change inside a clip is placed at a sentence or slide start within about one clip; a video whose
parts share their words (the same product in every chapter) or that speaks in fragments splits late
or not at all; a title slide shown again later is not a title; the summary quotes the recognised
speech, errors included; picture changes cut at cuts between scenes, not at a change of subject
filmed in one place; on a video over 10 minutes cuts are at least one tiling block apart (up to a
minute), so shorter chapters there are missed. Time and memory grow with the duration: at most
3 + 1 chapter per 2 minutes, each embedding at most :data:`SENTENCE_CANDIDATES` sentences
(``benchmarks/chapters_long.py``: a synthetic 3-hour lecture).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vidscope.core.errors import BackendUnavailable
from vidscope.core.lexicon import lemmas
from vidscope.core.timecodes import fmt_time
from vidscope.models import registry
from vidscope.models.protocols.chat import ChatModel
from vidscope.storage.chapters import KIND_CHAPTER, KIND_HIGHLIGHT, KIND_SENTENCE, KIND_SUMMARY
from vidscope.storage.clips import SIGNALS_SUMMARY
from vidscope.tasks.caption import clip_texts
from vidscope.tasks.chapter_writer import EvidenceClip, write_chapter
from vidscope.tasks.stage import Stage, StageContext, StageOutcome, ledger_rows, role_config
from vidscope.tasks.topic_tiling import (
    TextClip,
    block_clips,
    content_words,
    deep_gaps,
    fits,
    gaps,
    inverse_frequencies,
)

#: The title slide of a chapter appears within this many seconds of its start.
TITLE_SECONDS = 8.0
#: Lines of a title slide at least this share of its largest line's height belong to the title.
TITLE_LINE_SHARE = 0.7
TITLE_MAX_CHARS = 80
TITLE_WORDS = 3
#: Sentences per chapter summary: one, plus one per this many seconds, at most three.
SECONDS_PER_SENTENCE = 90.0
MAX_CHAPTER_SENTENCES = 3
#: Sentences embedded per chapter to find the most representative one (from its central clips).
SENTENCE_CANDIDATES = 8
CENTRAL_CLIPS = 2
#: Chapters whose first sentence goes into the video's summary (the longest ones, in time order).
SUMMARY_CHAPTERS = 6
MAX_HIGHLIGHTS = 5
SENTENCE_MAX_CHARS = 300
#: Chapter count limit: three, plus one per this many seconds (and the minimum length).
SECONDS_PER_EXTRA_CHAPTER = 120.0
NO_TEXT_TITLE = "Whole video"
#: Picture changes (a video without text): least seconds compared on each side of a frame, the highest
#: similarity of the two sides that still cuts (colour histograms of different scenes score ~0.3-0.7,
#: of one scene with motion ~0.95), and the frames read at most (evenly spread: bounded time and
#: memory for a long video).
PICTURE_WINDOW = 4.0
PICTURE_MAX_SIMILARITY = 0.85
MAX_PICTURES = 900
HISTOGRAM_BINS = 64
UNTITLED = "Untitled"


@dataclass(frozen=True)
class Sentence:
    """A line said (a transcript segment) or shown (an on-screen text item), with its span."""

    start: float
    end: float
    text: str


@dataclass(frozen=True)
class ScreenText:
    """An on-screen text item: its span, text and line height in stored-frame pixels."""

    start: float
    end: float
    text: str
    height: float
    top: float = 0.0
    left: float = 0.0


@dataclass
class ClipInfo:
    """What the stage knows of one clip: its span, texts and text vector."""

    clip_index: int
    start: float
    end: float
    speech: str = ""
    screen: str = ""
    caption: str = ""
    vector: np.ndarray | None = None

    @property
    def text(self) -> str:
        return "\n".join(t for t in (self.speech, self.screen, self.caption) if t)


@dataclass
class Part:
    """A chapter or highlight as stored: span, title, text, why, and the clips it came from."""

    start: float
    end: float
    title: str = ""
    text: str = ""
    why: str = ""
    clips: list[int] = field(default_factory=list)


@dataclass
class Outline:
    """The stage's result for one video."""

    summary: str
    chapters: list[Part]
    highlights: list[Part]
    note: str = ""


#: Embeds texts into L2-normalised vectors (the text embedder's ``embed``).
Embed = Callable[[Sequence[str]], np.ndarray]


def outline(
    duration: float,
    clips: Sequence[ClipInfo],
    sentences: Sequence[Sentence],
    screen: Sequence[ScreenText],
    *,
    clip_seconds: float,
    min_seconds: float,
    embed: Embed | None = None,
    no_text_reason: str = "no speech or on-screen text was found",
    pictures: Sequence[Picture] = (),
) -> Outline:
    """Chapters, highlights and a summary of a video of ``duration`` seconds (module notes);
    without any text, chapters where the ``pictures`` change (:func:`picture_cuts`)."""
    units = [TextClip(c.clip_index, c.start, c.end, content_words(c.text), c.vector) for c in clips]
    units = [u for u in units if u.words]
    if not units:
        return _by_picture(duration, clips, pictures, min_seconds, no_text_reason)
    cuts = _boundaries(duration, units, sentences, screen, clip_seconds, min_seconds)
    edges = [0.0, *cuts, duration]
    idf = inverse_frequencies(units)
    chapters = [Part(a, b) for a, b in zip(edges, edges[1:], strict=False)]
    for chapter in chapters:
        chapter.clips = [c.clip_index for c in clips if _inside(c.start, c.end, chapter)]
    chapter_units = [[u for u in units if _inside(u.start, u.end, ch)] for ch in chapters]
    leads: list[str] = []
    for i, chapter in enumerate(chapters):
        rest = [u for j, us in enumerate(chapter_units) if j != i for u in us]
        chapter.title, chapter.why = _title(chapter, chapters, chapter_units[i], rest, screen, idf)
        said = _chapter_summary(chapter, chapter_units[i], sentences, screen, idf, embed)
        chapter.text = joined(said)
        leads.append(said[0] if said else "")
    highlights = _highlights(chapters, chapter_units, units, sentences, screen, idf)
    return Outline(_video_summary(chapters, leads), chapters, highlights)


def _inside(start: float, end: float, part: Part) -> bool:
    """Whether the span's midpoint lies in ``part``."""
    return part.start <= (start + end) / 2 < part.end


# ------------------------------------------------------------------------------------ pictures


@dataclass(frozen=True)
class Picture:
    """A sampled frame: its time and a vector of what it looks like (an image–text model's frame
    vector, else a colour histogram; L2-normalised either way)."""

    t: float
    vector: np.ndarray


def colour_histogram(jpeg: bytes) -> np.ndarray:
    """The square roots of a frame's normalised 4x4x4 RGB histogram (unit length): the cosine of two
    is their Bhattacharyya coefficient, 1 for the same colours and near 0 for disjoint ones."""
    from io import BytesIO

    from PIL import Image

    with Image.open(BytesIO(jpeg)) as image:
        image.draft("RGB", (80, 60))  # decode at 1/8 scale: colours need no detail
        pixels = np.asarray(image.convert("RGB").resize((64, 36)), dtype=np.uint8).reshape(-1, 3)
    bins = (pixels // 64).astype(np.int32)
    counts = np.bincount(bins[:, 0] * 16 + bins[:, 1] * 4 + bins[:, 2], minlength=64).astype(np.float64)
    return np.sqrt(counts / max(1.0, counts.sum()))


def picture_cuts(pictures: Sequence[Picture], duration: float, min_seconds: float) -> list[float]:
    """Times where what the video shows changes for good: at each frame, the similarity of the
    mean picture of the ``min_seconds`` (at least :data:`PICTURE_WINDOW`) before and after it; a
    cut where that dips under :data:`PICTURE_MAX_SIMILARITY`, deepest first, keeping chapters
    ``min_seconds`` long. A flash, a moving object or a short shot changes too little of a
    chapter-long window to cut; a lasting change of scene changes all of the window after it."""
    if len(pictures) < 3:
        return []
    window = max(PICTURE_WINDOW, min_seconds)
    times = np.array([p.t for p in pictures])
    vectors = np.stack([p.vector for p in pictures]).astype(np.float64)
    scored: list[tuple[float, float]] = []
    for i in range(1, len(pictures)):
        before = vectors[(times >= times[i] - window) & (times < times[i])]
        after = vectors[(times >= times[i]) & (times < times[i] + window)]
        a, b = before.mean(axis=0), after.mean(axis=0)
        norm = float(np.linalg.norm(a) * np.linalg.norm(b))
        scored.append((float(a @ b) / norm if norm > 0 else 1.0, float(times[i])))
    limit = min(int(duration // min_seconds), 3 + int(duration // SECONDS_PER_EXTRA_CHAPTER)) - 1
    cuts: list[float] = []
    for similarity, t in sorted(scored):
        if similarity > PICTURE_MAX_SIMILARITY or len(cuts) >= limit:
            break
        if fits(cuts, t, duration, min_seconds):
            cuts.append(t)
    return sorted(cuts)


def _by_picture(
    duration: float, clips: Sequence[ClipInfo], pictures: Sequence[Picture], min_seconds: float, reason: str
) -> Outline:
    """The outline of a video without text: chapters where the picture changes, else one."""
    cuts = picture_cuts(pictures, duration, min_seconds)
    edges = [0.0, *cuts, duration]
    chapters = [Part(a, b) for a, b in zip(edges, edges[1:], strict=False)]
    for i, chapter in enumerate(chapters, 1):
        chapter.clips = [c.clip_index for c in clips if _inside(c.start, c.end, chapter)]
        if cuts:
            # Nothing says what a part is about: its title says where it starts, no more.
            chapter.title, chapter.why = f"Part {i} ({fmt_time(chapter.start)})", "picture change"
        else:
            chapter.title = NO_TEXT_TITLE
    if cuts:
        how = (
            "frame vectors"
            if pictures and pictures[0].vector.shape[0] != HISTOGRAM_BINS
            else "colour histograms"
        )
        return Outline(
            "", chapters, [], note=f"{len(chapters)} chapters where the picture changes ({how}): {reason}"
        )
    seen = " and no lasting picture change" if len(pictures) >= 3 else ""
    return Outline("", chapters, [], note=f"one chapter: {reason}{seen}")


# ------------------------------------------------------------------------------------ boundaries


def _boundaries(
    duration: float,
    units: Sequence[TextClip],
    sentences: Sequence[Sentence],
    screen: Sequence[ScreenText],
    clip_seconds: float,
    min_seconds: float,
) -> list[float]:
    """Cut times, in order: the deepest topic changes placed at their moment (module notes)."""
    block = block_clips(duration, clip_seconds, min_seconds)
    # Cuts at least one block apart: a dip less than a block from a deeper cut is measured with a
    # block that still straddles that cut, so it is its echo, not a topic change. Up to 10 minutes
    # a block is the minimum chapter (nothing changes); on a long video it is up to a minute (a
    # synthetic 3-hour lecture of 5-minute parts got 93 chapters for 36 parts without this).
    spacing = max(min_seconds, block * clip_seconds)
    limit = min(int(duration // spacing), 3 + int(duration // SECONDS_PER_EXTRA_CHAPTER)) - 1
    cuts: list[float] = []
    for gap in deep_gaps(gaps(units, block)):
        if len(cuts) >= limit:
            break
        t = _cut_time(units[gap.index - 1], units[gap.index], sentences, screen)
        if fits(cuts, t, duration, spacing):
            cuts.append(t)
    return sorted(cuts)


def _cut_time(
    before: TextClip, after: TextClip, sentences: Sequence[Sentence], screen: Sequence[ScreenText]
) -> float:
    """Where between the text clip ``before`` and the text clip ``after`` the new topic starts."""
    lo, hi = before.start, after.end

    def silent(t: float) -> bool:
        return not any(s.start + 0.5 < t < s.end - 0.5 for s in sentences)

    shown_before = {s.text for s in screen if s.start < lo <= s.end}
    slides = [s.start for s in screen if lo < s.start < hi and s.text not in shown_before and silent(s.start)]
    if slides:
        return min(slides)
    best: tuple[float, float] | None = None
    previous_end = 0.0
    for sentence in sorted(sentences, key=lambda s: s.start):
        if lo < sentence.start < hi:
            pause = sentence.start - previous_end
            # The longest pause wins; among equal pauses, the one nearest the clip boundary.
            key = (round(pause, 1), -abs(sentence.start - after.start))
            if best is None or key > (round(best[1], 1), -abs(best[0] - after.start)):
                best = (sentence.start, pause)
        previous_end = max(previous_end, sentence.end)
    return best[0] if best is not None else after.start


# ------------------------------------------------------------------------------------ titles


def _title(
    chapter: Part,
    chapters: Sequence[Part],
    units: Sequence[TextClip],
    rest: Sequence[TextClip],
    screen: Sequence[ScreenText],
    idf: dict[str, float],
) -> tuple[str, str]:
    """The chapter's title and how it was made (``title slide`` or ``distinctive words``)."""
    slide = _title_slide(chapter, chapters, screen)
    if slide:
        return slide, "title slide"
    words = distinctive_words(units, rest, idf, TITLE_WORDS)
    if not words:
        return UNTITLED, "no words to title it by"
    title = ", ".join(words)
    return title[:1].upper() + title[1:], "distinctive words"


def _title_slide(chapter: Part, chapters: Sequence[Part], screen: Sequence[ScreenText]) -> str:
    """The largest text appearing on screen in the chapter's first seconds and in no other chapter."""
    window_end = chapter.start + min(TITLE_SECONDS, (chapter.end - chapter.start) / 2)
    others = [c for c in chapters if c is not chapter]

    def elsewhere(text: str) -> bool:
        spans = [(s.start, s.end) for s in screen if s.text == text]
        return any(a < c.end and b > c.start for a, b in spans for c in others)

    shown = [
        s
        for s in screen
        if chapter.start - 1.0 <= s.start <= window_end
        and any(ch.isalpha() for ch in s.text)
        and len(s.text.strip()) >= 3
        and not elsewhere(s.text)
    ]
    if not shown:
        return ""
    # The first slide only: a second one shown a few seconds later is the chapter's content.
    first = min(s.start for s in shown)
    shown = [s for s in shown if s.start <= first + 1.0]
    tallest = max(s.height for s in shown)
    lines: list[str] = []
    for s in sorted(shown, key=lambda s: (s.top, s.left)):
        if s.height >= TITLE_LINE_SHARE * tallest and s.text.strip() not in lines:
            lines.append(s.text.strip())
    title = " ".join(lines)
    return title if len(title) <= TITLE_MAX_CHARS else title[: TITLE_MAX_CHARS - 1].rstrip() + "…"


def distinctive_words(
    units: Sequence[TextClip], rest: Sequence[TextClip], idf: dict[str, float], k: int
) -> list[str]:
    """The ``k`` words most particular to ``units`` against ``rest``: count x inverse clip frequency
    x the share of the word's uses that fall here; nouns first among equals, then first said."""
    here: Counter[str] = Counter(w for u in units for w in u.words)
    there: Counter[str] = Counter(w for u in rest for w in u.words)
    order = {w: i for i, w in reversed(list(enumerate(w for u in units for w in u.words)))}

    def score(word: str) -> tuple[float, bool, int]:
        share = here[word] / (here[word] + there[word])
        return (-round(here[word] * idf.get(word, 1.0) * share, 6), "NOUN" not in lemmas(word), order[word])

    return sorted(here, key=score)[:k]


# ------------------------------------------------------------------------------------ summaries


def _sentences_in(part: Part, sentences: Sequence[Sentence], screen: Sequence[ScreenText]) -> list[Sentence]:
    """What is said in ``part`` (by midpoint), else the distinct texts shown in it."""
    said = [s for s in sentences if _inside(s.start, s.end, part) and s.text.strip()]
    if said:
        return said
    seen: dict[str, Sentence] = {}
    for s in screen:
        if s.start < part.end and s.end > part.start and s.text.strip() not in seen:
            seen[s.text.strip()] = Sentence(max(s.start, part.start), min(s.end, part.end), s.text.strip())
    return list(seen.values())


def _mean_vector(units: Sequence[TextClip]) -> np.ndarray | None:
    vectors = [u.vector for u in units if u.vector is not None]
    if not vectors:
        return None
    mean = np.mean(vectors, axis=0)
    norm = float(np.linalg.norm(mean))
    return mean / norm if norm > 0 else None


def _chapter_summary(
    chapter: Part,
    units: Sequence[TextClip],
    sentences: Sequence[Sentence],
    screen: Sequence[ScreenText],
    idf: dict[str, float],
    embed: Embed | None,
) -> list[str]:
    """The chapter's most representative sentences, in time order (module notes)."""
    candidates = _sentences_in(chapter, sentences, screen)
    if len(candidates) > 1:  # the title said again is no summary
        candidates = [c for c in candidates if c.text.strip() != chapter.title] or candidates
    if not candidates:
        return []
    wanted = min(MAX_CHAPTER_SENTENCES, 1 + int((chapter.end - chapter.start) // SECONDS_PER_SENTENCE))
    scores = _representativeness(candidates, units, idf, embed)
    chosen: list[Sentence] = []
    for _, sentence in sorted(zip(scores, candidates, strict=True), key=lambda p: (-p[0], p[1].start)):
        if sentence.text not in {c.text for c in chosen}:
            chosen.append(sentence)
        if len(chosen) == wanted:
            break
    return [_shortened(s.text) for s in sorted(chosen, key=lambda s: s.start)]


def _representativeness(
    candidates: Sequence[Sentence], units: Sequence[TextClip], idf: dict[str, float], embed: Embed | None
) -> list[float]:
    """How well each candidate stands for the chapter: the cosine of its vector with the chapter's
    mean vector (for the sentences of the clips nearest that mean, others score below any of
    them), or without vectors its idf-weighted overlap with the chapter's words."""
    mean = _mean_vector(units)
    if embed is not None and mean is not None:
        central = sorted(
            (u for u in units if u.vector is not None), key=lambda u: -float(np.asarray(u.vector) @ mean)
        )[:CENTRAL_CLIPS]
        picked = [
            i for i, s in enumerate(candidates) if any(s.start < u.end and s.end > u.start for u in central)
        ][:SENTENCE_CANDIDATES]
        if picked:
            vectors = embed([candidates[i].text for i in picked])
            scores = [-2.0] * len(candidates)
            for i, vector in zip(picked, vectors, strict=True):
                scores[i] = float(np.asarray(vector) @ mean)
            return scores
    profile = Counter(w for u in units for w in u.words)
    scores = []
    for sentence in candidates:
        words = set(content_words(sentence.text))
        overlap = sum(idf.get(w, 1.0) * math.log1p(profile[w]) for w in words)
        scores.append(overlap / math.sqrt(len(words) + 1))
    return scores


def joined(texts: Iterable[str]) -> str:
    """Sentences in a row: after one that ends without a full stop (a line read off the screen),
    a semicolon keeps two lines from reading as one."""
    out = ""
    for text in texts:
        if out:
            out += " " if out.endswith((".", "!", "?", "…", ":", ";")) else "; "
        out += text
    return out


def _shortened(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SENTENCE_MAX_CHARS else text[: SENTENCE_MAX_CHARS - 1].rstrip() + "…"


def _video_summary(chapters: Sequence[Part], leads: Sequence[str]) -> str:
    """The first summary sentence of each chapter (of the longest ones when there are many)."""
    longest = sorted(
        (i for i, lead in enumerate(leads) if lead),
        key=lambda i: (-(chapters[i].end - chapters[i].start), i),
    )[:SUMMARY_CHAPTERS]
    return joined(leads[i] for i in sorted(longest))


# ------------------------------------------------------------------------------------ highlights


def _highlights(
    chapters: Sequence[Part],
    chapter_units: Sequence[Sequence[TextClip]],
    units: Sequence[TextClip],
    sentences: Sequence[Sentence],
    screen: Sequence[ScreenText],
    idf: dict[str, float],
) -> list[Part]:
    """Each chapter's most distinctive text clip, the best :data:`MAX_HIGHLIGHTS` in time order."""
    mean = _mean_vector(units)
    candidates: list[tuple[float, Part]] = []
    for chapter_index, members in enumerate(chapter_units):
        if not members:
            continue
        scored = [(_distinctiveness(u, idf, mean), u) for u in members]
        score, unit = max(scored, key=lambda p: (p[0], -p[1].start))
        moment = Part(unit.start, unit.end, clips=[unit.clip_index])
        said = _sentences_in(moment, sentences, screen)
        if said:
            moment.start = max(chapters[chapter_index].start, min(s.start for s in said))
            moment.end = min(chapters[chapter_index].end, max(s.end for s in said))
            moment.text = _shortened(joined(s.text for s in said))
        rest = [u for u in units if u is not unit]
        moment.why = "distinctive words: " + ", ".join(distinctive_words([unit], rest, idf, TITLE_WORDS))
        candidates.append((score, moment))
    best = sorted(candidates, key=lambda p: (-p[0], p[1].start))[:MAX_HIGHLIGHTS]
    return sorted((p for _, p in best), key=lambda p: p.start)


def _distinctiveness(unit: TextClip, idf: dict[str, float], mean: np.ndarray | None) -> float:
    """Rare words (mean idf of its distinct words, damped for few words) plus the distance of its
    vector from the video's mean vector."""
    words = set(unit.words)
    lexical = sum(idf.get(w, 1.0) for w in words) / math.sqrt(len(words) + 1)
    if mean is None or unit.vector is None:
        return lexical
    return lexical + (1.0 - float(np.asarray(unit.vector) @ mean))


# ------------------------------------------------------------------------------------ the stage


def _no_text_reason(ctx: StageContext) -> str:
    """Why the video has no text, from the speech and OCR stages' ledger rows."""
    ledger = ledger_rows(ctx.store, ctx.video.video_id)
    reasons = []
    for stage, nothing in (("speech", "no speech recognised"), ("ocr", "no on-screen text read")):
        row = ledger.get(stage)
        if row is None:
            reasons.append(f"{stage} has not run")
        elif row["status"] == "done":
            reasons.append(nothing)
        else:
            detail = row["error"] or json.loads(row["details_json"] or "{}").get("reason", "")
            reasons.append(f"{stage} {row['status']}" + (f" ({detail})" if detail else ""))
    return "; ".join(reasons)


def _screen_items(rows: list[dict[str, Any]]) -> list[ScreenText]:
    items = []
    for row in rows:
        box = list(row["box"] or [0.0] * 8)
        xs, ys = box[0::2], box[1::2]
        height = float(max(ys) - min(ys))
        items.append(ScreenText(row["t"], row["t_end"], row["text"], height, float(min(ys)), float(min(xs))))
    return items


def _pictures(ctx: StageContext) -> list[Picture]:
    """At most :data:`MAX_PICTURES` of the video's stored frames, evenly spread, as vectors: their
    image–text vectors when every one has one, else their colour histograms."""
    store, video_id = ctx.store, ctx.video.video_id
    count = store.count(store.frames, video_id=video_id)
    if count < 3:
        return []
    step = max(1, math.ceil(count / MAX_PICTURES))
    every = f"frame_index % {step} = 0" if step > 1 else None
    rows = store.rows(
        store.frames, video_id=video_id, where=every, columns=["t", "image_embedding"], order_by=["t"]
    ).to_pylist()
    if rows and all(r["image_embedding"] is not None for r in rows):
        vectors = [np.asarray(r["image_embedding"], np.float64) for r in rows]
        return [Picture(r["t"], v / (np.linalg.norm(v) or 1.0)) for r, v in zip(rows, vectors, strict=True)]
    rows = store.rows(
        store.frames, video_id=video_id, where=every, columns=["t", "jpeg"], order_by=["t"]
    ).to_pylist()
    return [Picture(r["t"], colour_histogram(r["jpeg"])) for r in rows]


def _planner(ctx: StageContext) -> ChatModel | None:
    """The planner model when one is configured, loads and is asked to write titles
    (``[ingest] chapter_titles``); else the titles stay extractive."""
    if ctx.settings.ingest.chapter_titles != "planner":
        return None
    if registry.effective_spec(ctx.settings, "planner") is None:
        return None
    try:
        return registry.planner_model(ctx.settings)
    except BackendUnavailable:
        return None


def write_outline(result: Outline, clips: Sequence[ClipInfo], chat: ChatModel) -> list[Part]:
    """Titles and summaries written by ``chat`` from each chapter's clips (:mod:`chapter_writer`),
    where its reply passes the checks; the sentences with the clips they cite, as stored rows."""
    by_index = {c.clip_index: c for c in clips}
    written_rows: list[Part] = []
    leads: list[str] = []
    for number, chapter in enumerate(result.chapters):
        evidence = [
            EvidenceClip(c.clip_index, c.start, c.end, c.text)
            for c in (by_index[i] for i in chapter.clips if i in by_index)
            if c.text.strip()
        ]
        written = write_chapter(chat, evidence)
        if written.title:
            chapter.title, chapter.why = written.title, "model title"
        else:
            reason = written.refused[0] if written.refused else "no reply"
            chapter.why = f"extractive title ({chapter.why}); model reply refused: {reason}"
        if written.sentences:
            chapter.text = joined(text for text, _ in written.sentences)
            for text, cited in written.sentences:
                spans = [by_index[i] for i in cited]
                written_rows.append(
                    Part(
                        min(c.start for c in spans),
                        max(c.end for c in spans),
                        "",
                        text,
                        f"chapter {number}",
                        cited,
                    )
                )
        leads.append(written.sentences[0][0] if written.sentences else chapter.text.split(". ")[0])
    result.summary = _video_summary(result.chapters, leads)
    return written_rows


def _run(ctx: StageContext) -> StageOutcome:
    store, video_id = ctx.store, ctx.video.video_id
    clip_rows = store.rows(
        store.clips,
        video_id=video_id,
        columns=["clip_index", "start", "end", "caption", "caption_source", "text_embedding"],
        order_by=["clip_index"],
    ).to_pylist()
    segments = store.rows(store.transcripts, video_id=video_id, columns=["start", "end", "text", "words"])
    ocr_rows = store.rows(store.ocr, video_id=video_id, columns=["t", "t_end", "text", "box"]).to_pylist()
    texts = clip_texts(clip_rows, segments.to_pylist(), ocr_rows)
    clips = [
        ClipInfo(
            row["clip_index"],
            row["start"],
            row["end"],
            speech,
            screen,
            row["caption"] if row["caption"] and row["caption_source"] != SIGNALS_SUMMARY else "",
            None if row["text_embedding"] is None else np.asarray(row["text_embedding"], np.float32),
        )
        for row, (speech, screen) in zip(clip_rows, texts, strict=True)
    ]
    sentences = [Sentence(s["start"], s["end"], s["text"]) for s in segments.to_pylist()]
    embedder = None
    if any(c.vector is not None for c in clips):
        try:
            embedder = registry.text_embedder(ctx.settings)
        except BackendUnavailable:  # the clip vectors are there: summaries fall back to words
            embedder = None
    has_text = any(content_words(c.text) for c in clips)
    result = outline(
        ctx.video.duration,
        clips,
        sentences,
        _screen_items(ocr_rows),
        clip_seconds=ctx.settings.ingest.clip_seconds,
        min_seconds=ctx.settings.ingest.chapter_min_seconds,
        embed=embedder.embed if embedder is not None and embedder.dim == store.text_dim else None,
        no_text_reason=_no_text_reason(ctx),
        pictures=() if has_text else _pictures(ctx),
    )
    sentences_written: list[Part] = []
    chat = _planner(ctx)
    if chat is not None and not result.note:
        sentences_written = write_outline(result, clips, chat)
    rows = [_row(video_id, KIND_SUMMARY, 0, Part(0.0, ctx.video.duration, "", result.summary, result.note))]
    rows += [_row(video_id, KIND_SENTENCE, i, p) for i, p in enumerate(sentences_written)]
    rows += [_row(video_id, KIND_CHAPTER, i, c) for i, c in enumerate(result.chapters)]
    rows += [_row(video_id, KIND_HIGHLIGHT, i, h) for i, h in enumerate(result.highlights)]
    store.replace_video_rows(store.chapters, video_id, rows)
    details: dict[str, Any] = {
        "chapters": len(result.chapters),
        "highlights": len(result.highlights),
        "cuts": [round(c.start, 2) for c in result.chapters[1:]],
        "titles": Counter(c.why.split(";")[0] for c in result.chapters),
    }
    if result.note:  # not "note": that key makes the video's ingest report a warning
        details["why"] = result.note
    return StageOutcome(rows=len(rows), details=details)


def _row(video_id: str, kind: str, index: int, part: Part) -> dict[str, Any]:
    return {
        "video_id": video_id,
        "kind": kind,
        "item_index": index,
        "start": part.start,
        "end": part.end,
        "title": part.title or None,
        "text": part.text,
        "why": part.why or None,
        "clips": part.clips,
    }


CHAPTERS = Stage(
    name="chapters",
    version=3,  # 3: cuts at least one tiling block apart (long videos)
    run=_run,
    config=lambda s: {
        **role_config(s, "text_embedder", "embedder"),
        "planner": role_config(s, "planner", "planner") if s.ingest.chapter_titles == "planner" else None,
        "clip_seconds": s.ingest.clip_seconds,
        "chapter_min_seconds": s.ingest.chapter_min_seconds,
    },
    needs=("segment",),
    reads=("speech", "ocr", "caption", "embed", "frames", "frame_embed"),
    description="chapters (titles, summaries), highlights and a video summary from speech and "
    "on-screen text (TextTiling over the clips' words and vectors)",
)

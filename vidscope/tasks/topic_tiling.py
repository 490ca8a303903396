"""Where the topic of a video changes: TextTiling's depth scores over its clips' words and vectors.

Hearst's TextTiling (1997) compares the blocks of text before and after every gap and cuts where
the similarity dips deepest below its neighbouring peaks. Here the blocks are *text clips* (clips
with speech, on-screen text or a model's caption; clips without any sit between them, so a silence
alone never cuts), and the similarity of two blocks is the mean of

- the cosine of their mean text vectors (the ``embed`` stage's MiniLM vectors, when present), and
- the cosine of their word counts weighted by inverse clip frequency (content words only, nouns
  singular), which catches a change of vocabulary the sentence vectors smooth over.

A gap's *depth* is how far its similarity lies below the highest similarity reached by climbing
left and right from it. Gaps are taken deepest first while they are deep enough (an absolute
floor, and above the mean depth of the video) and no chapter becomes shorter than the minimum.

Pure functions over plain values (no store, no model), so the rules are testable on their own.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from vidscope.core.lexicon import LIGHT_VERBS, STOP_WORDS, VAGUE_NOUNS, singular, tokens, verb_lemma

#: Depth (on the 0-1 similarity scale, summed over both sides) below which a dip is noise. On
#: generated 45 s videos: true boundaries 0.47-0.99 (speech, slides), a narrated single topic at
#: most 0.24, the echo of a true boundary one clip beside it 0.28 (the minimum length drops those).
DEPTH_MIN = 0.35
#: Width of the blocks compared at each gap, as a share of the video (at least the minimum
#: chapter length): a long lecture is compared minute by minute, not clip by clip.
BLOCK_SHARE = 1 / 60
#: Widest block, in clips.
MAX_BLOCK_CLIPS = 12


def content_words(text: str | None) -> list[str]:
    """The words of ``text`` that can carry a topic: any script, lower case, no stop words, vague
    nouns, light verbs ("make", "took") or numbers, English nouns singular ("volcanoes" -> "volcano")."""
    words = []
    for token in tokens(text, any_script=True):
        if len(token) < 3 or token.isdigit() or token in STOP_WORDS or token in VAGUE_NOUNS:
            continue
        if token in LIGHT_VERBS or (token.isascii() and verb_lemma(token) in LIGHT_VERBS):
            continue
        words.append(singular(token) if token.isascii() else token)
    return words


@dataclass
class TextClip:
    """A clip that carries text: its span, its content words and its text vector (if embedded)."""

    clip_index: int
    start: float
    end: float
    words: list[str]
    vector: np.ndarray | None = None


@dataclass(frozen=True)
class Gap:
    """The gap before ``units[index]`` (between it and the text clip before it), with its score."""

    index: int
    similarity: float
    depth: float


def inverse_frequencies(units: Sequence[TextClip]) -> dict[str, float]:
    """Smoothed inverse clip frequency of every word: ``log((1 + n) / (1 + df)) + 1``."""
    df: Counter[str] = Counter()
    for unit in units:
        df.update(set(unit.words))
    n = len(units)
    return {word: math.log((1 + n) / (1 + count)) + 1.0 for word, count in df.items()}


def block_clips(duration: float, clip_seconds: float, min_seconds: float) -> int:
    """Text clips per block: the minimum chapter length or :data:`BLOCK_SHARE` of the video."""
    seconds = max(min_seconds, duration * BLOCK_SHARE)
    return max(1, min(MAX_BLOCK_CLIPS, round(seconds / clip_seconds)))


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / norm if norm > 0 else 0.0


def _word_vector(units: Sequence[TextClip], idf: dict[str, float], vocab: dict[str, int]) -> np.ndarray:
    vector = np.zeros(len(vocab), dtype=np.float64)
    for unit in units:
        for word, count in Counter(unit.words).items():
            vector[vocab[word]] += count * idf[word]
    return vector


def _similarity(
    left: Sequence[TextClip], right: Sequence[TextClip], idf: dict[str, float], vocab: dict[str, int]
) -> float:
    scores = [_cosine(_word_vector(left, idf, vocab), _word_vector(right, idf, vocab))]
    left_vectors = [u.vector for u in left if u.vector is not None]
    right_vectors = [u.vector for u in right if u.vector is not None]
    if left_vectors and right_vectors:
        scores.append(_cosine(np.mean(left_vectors, axis=0), np.mean(right_vectors, axis=0)))
    return float(np.mean(scores))


def gaps(units: Sequence[TextClip], block: int) -> list[Gap]:
    """Every gap between consecutive text clips with its block similarity and depth score."""
    if len(units) < 2:
        return []
    idf = inverse_frequencies(units)
    vocab = {word: i for i, word in enumerate(idf)}
    sims = [
        _similarity(units[max(0, i - block) : i], units[i : i + block], idf, vocab)
        for i in range(1, len(units))
    ]
    scored = []
    for g, sim in enumerate(sims):
        left = sim
        for k in range(g - 1, -1, -1):
            if sims[k] < left:
                break
            left = sims[k]
        right = sim
        for k in range(g + 1, len(sims)):
            if sims[k] < right:
                break
            right = sims[k]
        scored.append(Gap(index=g + 1, similarity=sim, depth=(left - sim) + (right - sim)))
    return scored


def deep_gaps(scored: Sequence[Gap]) -> list[Gap]:
    """The gaps deep enough to cut at, deepest first: at least :data:`DEPTH_MIN` and above the
    mean depth of the video (a monotonous video has shallow dips everywhere)."""
    if not scored:
        return []
    mean = float(np.mean([g.depth for g in scored]))
    return sorted(
        (g for g in scored if g.depth >= DEPTH_MIN and g.depth > mean), key=lambda g: (-g.depth, g.index)
    )


def fits(bounds: Sequence[float], t: float, duration: float, min_seconds: float) -> bool:
    """Whether cutting at ``t`` keeps every chapter of ``bounds`` (cuts so far) at least
    ``min_seconds`` long (the first from 0, the last to ``duration``)."""
    edges = sorted([0.0, *bounds, t, duration])
    return all(b - a >= min_seconds - 1e-6 for a, b in zip(edges, edges[1:], strict=False))

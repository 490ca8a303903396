"""Evaluation metrics shared by tests, benchmarks and benchmark loaders.

* Temporal grounding (Charades-STA style): temporal IoU of a predicted and a gold interval,
  R@IoU=m (the share of queries whose prediction reaches IoU ≥ m) and mIoU.
* Text-to-video retrieval (MSR-VTT style): recall@k over ranked video lists with gold videos, and
  the median and mean rank of the gold video (MdR, MnR; 1 is best).
* Answers of CrossVid's non-single-choice tasks: a multi-select answer as a set of option letters
  (BU: "1-3 correct choices", answered "BCD"), a step order as an exact sequence (PSS: "2->3->1->4")
  and a time interval written "15,23" (FSA), scored by IoU.
* An interval answer inside a tolerance zone (an optional training reward, ``--interval-scoring
  within``; not AgentCVR's T_tol, which bounds turns): both of its ends within ``tolerance``
  seconds of the gold's.

Each formula is the one the benchmarks' reference code computes (``tests/test_metrics.py`` checks
them against figures worked out with it): R@IoU=m counts IoU >= m and mIoU averages IoU, as
VSLNet's Charades-STA / ActivityNet evaluation does; R@k counts a gold video ranked in the first k,
MdR is the median (the mean of the two middle ranks for an even count) and MnR the mean of the
1-based gold ranks, as CLIP4Clip's ``compute_metrics`` does. CrossVid's evaluation scripts
(``eval/BU.py``, ``PSS.py``, ``FSA.py``) compare the answer string with the gold letters joined,
compare it with the gold order string, and read ``"start,end"`` as two floats (anything else: IoU
0) and average the IoU; here a multi-select answer is read as the set of its letters (so "C, A" is
"AC", which the reference's string comparison would reject when gold is "AC" — the issue's rule),
an order as its numbers (spaces and arrow styles do not matter), an interval the same way.
* An agent's reasoning iterations as the papers count them (DVD Tab. 7; AVI's phases), read from
  its trace: :func:`reasoning_iterations`, :func:`phase_passes`, :func:`phase_seconds`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

Interval = tuple[float, float]

#: The IoU thresholds Charades-STA reports.
GROUNDING_THRESHOLDS = (0.3, 0.5, 0.7)
#: The cut-offs MSR-VTT retrieval reports.
RECALL_CUTOFFS = (1, 5, 10)
#: Rank metrics (not fractions): median and mean rank of the gold video.
RANK_METRICS = ("MdR", "MnR")


def temporal_iou(predicted: Interval, gold: Interval) -> float:
    """Intersection over union of two time intervals; 0 when either is empty or they are disjoint."""
    (p0, p1), (g0, g1) = sorted(predicted), sorted(gold)
    intersection = max(0.0, min(p1, g1) - max(p0, g0))
    union = max(p1, g1) - min(p0, g0)
    if union <= 0 or intersection <= 0:
        return 0.0
    return intersection / union


def grounding_scores(
    predictions: Sequence[Interval | None],
    golds: Sequence[Interval],
    thresholds: Iterable[float] = GROUNDING_THRESHOLDS,
) -> dict[str, float]:
    """``{"R@0.3": …, "R@0.5": …, "R@0.7": …, "mIoU": …}`` over paired predictions and golds.

    A missing prediction (``None``) counts as IoU 0. Values are fractions in [0, 1].
    """
    if len(predictions) != len(golds):
        raise ValueError(f"{len(predictions)} predictions for {len(golds)} gold intervals")
    if not golds:
        raise ValueError("no queries to score")
    ious = [0.0 if p is None else temporal_iou(p, g) for p, g in zip(predictions, golds, strict=True)]
    scores = {f"R@{m:g}": sum(iou >= m for iou in ious) / len(ious) for m in thresholds}
    scores["mIoU"] = sum(ious) / len(ious)
    return scores


def recall_at_k(
    rankings: Mapping[str, Sequence[str]],
    gold: Mapping[str, str | Iterable[str]],
    cutoffs: Iterable[int] = RECALL_CUTOFFS,
) -> dict[str, float]:
    """``{"R@1": …, "R@5": …, "R@10": …}``: the share of queries with a gold video in the top k.

    ``rankings`` maps a query id to its ranked video ids; ``gold`` maps it to the gold video id (or
    several, any of which counts). Every gold query must have a ranking (an empty one is a miss).
    """
    if not gold:
        raise ValueError("no queries to score")
    missing = [q for q in gold if q not in rankings]
    if missing:
        raise ValueError(f"no ranking for {len(missing)} queries, e.g. {missing[0]!r}")
    golds = {q: {g} if isinstance(g, str) else set(g) for q, g in gold.items()}
    return {f"R@{k}": sum(bool(golds[q] & set(rankings[q][:k])) for q in golds) / len(golds) for k in cutoffs}


def gold_ranks(
    rankings: Mapping[str, Sequence[str]], gold: Mapping[str, str | Iterable[str]], gallery: int
) -> dict[str, int]:
    """The 1-based rank of each query's best-ranked gold video. A gold video the ranking does not
    list is ranked last (``gallery``, the number of videos searched): the reference code ranks the
    whole gallery, so an unlisted video can be at best after the listed ones, and last is the
    pessimistic, reproducible choice."""
    ranks: dict[str, int] = {}
    for query, wanted in gold.items():
        targets = {wanted} if isinstance(wanted, str) else set(wanted)
        listed = [i for i, video in enumerate(rankings.get(query, ())) if video in targets]
        ranks[query] = listed[0] + 1 if listed else max(gallery, len(rankings.get(query, ())) + 1)
    return ranks


def rank_scores(
    rankings: Mapping[str, Sequence[str]], gold: Mapping[str, str | Iterable[str]], gallery: int
) -> dict[str, float]:
    """``{"MdR": …, "MnR": …}``: median and mean 1-based rank of the gold video (lower is better)."""
    if not gold:
        raise ValueError("no queries to score")
    ranks = sorted(gold_ranks(rankings, gold, gallery).values())
    middle = len(ranks) // 2
    median = ranks[middle] if len(ranks) % 2 else (ranks[middle - 1] + ranks[middle]) / 2
    return {"MdR": float(median), "MnR": sum(ranks) / len(ranks)}


_LETTERS_ONLY = re.compile(r"[A-Z](?:[\s,;/&+]*(?:and\s+)?[A-Z])*")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def letter_set(text: str | None, n_options: int) -> frozenset[str] | None:
    """The option letters a multi-select answer chose: ``"AC"``, ``"A, C"``, ``"C and A"`` → {A, C}.

    The answer must be letters alone (separators allowed); prose, or a letter beyond the options,
    is None (unparsed), never a guess."""
    if text is None:
        return None
    cleaned = re.sub(r"^\s*(?:the\s+)?answers?\s*(?:is|are|:)\s*", "", text, flags=re.IGNORECASE)
    cleaned = cleaned.strip().strip("\"'`.()[]<>").strip()
    if not cleaned or not _LETTERS_ONLY.fullmatch(cleaned):
        return None
    letters = frozenset(re.findall(r"[A-Z]", cleaned))
    allowed = {chr(ord("A") + i) for i in range(n_options)}
    return letters if letters <= allowed else None


def set_match(predicted: frozenset[str] | None, gold: Iterable[str]) -> bool:
    """Whether a multi-select answer chose exactly the gold letters (no partial credit)."""
    return predicted is not None and predicted == frozenset(gold)


def order_of(text: str | None) -> tuple[int, ...] | None:
    """A step order written ``"2->3->1->4"`` (or ``"2, 3, 1, 4"``, ``"2 → 3 → 1 → 4"``) as numbers;
    None when the text holds anything but integers and separators."""
    if text is None:
        return None
    cleaned = text.strip().strip("\"'`.[]").strip()
    if not cleaned or re.fullmatch(r"\d+(?:\s*(?:->|→|>|,|-|\s)\s*\d+)*", cleaned) is None:
        return None
    return tuple(int(n) for n in re.findall(r"\d+", cleaned))


def order_match(predicted: tuple[int, ...] | None, gold: Sequence[int]) -> bool:
    """Whether an order is exactly the gold order (no partial credit, as CrossVid's PSS)."""
    return predicted is not None and predicted == tuple(gold)


def interval_of(text: str | None) -> Interval | None:
    """An interval answer ``"15,23"`` (also ``"15s - 23s"``, ``"[15, 23]"``) as two seconds; None
    unless the text holds exactly two numbers."""
    if text is None:
        return None
    numbers = _NUMBER.findall(text.replace(" - ", " "))
    if len(numbers) != 2 or re.search(r"[A-Za-z]{2,}", text):
        return None
    return float(numbers[0]), float(numbers[1])


def within_tolerance(predicted: Interval | None, gold: Interval, tolerance: float) -> bool:
    """Whether an interval answer lies in the tolerance zone of the gold one: its start within
    ``tolerance`` seconds of the gold start and its end within ``tolerance`` of the gold end
    (the training reward's optional ``within`` scoring; a missing answer never does)."""
    if tolerance < 0:
        raise ValueError(f"a tolerance is seconds >= 0, not {tolerance}")
    if predicted is None:
        return False
    (p0, p1), (g0, g1) = sorted(predicted), sorted(gold)
    return abs(p0 - g0) <= tolerance and abs(p1 - g1) <= tolerance


# ---------------------------------------------------------------------------- agent iterations

#: Trace step kinds that are a model reply acting: a tool-calling round, or the reply that answers
#: (finish, a forced answer, an AVI review). Nudges (a prose reply we reminded, or a phase the loop
#: sent back), refused calls, model errors, context notes and the extractive floor are not.
ROUND_KINDS = frozenset({"tool", "finish", "answer", "review"})


def reasoning_iterations(steps: Sequence[Mapping[str, object]]) -> int:
    """The agent's reasoning iterations in a trace (its steps as dicts): one per model reply that
    called tools or answered, however many calls the reply held (``follows`` marks the further
    calls of one reply); nudges, refusals and unusable replies do not count.

    DVD (Tab. 7) counts reasoning iterations; the paper's text of the table's definition was not
    found in the sources at hand (the arXiv page's excerpts stop before it). The release's loop
    (``dvd/dvd_core.py``: ``for i in range(self.max_iterations)``, one ``call_openai_model_with_tools``
    per pass, every tool call of the reply executed in that pass) makes an iteration one orchestrator
    reply with all its calls, which is what this counts. Deviation: a reply with no call, which the
    release's loop also counts, is a nudge here and left out, as issue 37 asks ("nudges ... must
    not inflate"); ``steps`` keeps counting every trace step.
    """
    return sum(
        1
        for s in steps
        if s.get("kind") in ROUND_KINDS
        and not s.get("follows")
        and (s.get("kind") != "review" or s.get("ok", True))
    )


def phase_passes(steps: Sequence[Mapping[str, object]]) -> dict[str, int]:
    """How many times a phased agent (AVI) entered each phase: runs of consecutive steps in it.

    AVI's §4.5 iteration count could not be looked up (its text is not in the sources at hand); the
    agent's iterations here are its Review passes, each a Retrieve/Perceive/Review round ended by
    a verdict (an answer, or back to Perceive), so ``passes["review"]`` is 1 + the backtracks."""
    passes: dict[str, int] = {}
    last: object = None
    for step in steps:
        phase = step.get("phase")
        if phase is not None and phase != last:
            passes[str(phase)] = passes.get(str(phase), 0) + 1
        if phase is not None:
            last = phase
    return passes


def phase_seconds(steps: Sequence[Mapping[str, object]]) -> dict[str, float]:
    """Seconds a phased agent spent in each phase (model replies and tool calls of its steps)."""
    seconds: dict[str, float] = {}
    for step in steps:
        phase, latency = step.get("phase"), step.get("latency_s")
        if phase is not None and isinstance(latency, (int, float)):
            seconds[str(phase)] = round(seconds.get(str(phase), 0.0) + float(latency), 3)
    return seconds

"""The chapter overview SAMA's planner reads beside the question: each video's parts, in order.

Issue 39 asks that a video's chapter list (the ``chapters`` stage's titled parts, read by
:func:`vidscope.agents.chapter_list.load_chapters`, the list DVD's ``global_browse`` returns) serve
as an overview for SAMA's planner too. The paper's protocol is kept as it is (App. B/C: the
skills, the seven strict rules and the evidence memory are unchanged); the overview is one more
section of the planner's request, after the list of videos:

- **Where to look, not evidence.** It says so in words, as the subject registry and DVD's
  chapter list do: the planner still confirms a moment with a tool before citing it (rule 2).
- **Data.** Titles and summaries are the video's own words (a title slide, its speech), so they are
  quoted inside a ``<video_data>`` block (rule 6), never as instructions.
- **Bounded.** At most :data:`OVERVIEW_TOKENS` (estimated) for all videos together, shared evenly:
  a 3-hour video has some 90 chapters; past its share the summaries go first, then the shortest
  chapters, with a line saying how many are not shown. The budget is counted in the request's fixed
  part, so the evidence memory's budgets (``memory_budgets``) leave room for it.
- **Only where it tells something.** A video whose stage has not run, failed, or found one part
  (a video without speech or text and without picture changes is one chapter, "Whole video") gets
  no overview; with no video having one the request is exactly what it was before.

The simulated environment has no store, so a rollout sees no overview (its scripts hold no
chapters); the ablation ``chapters`` switches the overview off for an evaluation.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from vidscope.agents.chapter_list import ChapterEntry, load_chapters
from vidscope.agents.sama.memory import estimate_tokens
from vidscope.agents.tools import ToolContext, ToolError
from vidscope.models.json_tools import quote_data

#: Tokens (estimated) of the whole overview, all videos together. The request's fixed part must
#: leave half of an 8,192-token context to the memory and the reply (tests/test_sama_rules.py);
#: with the skills and rules at about 3,000 tokens, 500 keeps a dozen titled chapters a video.
OVERVIEW_TOKENS = 500
#: A video's least share (about six bare titles): past ``OVERVIEW_TOKENS // MIN_VIDEO_TOKENS``
#: videos with chapters, the later ones are counted, not listed.
MIN_VIDEO_TOKENS = 60
#: Chapters read per video: all of them (the stage makes at most 3 + 1 per 2 minutes, 183 for the
#: 6-hour limit), so the line counting those not shown is true; the token budget does the bounding.
READ_CHAPTERS = 1000
#: Characters of a chapter's summary kept beside its title.
SUMMARY_CHARS = 100
#: Said before the overview: what it is and what it is not.
HEADER = (
    "Chapter overview: each video's parts in order, titled by the video's own words (a title slide, "
    "its most distinctive words, or a picture change). Use it to choose where to look; it is not "
    "evidence: confirm a moment with a tool before citing it."
)


def chapter_line(entry: ChapterEntry, with_summary: bool) -> str:
    """One chapter in words: its span in seconds, its title and, if asked, its summary's start."""
    line = f"{entry.start:.1f}-{entry.end:.1f}s {entry.title or 'Untitled'}"
    summary = " ".join(entry.summary.split())
    if with_summary and summary and summary.casefold() != entry.title.casefold():
        if len(summary) > SUMMARY_CHARS:
            summary = summary[: SUMMARY_CHARS - 1].rstrip() + "…"
        line += f": {summary}"
    return line


def fitted_lines(entries: Sequence[ChapterEntry], budget: int) -> list[str]:
    """The chapters as lines within ``budget`` tokens: with their summaries if all fit, else titles
    only, else the longest chapters' titles that fit (in time order) and a line counting the rest."""
    for with_summary in (True, False):
        lines = [chapter_line(e, with_summary) for e in entries]
        if estimate_tokens(json.dumps(lines, ensure_ascii=False)) <= budget:
            return lines
    longest = sorted(range(len(entries)), key=lambda i: (-(entries[i].end - entries[i].start), i))
    kept: list[int] = []
    used = estimate_tokens(f'["({len(entries)} shorter chapters not shown)"]')
    for i in longest:
        cost = estimate_tokens(json.dumps(chapter_line(entries[i], False), ensure_ascii=False)) + 1
        if used + cost > budget:
            continue
        kept.append(i)
        used += cost
    lines = [chapter_line(entries[i], False) for i in sorted(kept)]
    return [*lines, f"({len(entries) - len(kept)} shorter chapters not shown)"]


def chapter_overview(ctx: ToolContext, video_ids: Sequence[str], budget: int = OVERVIEW_TOKENS) -> str:
    """The overview section of the planner's request (header and quoted lines per video id), or
    ``""`` when no video has two chapters or more (or there is no store: the simulator)."""
    try:
        store = ctx.store
    except ToolError:  # the simulated environment answers from a script, without a store
        return ""
    listed: dict[str, list[ChapterEntry]] = {}
    for video_id in video_ids:
        entries = load_chapters(store, video_id, limit=READ_CHAPTERS)
        if len(entries) >= 2:
            listed[video_id] = entries
    if not listed:
        return ""
    shown = list(listed)[: max(1, budget // MIN_VIDEO_TOKENS)]
    share = budget // len(shown)
    lines = {video_id: fitted_lines(listed[video_id], share) for video_id in shown}
    text = f"{HEADER}\n{quote_data(lines)}"
    if len(shown) < len(listed):
        text += f"\n({len(listed) - len(shown)} more videos have chapters not shown here.)"
    return text

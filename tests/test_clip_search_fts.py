"""Per-video keyword ranking in clip_search: Lance's full-text index, filtered to the video.

Once ingestion's ``optimize`` has built the clips' full-text (BM25) index, ``clip_search`` ranks a
video's clips by words through that index with a ``video_id`` filter — the index moment search
reads across the library. Before it exists, the same BM25 measure is computed in Python.
"""

from __future__ import annotations

from pathlib import Path

from test_agent_runtime import ANSWER_CLIP, VIDEO_ID, build_store, context, make_settings

from vidscope.agents.evidence import ClipSearchResult, keyword_ranking, load_clips
from vidscope.agents.tools import execute_tool
from vidscope.storage.store import Store

#: A second video whose clips say other things, except one that names the vault's code too.
OTHER_ID = "ef56" + "0" * 60


def add_other_video(store: Store) -> None:
    """Copies of the first video's clips under OTHER_ID, all about a garden but clip 2, which tells
    the same secret as the first video's answer clip."""
    rows = [dict(r) for r in load_clips_rows(store)]
    for row in rows:
        row["video_id"] = OTHER_ID
        row["caption"] = "Speech: we water the tomatoes in the garden."
        row["transcript_text"] = "we water the tomatoes in the garden"
        row["ocr_text"] = None
    rows[2]["caption"] = "Speech: the secret code for the vault is purple elephant."
    rows[2]["transcript_text"] = "the secret code for the vault is purple elephant"
    store.replace_video_rows(store.clips, OTHER_ID, rows)


def load_clips_rows(store: Store) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = store.rows(store.clips, video_id=VIDEO_ID).to_pylist()
    return rows


def test_keyword_ranking_reads_the_full_text_index_of_one_video(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "data")
    store = build_store(settings)
    add_other_video(store)
    world = (settings, store)
    ctx = context(world)
    query = "what is the secret code for the vault"

    # Before optimize: no full-text index; the Python BM25 ranks the video's clips.
    assert store.fts_columns(store.clips) == []
    before = keyword_ranking(ctx, VIDEO_ID, query, load_clips(ctx, VIDEO_ID))
    assert before[0] == ANSWER_CLIP

    done = store.optimize()
    assert "fts(caption)" in done["clips"]
    assert set(store.fts_columns(store.clips)) == {"caption", "transcript_text", "ocr_text"}

    ranked = keyword_ranking(ctx, VIDEO_ID, query, load_clips(ctx, VIDEO_ID))
    assert ranked[0] == ANSWER_CLIP
    # Only this video's clips, each once: the other video's matching clip 2 is not among them
    # (this video's clip 2 says nothing of a code, a vault or a secret).
    assert len(ranked) == len(set(ranked)) and 2 not in ranked
    other = keyword_ranking(ctx, OTHER_ID, query, load_clips(ctx, OTHER_ID))
    assert other[0] == 2

    outcome = execute_tool(ctx, "clip_search", {"video_id": VIDEO_ID, "query": query, "top_k": 3})
    assert outcome.ok, outcome.error
    assert isinstance(outcome.result, ClipSearchResult)
    best = outcome.result.by_relevance()[0]
    assert best.clip_index == ANSWER_CLIP and "purple elephant" in (best.speech or "")

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


def test_text_search_returns_what_lances_multi_column_query_returns(tmp_path: Path) -> None:
    """``Store.text_search`` asks each indexed column alone and keeps each row's best score; Lance's
    own ``MultiMatchQuery`` over the columns is the oracle: the same rows with the same scores,
    best first, at every depth (ties at the k-th score aside: none here), with and without a
    filter. The words sit in one column, in two, or in all three, so a wrong merge (a sum, or a
    row missing from a column's list) changes a score or the rows."""
    from lance.query import MultiMatchQuery

    settings = make_settings(tmp_path / "data")
    store = build_store(settings)
    add_other_video(store)
    rows = load_clips_rows(store)
    words = ["harbour ferry", "ferry pier", "pier harbour lighthouse", "lighthouse", "garden ferry pier"]
    for i, row in enumerate(rows):
        row["caption"] = f"Caption: {words[i % 5]} {'ferry' * (i % 2)}"
        row["transcript_text"] = f"{words[(i + 1) % 5]} said at {i}"
        row["ocr_text"] = words[(i + 3) % 5].upper() if i % 3 else None
    store.replace_video_rows(store.clips, VIDEO_ID, rows)
    store.optimize()
    columns = ["video_id", "clip_index"]
    dataset = store.dataset(store.clips)
    for query in ("ferry pier", "lighthouse harbour", "garden"):
        for where in (None, f"video_id = '{VIDEO_ID}'"):
            ranked = dataset.to_table(
                full_text_query=MultiMatchQuery(query, store.fts_columns(store.clips)),
                columns=[*columns, "_score"],
                filter=where,
                prefilter=where is not None,
                limit=100,
            ).to_pylist()
            for k in (1, 3, 24):
                oracle = ranked[:k]
                found = store.text_search(store.clips, query, k, where=where, columns=columns)
                scores = [round(r["_score"], 5) for r in oracle]
                assert sorted(round(r["_score"], 5) for r in found) == sorted(scores), (query, where, k)
                assert [r["_score"] for r in found] == sorted((r["_score"] for r in found), reverse=True)
                # Unless the k-th score ties with the next, the k best rows are the very same.
                if len(ranked) <= k or round(ranked[k]["_score"], 5) != scores[-1]:
                    key = lambda r: (r["video_id"], r["clip_index"])  # noqa: E731
                    assert sorted(map(key, found)) == sorted(map(key, oracle)), (query, where, k)

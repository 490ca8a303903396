"""Corpus search (MAVIS): planner, dimension agents, fusion modes, fine rerank, flow and CLI.

The library tables are filled directly, the way the parse and tags stages fill them. Most tests
embed with :class:`WordEmbedder`, a deterministic bag-of-words embedder whose similarities are known
exactly (each word group is one orthogonal axis), so the fusion ablation is checked on exact
numbers; the flow tests use the embedded MiniLM model with thresholds calibrated for it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llm_server import ScriptedLLMServer, text
from typer.testing import CliRunner

from vidscope.agents.mavis.search import (
    ConceptSnapshot,
    Library,
    fuse,
    parse_plan,
    plan_with_rules,
    search_library,
)
from vidscope.core.settings import ModelSettings, SearchSettings, Settings
from vidscope.storage import store as store_module
from vidscope.storage.store import Store

# ============================================================================ a tiny known corpus

#: Word groups of the deterministic embedder: each group is one axis of the vector space.
GROUPS: dict[str, tuple[str, ...]] = {
    "beach": ("beach", "seaside", "shore"),
    "dog": ("dog", "dogs", "puppy"),
    "running": ("running", "run", "runs", "sprinting"),
    "people": ("people", "sunbathers"),
    "sunbathing": ("sunbathing",),
    "sofa": ("sofa", "couch"),
    "sleeping": ("sleeping", "asleep"),
    "kitchen": ("kitchen",),
    "man": ("man",),
    "cooking": ("cooking",),
    "pasta": ("pasta",),
    "living room": ("living",),
}
AXIS = {word: i for i, group in enumerate(GROUPS.values()) for word in group}
DIM = 32


class WordEmbedder:
    """Text -> normalised sum of the axes of its known words (unknown words are ignored)."""

    name = "words"
    dim = DIM

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for row, value in enumerate(texts):
            for word in re.findall(r"[a-z]+", value.lower()):
                if word in AXIS:
                    out[row, AXIS[word]] += 1.0
            if not out[row].any():
                out[row, DIM - 1] = 1.0  # "nothing known": its own axis
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    # The same space doubles as an image–text model: a frame's "image embedding" is the embedding
    # of what the frame shows.
    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed(texts)


#: video id -> (file, caption, scene tags, object tags, action tags). Tags are (concept, surface).
CORPUS: dict[str, tuple[str, str, list[tuple[str, str]], list[tuple[str, str]], list[tuple[str, str]]]] = {
    "a" * 64: (
        "dog_beach.mp4",
        "a dog running on the beach",
        [("beach", "beach")],
        [("dog", "dog")],
        [("running", "running")],
    ),
    "b" * 64: (  # a distractor: the right scene, nothing else
        "sunbathers.mp4",
        "people sunbathing on the beach",
        [("beach", "beach")],
        [("people", "people")],
        [("sunbathing", "sunbathing")],
    ),
    "c" * 64: (  # a true match whose scene tag the parser missed
        "puppy_seaside.mp4",
        "a puppy sprinting along the seaside",
        [],
        [("dog", "puppy")],
        [("running", "sprinting")],
    ),
    "d" * 64: (  # a distractor: the right object, asleep indoors
        "dog_sofa.mp4",
        "a dog sleeping on a sofa",
        [("living room", "living room")],
        [("dog", "dog"), ("sofa", "sofa")],
        [("sleeping", "sleeping")],
    ),
    "e" * 64: (
        "cooking.mp4",
        "a man cooking pasta in a kitchen",
        [("kitchen", "kitchen")],
        [("man", "man"), ("pasta", "pasta")],
        [("cooking", "cooking")],
    ),
}
TRUE_MATCH, SUNBATHERS, PUPPY, DOG_SOFA, COOKING = CORPUS


def fill_library(store: Store, embedder: Any, *, windows: int = 1) -> None:
    """Write the corpus into the videos and library tables as ingestion would."""
    now = datetime.now(UTC)
    videos, vocab = [], {}
    for vid, (name, caption, scenes, objects, actions) in CORPUS.items():
        videos.append(
            {
                "video_id": vid, "path": f"/videos/{name}", "file_name": name, "size_bytes": 1,
                "duration": 30.0 * windows, "fps": 25.0, "width": 64, "height": 64, "rotation": 0,
                "has_audio": False, "added_at": now,
            }
        )  # fmt: skip
        # Window 0 shows the caption; later windows (if any) show nothing searchable.
        captions = [caption] + ["a blank screen"] * (windows - 1)
        vectors = embedder.embed(captions)
        parses = [
            {
                "video_id": vid, "window_index": w, "start": 30.0 * w, "end": 30.0 * (w + 1),
                "caption": captions[w], "scene": [s for _, s in scenes],
                "objects": [s for _, s in objects], "actions": [s for _, s in actions], "parser": "test",
                "caption_embedding": vectors[w].tolist(),
            }
            for w in range(windows)
        ]  # fmt: skip
        store.replace_video_rows(store.video_parses, vid, parses)
        index = []
        for dimension, tags in (("scene", scenes), ("object", objects), ("action", actions)):
            for concept, surface in tags:
                index.append(
                    {"dimension": dimension, "concept": concept, "video_id": vid, "window_index": 0,
                     "surface": surface}
                )  # fmt: skip
                vocab.setdefault((dimension, concept), set()).add(surface)
        store.replace_video_rows(store.concept_index, vid, index)
    store.upsert(store.videos, videos)
    concepts = list(vocab)
    vectors = embedder.embed([c for _, c in concepts])
    store.upsert(
        store.concepts,
        [
            {"dimension": d, "concept": c, "aliases": sorted(vocab[(d, c)] - {c}), "embedding": v.tolist(),
             "confirmed_by": "embedding"}
            for (d, c), v in zip(concepts, vectors, strict=True)
        ],
    )  # fmt: skip


@pytest.fixture
def library(tmp_path: Path) -> tuple[Store, WordEmbedder]:
    embedder = WordEmbedder()
    store = Store(tmp_path / "data", text_dim=DIM, image_dim=DIM)
    fill_library(store, embedder)
    return store, embedder


#: The bag-of-words space scores a one-word intent 3**-0.5 = 0.58 against a three-word caption that
#: says it, and 0 otherwise: the MAVIS paper's thresholds suit it (the defaults suit MiniLM).
WORD_THRESHOLDS = {"tau_soft": 0.5, "tau_hard": 0.3}


def run(store: Store, embedder: Any, query: str, fusion: str, **options: Any) -> Any:
    settings = SearchSettings(fusion=fusion, **{**WORD_THRESHOLDS, **options})
    return search_library(store, query, embedder=embedder, options=settings)


# ============================================================================ fusion ablation


def test_veto_removes_the_distractor_union_keeps_and_intersection_loses_a_true_match(
    library: tuple[Store, WordEmbedder],
) -> None:
    store, embedder = library
    query = "a dog running on the beach"
    results = {f: run(store, embedder, query, f) for f in ("veto", "union", "intersection", "average")}
    hits = {f: {h.video_id for h in r.hits} for f, r in results.items()}

    veto = results["veto"]
    assert veto.plan == {"scene": "beach", "object": "dog", "action": "running"}
    assert veto.planner == "rules"
    # Scene proposes the sunbathers, object proposes the dog on the sofa; the veto removes both.
    assert veto.pool_size == 4 and veto.proposals == {"scene": 2, "object": 3, "action": 2}
    assert hits["veto"] == {TRUE_MATCH, PUPPY}
    reasons = {d.video_id: d.reason for d in veto.dropped}
    assert set(reasons) == {SUNBATHERS, DOG_SOFA}
    assert "'object: dog' matched 0.00, under the veto bar 0.30 (--tau-hard)" in reasons[SUNBATHERS]
    assert "'action: running'" in reasons[SUNBATHERS] and "scene" not in reasons[SUNBATHERS]
    assert "'scene: beach'" in reasons[DOG_SOFA] and "object" not in reasons[DOG_SOFA]
    assert "φ" not in reasons[SUNBATHERS] and "τ" not in reasons[SUNBATHERS]  # plain words
    assert veto.fine_comparisons == 2 and veto.rerank == "caption"

    # Union only: the distractors reach the results.
    assert hits["union"] == {TRUE_MATCH, PUPPY, SUNBATHERS, DOG_SOFA}
    assert results["union"].dropped == [] and results["union"].fine_comparisons == 4
    # Intersection: the puppy (scene tag missed by the parser) is lost although it matches.
    assert hits["intersection"] == {TRUE_MATCH}
    lost = {d.video_id: d.reason for d in results["intersection"].dropped}
    assert lost[PUPPY] == "did not pass the relevance bar for 'scene: beach'"
    # Average: one strong dimension cannot carry a video the others reject.
    assert hits["average"] == {TRUE_MATCH, PUPPY}

    # Hits carry every agent's score, the fine score and the matching window.
    top = veto.hits[0]
    assert top.scores["scene"] == pytest.approx(3**-0.5, abs=1e-3)
    assert top.scores["fine"] == pytest.approx(1.0, abs=1e-3) and top.score == top.scores["fine"]
    assert top.moments[0] == (0.0, 30.0) and top.file_name in {"dog_beach.mp4", "puppy_seaside.mp4"}
    assert all(h.video_id != COOKING for r in results.values() for h in r.hits)


def test_a_query_about_object_and_action_activates_only_those_agents(
    library: tuple[Store, WordEmbedder],
) -> None:
    store, embedder = library
    result = run(store, embedder, "dogs running", "veto")
    assert result.plan == {"object": "dogs", "action": "running"}
    assert set(result.proposals) == set(result.concepts) == {"object", "action"}
    assert result.concepts["object"][0] == "dog"
    for hit in result.hits:
        assert "scene" not in hit.scores and {"object", "action", "fine"} <= set(hit.scores)
    # No scene agent: the sunbathers are never pooled; the dog asleep is vetoed by action alone.
    assert {h.video_id for h in result.hits} == {TRUE_MATCH, PUPPY}
    (dropped,) = result.dropped
    assert dropped.video_id == DOG_SOFA and dropped.reason.startswith("vetoed: 'action: ")
    assert set(dropped.scores) == {"object", "action"}


def test_thresholds_and_k_are_options(library: tuple[Store, WordEmbedder]) -> None:
    store, embedder = library
    query = "a dog running on the beach"
    assert len(run(store, embedder, query, "veto", k=1).hits) == 1
    # Nothing scores 0.6 against a one-word intent here: no agent proposes anything.
    strict = run(store, embedder, query, "veto", tau_soft=0.6)
    assert strict.pool_size == 0 and strict.hits == [] and strict.fine_comparisons == 0
    note = strict.notes[0]
    assert note.startswith("no video passed the relevance bar 0.60 for 'scene: beach'"), note
    assert "'object: dog' (best 0.58)" in note and "τ" not in note and "φ" not in note
    # A negative hard threshold vetoes nothing: veto then equals union.
    lenient = run(store, embedder, query, "veto", tau_hard=-0.1)
    assert {h.video_id for h in lenient.hits} == {TRUE_MATCH, PUPPY, SUNBATHERS, DOG_SOFA}
    with pytest.raises(ValueError, match="query is empty"):
        run(store, embedder, "  ", "veto")


def test_concept_membership_counts_as_evidence(library: tuple[Store, WordEmbedder]) -> None:
    """A video indexed under the exact concepts of the sub-intents is not vetoed because its short
    caption omits the words; a video indexed under a near concept only is still vetoed."""
    store, embedder = library
    shy = "f" * 64
    tagged = {"scene": ["beach"], "object": ["dog"], "action": ["running"]}
    store.replace_video_rows(
        store.video_parses,
        shy,
        [
            {"video_id": shy, "window_index": 0, "start": 0.0, "end": 30.0,
             "caption": "sunbathers on the shore", "scene": ["beach"], "objects": ["dog"],
             "actions": ["running"], "parser": "test",
             "caption_embedding": embedder.embed(["sunbathers on the shore"])[0].tolist()}
        ],
    )  # fmt: skip
    store.replace_video_rows(
        store.concept_index,
        shy,
        [
            {"dimension": d, "concept": c, "video_id": shy, "window_index": 0, "surface": c}
            for d, concepts in tagged.items()
            for c in concepts
        ],
    )
    result = run(store, embedder, "a dog running on the beach", "veto")
    # The caption says nothing of a dog or running (φ 0 for both agents), the index does.
    assert shy in {h.video_id for h in result.hits}
    (hit,) = [h for h in result.hits if h.video_id == shy]
    assert hit.scores["object"] == hit.scores["action"] == WORD_THRESHOLDS["tau_hard"]
    assert hit.scores["scene"] == pytest.approx(2**-0.5, abs=1e-3)  # "shore": the scene proposed it
    assert result.members == {"object": 1, "action": 1}
    # Membership never lifts a video above the ones whose caption says it.
    assert [h.video_id for h in result.hits][-1] == shy
    # The others are decided as before: the dog asleep is indexed under "sleeping", not "running".
    assert {d.video_id for d in result.dropped} == {SUNBATHERS, DOG_SOFA}
    # A sub-intent naming no concept (or alias) exactly lifts nobody on that dimension.
    near = run(store, embedder, "a dog jogging on the beach", "veto")
    assert near.plan["action"] == "jogging" and near.members == {"object": 1}
    assert shy not in {h.video_id for h in near.hits}


def test_fuse_rejects_an_unknown_mode() -> None:
    with pytest.raises(ValueError, match="unknown fusion 'max'"):
        fuse({"object": {"v"}}, {"v": {"object": 1.0}}, fusion="max", tau_hard=0.3)


def test_image_text_rerank_uses_frame_embeddings(library: tuple[Store, WordEmbedder]) -> None:
    store, embedder = library
    # The true match's frames show the whole query at 12 s; the puppy's only show the seaside.
    shows = {
        TRUE_MATCH: ["a blank screen", "dog running beach", "beach"],
        PUPPY: ["beach", "beach", "a blank screen"],
    }
    rows = []
    for vid, frames in shows.items():
        vectors = embedder.embed_texts(frames)
        for i, vector in enumerate(vectors):
            rows.append(
                {"video_id": vid, "frame_index": i, "t": 6.0 * (i + 1), "clip_index": i, "width": 8,
                 "height": 8, "jpeg": b"\xff\xd8", "image_embedding": vector.tolist()}
            )  # fmt: skip
    store.upsert(store.frames, rows)
    # The ledger rows the frame_embed stage writes; without them the vectors are not used.
    store.upsert(
        store.ledger,
        [
            {"video_id": vid, "stage": "frame_embed", "stage_version": 1, "config_hash": "test",
             "status": "done", "started_at": datetime.now(UTC),
             "details_json": json.dumps({"model": embedder.name})}
            for vid in shows
        ],
    )  # fmt: skip
    result = search_library(
        store, "dog running on a beach", embedder=embedder, options=SearchSettings(), image_text=embedder
    )
    assert result.rerank == "image-text:words" and result.fine_comparisons == 2
    assert [h.video_id for h in result.hits] == [TRUE_MATCH, PUPPY]
    assert result.hits[0].score == pytest.approx(1.0, abs=1e-3)
    assert result.hits[0].moments[0] == (12.0, 12.5)
    # A survivor without frame embeddings sends the whole fine stage back to captions, noted.
    store.delete_rows(store.frames, f"video_id = '{PUPPY}'")
    fallback = search_library(
        store, "dog running on a beach", embedder=embedder, options=SearchSettings(), image_text=embedder
    )
    assert fallback.rerank == "caption" and "no frame embeddings" in fallback.notes[0]


# ============================================================================ reading the library


def test_candidate_windows_taken_by_row_id_equal_the_filtered_read(
    library: tuple[Store, WordEmbedder], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, embedder = library
    ids = list(CORPUS)
    filtered = Library(store).window_matrix(ids)
    monkeypatch.setattr(store_module, "TAKE_MIN_VIDEOS", 1)  # take by row id even for five videos
    taken = Library(store).window_matrix(ids)
    assert taken.videos == filtered.videos == sorted(ids)
    assert taken.window_index.tolist() == filtered.window_index.tolist()
    assert np.allclose(taken.vectors, filtered.vectors)
    # A re-parsed video makes a new table version: the row ids are read again, not reused.
    captions = ["a man cooking pasta", "a dog running on the beach"]
    store.replace_video_rows(
        store.video_parses,
        COOKING,
        [
            {"video_id": COOKING, "window_index": w, "start": 30.0 * w, "end": 30.0 * (w + 1),
             "caption": c, "parser": "test", "caption_embedding": v.tolist()}
            for w, (c, v) in enumerate(zip(captions, embedder.embed(captions), strict=True))
        ],
    )  # fmt: skip
    again = Library(store).window_matrix(ids)
    rows = again.rows(COOKING)
    assert again.window_index[rows].tolist() == [0, 1]
    assert np.allclose(again.vectors[rows], embedder.embed(captions))
    assert again.phi(embedder.embed(["beach"]))[again.position[COOKING], 0] == pytest.approx(3**-0.5)
    # The whole search reads the same either way.
    by_take = run(store, embedder, "a dog running on the beach", "veto")
    monkeypatch.setattr(store_module, "TAKE_MIN_VIDEOS", 10_000)
    by_filter = run(store, embedder, "a dog running on the beach", "veto")
    assert by_take.model_dump(exclude={"seconds", "stages"}) == by_filter.model_dump(
        exclude={"seconds", "stages"}
    )


def test_optimize_indexes_the_concepts_and_the_search_still_reads_them(
    library: tuple[Store, WordEmbedder],
) -> None:
    store, embedder = library
    done = store.optimize()
    assert "btree(concept)" in done["concept_index"] and "btree(video_id)" in done["concept_index"]
    assert "btree(concept)" not in done["video_parses"]
    result = run(store, embedder, "a dog running on the beach", "veto")
    assert {h.video_id for h in result.hits} == {TRUE_MATCH, PUPPY}


def test_the_concept_floor_keeps_the_best_concept_and_drops_dissimilar_ones(
    library: tuple[Store, WordEmbedder],
) -> None:
    store, embedder = library
    vocabulary = ConceptSnapshot.from_store(store)
    # "puppy" is an alias of the concept dog (1.0); every other object concept is orthogonal (0.0).
    loose = vocabulary.nearest("object", "puppy", 3, embedder)
    assert loose[0] == ("dog", 1.0) and len(loose) == 3 and loose[1][1] == 0.0
    assert vocabulary.nearest("object", "puppy", 3, embedder, min_similarity=0.6) == [("dog", 1.0)]
    # An intent no concept resembles keeps its single best concept.
    assert len(vocabulary.nearest("object", "pasta and sofa", 3, embedder, min_similarity=0.99)) == 1
    result = run(store, embedder, "dogs running", "veto", concept_min_similarity=0.6)
    assert result.concepts == {"object": ["dog"], "action": ["running"]}
    assert {h.video_id for h in result.hits} == {TRUE_MATCH, PUPPY}


# ============================================================================ the rule planner


def test_rule_planner_without_a_vocabulary_uses_word_shapes_and_places() -> None:
    plan = plan_with_rules("show me a red car driving in the city at night", ConceptSnapshot())
    assert plan.intents == {"scene": "city and night", "object": "red car", "action": "driving"}
    plan = plan_with_rules("a man with a dog in the park", ConceptSnapshot())
    assert plan.intents == {"scene": "park", "object": "man and dog"}
    # Nothing to split: every agent gets the query, and that is noted.
    plan = plan_with_rules("the", ConceptSnapshot())
    assert set(plan.intents) == {"scene", "object", "action"} and plan.notes


def test_rule_planner_prefers_the_library_vocabulary(library: tuple[Store, WordEmbedder]) -> None:
    store, embedder = library
    vocabulary = ConceptSnapshot.from_store(store)
    # "sunbathing" is an action of the library; "living room" a scene (two words, one concept).
    plan = plan_with_rules("sunbathing people in the living room", vocabulary)
    assert plan.intents == {"scene": "living room", "object": "people", "action": "sunbathing"}
    # An unknown phrase goes to the dimension of its nearest concept when it is close enough.
    plan = plan_with_rules("couch", vocabulary, embedder=embedder)
    assert plan.intents == {"object": "couch"}
    plan = plan_with_rules("seaside", vocabulary, embedder=embedder)
    assert plan.intents == {"scene": "seaside"}


def test_parse_plan_accepts_the_asked_shape_only() -> None:
    assert parse_plan('{"scene": null, "object": "a dog", "action": ["running", "jumping"]}') == {
        "object": "a dog",
        "action": "running and jumping",
    }
    for bad in ('{"plan": "dog"}', '["dog"]', '{"object": 3}', '{"scene": null}'):
        with pytest.raises(ValueError):
            parse_plan(bad)


# ============================================================================ the flow, with MiniLM


def minilm_settings(tmp_path: Path, server: ScriptedLLMServer | None = None) -> Settings:
    # The default thresholds are calibrated for MiniLM: these flow tests run on them. The fine
    # stage compares captions here: no image-text model (the default's cannot be had offline).
    if server is None:
        return Settings(data_dir=tmp_path / "data", models=ModelSettings(chat=None, image_text=None))
    options = {"openai": {"base_url": server.base_url, "timeout_s": 5, "max_retries": 0, "cache": False}}
    return Settings(
        data_dir=tmp_path / "data",
        models=ModelSettings(chat="openai:scripted", image_text=None, options=options),
    )


def minilm_library(settings: Settings) -> Store:
    from vidscope.models import registry
    from vidscope.models.open_store import open_store

    store = open_store(settings)
    fill_library(store, registry.text_embedder(settings), windows=2)
    return store


def test_search_flow_with_the_chat_planner_and_its_fallback(
    tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    from vidscope.flows.search import result_markdown, run_search

    settings = minilm_settings(tmp_path, llm_server)
    minilm_library(settings)
    llm_server.script(
        [
            text('{"scene": "beach", "object": "dog", "action": "running"}'),
            text('{"plan": "a dog on the beach"}'),  # valid JSON, not a plan
        ]
    )
    planned = run_search(settings, "a dog running on the beach")
    assert planned.planner == "chat:openai:scripted" and planned.notes == []
    assert planned.plan == {"scene": "beach", "object": "dog", "action": "running"}
    assert [h.video_id for h in planned.hits][:1] == [TRUE_MATCH]
    assert {h.video_id for h in planned.hits} == {TRUE_MATCH, PUPPY}
    assert {d.video_id for d in planned.dropped} == {SUNBATHERS, DOG_SOFA}
    assert planned.hits[0].moments[0] == (0.0, 30.0)  # the window that shows it, not the blank one
    sent = llm_server.chat_requests[0]["messages"]
    assert '<query>"a dog running on the beach"</query>' in sent[-1]["content"]

    fallback = run_search(settings, "a dog running on the beach", fusion="union", k=3)
    assert fallback.planner == "rules" and "not usable" in fallback.notes[0]
    assert fallback.plan == planned.plan and fallback.fusion == "union"
    assert len(fallback.hits) == 3 and fallback.pool_size == 4
    markdown = result_markdown(planned)
    assert "dog_beach.mp4" in markdown and "vetoed: " in markdown


def test_cli_search_json_and_an_empty_library(tmp_path: Path) -> None:
    from vidscope.cli import app

    runner = CliRunner()
    empty = runner.invoke(app, ["--data-dir", str(tmp_path / "empty"), "search", "a dog"])
    assert empty.exit_code == 1
    assert "library is empty" in empty.output

    settings = minilm_settings(tmp_path)
    minilm_library(settings)
    args = ["--data-dir", str(tmp_path / "data"), "search", "dogs running"]
    result = runner.invoke(app, [*args, "--k", "1", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["plan"] == {"object": "dogs", "action": "running"}
    assert [h["video_id"] for h in data["hits"]] == [TRUE_MATCH]
    table = runner.invoke(app, [*args, "--dropped"])
    assert table.exit_code == 0 and "dog_beach.mp4" in table.output and "looked for" in table.output
    explained = runner.invoke(app, [*args, "--dropped", "--explain"])  # the pipeline's own terms
    assert explained.exit_code == 0 and "fusion veto" in explained.output and "dropped" in explained.output
    # The MAVIS paper's thresholds stay available; MiniLM scores no one-word intent 0.5 here.
    paper = runner.invoke(app, [*args, "--tau-soft", "0.5", "--tau-hard", "0.3", "--json"])
    assert paper.exit_code == 0, paper.output
    data = json.loads(paper.output)
    assert data["hits"] == [] and any("no video passed the relevance bar" in n for n in data["notes"])
    bad = runner.invoke(app, [*args, "--fusion", "max"])
    assert bad.exit_code == 2 and "unknown fusion" in bad.output


@pytest.mark.slow
def test_thresholds_follow_the_text_embedder(tmp_path: Path) -> None:
    """Thresholds are per embedder spec: a profile that switches embedders switches thresholds;
    explicit values win; an uncalibrated embedder is said to be so."""
    from vidscope.core.settings import CALIBRATED_THRESHOLDS
    from vidscope.flows.search import run_search

    minilm = CALIBRATED_THRESHOLDS["minilm:embedded"]
    assert SearchSettings().for_embedder("minilm:embedded").tau_soft == minilm.tau_soft
    block = {"words:test": {"tau_soft": 0.5, "tau_hard": 0.3, "concept_min_similarity": 0.7}}
    custom = Settings(data_dir=tmp_path / "x", search={"thresholds": block})
    chosen = custom.search.for_embedder("words:test")
    assert (chosen.tau_soft, chosen.tau_hard, chosen.concept_min_similarity) == (0.5, 0.3, 0.7)
    assert "minilm:embedded" in custom.search.thresholds  # the shipped calibration stays
    pinned = Settings(data_dir=tmp_path / "x", search={"tau_hard": 0.2, "thresholds": block})
    assert pinned.search.for_embedder("words:test").tau_hard == 0.2  # set explicitly: kept
    assert pinned.search.for_embedder("words:test").tau_soft == 0.5

    # Through the flow: MiniLM's calibrated thresholds find the dog (as the defaults do); an entry
    # for MiniLM at the paper's scale (0.5 / 0.3) is what the same search then runs with.
    settings = minilm_settings(tmp_path)
    minilm_library(settings)
    assert [h.video_id for h in run_search(settings, "dogs running").hits][:1] == [TRUE_MATCH]
    paper = {"minilm:embedded": {"tau_soft": 0.5, "tau_hard": 0.3, "concept_min_similarity": 0.6}}
    strict = settings.model_copy(update={"search": SearchSettings(thresholds=paper)})
    result = run_search(strict, "dogs running")
    assert result.hits == [] and "relevance bar 0.50" in result.notes[0]
    assert not any("calibrated" in n for n in result.notes)
    # An embedder without a calibration: the defaults, and a note saying what to run.
    other = settings.model_copy(update={"search": SearchSettings(thresholds={})})
    other.search.thresholds.pop("minilm:embedded")
    noted = run_search(other, "dogs running")
    assert any("--calibrate --embedder 'minilm:embedded'" in n for n in noted.notes), noted.notes

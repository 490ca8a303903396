"""The semantic library: per-window parses, tag normalisation, the vocabulary and the concept index."""

from __future__ import annotations

import json
import threading
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llm_server import ScriptedLLMServer, text
from typer.testing import CliRunner

from vidscope.cli import app
from vidscope.core.images import encode_jpeg
from vidscope.core.lexicon import canonical_form
from vidscope.core.settings import IngestSettings, ModelSettings, Settings
from vidscope.models import registry
from vidscope.models.open_store import open_store
from vidscope.storage import Store
from vidscope.storage.clips import SIGNALS_SUMMARY
from vidscope.storage.ledger import STATUS_DONE, STATUS_FAILED
from vidscope.storage.videos import VideoRecord
from vidscope.tasks.parse import (
    CAPTION_MAX_WORDS,
    CAPTION_MIN_WORDS,
    PARSE,
    SIGNALS_PARSER,
    Window,
    parse_reply,
    signals_parse,
    split_windows,
    text_keywords,
)
from vidscope.tasks.stage import StageContext, execute, ledger_rows
from vidscope.tasks.tags import (
    MERGE_THRESHOLD,
    TAGS,
    ConceptVocabulary,
    MergeStats,
    map_forms,
    map_parses,
    nearest_concepts,
)

VIDEO_ID = "a" * 64
CLIP_SECONDS = 5.0


def embedded_settings(tmp_path: Path, **models: Any) -> Settings:
    """The embedded default (MiniLM, no captioner, no chat) unless ``models`` says otherwise."""
    return Settings(data_dir=tmp_path / "data", models=ModelSettings(**models))


def loopback(server: ScriptedLLMServer) -> dict[str, Any]:
    return {"openai": {"base_url": server.base_url, "timeout_s": 5, "max_retries": 0, "cache": False}}


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The real embedded MiniLM (loaded once per process by the registry)."""
    settings = Settings(data_dir=tmp_path_factory.mktemp("minilm"))
    return registry.text_embedder(settings)


# ============================================================================ canonical forms


@pytest.mark.parametrize(
    ("surface", "dimension", "canonical"),
    [
        ("Dogs", "object", "dog"),
        ("people", "object", "person"),  # what detectors label "person"
        ("the red cars", "object", "red car"),
        ("T-Shirts", "object", "t-shirt"),
        ("in the kitchen", "scene", "kitchen"),
        ("city streets", "scene", "city street"),
        ("runs", "action", "running"),
        ("ran", "action", "running"),
        ("run", "action", "running"),
        ("Chatting", "action", "chatting"),
        ("swam", "action", "swimming"),
        ("man walks the dogs", "action", "walking dog"),
        ("riding bicycles", "action", "riding bicycle"),
        ("the", "object", ""),
    ],
)
def test_canonical_forms(surface: str, dimension: str, canonical: str) -> None:
    assert canonical_form(surface, dimension) == canonical


def test_unknown_dimension_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown dimension"):
        canonical_form("dog", "colour")


def test_signals_keywords_from_running_text() -> None:
    scenes, objects, actions = text_keywords(
        "The quick brown fox jumps over the lazy dog. They swam in the lake."
    )
    assert scenes == ["lake"]
    assert objects == ["fox", "dog"]  # adjectives before a noun are not objects
    assert actions == ["jumping", "swimming"]


NARRATION = (
    "Welcome to the kitchen. First, heat the oven to 200 degrees. Then mix the flour and the sugar "
    "in a large bowl. Finally, make the cake and then bake it for 40 minutes."
)


def test_actions_from_imperative_narration() -> None:
    scenes, objects, actions = text_keywords(NARRATION)
    assert scenes == ["kitchen"]
    assert objects == ["oven", "flour", "sugar", "bowl", "cake"]  # "heat" is a command, not a thing
    # Commands at clause start with an object; a light verb ("make") only together with its object.
    assert actions == ["heating", "mixing", "making cake", "baking"]
    # Signs and titles: one short clause per line, a bare noun may be the object.
    assert text_keywords("KITCHEN TOUR\nMIX FLOUR\nBAKE 40 MIN") == (
        ["kitchen"],
        ["flour"],
        ["mixing", "baking"],
    )
    # Nouns with a verb reading are not commands without an object after them.
    assert text_keywords("Tour of the kitchen. Sign here. Welcome to the show.")[2] == []
    assert text_keywords("The sign on the water tower. Stop sign ahead.")[2] == []


def clip_texts(*texts: tuple[str | None, str | None]) -> Window:
    clips = [{"transcript_text": speech, "ocr_text": shown} for speech, shown in texts]
    return Window(0, 0.0, 5.0 * len(clips), clips)


def test_signals_caption_is_a_short_keyword_summary() -> None:
    demo = clip_texts(
        ("Welcome to the kitchen. First, heat the oven to 200 degrees.", "KITCHEN TOUR"),
        ("Then mix the flour and the sugar in a large bowl. Finally, make the cake", "OVEN 200 C"),
        ("for 40 minutes.", "MIX FLOUR"),
        (None, "BAKE 40 MIN"),
    )
    parse = signals_parse(demo, Counter())
    assert parse.caption == "kitchen: heating oven, mixing flour, sugar, bowl, making cake, baking"
    assert parse.actions == ["mixing", "heating", "making cake", "baking"]
    # Many tags: whole items are left out so that the caption stays within the limit.
    long = clip_texts(*[(text["transcript_text"], text.get("ocr_text")) for text in SPOKEN * 3])
    long.clips.append({"transcript_text": NARRATION + " The cat eats the fish.", "ocr_text": None})
    caption = signals_parse(long, Counter({"person": 4, "chair": 1})).caption
    assert CAPTION_MIN_WORDS <= len(caption.split()) <= CAPTION_MAX_WORDS
    assert caption.startswith("kitchen: cooking, chopping, onion") and '"' not in caption
    # Too few tags for a summary: quoted signals fill it; nothing at all is said so.
    assert (
        signals_parse(clip_texts((None, "BAKE 40 MIN")), Counter()).caption
        == 'baking; on screen: "BAKE 40 MIN"'
    )
    assert signals_parse(clip_texts((None, None)), Counter({"person": 2})).caption == "seen: person"
    assert signals_parse(clip_texts((None, None)), Counter()).caption.startswith("No speech")


# ============================================================================ merging


def test_synonyms_merge_and_distinct_concepts_stay_apart(tmp_path: Path, embedder: Any) -> None:
    store = Store(tmp_path / "data")
    vocabulary = ConceptVocabulary(store, "action")
    forms = ["talking", "running", "chatting", "swimming", "talking"]
    mapping = map_forms(vocabulary, forms, embedder, None, stats := MergeStats())
    assert mapping == {
        "talking": "talking",
        "running": "running",
        "chatting": "talking",  # cosine 0.82 with MiniLM
        "swimming": "swimming",  # 0.50 with running
    }
    assert (stats.new, stats.merged) == (3, 1)
    vocabulary.save()

    objects = ConceptVocabulary(store, "object")
    assert map_forms(objects, ["dog", "cat", "bicycle"], embedder, None, MergeStats()) == {
        "dog": "dog",
        "cat": "cat",  # 0.66: related, not the same
        "bicycle": "bicycle",
    }
    objects.save()

    # The stored vocabulary only grows: new tags map to existing concepts without rebuilding.
    assert ConceptVocabulary(store, "action").known("chatting").concept == "talking"  # type: ignore[union-attr]
    reloaded = ConceptVocabulary(store, "object")
    stats = MergeStats()
    assert map_forms(reloaded, ["cat", "bike"], embedder, None, stats) == {
        "cat": "cat",
        "bike": "bicycle",  # 0.92
    }
    assert stats.known == 1 and stats.merged == 1
    reloaded.save()
    rows = {r["concept"]: r for r in store.rows(store.concepts).to_pylist()}
    assert sorted(rows) == ["bicycle", "cat", "dog", "running", "swimming", "talking"]
    assert set(rows["talking"]["aliases"]) == {"talking", "chatting"}
    assert set(rows["bicycle"]["aliases"]) == {"bicycle", "bike"}
    assert rows["bicycle"]["confirmed_by"] == "embedding"

    # Query side: exact alias hits score 1.0, others by cosine.
    hits = nearest_concepts(store, embedder, "action", "chats", 3)
    assert hits[0] == ("talking", 1.0) and len(hits) == 3
    near = nearest_concepts(store, embedder, "action", "jogging", 2)
    assert near[0][0] == "running" and 0.5 < near[0][1] < 1.0
    assert nearest_concepts(store, None, "object", "Dogs", 5) == [("dog", 1.0)]
    assert MERGE_THRESHOLD == 0.80


def test_chat_model_confirms_or_refuses_merges(
    tmp_path: Path, embedder: Any, llm_server: ScriptedLLMServer
) -> None:
    settings = embedded_settings(tmp_path, chat="openai:judge", options=loopback(llm_server))
    chat = registry.chat_model(settings)
    store = open_store(settings)
    vocabulary = ConceptVocabulary(store, "action")
    map_forms(vocabulary, ["talking"], embedder, chat, MergeStats())
    assert llm_server.chat_requests == []  # nothing to compare with yet
    # "chatting" (0.82) would merge on the embedding alone: the model says no, so it stays apart.
    # "speaking" (0.74) is below the embedding threshold: the model says yes, so it merges.
    llm_server.script([text('{"same": false}'), text('{"same": true}')])
    stats = MergeStats()
    mapping = map_forms(vocabulary, ["chatting", "speaking"], embedder, chat, stats)
    assert mapping == {"chatting": "chatting", "speaking": "talking"}
    assert (stats.asked, stats.refused, stats.merged) == (2, 1, 1)
    asked = json.dumps(llm_server.chat_requests[0]["messages"])
    assert "chatting" in asked and "talking" in asked and "video_data" in asked
    vocabulary.save()
    row = store.rows(store.concepts, where="concept = 'talking'").to_pylist()[0]
    assert set(row["aliases"]) == {"talking", "speaking"} and row["confirmed_by"] == "openai:judge"

    # An unusable answer (after the backend's re-ask) leaves the decision to the embedding rule.
    llm_server.script([text("maybe"), text("hard to say")])
    stats = MergeStats()
    assert map_forms(ConceptVocabulary(store, "action"), ["conversing"], embedder, chat, stats) == {
        "conversing": "conversing"  # nearest is chatting at 0.76: below the embedding threshold
    }
    assert stats.asked == 1 and len(stats.confirm_errors) == 1


def test_concurrent_videos_extend_one_vocabulary(tmp_path: Path, embedder: Any) -> None:
    store = Store(tmp_path / "data")
    parses = [
        {"window_index": 0, "scene": ["kitchen"], "objects": ["dogs", "knife"], "actions": ["talking"]},
        {"window_index": 0, "scene": ["kitchens"], "objects": ["dog", "cup"], "actions": ["chatting"]},
    ]
    results: list[Any] = [None, None]

    def ingest(i: int) -> None:
        results[i] = map_parses(store, [parses[i]] * 3, embedder, None, MergeStats())[0]

    threads = [threading.Thread(target=ingest, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    concepts = store.rows(store.concepts, columns=["dimension", "concept"]).to_pylist()
    pairs = sorted((c["dimension"], c["concept"]) for c in concepts)
    assert pairs == [
        ("action", "talking"),
        ("object", "cup"),
        ("object", "dog"),
        ("object", "knife"),
        ("scene", "kitchen"),
    ] or pairs == [
        ("action", "chatting"),
        ("object", "cup"),
        ("object", "dog"),
        ("object", "knife"),
        ("scene", "kitchen"),
    ]
    assert results[0]["action"]["talking"] == results[1]["action"]["chatting"]
    # Running again (a retried stage) changes nothing.
    before = store.table_version(store.concepts)
    map_parses(store, [parses[0]], embedder, None, MergeStats())
    assert store.table_version(store.concepts) == before


# ============================================================================ the stages


def stored_video(
    settings: Settings, clips: list[dict[str, Any]], *, frames: bool = False
) -> tuple[Store, VideoRecord]:
    """A registered video with these clip texts and its caption stage recorded as done."""
    store = open_store(settings)
    now = datetime.now(UTC)
    duration = len(clips) * CLIP_SECONDS
    row = {
        "video_id": VIDEO_ID,
        "path": str(settings.data_dir / "kitchen.mp4"),
        "file_name": "kitchen.mp4",
        "size_bytes": 1000,
        "duration": duration,
        "fps": 25.0,
        "width": 64,
        "height": 48,
        "rotation": 0,
        "has_audio": True,
        "added_at": now,
    }
    store.upsert(store.videos, [row])
    store.replace_video_rows(
        store.clips,
        VIDEO_ID,
        [
            {
                "video_id": VIDEO_ID,
                "clip_index": i,
                "start": i * CLIP_SECONDS,
                "end": (i + 1) * CLIP_SECONDS,
                "caption": "[no visual caption] signals",
                "caption_source": SIGNALS_SUMMARY,
                **clip,
            }
            for i, clip in enumerate(clips)
        ],
    )
    if frames:
        image = np.full((48, 64, 3), 200, dtype=np.uint8)
        jpeg = encode_jpeg(image, 80)
        count = int(duration * 2)
        store.replace_video_rows(
            store.frames,
            VIDEO_ID,
            [
                {
                    "video_id": VIDEO_ID,
                    "frame_index": i,
                    "t": i / 2,
                    "clip_index": int(i / 2 // CLIP_SECONDS),
                    "width": 64,
                    "height": 48,
                    "jpeg": jpeg,
                }
                for i in range(count)
            ],
        )
    store.replace_video_rows(
        store.detections,
        VIDEO_ID,
        [
            {
                "video_id": VIDEO_ID,
                "frame_index": 1,
                "det_index": 0,
                "t": 0.5,
                "label": "person",
                "box": [1.0, 1.0, 10.0, 10.0],
                "score": 0.9,
                "track_id": 1,
            }
        ],
    )
    store.upsert(
        store.ledger,
        [
            {
                "video_id": VIDEO_ID,
                "stage": "caption",
                "stage_version": 1,
                "config_hash": "c1",
                "status": STATUS_DONE,
                "started_at": now,
                "finished_at": now,
                "seconds": 0.1,
                "rows": len(clips),
            }
        ],
    )
    return store, VideoRecord(**row)


def run(stage: Any, settings: Settings, store: Store, record: VideoRecord) -> Any:
    ctx = StageContext(settings=settings, store=store, video=record, path=Path(record.path))
    return execute(stage, ctx)


SPOKEN = [
    {"transcript_text": "Today we are cooking pasta in the kitchen.", "ocr_text": "PASTA NIGHT"},
    {"transcript_text": "I chop the onions and my friend talks on the phone."},
    {"transcript_text": "The dogs run around the table."},
]


def test_signals_parse_and_tags_make_a_video_searchable(tmp_path: Path) -> None:
    settings = embedded_settings(tmp_path)
    store, record = stored_video(settings, SPOKEN)
    assert run(PARSE, settings, store, record).status == "done"
    (parse,) = store.rows(store.video_parses, video_id=VIDEO_ID).to_pylist()
    assert parse["parser"] == SIGNALS_PARSER
    assert parse["caption"].startswith("kitchen: cooking, chopping, onion")
    assert CAPTION_MIN_WORDS <= len(parse["caption"].split()) <= CAPTION_MAX_WORDS
    assert "kitchen" in parse["scene"]
    assert {"person", "onion", "phone", "dog", "table"} <= set(parse["objects"])
    assert {"cooking", "chopping", "talking"} <= set(parse["actions"])
    assert parse["caption_embedding"] is not None and len(parse["caption_embedding"]) == 384

    result = run(TAGS, settings, store, record)
    assert result.status == "done" and result.rows > 0
    index = store.rows(store.concept_index, video_id=VIDEO_ID).to_pylist()
    assert ("action", "cooking") in {(r["dimension"], r["concept"]) for r in index}
    assert {"scene", "object", "action"} == {r["dimension"] for r in index}
    vocabulary = {r["concept"] for r in store.rows(store.concepts).to_pylist()}
    assert {"kitchen", "onion", "cooking"} <= vocabulary

    # `vidscope sql` sees the three sub-libraries joined with the captions.
    query = (
        "SELECT i.concept, p.caption FROM concept_index i JOIN video_parses p "
        "USING (video_id, window_index) WHERE i.dimension = 'object' ORDER BY i.concept"
    )
    cli = CliRunner().invoke(app, ["--data-dir", str(settings.data_dir), "sql", "--json", query])
    assert cli.exit_code == 0, cli.output
    rows = [json.loads(line) for line in cli.output.splitlines() if line.startswith("{")]
    assert {"onion", "person"} <= {r["concept"] for r in rows}

    # Removing the video removes its parse and index rows, not the library's vocabulary.
    store.delete_video(VIDEO_ID)
    assert store.count(store.concept_index) == 0 and store.count(store.video_parses) == 0
    assert store.count(store.concepts) == len(vocabulary)


def test_long_videos_are_parsed_in_chapter_windows(tmp_path: Path) -> None:
    clips = [{"start": i * 5.0, "end": (i + 1) * 5.0} for i in range(25)]  # 125 s
    windows = split_windows(clips, 60.0)
    assert [(w.start, w.end) for w in windows] == [(0.0, 60.0), (60.0, 125.0)]  # 5 s tail joined
    settings = Settings(data_dir=tmp_path / "data", ingest=IngestSettings(parse_window_seconds=10.0))
    store, record = stored_video(settings, SPOKEN * 2)  # 30 s
    run(PARSE, settings, store, record)
    parses = store.rows(store.video_parses, video_id=VIDEO_ID).to_pylist()
    assert [(p["start"], p["end"]) for p in parses] == [(0.0, 10.0), (10.0, 20.0), (20.0, 30.0)]


VALID = {
    "caption": "A person cooks pasta in a small kitchen while a friend talks on the phone.",
    "scene": ["kitchen"],
    "objects": ["pasta", "phones", "person"],
    "actions": ["cooks pasta", "talking on the phone"],
}


def captioner_settings(tmp_path: Path, server: ScriptedLLMServer) -> Settings:
    return embedded_settings(tmp_path, captioner="openai:vlm", options=loopback(server))


def test_captioner_json_parse_with_frames_and_quoted_data(
    tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    settings = captioner_settings(tmp_path, llm_server)
    store, record = stored_video(settings, SPOKEN, frames=True)
    long_caption = dict(VALID, caption=VALID["caption"] + " " + "Then they sit down and eat together. " * 3)
    llm_server.script([text(json.dumps(long_caption))])
    assert run(PARSE, settings, store, record).status == "done"
    (parse,) = store.rows(store.video_parses, video_id=VIDEO_ID).to_pylist()
    assert parse["parser"] == "openai:vlm"
    assert parse["caption"] == VALID["caption"]  # trimmed to its first sentence
    assert parse["objects"] == ["pasta", "phones", "person"]
    (request,) = llm_server.chat_requests
    user = request["messages"][-1]["content"]
    images = [p for p in user if p.get("type") == "image_url"]
    assert 1 <= len(images) <= 6
    prompt = next(p["text"] for p in user if p.get("type") == "text")
    assert "<video_data>" in prompt and "PASTA NIGHT" in prompt
    run(TAGS, settings, store, record)
    concepts = {(r["dimension"], r["concept"]) for r in store.rows(store.concept_index).to_pylist()}
    assert {("object", "phone"), ("action", "cooking pasta"), ("scene", "kitchen")} <= concepts


def test_malformed_replies_are_repaired_or_asked_again(tmp_path: Path, llm_server: ScriptedLLMServer) -> None:
    settings = captioner_settings(tmp_path, llm_server)
    store, record = stored_video(settings, SPOKEN, frames=True)
    llm_server.script(
        [
            text("Sure! Here it is: {'caption': 'Too short.', 'objects': ['pot'],}"),  # near-JSON
            text(json.dumps(VALID)),
        ]
    )
    assert run(PARSE, settings, store, record).status == "done"
    assert len(llm_server.chat_requests) == 2
    retry = llm_server.chat_requests[1]["messages"][-1]["content"]
    assert "could not be used" in retry and "caption" in retry
    (parse,) = store.rows(store.video_parses, video_id=VIDEO_ID).to_pylist()
    assert parse["caption"] == VALID["caption"]


@pytest.mark.parametrize(
    "bad",
    [
        ["I cannot help with that.", "no JSON here either"],  # the backend re-asks for JSON
        ['{"caption": "A kitchen."}', '{"caption": 42, "objects": "pot"}'],  # parse re-asks
    ],
    ids=["not-json", "invalid-parse"],
)
def test_malformed_twice_fails_clearly_and_stores_nothing(
    tmp_path: Path, llm_server: ScriptedLLMServer, bad: list[str]
) -> None:
    settings = captioner_settings(tmp_path, llm_server)
    store, record = stored_video(settings, SPOKEN * 2, frames=True)
    settings = settings.model_copy(
        update={"ingest": IngestSettings(parse_window_seconds=15.0)}
    )  # two windows: the first parses, the second never does
    llm_server.script([text(json.dumps(VALID)), *map(text, bad)])
    with pytest.raises(Exception, match="no usable parse of window 2"):
        run(PARSE, settings, store, record)
    assert llm_server.pending == 0
    assert store.count(store.video_parses) == 0  # the good first window was not stored alone
    ledger = ledger_rows(store, VIDEO_ID)["parse"]
    assert ledger["status"] == STATUS_FAILED and "openai:vlm" in ledger["error"]
    assert run(TAGS, settings, store, record).status == "blocked"


@pytest.mark.slow
def test_an_ingested_video_is_in_the_index_and_vocabulary(tmp_path: Path) -> None:
    """End to end with the embedded default: speech and on-screen text become concepts."""
    from media import speech_wav, text_video

    from vidscope.flows.ingest import run_ingest

    wav = speech_wav("the quick brown fox jumps over the lazy dog", tmp_path / "speech.wav")
    video = text_video(
        tmp_path / "fox.mp4",
        duration=8.0,
        texts=[(0.0, 4.0, "THE DOG IN THE KITCHEN")],
        audio=wav,
    )
    settings = embedded_settings(tmp_path)
    (report,) = run_ingest([str(video)], settings, optimize=False)
    statuses = {s.stage: s.status for s in report.stages}
    assert statuses["parse"] == "done" and statuses["tags"] == "done", report
    store = open_store(settings)
    (parse,) = store.rows(store.video_parses, video_id=report.video_id).to_pylist()
    assert parse["parser"] == SIGNALS_PARSER and parse["caption_embedding"] is not None
    cli = CliRunner().invoke(
        app,
        [
            "--data-dir",
            str(settings.data_dir),
            "sql",
            "--json",
            "SELECT dimension, concept FROM concept_index ORDER BY dimension, concept",
        ],
    )
    assert cli.exit_code == 0, cli.output
    indexed = {
        (r["dimension"], r["concept"])
        for r in map(json.loads, (line for line in cli.output.splitlines() if line.startswith("{")))
    }
    assert {("object", "dog"), ("scene", "kitchen")} <= indexed  # read on screen
    if statuses["speech"] == "done":
        assert {("object", "fox"), ("action", "jumping")} <= indexed
    vocabulary = {r["concept"] for r in store.rows(store.concepts).to_pylist()}
    assert {concept for _, concept in indexed} <= vocabulary


def test_parse_reply_validates_and_repairs() -> None:
    parsed = parse_reply(
        '```json\n{"Caption": "A man rides a red bicycle down a busy city street at night.", '
        '"setting": "city street", "object": "bicycle, man", "actions": ["riding bicycle", ""]}\n```'
    )
    assert parsed.scene == ["city street"] and parsed.objects == ["bicycle", "man"]
    assert parsed.actions == ["riding bicycle"]
    long = "word " * 30
    assert len(parse_reply(json.dumps({"caption": long})).caption.split()) == 20
    with pytest.raises(ValueError, match="caption: .*has 2 words"):
        parse_reply('{"caption": "Two words"}')
    with pytest.raises(ValueError, match="caption"):
        parse_reply('{"objects": ["dog"]}')
    with pytest.raises(ValueError):
        parse_reply("[1, 2]")


@pytest.mark.slow
def test_the_narrated_demo_video_is_found_by_search(tmp_path: Path) -> None:
    """End to end with the embedded default (no captioner, no chat): the demo-like narrated video
    is the top hit for its content and no hit for an unrelated query, which finds a distractor."""
    from media import speech_wav, text_video

    from vidscope.flows.demo import DEMO_NARRATION, DEMO_TEXTS
    from vidscope.flows.ingest import run_ingest
    from vidscope.flows.search import run_search

    wav = speech_wav(DEMO_NARRATION, tmp_path / "narration.wav", rate_wpm=150)
    demo = text_video(tmp_path / "kitchen-tour.mp4", duration=20.0, texts=DEMO_TEXTS, audio=wav)
    road = text_video(tmp_path / "road.mp4", duration=6.0, texts=[(0.0, 6.0, "A RED CAR ON THE ROAD")])
    settings = embedded_settings(tmp_path)
    reports = run_ingest([str(demo), str(road)], settings, optimize=False)
    assert all({s.stage: s.status for s in r.stages}["tags"] == "done" for r in reports), reports
    store = open_store(settings)
    captions = {r["caption"] for r in store.rows(store.video_parses).to_pylist()}
    assert any("mixing flour" in c for c in captions), captions

    for query in ("mixing flour in the kitchen", "baking a cake", "heating the oven"):
        hits = run_search(settings, query).hits
        assert hits and hits[0].file_name == "kitchen-tour.mp4", (query, hits)
    hits = run_search(settings, "a car on the road").hits
    assert "kitchen-tour.mp4" not in {h.file_name for h in hits}
    assert [h.file_name for h in hits] == ["road.mp4"]

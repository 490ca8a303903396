"""Canonical forms keep parts of speech; filler never becomes a concept (lexicon, parse, tags)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vidscope.core.lexicon import STOP_WORDS, VAGUE_NOUNS, canonical_form, lemmas, verb_lemma
from vidscope.core.settings import ModelSettings, Settings
from vidscope.tasks.parse import text_keywords

TRICKY = [
    # Nouns that can be verbed stay nouns, in every dimension (an action tag included).
    ("spring", "action", "spring"),
    ("springs", "action", "spring"),
    ("post", "action", "post"),
    ("posts", "action", "post"),
    ("map", "action", "map"),
    ("maps", "object", "map"),
    ("ferry", "action", "ferry"),
    ("ticket", "action", "ticket"),
    ("string", "action", "string"),
    # Action phrases do become gerunds: a verb with its object, an -ing form, a verb-only form,
    # a common action verb.
    ("map the route", "action", "mapping route"),
    ("post a letter", "action", "posting letter"),
    ("painting", "action", "painting"),
    ("ran", "action", "running"),
    ("walks", "action", "walking"),
    ("bring", "action", "bringing"),
    ("swinging", "action", "swinging"),
    # Stop-words, filler and vague nouns alone are no concept; inside a phrase a noun stays.
    ("um", "object", ""),
    ("gonna", "action", ""),
    ("basically", "object", ""),
    ("yeah right", "object", ""),
    ("kind of", "object", ""),
    ("a lot", "object", ""),
    ("the thing", "object", ""),
    ("let's go", "action", ""),
    ("parking lot", "scene", "parking lot"),
]


@pytest.mark.parametrize(("surface", "dimension", "canonical"), TRICKY)
def test_tricky_words_keep_their_part_of_speech(surface: str, dimension: str, canonical: str) -> None:
    assert canonical_form(surface, dimension) == canonical


def test_plural_nouns_after_nouns_are_compounds_not_actions() -> None:
    _, objects, actions = text_keywords(
        "The fence posts are old. Look at the harbor maps. The dog runs over the hill. "
        "The ferry posts a schedule."
    )
    assert "post" in objects and "map" in objects
    assert actions == ["running", "posting"]  # "posts a schedule" is a verb with an object


def test_a_sign_opening_with_a_noun_that_can_be_verbed_is_a_compound() -> None:
    # A bare noun after a word with noun and verb readings: a command only for instruction verbs.
    assert text_keywords("SPRING TIMETABLE")[1:] == (["timetable"], [])
    assert text_keywords("BLUE BOAT")[1:] == (["boat"], [])  # the head of a sign is a thing shown
    assert text_keywords("POST OFFICE\nMAP ROOM\nFERRY TICKETS")[2] == []
    assert text_keywords("MIX FLOUR\nPRESS BUTTON\nSTIR SAUCE")[2] == ["mixing", "pressing", "stirring"]
    # With a determiner after it the same word is a command, whatever it is.
    assert text_keywords("Spring the trap. Post a letter.")[2] == ["springing", "posting"]


def nonsense(dimension: str, concept: str) -> str | None:
    """Why ``concept`` is no concept, or ``None`` when it reads as one."""
    words = concept.split()
    if any(w in STOP_WORDS for w in words):
        return "a stop-word or filler"
    if all(w in VAGUE_NOUNS for w in words):
        return "vague"
    head = words[0]
    if dimension == "action" and head.endswith("ing"):
        lemma = verb_lemma(head)
        if lemma is None or lemma == head:
            return "an -ing word that is no verb form"
    if dimension != "action" and head.endswith("ing") and "NOUN" not in lemmas(head):
        return "a gerund outside the action dimension"
    return None


NARRATION = (
    "Welcome aboard the harbor tour. In spring, the ferry to North Point leaves every hour. "
    "Um, so, you know, the lighthouse was painted green last year. Okay. "
    "The life jackets are under the seats, basically. The fence posts are old. "
    "An adult ticket costs twelve dollars. Check the map at the gate. Let's go!"
)


@pytest.mark.slow
def test_signals_parse_of_a_narrated_video_has_no_nonsense_concepts(tmp_path: Path) -> None:
    """A narrated tour (espeak speech, on-screen signs) through the real ingestion flow: every
    concept in the index reads as a thing, place or action."""
    from media import speech_wav, text_video

    from vidscope.flows.ingest import run_ingest
    from vidscope.models.open_store import open_store

    wav = speech_wav(NARRATION, tmp_path / "tour.wav", rate_wpm=150)
    video = text_video(
        tmp_path / "harbor-tour.mp4",
        duration=26.0,
        texts=[(0.0, 6.0, "HARBOR TOUR"), (8.0, 14.0, "FERRY TIMES"), (16.0, 22.0, "MAP")],
        audio=wav,
    )
    settings = Settings(data_dir=tmp_path / "data", models=ModelSettings(chat=None))
    (report,) = run_ingest([str(video)], settings, optimize=False)
    statuses = {s.stage: s.status for s in report.stages}
    assert statuses["speech"] == "done" and statuses["tags"] == "done", report
    store = open_store(settings)
    (parse,) = store.rows(store.video_parses, video_id=report.video_id).to_pylist()
    assert parse["parser"] == "signals"
    index = store.rows(store.concept_index, video_id=report.video_id, columns=["dimension", "concept"])
    concepts = set(
        zip(index.column("dimension").to_pylist(), index.column("concept").to_pylist(), strict=True)
    )
    problems = {c: why for d, c in concepts if (why := nonsense(d, c))}
    assert not problems, (problems, parse)
    # What the tour is about was found, as what it is.
    found = {c for _, c in concepts}
    assert {"ferry", "lighthouse", "ticket", "map"} <= found, (concepts, parse)
    assert not {"springing", "mapping", "posting", "going", "letting go"} & found, sorted(concepts)

"""A query in another language than the videos' speech (issue 41): said, or translated by the planner.

The video is narrated in English by espeak-ng and ingested for real (Whisper records the language);
the planner is the scripted OpenAI-compatible server on loopback.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from llm_server import ScriptedLLMServer, text
from media import narration_wav, text_video
from stores import stored_copy

from vidscope.agents.languages import is_multilingual, query_language
from vidscope.core.settings import ModelSettings, Settings
from vidscope.flows.ingest import run_ingest
from vidscope.flows.search import find_moments
from vidscope.models.open_store import open_store

SAID = "The oven is heated to two hundred degrees before the bread goes in."


def _build(data_dir: Path) -> None:
    folder = data_dir.parent / "videos"
    wav = narration_wav([(0.5, SAID)], folder / "said.wav", duration=7.0)
    video = text_video(folder / "oven.mp4", duration=7.0, size=(320, 180), audio=wav)
    (report,) = run_ingest([str(video)], Settings(data_dir=data_dir), optimize=False)
    assert report.status == "ok", report


@pytest.fixture
def library(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    stored_copy(("query-languages", SAID), data, _build)
    return data


def test_the_query_language_is_told_only_when_it_is_clear() -> None:
    assert query_language("Wie heiß ist der Ofen?") == "de"
    assert query_language("la température du four") == "fr"
    assert query_language("mixing flour in the kitchen") == "en"
    # Too short or names only: no guess (short English queries read as Dutch at 0.3).
    assert query_language("oven") is None and query_language("Ofentemperatur") is None
    assert is_multilingual("sentence-transformers:paraphrase-multilingual-MiniLM-L12-v2")
    assert not is_multilingual("minilm:embedded")


def test_without_a_planner_the_result_says_why_a_german_query_finds_little(library: Path) -> None:
    settings = Settings(data_dir=library)
    store = open_store(settings)
    languages = {r["language"] for r in store.rows(store.transcripts, columns=["language"]).to_pylist()}
    assert languages == {"en"}  # what Whisper recorded for the narration
    german = find_moments("Wie heiß ist der Ofen vor dem Brot?", settings)
    note = " ".join(german.notes)
    assert "looks German" in note and "speech is English" in note and "multilingual" in note
    assert german.query == "Wie heiß ist der Ofen vor dem Brot?"
    english = find_moments("how hot is the oven before the bread", settings)
    assert not any("looks" in n for n in english.notes) and english.moments


def test_a_planner_translates_the_query_into_the_speech_language(
    library: Path, llm_server: ScriptedLLMServer
) -> None:
    options = {"openai": {"base_url": llm_server.base_url, "max_retries": 0, "timeout_s": 20}}
    settings = Settings(data_dir=library, models=ModelSettings(planner="openai:scripted", options=options))
    llm_server.script([text("how hot is the oven before the bread")])
    found = find_moments("Wie heiß ist der Ofen vor dem Brot?", settings)
    (request,) = llm_server.chat_requests
    assert "into English" in request["messages"][0]["content"]
    assert request["messages"][1]["content"] == "Wie heiß ist der Ofen vor dem Brot?"  # data, as given
    note = " ".join(found.notes)
    assert "'how hot is the oven before the bread'" in note and "translated by the planner" in note
    assert found.moments and found.moments[0].start < 4.0  # the narrated moment, found in English
    # A reply that is not a plain one-line translation is not searched; the note says why instead.
    llm_server.script([text('{"translation": "oven"}')])
    again = find_moments("Wie heiß ist der Ofen vor dem Brot bitte?", settings)
    assert "looks German" in " ".join(again.notes)

"""Chapter titles and summaries written by a planner (issue 39), against the scripted model server.

The extractive outline of three 15 s parts on different subjects is handed to the real OpenAI
backend pointed at the scripted server: a sensible reply is used and every sentence keeps the
clips it cites; nonsense (empty, a JSON echo, too long, words not in the chapter) keeps the
extractive title, marked with why; a chapter longer than the evidence budget is summarised in
chunks and aggregated, no request over the budget.
"""

from __future__ import annotations

import json

from llm_server import ScriptedLLMServer, empty, text

from vidscope.core.settings import Settings
from vidscope.models import registry
from vidscope.models.protocols.chat import ChatModel
from vidscope.tasks.chapter_writer import (
    CHARS_PER_TOKEN,
    EVIDENCE_TOKENS,
    EvidenceClip,
    chunks,
    write_chapter,
)
from vidscope.tasks.chapters import ClipInfo, outline, write_outline

TOPICS = [
    "flour dough yeast bread oven loaf",
    "volcano lava magma crust eruption ash",
    "football striker goalkeeper referee goal whistle",
]


def planner(llm_server: ScriptedLLMServer) -> ChatModel:
    options = {"openai": {"base_url": llm_server.base_url, "max_retries": 0, "timeout_s": 10}}
    model = registry.planner_model(Settings(models={"planner": "openai:scripted", "options": options}))
    assert model is not None
    return model


def lecture() -> list[ClipInfo]:
    return [
        ClipInfo(
            i,
            5.0 * i,
            5.0 * (i + 1),
            speech=" ".join(TOPICS[i // 3].split()[i % 3 :: 2]) + " " + TOPICS[i // 3],
        )
        for i in range(9)
    ]


def reply(title: str, *sentences: tuple[str, list[int]]) -> str:
    return json.dumps({"title": title, "sentences": [{"text": t, "clips": c} for t, c in sentences]})


def test_a_sensible_reply_is_used_and_nonsense_keeps_the_extractive_title_marked(
    llm_server: ScriptedLLMServer,
) -> None:
    clips = lecture()
    made = outline(45.0, clips, [], [], clip_seconds=5.0, min_seconds=10.0)
    extractive = [c.title for c in made.chapters]
    assert [c.start for c in made.chapters] == [0.0, 15.0, 30.0]
    llm_server.script(
        [
            text(reply("Bread dough and yeast", ("The bread dough rises with yeast in the oven.", [0, 1]))),
            text(json.dumps({"title": '{"clip": 3, "text": "volcano lava"}', "sentences": []})),
            text(reply("Quantum chromodynamics lecture", ("Quarks and gluons bind protons.", [6]))),
        ]
    )
    rows = write_outline(made, clips, planner(llm_server))
    first, second, third = made.chapters
    assert (first.title, first.why) == ("Bread dough and yeast", "model title")
    assert first.text == "The bread dough rises with yeast in the oven."
    assert second.title == extractive[1] and second.why.startswith("extractive title (distinctive words)")
    assert second.why.endswith("model reply refused: the title echoed JSON")
    assert third.title == extractive[2] and "is not in the chapter's words" in third.why
    assert "Quarks" not in third.text  # the sentence not in its clips' words is dropped
    # Every written sentence is stored with the clips it cites, inside its chapter.
    assert [(r.text, r.clips, r.why) for r in rows] == [
        ("The bread dough rises with yeast in the oven.", [0, 1], "chapter 0")
    ]
    assert (rows[0].start, rows[0].end) == (0.0, 10.0)
    assert made.summary.startswith("The bread dough rises with yeast in the oven.")
    # The clips went to the model as quoted data, one request per chapter.
    assert len(llm_server.chat_requests) == 3
    assert "<video_data>" in llm_server.chat_requests[0]["messages"][1]["content"]


def test_an_empty_or_overlong_reply_or_one_citing_no_clip_is_refused(llm_server: ScriptedLLMServer) -> None:
    def evidence(n: int) -> list[EvidenceClip]:
        # Each call other clips: the backend answers an identical request from its cache.
        return [EvidenceClip(i, 5.0 * i, 5.0 * i + 5, TOPICS[1]) for i in range(n, n + 3)]

    chat = planner(llm_server)
    llm_server.default = empty()  # the backend asks again after an empty reply: empty every time
    assert "empty" in write_chapter(chat, evidence(0)).refused[0]
    llm_server.default = None
    llm_server.script(
        [
            text("Volcano " * 400),
            text(reply("Volcano lava", ("Lava and ash from the volcano.", [42]))),
            text("Sure! Here is a title: Volcano lava"),
        ]
    )
    assert write_chapter(chat, evidence(10)).refused[0].startswith("the reply was 3199 characters")
    cited_nothing = write_chapter(chat, evidence(20))
    assert cited_nothing.title == "Volcano lava" and cited_nothing.sentences == [], cited_nothing
    assert cited_nothing.refused[0].startswith("a sentence cited no clip of the chapter")
    assert write_chapter(chat, evidence(30)).refused == ["the reply was not a JSON object"]


def test_a_long_chapter_is_summarised_in_chunks_within_the_budget_then_aggregated(
    llm_server: ScriptedLLMServer,
) -> None:
    said = "The volcano erupts and lava flows over the crust while ash and magma rise. " * 12
    evidence = [EvidenceClip(i, 5.0 * i, 5.0 * i + 5, said) for i in range(12)]
    groups = chunks(evidence)
    assert len(groups) > 1 and sum(len(g) for g in groups) == 12
    parts = [text(reply("", ("Lava flows over the crust.", [g[0].clip_index]))) for g in groups]
    llm_server.script(
        [
            *parts,
            text(reply("Volcano lava and magma", ("Lava flows over the crust.", [groups[1][0].clip_index]))),
        ]
    )
    written = write_chapter(planner(llm_server), evidence)
    assert written.requests == len(groups) + 1 and written.title == "Volcano lava and magma"
    assert written.sentences == [("Lava flows over the crust.", [groups[1][0].clip_index])]
    budget = EVIDENCE_TOKENS * CHARS_PER_TOKEN
    for request in llm_server.chat_requests:
        assert len(request["messages"][1]["content"]) <= budget + 200  # the task line and tags
    # The aggregation sees the chunks' sentences with their clips, not the clips again.
    assert "Lava flows over the crust." in llm_server.chat_requests[-1]["messages"][1]["content"]
    assert said[:40] not in llm_server.chat_requests[-1]["messages"][1]["content"]


def test_chapter_titles_extractive_asks_no_model_even_with_a_planner() -> None:
    # A small local planner wrote titles at 87 % of ingestion (benchmarks/RESULTS.md): a library
    # that wants ingestion fast keeps its planner for questions and sets chapter_titles.
    from types import SimpleNamespace

    from vidscope.tasks.chapters import CHAPTERS, _planner

    models = {"planner": "openai:scripted", "options": {"openai": {"base_url": "http://127.0.0.1:9/v1"}}}
    asked = Settings(models=models)
    kept = Settings(models=models, ingest={"chapter_titles": "extractive"})
    assert _planner(SimpleNamespace(settings=asked)) is not None  # type: ignore[arg-type]
    assert _planner(SimpleNamespace(settings=kept)) is None  # type: ignore[arg-type]
    # The choice is part of the stage's cache key: switching it re-runs the stage; the default
    # keys as before the setting existed (nothing re-runs on upgrade).
    assert CHAPTERS.config(asked) != CHAPTERS.config(kept)
    assert (
        CHAPTERS.config(asked)["planner"] == CHAPTERS.config(Settings(models=models))["planner"] is not None
    )

"""Answers you can check (issue 35): a citation is verified only where a tool call *found* something.

What the tests hold the code to, and where it comes from:

* Real models' replies to a look that saw nothing, as the issue records them: DVD's frame_inspect
  answering "Error: Cannot find corresponding result in the given time range.", AgentCVR's visual
  sub-agent "No lighthouse is visible in these frames.", SAMA's video_reader "I cannot find any
  boat" — and the same said other ways, and in other languages (a multilingual vision model answers
  in the language it is asked in). Each verified a citation before.
* SAMA calls temporal grounding's candidates "hints, not evidence": they verify nothing.
* AVI's captions are hints that perception must check; a flat similarity curve finds no event.
* AgentCVR's visual sub-agent says "no evidence" when the frames do not show it.
* DVD's finish answers with a choice among lettered options; an article ("A purple elephant…") is
  no letter.
"""

from __future__ import annotations

import json

import pytest
from llm_server import text, tool_call
from test_agent_runtime import VIDEO_ID
from test_ask import ANSWER_RANGE, QUESTION, finish_call, search, world  # noqa: F401  (fixture)

from vidscope.agents.avi.tools_perceive import BoundaryResult, TextExtractResult, TextItem
from vidscope.agents.citations import Evidence
from vidscope.agents.cvr.results import AudioQueryResult, LookedRange, VisualQueryResult
from vidscope.agents.dvd.tools import FrameInspectResult
from vidscope.agents.evidence import ClipHit, ClipSearchResult
from vidscope.agents.looks import read_look, reports_nothing
from vidscope.agents.runtime import pick_choice
from vidscope.agents.sama.tools_look import ReadResult
from vidscope.agents.tools import AgentConfig
from vidscope.flows.ask import run_ask

V = "video-1"
LENGTH = 100.0

#: Replies that found nothing, refused, or say the thing is absent.
NOTHING_FOUND = [
    "Error: Cannot find corresponding result in the given time range.",
    "No lighthouse is visible in these frames.",
    "I cannot find any boat",
    "I can't see a boat in any of the frames.",
    "There is no dog in these images.",
    "The frames do not show a red car.",
    "Nothing matching the description appears in the frames.",
    "no evidence",
    "Sorry, I am unable to determine that from these frames.",
    "The lighthouse is not visible here.",
    "None of the frames shows the code.",
    "It is impossible to tell what the sign says.",
    "I don't know.",
    "",
    "在这些画面中没有看到灯塔。",  # Chinese: no lighthouse is seen in these frames
    "画面中找不到船。",  # Chinese: no boat can be found in the frames
    "灯台は見えません。",  # Japanese: the lighthouse cannot be seen
    "등대가 보이지 않습니다.",  # Korean: the lighthouse is not visible
    "No se ve ningún faro en estas imágenes.",  # Spanish
    "Je ne vois aucun phare sur ces images.",  # French
    "Auf den Bildern ist kein Leuchtturm zu sehen.",  # German
    "Não há nenhum farol nestas imagens.",  # Portuguese
    "Non vedo nessun faro in questi fotogrammi.",  # Italian
    "На этих кадрах нет маяка.",  # Russian
]

#: Replies that saw something.
SOMETHING_SEEN = [
    "The screen reads CODE: PURPLE ELEPHANT.",
    "A red car drives past the lighthouse at about 12 s.",
    "Yes, a boat is moored at the pier.",
    "Two people are cooking; one stirs a pot.",
    "画面中有一座白色的灯塔。",  # Chinese: there is a white lighthouse in the frame
    "Se ve un faro blanco junto al mar.",  # Spanish
    "On voit un phare blanc au bord de la mer.",  # French
    "Ein weißer Leuchtturm steht am Meer.",  # German
]


@pytest.mark.parametrize("reply", NOTHING_FOUND)
def test_a_reply_that_found_nothing_is_read_as_nothing(reply: str) -> None:
    assert reports_nothing(reply)
    assert not read_look(reply).found


@pytest.mark.parametrize("reply", SOMETHING_SEEN)
def test_a_reply_that_saw_something_is_read_as_found(reply: str) -> None:
    assert not reports_nothing(reply)
    assert read_look(reply).found


def test_the_structured_reply_is_read_and_its_words_are_checked() -> None:
    seen = read_look(json.dumps({"found": True, "what": "A red car.", "when": [12.5, 13.0]}))
    assert seen.found and seen.structured and seen.what == "A red car." and seen.when == (12.5, 13.0)
    assert not read_look('{"found": false, "what": "A boat is not there.", "when": []}').found
    # "found: true" while the words say the thing is absent: nothing found (the words win).
    assert not read_look('```json\n{"found": true, "what": "No lighthouse is visible."}\n```').found
    assert not read_look('{"found": "no", "what": "a lighthouse"}').found


# ----------------------------------------------------------------------------- support, unit


class _Video:
    duration = LENGTH


class _Context:
    """What :meth:`Evidence.check` reads of a tool context: a video's duration and the config."""

    config = AgentConfig()

    def video(self, video_id: str) -> _Video:
        return _Video()


def check(evidence: Evidence, start: float, end: float) -> tuple[str, bool]:
    cited = evidence.check(_Context(), V, start, end)  # type: ignore[arg-type]
    return cited.evidence, cited.verified


def look(answer: str, ranges: list[list[float]], **fields: object) -> FrameInspectResult:
    times = [a + (b - a) * i / 10 for a, b in ranges for i in range(10)]
    return FrameInspectResult(
        video_id=V, question="q", answer=answer, frame_times=times, ranges=ranges, **fields
    )


@pytest.mark.parametrize("reply", NOTHING_FOUND)
def test_a_look_that_found_nothing_verifies_nothing(reply: str) -> None:
    evidence = Evidence()
    evidence.add(look(reply, [[30.0, 40.0]]), "frame_inspect")
    assert check(evidence, 32.0, 37.0) == ("echoed", False)
    looked = [LookedRange(video_id=V, t0=30, t1=40, frames=8)]
    cvr = VisualQueryResult(targets=looked, focus="f", answer=reply)
    sama = ReadResult(video_id=V, t0=30, t1=40, question="q", answer=reply, frame_times=[31.0, 35.0])
    for result in (cvr, sama):
        assert {s.level for s in result.support()} == {"echoed"}


def test_a_look_that_saw_something_supports_its_range() -> None:
    evidence = Evidence()
    evidence.add(look("The screen reads CODE: PURPLE ELEPHANT.", [[30.0, 40.0]]), "frame_inspect")
    assert check(evidence, 32.0, 37.0) == ("perceived", True)
    cited = evidence.check(_Context(), V, 32.0, 37.0)  # type: ignore[arg-type]
    assert [(s.tool, s.call) for s in cited.support] == [("frame_inspect", 1)]
    assert "PURPLE ELEPHANT" in cited.support[0].found


def test_a_look_that_says_when_supports_the_moments_around_it() -> None:
    evidence = Evidence()
    evidence.add(look("A red car.", [[0.0, 60.0]], found=True, seen_at=[37.0]), "frame_inspect")
    assert check(evidence, 35.0, 40.0) == ("perceived", True)
    assert check(evidence, 5.0, 10.0) == ("none", False)  # looked at, nothing seen there


def test_a_text_hit_verifies_only_its_own_span() -> None:
    # text_extract over [0, 50] found text at 0-5 s and 35-40 s (the case).
    result = TextExtractResult(
        video_id=V,
        time_range=[0.0, 50.0],
        source="stored OCR",
        frames_read=0,
        items=[
            TextItem(text="WELCOME", start=0.0, end=5.0, score=0.9),
            TextItem(text="EXIT 12", start=35.0, end=40.0, score=0.9),
        ],
    )
    evidence = Evidence()
    evidence.add(result, "text_extract")
    assert check(evidence, 35.0, 40.0) == ("perceived", True)
    assert check(evidence, 10.0, 15.0) == ("none", False)
    empty = Evidence()
    empty.add(result.model_copy(update={"items": []}), "text_extract")
    assert check(empty, 10.0, 15.0) == ("echoed", False)


def test_a_flat_similarity_curve_supports_nothing() -> None:
    flat = BoundaryResult(
        video_id=V, event="lighthouse", time_range=[0, 20], t_start=0, t_end=20, contrast=0.004, source="x"
    )
    clear = flat.model_copy(update={"t_start": 6.0, "t_end": 9.0, "contrast": 0.3})
    assert [s.level for s in flat.support()] == ["echoed"]
    assert [(s.start, s.end, s.level) for s in clear.support()] == [(6.0, 9.0, "perceived")]


def test_a_citation_must_lie_mostly_where_something_was_found() -> None:
    hit = ClipHit(start=10.0, end=15.0, clip_index=2, score=1.0, speech="the ferry leaves from pier seven")
    evidence = Evidence()
    evidence.add(ClipSearchResult(video_id=V, query="ferry", clips=[hit], searched_clips=20), "clip_search")
    assert check(evidence, 10.0, 15.0) == ("retrieved", True)
    assert check(evidence, 12.0, 18.0) == ("retrieved", True)  # 3 of 6 s
    # A 30-s citation sharing 0.1 s with the hit: not verified, and the note says how little.
    cited = evidence.check(_Context(), V, 14.9, 44.9)  # type: ignore[arg-type]
    assert (cited.evidence, cited.verified) == ("echoed", False) and "0%" in cited.note


def test_looks_that_together_cover_the_video_verify_nothing() -> None:
    said = "There is a red car."
    halves = Evidence()
    halves.add(look(said, [[0.0, 50.0]]), "frame_inspect")
    halves.add(look(said, [[50.0, 100.0]]), "frame_inspect")
    assert check(halves, 20.0, 25.0) == ("echoed", False)
    one = Evidence()
    one.add(look(said, [[0.0, 50.0]]), "frame_inspect")
    assert check(one, 20.0, 25.0) == ("perceived", True)


def test_a_clip_hit_on_a_video_of_one_clip_verifies_it() -> None:
    # A 4-s title card is one clip: the hit on its on-screen text is as precise as the store is
    # (seen with the extractive answer, which called it unverified). A hit as wide as a long
    # video still verifies nothing.
    stand_in = "[no visual caption: no captioning model configured] Signals in this clip: …"
    card = ClipHit(
        start=0.0, end=4.0, clip_index=0, score=1.0, caption=stand_in, on_screen_text="THANKS FOR WATCHING"
    )
    evidence = Evidence()
    evidence.add(ClipSearchResult(video_id=V, query="card", clips=[card], searched_clips=1), "clip_search")
    level, _, (support,) = evidence.assess(V, 0.0, 4.0, 4.0)
    assert level == "retrieved" and support.found == "THANKS FOR WATCHING"
    wide = ClipHit(start=0.0, end=LENGTH, clip_index=0, score=1.0, on_screen_text="THANKS FOR WATCHING")
    whole = Evidence()
    whole.add(ClipSearchResult(video_id=V, query="card", clips=[wide], searched_clips=1), "clip_search")
    assert check(whole, 10.0, 15.0) == ("echoed", False)


def test_hearing_nothing_verifies_nothing() -> None:
    heard = AudioQueryResult(video_id=V, t0=0.0, t1=10.0, answer="no speech is heard in this interval")
    assert [s.level for s in heard.support()] == ["echoed"]


# ----------------------------------------------------------------------------- choices


def test_an_article_is_never_an_option_letter() -> None:
    others = ["blue whale", "green frog", "red fox", "grey wolf"]
    assert pick_choice(None, "A purple elephant is the code.", others) is None
    assert pick_choice(None, "a dog sits on the mat", others) is None
    assert pick_choice(None, "A purple elephant is the code.", ["blue whale", "purple elephant"]) == "B"
    for written in ("(B)", "B.", "Answer: B", "B", "The answer is B.", "**B**"):
        assert pick_choice(None, written, others) == "B", written
    assert pick_choice("B", "A purple elephant", others) == "B"  # an explicit choice argument


# ----------------------------------------------------------------------------- the loop, end to end


def test_a_look_that_saw_nothing_verifies_nothing_end_to_end(world) -> None:  # noqa: F811
    settings, _, server = world
    server.script(
        [
            tool_call(
                "frame_inspect",
                {"video_id": VIDEO_ID, "question": "What code is shown?", "time_ranges": [ANSWER_RANGE]},
                call_id="f",
            ),
            text("Error: Cannot find corresponding result in the given time range."),  # the look
            finish_call("The code is purple elephant.", [ANSWER_RANGE]),
        ]
    )
    result = run_ask(settings, VIDEO_ID, QUESTION)
    assert [(c.evidence, c.verified) for c in result.citations] == [("echoed", False)]
    # The look was asked for the structured reply that says whether it saw anything.
    look_request = server.chat_requests[1]
    assert '"found"' in look_request["messages"][0]["content"]


def test_a_run_that_only_pastes_data_back_ends_with_the_extractive_moment(world) -> None:  # noqa: F811
    """The real 1.5B planner ended forced with a raw JSON tool result as its answer: the user gets
    the extractive answer to the same question instead, marked, never the data."""
    settings, _, server = world
    dump = json.dumps({"clips": [{"start": 35.0, "end": 40.0, "speech": "the code is purple elephant"}]})
    server.script([search("secret code"), text(f"<video_data>{dump}</video_data>"), text(dump)])
    result = run_ask(settings, VIDEO_ID, QUESTION, config=AgentConfig(max_steps=2))
    assert result.fallback and result.forced and result.extractive and result.agent == "dvd"
    assert "{" not in result.answer and "No answer was reached" in result.answer
    assert "Best matching moments" in result.answer
    assert any(c.verified and c.start <= ANSWER_RANGE[0] < c.end for c in result.citations)
    assert [s.kind for s in result.trace][-1] == "extractive"
    assert [s.index for s in result.trace] == list(range(1, len(result.trace) + 1))

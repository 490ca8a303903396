"""AgentCVR's master choosing what to look at (issue 29): one ``visual_query`` names several
targets, each a video, an interval and a frame count, looked at side by side, at most 128 frames in
all; driven through the real loop (:func:`run_cvr`) with the ``openai`` backend talking to the
scripted loopback server (tests/llm_server.py) as master and visual sub-agent.

The frame budget as the paper's released master prompts word it (wang-jh24/AgentCVR,
agent_system/prompts/master_*.prompt): "The total number of frames (`num_frames` sum) in a single
operation **must not exceed 128**", with targets written as ``{"video_index": 1, "start_time": 0,
"end_time": 10, "num_frames": 16}``. Over the budget we scale the counts down in proportion and say
so in the observation (the look still happens): a refusal would cost a whole master turn.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from llm_server import ScriptedLLMServer, text
from test_agent_runtime import VIDEO_ID, build_store, make_settings

from vidscope.agents.cvr.agent import run_cvr, visual_arguments
from vidscope.agents.tools import AgentConfig, ToolContext
from vidscope.core.settings import Settings
from vidscope.models import registry
from vidscope.models.open_store import open_store

#: Two moments of the synthetic kitchen video: the weighing (5-10 s) and the code (35-40 s).
FLOUR, CODE = (5.0, 10.0), (35.0, 40.0)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("cvr") / "data"
    build_store(make_settings(data))
    return data


def context(data: Path, server: ScriptedLLMServer, **config: Any) -> ToolContext:
    settings: Settings = make_settings(
        data,
        chat="openai:scripted",
        options={"openai": {"base_url": server.base_url, "max_retries": 0, "timeout_s": 30}},
    )
    return ToolContext(
        settings,
        open_store(settings),
        chat=registry.chat_model(settings),
        config=AgentConfig(tool_cache=False, **config),
        registry=None,
    )


def looks(server: ScriptedLLMServer) -> list[dict[str, Any]]:
    """The visual sub-agent's requests (the ones carrying frames)."""
    return [b for b in server.chat_requests if "visual sub-agent" in json.dumps(b)]


def images_in(body: dict[str, Any]) -> int:
    return json.dumps(body).count('"type": "image_url"')


def answer(*spans: tuple[float, float]) -> str:
    cited = [{"video_id": VIDEO_ID, "start": a, "end": b} for a, b in spans]
    return json.dumps({"action": "answer", "answer": "Flour, then a code.", "citations": cited})


def test_one_visual_query_looks_at_two_targets_side_by_side_with_their_frame_counts(
    data_dir: Path, llm_server: ScriptedLLMServer
) -> None:
    query = {
        "action": "visual_query",
        "targets": [
            {"video_id": VIDEO_ID, "t0": FLOUR[0], "t1": FLOUR[1], "frames": 3},
            {"video_id": VIDEO_ID, "t0": CODE[0], "t1": CODE[1], "frames": 2},
        ],
        "focus": "what is written on screen",
    }
    llm_server.script(
        [
            text(json.dumps({"actions": [query]})),
            text("Images 1-3 show 500 g flour; images 4-5 show CODE: PURPLE ELEPHANT."),
            text(answer(FLOUR, CODE)),
        ]
    )
    result = run_cvr(context(data_dir, llm_server), "What is shown, in order?", [VIDEO_ID])
    [look] = looks(llm_server)  # one look for both targets
    assert images_in(look) == 5
    shown = json.dumps(look)
    assert "frames 1-3: video" in shown and "frames 4-5: video" in shown
    assert [s.tool for s in result.trace if s.kind == "tool"] == ["visual_query"]
    assert result.answer == "Flour, then a code." and all(c.verified for c in result.citations)
    assert len(result.citations) == 2


@pytest.mark.parametrize(
    "written",
    [
        # the paper's prompts: observation_targets, video_index from 1, start/end_time, num_frames
        {
            "observation_targets": [
                {"video_index": 1, "start_time": CODE[0], "end_time": CODE[1], "num_frames": 4}
            ],
            "focus_prompt": "the sign",
        },
        # a dict keyed by video id (a real model's habit with "name several videos")
        {"targets": {VIDEO_ID: {"start": CODE[0], "end": CODE[1], "frames": 4}}, "focus": "the sign"},
        {"targets": {VIDEO_ID: [CODE[0], CODE[1], 4]}, "focus": "the sign"},
        # one range written flat, as the earlier protocol did
        {"video_id": VIDEO_ID, "t0": CODE[0], "t1": CODE[1], "frames": 4, "focus": "the sign"},
    ],
)
def test_targets_in_the_shapes_models_write_are_read(
    data_dir: Path, llm_server: ScriptedLLMServer, written: dict[str, Any]
) -> None:
    llm_server.script(
        [
            text(json.dumps({"actions": [{"action": "visual_query", **written}]})),
            text("A sign reads CODE: PURPLE ELEPHANT."),
            text(answer(CODE)),
        ]
    )
    result = run_cvr(context(data_dir, llm_server), "What does the sign say?", [VIDEO_ID])
    step = next(s for s in result.trace if s.kind == "tool")
    assert step.ok, step.observation
    assert step.arguments["targets"] == [{"video_id": VIDEO_ID, "t0": 35.0, "t1": 40.0, "frames": 4}]
    assert step.arguments["focus"] == "the sign"
    assert images_in(looks(llm_server)[0]) == 4 and result.citations[0].verified


def test_over_128_frames_the_look_is_scaled_and_the_master_is_told(
    data_dir: Path, llm_server: ScriptedLLMServer
) -> None:
    query = {
        "action": "visual_query",
        "targets": [
            {"video_id": VIDEO_ID, "t0": 0, "t1": 30, "frames": 150},
            {"video_id": VIDEO_ID, "t0": 30, "t1": 60, "frames": 50},
        ],
        "focus": "everything on screen",
    }
    llm_server.script([text(json.dumps({"actions": [query]})), text("Many signs."), text(answer(CODE))])
    result = run_cvr(context(data_dir, llm_server), "What is shown?", [VIDEO_ID])
    told = json.dumps(llm_server.chat_requests[-1]["messages"][-1]["content"])
    assert "200 frames asked, over the 128-frame budget: scaled to 128 ([96, 32])" in told
    # One look over the whole video (0-60 s) that did not say where: it verifies no citation.
    assert [(c.evidence, c.verified) for c in result.citations] == [("echoed", False)]
    # Every frame taken is seen, within the backend's 32 images per request: stitched into grids.
    [look] = looks(llm_server)
    shown = json.dumps(look)
    # 61 stored frames (2 fps) of 0-30 s within its 96, then its 32 of 30-60 s: 93 frames, 32 images
    assert "frames 1-61: video" in shown and "frames 62-93: video" in shown
    assert images_in(look) <= 32 and "grids of up to" in shown


def test_a_target_without_its_end_gets_one_line_back_and_no_look(
    data_dir: Path, llm_server: ScriptedLLMServer
) -> None:
    query = {"action": "visual_query", "targets": [{"video_id": VIDEO_ID, "t0": 35}], "focus": "sign"}
    llm_server.script([text(json.dumps({"actions": [query]})), text(answer(CODE))])
    result = run_cvr(context(data_dir, llm_server), "What does the sign say?", [VIDEO_ID])
    step = next(s for s in result.trace if s.kind == "tool")
    assert not step.ok and "t1" in step.observation and "Traceback" not in step.observation
    assert not looks(llm_server)
    assert not result.citations[0].verified  # nothing was looked at, so nothing verifies it


def test_unreadable_target_shapes_are_left_for_validation() -> None:
    assert visual_arguments({"focus": "x"}, [VIDEO_ID]) == {"focus": "x"}
    # video_index past the listed videos names no video: left as written, refused by validation
    odd = {"targets": [{"video_index": 3, "t0": 1, "t1": 2}], "focus": "x"}
    assert visual_arguments(odd, [VIDEO_ID])["targets"] == odd["targets"]


# ------------------------------------------------------------------ task prompts (CrossVid's ten)


def test_ten_task_prompts_each_with_the_four_query_rule() -> None:
    from vidscope.agents.cvr.tasks import TASKS, task_prompt

    # CrossVid's tasks as the paper's released prompts and runners name them
    assert set(TASKS) == {"BU", "NC", "CC", "PEA", "PI", "FSA", "PSS", "MSR", "MOC", "CCQA"}
    assert all("at least 4 queries" in t.render(4) for t in TASKS.values())
    assert task_prompt("fsa").name == "functional step alignment"
    with pytest.raises(ValueError, match="unknown AgentCVR task 'XYZ': one of BU, NC"):
        task_prompt("XYZ")


def test_a_pss_question_without_options_is_told_to_answer_the_order(
    data_dir: Path, llm_server: ScriptedLLMServer
) -> None:
    """CrossVid's own PSS records carry no options and score ``answer == "2->3->1->4"`` (its
    ``eval/PSS.py``); the simulator's scripts ask the order as options. The master is told the form
    that matches the question it got, never letters for a question without options."""
    from vidscope.agents.cvr.tasks import task_prompt

    assert "option letters" in task_prompt("PSS").render(4, with_options=True)
    final = {"action": "answer", "thought": "Mixing comes first.", "final_answer": "2->1"}
    llm_server.script([text(json.dumps(final))])
    ctx = context(data_dir, llm_server)
    ctx.config = ctx.config.model_copy(update={"cvr_min_queries": 0})
    question = "The 2 videos are 2 segments of one video, shuffled. In what order do they happen?"
    result = run_cvr(ctx, question, [VIDEO_ID, VIDEO_ID], task="PSS")
    first = llm_server.chat_requests[0]["messages"][1]["content"]
    assert '"answer": "2->3->1->4"' in first and "option letters" not in first
    assert result.answer == "2->1" and result.choice is None and not result.forced


def test_a_task_answer_before_four_queries_is_set_aside(
    data_dir: Path, llm_server: ScriptedLLMServer
) -> None:
    """The paper's prompts: "You are REQUIRED to perform at least 4 distinct tool interactions ...
    before you are allowed to call the `answer` tool". A real small master answers at once; the
    answer is set aside (said to it in one line) and taken once four queries have run."""

    def look(span: tuple[float, float]) -> dict[str, Any]:
        return {
            "action": "visual_query",
            "targets": [{"video_id": VIDEO_ID, "t0": span[0], "t1": span[1]}],
            "focus": "step",
        }

    early = {"action": "answer", "thought": "I know it.", "final_answer": [30, 35]}
    final = {"action": "answer", "thought": "Aligned.", "final_answer": [35.0, 40.0]}
    llm_server.script(
        [
            text(json.dumps(early)),
            text(json.dumps({"actions": [look(FLOUR), look(CODE)]})),
            text("flour"),
            text("a code"),
            text(json.dumps(early)),  # two queries so far: still too early
            text(json.dumps({"actions": [look((0, 5)), look((10, 15))]})),
            text("a title"),
            text("water"),
            text(json.dumps(final)),
        ]
    )
    ctx = context(data_dir, llm_server)
    result = run_cvr(ctx, "Which segment matches 5-10 s of the reference?", [VIDEO_ID], task="FSA")
    first = llm_server.chat_requests[0]["messages"][1]["content"]
    assert first.startswith("Task: functional step alignment (FSA).") and "at least 4 queries" in first
    refused = [s.observation for s in result.trace if s.kind == "model-error"]
    assert refused == [
        "Your answer was set aside: this task needs at least 4 answered queries before the answer "
        "(0 so far; refused queries do not count).",
        "Your answer was set aside: this task needs at least 4 answered queries before the answer "
        "(2 so far; refused queries do not count).",
    ]
    assert len([s for s in result.trace if s.kind == "tool"]) == 4
    assert result.answer == "[35.0, 40.0]" and not result.forced


def test_the_papers_action_shape_with_params_and_a_letter_answer(
    data_dir: Path, llm_server: ScriptedLLMServer
) -> None:
    """The paper's prompts write ``{"action", "thought", "params": {...}}`` and answer with the
    option letter in ``"final_answer"``; without a task no minimum holds."""
    observe = {
        "action": "visual_query",
        "thought": "Look at the sign.",
        "params": {
            "observation_targets": [{"video_index": 1, "start_time": 35, "end_time": 40, "num_frames": 2}],
            "focus_prompt": "the sign",
        },
    }
    final = {"action": "answer", "thought": "Both.", "params": {"final_answer": "C"}}
    llm_server.script([text(json.dumps(observe)), text("CODE: PURPLE ELEPHANT"), text(json.dumps(final))])
    options = ["purple", "green", "elephant", "vault"]
    result = run_cvr(context(data_dir, llm_server), "Which words are shown?", [VIDEO_ID], options=options)
    step = next(s for s in result.trace if s.kind == "tool")
    assert step.ok and step.arguments["targets"][0]["frames"] == 2 and "thought" not in step.arguments
    assert result.choice == "C" and result.answer == "C" and not result.forced


@pytest.mark.parametrize(
    "final",
    [
        {"action": "answer", "params": {"final_answer": "AC"}},  # the paper's BU form
        {"action": "answer", "params": {"final_answer": "A, C"}},
        {"action": "answer", "answer": "The answer is C and A."},
        {"action": "answer", "params": {"final_answer": ["C", "A"]}},
        {"action": "answer", "answer": "Eating and sleeping.", "choice": "A, C"},
    ],
)
def test_a_multi_select_answer_keeps_its_set_of_letters(
    data_dir: Path, llm_server: ScriptedLLMServer, final: dict[str, Any]
) -> None:
    """CrossVid's BU has "1-3 correct choices" and its ``eval/BU.py`` compares the letters joined:
    the master's "AC" (or "A, C", "C and A", a JSON list) is the choice AC, never A alone."""
    from vidscope.evaluation.items import BenchmarkItem
    from vidscope.evaluation.scoring import is_correct

    llm_server.script([text(json.dumps(final))])
    options = ["eat", "run", "sleep", "swim"]
    result = run_cvr(
        context(data_dir, llm_server), "Which do they want?", [VIDEO_ID], options=options, multi_select=True
    )
    assert result.choice == "AC" and not result.forced
    item = BenchmarkItem(
        benchmark="crossvid",
        question_id="bu-0",
        kind="multiple_choice",
        video_ids=("a.mp4",),
        question="Which do they want?",
        options=tuple(options),
        answer="AC",
        extra={"rule": "set"},
    )
    assert is_correct(item, result.choice)


def test_an_evaluated_crossvid_item_gets_its_task_brief_and_its_set_answer(
    data_dir: Path, llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    """The eval path (the release's ``QA/BU.json`` loaded, asked through ``answer_item``): AgentCVR
    is told the BU task and its four-query rule, and its multi-select answer is scored as a set."""
    from vidscope.evaluation.loaders import load_benchmark
    from vidscope.evaluation.scoring import score_choices
    from vidscope.flows.eval_agents import answer_item

    (tmp_path / "BU.json").write_text(
        json.dumps(
            [
                {
                    "id": 0,
                    "videos": ["behavior/a.mp4", "behavior/b.mp4"],
                    "question": "What does the subject want in each video?",
                    "options": ["A. eat", "B. run", "C. sleep", "D. swim"],
                    "answer": ["C", "A"],
                }
            ]
        )
    )
    # Scored as a set (--parse lenient): strictly, as BU.py compares "".join(gold), only "CA" is right.
    (item,) = load_benchmark("crossvid", tmp_path / "BU.json", parse="lenient")
    target = {"video_id": VIDEO_ID, "t0": 5, "t1": 10}
    look = {"action": "visual_query", "targets": [target], "focus": "intent"}
    llm_server.script(
        [
            text(json.dumps({"actions": [look] * 4})),
            *[text("someone weighs flour") for _ in range(4)],
            text(json.dumps({"action": "answer", "params": {"final_answer": "A, C"}})),
        ]
    )
    result = answer_item("cvr", context(data_dir, llm_server), item, [VIDEO_ID])
    brief = llm_server.chat_requests[0]["messages"][1]["content"]
    assert brief.startswith("Task: behavioural understanding (BU).") and "at least 4 queries" in brief
    assert result.choice == "AC"
    assert score_choices([item], {item.question_id: result.choice}).overall.correct == 1

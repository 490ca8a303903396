"""Interval answers in training (AgentCVR §3–4): FSA is asked as CrossVid and the deployed master ask
it — free-form, answered "[start, end]" — and scored as the release scores it. Issue 38: "FSA
rewarded as the release does (exact match in its reward script, IoU in its eval), with any
tolerance a named, non-default option". The release's reward script
(``verl/utils/reward_score/crossvid.py``, wang-jh24/AgentCVR) pays ``score`` only when the final
answer equals the ground truth; its FSA evaluation averages IoU. The 2-s zone of an earlier pass is
``--interval-scoring within`` now, and no longer called T_tol (App. B's T_tol = 10 bounds turns).

The policy is the planner behind a real OpenAI-compatible client and the loopback test server
(tests/llm_server.py), answering as real models write intervals.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from llm_server import ScriptedLLMServer, text

from vidscope.agents import strategies
from vidscope.agents.simulator.script import Evidence, Question, Script
from vidscope.agents.simulator.simulator import ScriptSimulator, SimContext
from vidscope.agents.simulator.templates import generate_script
from vidscope.agents.strategies import StrategyRequest
from vidscope.core.settings import Settings
from vidscope.evaluation.metrics import within_tolerance
from vidscope.flows.training.rollout import (
    DEFAULT_INTERVAL_SCORING,
    WITHIN_SECONDS,
    Scoring,
    answer_score,
    is_correct,
    rollout,
)
from vidscope.flows.training.train import training_rows
from vidscope.models import registry


def test_the_tolerance_zone_holds_both_ends() -> None:
    gold = (40.0, 52.0)
    assert within_tolerance((41.5, 50.5), gold, 2.0)
    assert within_tolerance((52.0, 40.0), gold, 0.0)  # written end first: the same interval
    assert not within_tolerance((40.0, 55.0), gold, 2.0)  # one end 3 s off
    assert not within_tolerance((37.0, 52.0), gold, 2.0)
    assert not within_tolerance(None, gold, 2.0)
    with pytest.raises(ValueError, match="tolerance"):
        within_tolerance(gold, gold, -1.0)


def fsa_script() -> Script:
    """A template script with one FSA question as the writer asks it: no options, the answer the
    segment of the second video as "start,end"."""
    script = generate_script(7)
    first, second = script.videos
    question = Question(
        question_id="fsa-1",
        text=f"Which segment of {second.file_name} serves the purpose of {first.file_name} at 10-20 s?",
        video_ids=[first.video_id, second.video_id],
        answer="20,30",
        evidence=[Evidence(video_id=second.video_id, start=20.0, end=30.0)],
        task="FSA",
    )
    return script.model_copy(update={"questions": [question]})


@pytest.mark.parametrize(
    ("said", "right"),
    [
        ("[20, 30]", True),  # the deployed master's form
        ("20,30", True),  # CrossVid's form: the same two numbers
        ("30, 20", True),  # end first: the same interval
        ("[21, 29]", False),  # inside a 2-s zone, but not the answer
        ("20,30.5", False),
        ("20,30 or 40,50", False),  # two intervals are no answer
        ("20 to 30", False),  # words around the numbers: not the form CrossVid reads either
    ],
)
def test_an_interval_answer_is_rewarded_by_exact_match_as_the_release_does(said: str, right: bool) -> None:
    (question,) = fsa_script().questions
    assert DEFAULT_INTERVAL_SCORING == "exact"
    assert is_correct(question, said, None) is right


def test_iou_and_the_zone_are_named_options() -> None:
    (question,) = fsa_script().questions
    iou = Scoring("iou")
    assert answer_score(question, "[20, 30]", None, iou) == 1.0
    assert answer_score(question, "[25, 35]", None, iou) == pytest.approx(5 / 15)  # as eval/FSA.py
    assert answer_score(question, "no idea", None, iou) == 0.0
    within = Scoring("within")
    assert WITHIN_SECONDS == 2.0
    assert is_correct(question, "[21, 29]", None, within) and is_correct(question, "21.5-31 s", None, within)
    assert not is_correct(question, "[20, 33]", None, within)  # the end 3 s off
    assert not is_correct(question, "[20, 30.5]", None, Scoring("within", 0.0))
    with pytest.raises(ValueError, match="one of exact, iou, within"):
        Scoring("tolerant")  # type: ignore[arg-type]


def settings_for(tmp_path: Path, server: ScriptedLLMServer) -> Settings:
    registry.clear_cache()
    return Settings(
        data_dir=tmp_path / "data",
        models={
            "chat": "openai:scripted",
            "options": {"openai": {"base_url": server.base_url, "max_retries": 0, "cache": False}},
        },
    )


def query(video_id: str, t0: float, t1: float) -> str:
    targets = [{"video_id": video_id, "t0": t0, "t1": t1, "frames": 8}]
    return json.dumps({"actions": [{"action": "visual_query", "targets": targets, "focus": "the step"}]})


def answer(interval: str, video_id: str) -> str:
    citation = {"video_id": video_id, "start": 20, "end": 30}
    return json.dumps({"actions": [{"action": "answer", "answer": interval, "citations": [citation]}]})


def test_an_fsa_rollout_is_rewarded_in_the_zone_and_asked_with_the_task_prompt(
    tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    """The master is asked the written FSA question with FSA's prompt (its ≥4-queries rule too) and
    answers "[21, 29]" after four queries: 0.1 by exact match (the release's), 1 + 0.1 in the
    optional 2-s zone."""
    settings = settings_for(tmp_path, llm_server)
    script = fsa_script()
    first, second = (v.video_id for v in script.videos)
    turns = [query(first, 10, 20), query(second, 0, 15), query(second, 15, 35), query(second, 20, 30)]
    llm_server.script([text(t) for t in [*turns, answer("[21, 29]", second)] * 2])

    def policy(question, rng):  # type: ignore[no-untyped-def]
        return registry.planner_model(settings)

    exact = rollout(settings, [script], policy, group_size=1, temperature=0.0)
    zone = rollout(settings, [script], policy, group_size=1, temperature=0.0, scoring=Scoring("within"))
    registry.clear_cache()

    assert zone.column("reward").to_pylist() == [pytest.approx(1.1)]
    assert exact.column("reward").to_pylist() == [pytest.approx(0.1)]
    opening = llm_server.chat_requests[0]["messages"][1]["content"]
    assert opening.startswith("Task: functional step alignment (FSA).") and "at least 4 queries" in opening
    assert "Options:" not in opening


def test_a_written_task_question_trains_on_the_conversation_the_deployed_master_sends(
    tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    """Train what you deploy, for a task's question: the training prompt is what ``run_cvr`` sends
    for that CrossVid task (the task's prompt before the question), not the bare question."""
    settings = settings_for(tmp_path, llm_server)
    script = fsa_script()
    (row,) = training_rows([script], settings, seed=0)
    (question,) = script.questions
    first, second = question.video_ids
    turns = [query(first, 10, 20), query(second, 0, 15), query(second, 15, 35), query(second, 20, 30)]
    llm_server.script([text(t) for t in [*turns, answer("[20, 30]", second)]])
    ctx = SimContext(
        settings,
        ScriptSimulator(script, clip_seconds=settings.ingest.clip_seconds),
        chat=registry.planner_model(settings),
    )
    request = StrategyRequest(question.text, question.video_ids, "videos", None, task="FSA")
    said = strategies.answer("cvr", ctx, request)
    registry.clear_cache()

    assert said.answer == "[20, 30]" and said.usage.tool_calls == 4
    sent = llm_server.chat_requests[0]["messages"]
    assert [{"role": m["role"], "content": m["content"]} for m in sent] == row["prompt"]
    assert "(FSA)" in row["prompt"][1]["content"]


def test_a_question_names_a_crossvid_task_or_none() -> None:
    with pytest.raises(ValueError, match="unknown task 'XYZ'"):
        Question(question_id="q", text="?", video_ids=["v"], answer="1,2", task="XYZ")


def test_the_commands_take_the_scoring_and_refuse_a_bad_one(tmp_path: Path) -> None:
    import inspect

    from typer.testing import CliRunner

    from vidscope.cli import app
    from vidscope.cli.train import grpo, rollouts

    for command in (grpo, rollouts):  # the commands' defaults are the reward's
        parameters = inspect.signature(command).parameters
        assert parameters["interval_scoring"].default == DEFAULT_INTERVAL_SCORING
        assert parameters["interval_seconds"].default == WITHIN_SECONDS
        assert "interval_tolerance" not in parameters
    env = {"VIDSCOPE_DATA_DIR": str(tmp_path / "data")}
    out = str(tmp_path / "o")
    for args in (["grpo", "m", "--out", out], ["rollouts", "--out", out, "--policy", "oracle"]):
        bad = CliRunner().invoke(app, ["train", *args, "--interval-seconds", "-1"], env=env)
        assert bad.exit_code == 2 and "interval-seconds" in bad.output and "Traceback" not in bad.output
        bad = CliRunner().invoke(app, ["train", *args, "--interval-scoring", "loose"], env=env)
        assert bad.exit_code == 2 and "Traceback" not in bad.output, bad.output
        assert "interval" in bad.output and len(bad.output.strip().splitlines()) == 1, bad.output


def test_sim_to_real_counts_two_intervals_in_each_others_zone_as_the_same_answer() -> None:
    from vidscope.agents.answers import Answer
    from vidscope.flows.training.sim_to_real import answers_agree

    real, sim = Answer(answer="[20, 30]"), Answer(answer="21.5-29 s")
    assert answers_agree(real, sim)
    assert not answers_agree(real, sim, tolerance=1.0)
    assert not answers_agree(real, Answer(answer="[20, 34]"))
    assert answers_agree(Answer(answer="The Red Boat"), Answer(answer="the red  boat"))
    assert not answers_agree(Answer(answer="x", choice="A"), Answer(answer="x", choice="B"))

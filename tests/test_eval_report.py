"""Evaluation reports a person reads (issue 24): aggregate plots at fixed sizes, bootstrap
intervals and chance levels, the wrong answers with their traces, ``eval compare`` with a paired
interval, and the papers' ablations reaching the agents.

The report tests score synthetic prediction sets (no model, no video), from a few questions to
2,000; the ablation tests run the agents against the loopback model server and check what the
model was offered and asked.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from llm_server import ScriptedLLMServer, text, tool_call
from PIL import Image
from test_agent_runtime import ANSWER_CLIP, VIDEO_ID, build_store, make_settings
from typer.testing import CliRunner

from vidscope.agents import prompts, strategies
from vidscope.agents.tools import AgentConfig, ToolContext
from vidscope.cli import app
from vidscope.evaluation.items import LETTERS, BenchmarkItem
from vidscope.evaluation.report import (
    PLOT_FILES,
    REPORT_FILE,
    SUMMARY_FILE,
    compare_markdown,
    read_summary,
    report_markdown,
    summarise,
    write_report,
)
from vidscope.evaluation.runs import PREDICTIONS_FILE, Prediction, RunSpec, read_predictions, read_spec
from vidscope.evaluation.samples import read_samples
from vidscope.evaluation.stats import bootstrap_mean, paired_difference, paired_proportions, wilson
from vidscope.flows.eval_agents import answer_item, request_of
from vidscope.models import registry

runner = CliRunner()
CATEGORIES = ("count", "order", "needle", "plot")


def items(n: int, *, seed: int = 0) -> list[BenchmarkItem]:
    """``n`` multiple-choice items over four categories, 4 or 5 options each."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        options = tuple(f"option {k}" for k in range(4 if i % 2 else 5))
        out.append(
            BenchmarkItem(
                benchmark="mlvu",
                question_id=f"q{i}",
                kind="multiple_choice",
                video_ids=(f"video_{i % 7}.mp4",),
                question=f"Question {i}?",
                options=options,
                answer=rng.choice(LETTERS[: len(options)]),
                categories=(CATEGORIES[i % 4],),
            )
        )
    return out


def predictions(chosen: list[BenchmarkItem], right: float, *, seed: int = 1) -> dict[str, Prediction]:
    """Answers right with probability ``right``, with latency, tokens and cost per question."""
    rng = random.Random(seed)
    out = {}
    for item in chosen:
        wrong = [x for x in LETTERS[: len(item.options)] if x != item.answer]
        choice = item.answer if rng.random() < right else rng.choice(wrong)
        out[item.question_id] = Prediction(
            question_id=item.question_id,
            kind="multiple_choice",
            video_ids=["f" * 64],
            answer=f"The answer is ({choice}).",
            choice=choice,
            steps=rng.randint(1, 9),
            input_tokens=rng.randint(500, 9000),
            output_tokens=rng.randint(10, 300),
            cost_usd=rng.uniform(0.0001, 0.01),
            seconds=rng.lognormvariate(1.0, 0.5),
            citations=[("f" * 64, 10.0, 15.0)],
            trace=f"traces/{item.question_id}.json",
        )
    return out


def spec(name: str, *, ablations: list[str] | None = None) -> RunSpec:
    return RunSpec(
        name=name,
        benchmark="mlvu",
        annotations="mlvu",
        root="videos",
        agent="dvd",
        settings_fingerprint="x",
        ablations=ablations or [],
        created_at="2026-01-01T00:00:00+00:00",
    )


def write_run(folder: Path, name: str, n: int, right: float, seed: int = 1) -> Path:
    chosen = items(n)
    answers = predictions(chosen, right, seed=seed)
    run_dir = folder / name
    run_dir.mkdir(parents=True)
    summary = summarise(spec(name), chosen, chosen, answers, [], [])
    write_report(run_dir, summary, [answers[i.question_id] for i in chosen])
    return run_dir


# ============================================================================ report and plots


@pytest.mark.parametrize("n", [10, 2000])
def test_plots_have_a_fixed_size_whatever_the_number_of_questions(tmp_path: Path, n: int) -> None:
    run_dir = write_run(tmp_path, f"run{n}", n, 0.6)
    report = (run_dir / REPORT_FILE).read_text()
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", report)
    assert links == list(PLOT_FILES)  # embedded, relative to report.md
    for name in links:
        with Image.open(run_dir / name) as image:
            image.verify()
            # 1,549 questions once made a 46,670-px image: now at most 1200 x 1000 at any size.
            assert 300 <= image.width <= 1200 and 250 <= image.height <= 1000, (name, image.size)


def test_accuracy_comes_with_a_wilson_interval_and_the_chance_level(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, "run", 400, 0.5)
    summary = read_summary(run_dir)
    low, high = summary.accuracy_interval or (0, 0)
    accuracy = summary.scores["accuracy"]
    # 400 coin flips: the 95 % interval is about ±4.9 points around the accuracy.
    assert low < accuracy < high and 0.07 < high - low < 0.13
    again = write_run(tmp_path, "again", 400, 0.5)
    assert read_summary(again).accuracy_interval == summary.accuracy_interval  # no randomness
    for name, group in summary.by_category.items():
        # Even items have 5 options, odd ones 4: count and needle (even) 1/5, order and plot 1/4.
        assert group.chance == pytest.approx(0.2 if name in ("count", "needle") else 0.25)
        assert group.low is not None and group.high is not None
        assert group.low <= group.accuracy <= group.high
    table = (run_dir / REPORT_FILE).read_text()
    assert "| count | " in table and "| 20.0 |" in table and "Intervals: Wilson score interval" in table


def test_bootstrap_intervals_narrow_with_more_questions_and_pair_runs() -> None:
    assert bootstrap_mean([1.0] * 30) == bootstrap_mean([1.0] * 30)
    small = bootstrap_mean([1.0, 0.0] * 10)
    large = bootstrap_mean([1.0, 0.0] * 500)
    assert small.value == large.value == 0.5
    assert (small.high - small.low) > 3 * (large.high - large.low)
    same = paired_difference([1, 0, 1, 1], [1, 0, 1, 1])
    assert (same.value, same.low, same.high) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError):
        paired_difference([1.0], [1.0, 0.0])


def test_accuracy_intervals_hold_for_small_groups(tmp_path: Path) -> None:
    """Issue 37: a percentile bootstrap gave 3/3 as 100.0-100.0 and 0/6 as 0.0-0.0."""
    assert (wilson(3, 3).low, wilson(3, 3).high) == pytest.approx((0.4385, 1.0), abs=1e-4)
    assert (wilson(0, 6).low, wilson(0, 6).high) == pytest.approx((0.0, 0.3903), abs=1e-4)
    assert (wilson(50, 100).low, wilson(50, 100).high) == pytest.approx((0.4038, 0.5962), abs=1e-4)
    chosen = items(9)
    # Three "count" questions all right (q0, q4, q8), the six others all wrong.
    answers = predictions(chosen, 0.0)
    for q in ("q0", "q4", "q8"):
        right = next(i for i in chosen if i.question_id == q).answer
        answers[q] = answers[q].model_copy(update={"choice": right, "answer": f"({right})"})
    summary = summarise(spec("small"), chosen, chosen, answers, [], [])
    count = summary.by_category["count"]
    assert (count.correct, count.total) == (3, 3) and count.low == pytest.approx(0.4385, abs=1e-4)
    write_report(tmp_path, summary, list(answers.values()))
    report = (tmp_path / REPORT_FILE).read_text()
    assert "| count | 3 | 3 | 100.0 | 43.9–100.0 | 3 | 100.0 | 43.9–100.0 |" in report
    assert "| accuracy | 33.3 | 12.1–64.6 | 33.3 | 12.1–64.6 |" in report
    assert "Intervals: Wilson score interval (95 %)" in report


def test_the_paired_interval_does_not_collapse_on_small_groups() -> None:
    same = paired_proportions([True] * 3, [True] * 3)
    assert same.value == 0.0 and (same.low, same.high) == pytest.approx((-0.5615, 0.5615), abs=1e-4)
    better = paired_proportions([False] * 6, [True] * 6)
    assert better.value == 1.0 and (better.low, better.high) == pytest.approx((0.4480, 1.0), abs=1e-4)
    # The runs' answers agree: a tighter interval than if they were independent.
    a = [True] * 12 + [False] * 9 + [True] * 2 + [False]
    b = [True] * 12 + [True] * 9 + [False] * 2 + [False]
    paired = paired_proportions(a, b)
    assert paired.value == pytest.approx(7 / 24) and 0 < paired.low < paired.value < paired.high < 0.55
    with pytest.raises(ValueError):
        paired_proportions([True], [True, False])


def test_every_question_ends_with_a_status_and_both_figures_per_metric(tmp_path: Path) -> None:
    """Scored, unparsed, unscored (no gold), failed (with its stage) and skipped (video missing,
    not asked yet), for multiple-choice and grounding questions alike."""

    def mc(q: str, answer: str | None, video: str = "v.mp4") -> BenchmarkItem:
        return BenchmarkItem(
            benchmark="mlvu", question_id=q, kind="multiple_choice", video_ids=(video,), question=f"{q}?",
            options=("red", "blue"), answer=answer, categories=("c",),
        )  # fmt: skip

    def grounding(q: str) -> BenchmarkItem:
        return BenchmarkItem(
            benchmark="charades_sta", question_id=q, kind="grounding", video_ids=("v.mp4",),
            question="a person opens a door", intervals=((0.0, 10.0),),
        )  # fmt: skip

    def said(q: str, kind: str, answer: str, **more: object) -> Prediction:
        return Prediction(question_id=q, kind=kind, video_ids=["f" * 64], answer=answer, **more)  # type: ignore[arg-type]

    chosen = [
        mc("right", "A"), mc("garbled", "A"), mc("nogold", None), mc("broken", "A"), mc("later", "A"),
        grounding("g-right"), grounding("g-none"), grounding("g-failed"),
    ]  # fmt: skip
    everything = [*chosen, mc("lost", "A", video="gone.mp4")]
    answers = {
        "right": said("right", "multiple_choice", "The answer is (A)."),
        "garbled": said("garbled", "multiple_choice", "I could not see it."),
        "nogold": said("nogold", "multiple_choice", "(B)"),
        "broken": Prediction(
            question_id="broken", kind="multiple_choice", video_ids=[], answer="", status="failed",
            stage="answer", error="APIConnectionError: connection refused",
        ),
        "g-right": said("g-right", "grounding", "0-10", interval=(0.0, 10.0)),
        "g-none": said("g-none", "grounding", "I cannot tell when."),
    }  # fmt: skip
    failed = {"g-failed": "video v.mp4 could not be ingested: probe: bad"}
    # "lost" is not ready (its video is missing); "later" is ready but was never asked.
    summary = summarise(spec("mixed"), everything, chosen, answers, failed, ["gone.mp4"])
    statuses = {s.question_id: s.status for s in summary.samples}
    assert statuses == {
        "right": "scored", "garbled": "unparsed", "nogold": "unscored", "broken": "failed",
        "later": "skipped", "g-right": "scored", "g-none": "unparsed", "g-failed": "failed",
        "lost": "skipped",
    }  # fmt: skip
    assert summary.outcomes == {"scored": 2, "unparsed": 2, "unscored": 1, "failed": 2, "skipped": 2}
    # Multiple choice: right, garbled (wrong) and broken (failed) are scored; nogold has no gold.
    assert summary.scores["accuracy"] == pytest.approx(1 / 3)  # strict: the failure counts wrong
    assert summary.answered_scores["accuracy"] == pytest.approx(1 / 2)  # over right and garbled
    # Grounding: IoU 1, 0 (no interval read), 0 (failed) strict; 1 and 0 over the answered.
    assert summary.scores["mIoU"] == pytest.approx(1 / 3)
    assert summary.answered_scores["mIoU"] == pytest.approx(1 / 2)
    assert summary.failures == {
        "broken": "answer: APIConnectionError: connection refused",
        "g-failed": "video v.mp4 could not be ingested: probe: bad",
    }
    assert summary.unparsed == ["garbled"]
    write_report(tmp_path, summary, list(answers.values()))
    samples = {s.question_id: s for s in read_samples(tmp_path)}
    assert samples["lost"].error == "video gone.mp4 not found under the root"
    assert samples["later"].error == "not asked yet (--limit)"
    assert samples["g-right"].parsed == "0-10" and samples["g-right"].gold == "0-10"
    assert samples["broken"].stage == "answer" and samples["broken"].response is None
    assert samples["garbled"].response == "I could not see it." and samples["garbled"].parsed is None
    assert samples["garbled"].score == 0.0 and samples["nogold"].score is None


def test_run_files_written_before_statuses_stay_readable(tmp_path: Path) -> None:
    # A predictions line from before: no status, stage or error. It reads as answered.
    old_line = {"question_id": "q0", "kind": "multiple_choice", "video_ids": ["f" * 64], "answer": "(A)"}
    (tmp_path / PREDICTIONS_FILE).write_text(json.dumps(old_line) + "\n")
    (old,) = read_predictions(tmp_path).values()
    assert old.status == "answered" and not old.failed and old.error is None
    # A summary from before: its failures were scored wrong in per_question and named in
    # `failed`; compare leaves them out all the same.
    a = read_summary(write_run(tmp_path, "a", 8, 0.5))
    b = read_summary(write_run(tmp_path, "b", 8, 0.5, seed=2))
    dumped = a.model_dump(exclude={"outcomes", "failures", "failure_groups", "answered_scores", "overall"})
    for question in dumped["per_question"].values():
        del question["status"], question["stage"]
    dumped["failed"] = ["q0", "q1"]
    (tmp_path / "a" / SUMMARY_FILE).write_text(json.dumps(dumped))
    text_ = compare_markdown(read_summary(tmp_path / "a"), b)
    assert "left out 2 questions not answered by both runs: failed in A 2, failed in B 0" in text_
    assert "| **all** | 6 |" in text_


def test_wrong_answers_are_listed_with_gold_prediction_citations_and_trace(tmp_path: Path) -> None:
    chosen = items(3)
    chosen[0] = chosen[0].model_copy(update={"question": "Is <b>this</b> | a [link](http://x) *bold*?"})
    answers = predictions(chosen, 0.0)  # every answer wrong
    answers["q0"].trace = "traces/q0.json"
    summary = summarise(spec("run"), chosen, chosen, answers, ["q2"], [])
    del answers["q2"]  # q2 failed after its retries: no answer, so not a wrong one (issue 37)
    summary = summarise(spec("run"), chosen, chosen, answers, ["q2"], [])
    write_report(tmp_path, summary, list(answers.values()))
    report = (tmp_path / REPORT_FILE).read_text()
    assert "## Wrong answers (2)" in report and "| q2" not in report
    row = next(line for line in report.splitlines() if line.startswith("| q0"))
    gold = f"{chosen[0].answer}. option {LETTERS.index(chosen[0].answer or 'A')}"
    assert gold in row and "[trace](traces/q0.json)" in row
    assert "video\\_0.mp4 10-15 s" in row  # the benchmark's video name, not the store id
    # Text from the benchmark is data: no HTML, no link, no table break, no emphasis.
    assert "<b>" not in row and "&lt;b>" in row and "\\[link\\]" in row and "\\*bold\\*" in row
    assert row.count(" | ") == 5
    assert "## Failed (1 of 3 attempted)" in report and "- q2: failed after its retries" in report


# ============================================================================ eval compare


def test_compare_gives_per_category_differences_with_paired_intervals(tmp_path: Path) -> None:
    a = read_summary(write_run(tmp_path, "a", 400, 0.4))
    b = read_summary(write_run(tmp_path, "b", 400, 0.8, seed=2))
    text_ = compare_markdown(a, b)
    row = next(line for line in text_.splitlines() if line.startswith("| **all**"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    n, acc_a, acc_b, diff, interval = cells[1:]
    assert n == "400" and float(diff) == pytest.approx(float(acc_b) - float(acc_a), abs=0.11)
    low, high = (float(x) for x in interval.split(" to "))
    assert 0 < low < float(diff) < high  # B is clearly better
    assert all(f"| {c} | 100 |" in text_ for c in CATEGORIES)


def test_eval_compare_command_prints_markdown_and_refuses_bad_pairs(tmp_path: Path) -> None:
    write_run(tmp_path, "a", 40, 0.5)
    write_run(tmp_path, "b", 40, 0.7, seed=3)
    result = runner.invoke(app, ["eval", "compare", str(tmp_path / "a"), str(tmp_path / "b")])
    assert result.exit_code == 0, result.output
    assert "| category | n | A % | B % | B − A | 95 % interval |" in result.output
    assert "| **all** | 40 |" in result.output

    other = tmp_path / "other"
    other.mkdir()
    summary = read_summary(tmp_path / "a")
    renamed = {f"x{q}": s for q, s in summary.per_question.items()}
    other_summary = summary.model_copy(update={"run": "other", "per_question": renamed})
    (other / SUMMARY_FILE).write_text(other_summary.model_dump_json())
    result = runner.invoke(app, ["eval", "compare", str(tmp_path / "a"), str(other)])
    assert result.exit_code == 1 and "share no scored question" in result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    result = runner.invoke(app, ["eval", "compare", str(tmp_path / "a"), str(tmp_path / "nowhere")])
    assert result.exit_code == 1 and "no evaluation run" in result.output


# ============================================================================ ablations


def test_ablation_names_are_checked_and_recorded_in_the_run(tmp_path: Path) -> None:
    assert strategies.parse_ablations("avi", ["avi:no-review,avi:no_graph", "avi:no-review"]) == (
        "avi:no-review",
        "avi:no-graph",
    )
    with pytest.raises(ValueError, match="unknown ablation 'avi:no-skills' for agent 'avi'"):
        strategies.parse_ablations("avi", ["avi:no-skills"])
    with pytest.raises(ValueError, match="dvd:no-frame-inspect"):
        strategies.parse_ablations("dvd", ["dvd:no-eyes"])

    from vidscope.flows.evaluate import prepare_run

    annotations = tmp_path / "mlvu"
    annotations.mkdir()
    record = {"video": "v.mp4", "duration": 5.0, "question": "Q?", "candidates": ["A1", "B1"]}
    record.update(answer="A1", question_type="t")
    (annotations / "1_t.json").write_text(json.dumps([record]))
    settings = make_settings(tmp_path / "data", chat="openai:scripted")
    plain = prepare_run(settings, "mlvu", annotations, tmp_path, "avi")
    ablated = prepare_run(settings, "mlvu", annotations, tmp_path, "avi", ablations=["avi:no-review"])
    assert plain != ablated  # part of the run's identity
    assert read_spec(ablated).ablations == ["avi:no-review"] and read_spec(plain).ablations == []

    result = runner.invoke(
        app,
        ["--data-dir", str(tmp_path / "data"), "eval", "mlvu", "--root", str(tmp_path)]
        + ["--annotations", str(annotations), "--agent", "extractive", "--ablation", "dvd:no-clip-search"],
    )
    assert (
        result.exit_code == 2
        and "unknown ablation 'dvd:no-clip-search' for agent 'extractive'" in result.output
    )
    assert "Traceback" not in result.output
    help_text = runner.invoke(app, ["eval", "--help"], env={"COLUMNS": "200"}).output
    for name in strategies.ablation_names():
        assert name in help_text


@pytest.fixture
def world(tmp_path: Path, llm_server: ScriptedLLMServer):  # type: ignore[no-untyped-def]
    options = {"openai": {"base_url": llm_server.base_url, "max_retries": 0, "timeout_s": 20}}
    settings = make_settings(tmp_path / "data", chat="openai:scripted", options=options)
    return settings, build_store(settings), llm_server


def _item(question: str) -> BenchmarkItem:
    return BenchmarkItem(
        benchmark="mlvu", question_id="q", kind="open_ended", video_ids=("v",), question=question
    )


def _tools(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


@pytest.mark.parametrize("tool", ["global_browse", "clip_search", "frame_inspect"])
def test_a_dvd_ablation_takes_its_tool_away_from_the_model(world, tool: str) -> None:  # type: ignore[no-untyped-def]
    settings, store, server = world
    server.script([tool_call("finish", {"answer": "PURPLE ELEPHANT", "citations": []})])
    ctx = ToolContext(settings, store, chat=registry.chat_model(settings), config=AgentConfig())
    name = strategies.ablation_name("dvd", tool)
    answer = answer_item("dvd", ctx, _item("What is the code?"), [VIDEO_ID], [name])
    assert answer.answer == "PURPLE ELEPHANT"
    offered = _tools(server.chat_requests[0])
    assert tool not in offered and "finish" in offered and len(offered) == 3


def _avi(world, ablations: list[str], script: list) -> tuple:  # type: ignore[no-untyped-def,type-arg]
    settings, store, server = world
    server.script(script)
    config = AgentConfig(avi_require_perception=False)
    ctx = ToolContext(settings, store, chat=registry.chat_model(settings), config=config)
    answer = strategies.answer(
        "avi", ctx, request_of(_item("What is the secret code?"), [VIDEO_ID], ablations)
    )
    return answer, server.chat_requests


ANSWER_RANGE = [ANSWER_CLIP * 5.0, ANSWER_CLIP * 5.0 + 5]
AVI_SCRIPT = [
    tool_call("clip_retrieve", {"video_id": VIDEO_ID, "query": "secret code", "k": 3}, call_id="c"),
    text("Candidate: 35-40 s."),
    text("The code is on screen over 35-40 s."),
]
ANSWER_JSON = text(
    json.dumps({"verdict": "answer", "answer": "PURPLE ELEPHANT", "citations": [ANSWER_RANGE]})
)


def test_avi_without_review_answers_after_perceive_and_never_asks_for_a_review(world) -> None:  # type: ignore[no-untyped-def]
    answer, requests = _avi(world, ["avi:no-review"], [*AVI_SCRIPT, ANSWER_JSON])
    assert answer.answer == "PURPLE ELEPHANT" and not answer.forced
    said = [m.get("content") or "" for m in requests[-1]["messages"] if m["role"] == "user"]
    assert said[-1] == prompts.AVI_ANSWER_NOW
    assert not any("Phase 3 of 3: REVIEW" in str(m.get("content")) for r in requests for m in r["messages"])
    assert "review" not in {s.phase for s in answer.trace}
    assert [s.phase for s in answer.trace if s.kind == "answer"] == ["answer"]


def test_avi_without_the_graph_is_never_offered_graph_retrieve(world) -> None:  # type: ignore[no-untyped-def]
    answer, requests = _avi(world, ["avi:no-graph"], [*AVI_SCRIPT, ANSWER_JSON])
    assert answer.answer == "PURPLE ELEPHANT"
    assert _tools(requests[1]) == ["clip_retrieve", "clip_merge", "global_explore"]
    assert any("Phase 3 of 3: REVIEW" in str(m.get("content")) for m in requests[-1]["messages"])  # still on


@pytest.mark.parametrize("ablation", ["sama:no-skills", "sama:no-conflict-check"])
def test_sama_ablations_skip_the_skill_choice_or_the_conflict_re_read(
    llm_server: ScriptedLLMServer, tmp_path: Path, ablation: str
) -> None:
    """The conflict scenario of ``test_simulator_sama``: object_tracker follows three cars where
    video_reader counts two over the same window; SAMA re-reads it unless its conflict check is off."""
    from test_simulator_sama import planner_settings, street_conflict

    from vidscope.agents.simulator.simulator import ScriptSimulator, SimContext

    script, replies = street_conflict()
    v = "street"
    skills_on = ablation != "sama:no-skills"
    llm_server.script([text('{"type": "reading"}'), *replies] if skills_on else replies)
    settings = planner_settings(tmp_path / "data", llm_server)
    ctx = SimContext(settings, ScriptSimulator(script), chat=registry.chat_model(settings))
    request = request_of(
        _item("How many cars are there?").model_copy(update={"video_ids": (v,)}), [v], [ablation]
    )
    answer = strategies.answer("sama", ctx, request)
    kinds = [s.kind for s in answer.trace]
    assert answer.answer == "2 cars" and llm_server.pending == 0
    assert ("classify" in kinds) == skills_on
    conflict_on = ablation != "sama:no-conflict-check"
    assert ("verify" in kinds) == conflict_on and ("conflict" in kinds) == conflict_on


def test_crossvid_overall_score_is_given_over_answered_questions_too(tmp_path: Path) -> None:
    """NC: one right, one failed; FSA: one answered with IoU 5/15. Strict O.Avg (2 of 10 tasks) =
    (1/2 + 1/3) / 2 = 41.7; over answered questions NC is 1/1, so (1 + 1/3) / 2 = 66.7. When the
    FSA question fails instead, FSA has no figure over answered questions: no answered O.Avg."""
    from vidscope.evaluation.loaders import load_benchmark

    nc = [{"id": f"nc{n}", "task": "NC", "videos": ["a.mp4", "b.mp4"], "question": f"Who {n}?",
           "options": ["A. one", "B. two"], "answer": "B"} for n in range(2)]  # fmt: skip
    fsa = {"id": "fsa0", "task": "FSA", "video A": "a.mp4", "video B": "b.mp4", "ref_segment": [1, 3],
           "answer": [10, 20]}  # fmt: skip
    (tmp_path / "crossvid.json").write_text(json.dumps([*nc, fsa]))
    items = load_benchmark("crossvid", tmp_path / "crossvid.json")
    spec = RunSpec(name="r", benchmark="crossvid", annotations=str(tmp_path / "crossvid.json"), root="/v",
                   agent="dvd", settings_fingerprint="-", created_at="2026-01-01T00:00:00+00:00")  # fmt: skip

    def answered(qid: str, said: str) -> Prediction:
        return Prediction(question_id=qid, kind="multiple_choice" if qid.startswith("nc") else "open_ended",
                          video_ids=["x", "y"], answer=said)  # fmt: skip

    label = "O.Avg (2 of 10 tasks)"
    got = {"nc0": answered("nc0", "B"), "fsa0": answered("fsa0", "15,25")}
    summary = summarise(spec, items, items, got, {"nc1": "answer: timeout"}, [])
    assert round(100 * summary.scores[label], 1) == 41.7
    assert round(100 * summary.answered_scores[label], 1) == 66.7
    assert f"| {label} | 41.7 | — | 66.7 | — |" in report_markdown(summary)

    got = {"nc0": answered("nc0", "B"), "nc1": answered("nc1", "B")}
    summary = summarise(spec, items, items, got, {"fsa0": "answer: timeout"}, [])
    assert summary.scores[label] == pytest.approx(0.5) and label not in summary.answered_scores

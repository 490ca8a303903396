"""Multi-video benchmarks scored as their releases score them: CrossVid's gold forms, strict
parsing and a judge of its own; MVX-Bench's video options mapped to its candidates.

Reference: the CrossVid release (chuntianli666/CrossVid, ``eval/*.py``). Every task script keeps
the model's whole reply (or, with its "extractable" prompt, the inside of ``<answer></answer>``)
and compares it with the gold as a string: ``answer == gold``, BU ``answer == "".join(gold)``,
PSS ``answer == "2->3->1->4"``; FSA splits the reply at its comma into two floats (else IoU 0).
``score_CCQA.py`` asks a separate judge model about each scoring point.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from llm_server import ScriptedLLMServer, eval_config, text, tool_call
from typer.testing import CliRunner

from vidscope.cli import app
from vidscope.cli.common import overrides
from vidscope.core.settings import Settings
from vidscope.evaluation.loaders import load_benchmark

runner = CliRunner()
OPTIONS = ["A. eat", "B. run", "C. sleep", "D. swim"]


def _bu(golds: list[Any]) -> list[dict[str, Any]]:
    return [{"id": str(n), "videos": ["a.mp4", "b.mp4"], "question": "Which?", "options": OPTIONS,
             "answer": g}
            for n, g in enumerate(golds)]  # fmt: skip


def test_bu_golds_in_every_form_the_release_accepts_and_a_bad_one_skips_only_itself(tmp_path: Path) -> None:
    """``BU.py`` joins the gold (``"".join(answer)``): a list of letters, or a string already
    joined. Every form is read as the set A, C; a letter beyond the options or a word is that
    question skipped with one line, the file's other questions kept."""
    golds = [["A", "C"], "AC", "A, C", "A,C", "A C", ["C", "A"], [0, 2], ["A, C"], "E", "maybe"]
    (tmp_path / "BU.json").write_text(json.dumps(_bu(golds)))
    items = load_benchmark("crossvid", tmp_path / "BU.json")
    usable = [i for i in items if "unusable" not in i.extra]
    assert [i.answer for i in usable] == ["AC"] * 8
    assert [i.extra["gold_text"] for i in usable] == ["AC", "AC", "A, C", "A,C", "A C", "CA", "02", "A, C"]
    assert all(i.extra["rule"] == "set" and i.categories == ("BU",) for i in usable)
    bad = {i.question_id: i.extra["unusable"] for i in items if "unusable" in i.extra}
    assert set(bad) == {"8", "9"}
    assert all(
        len(reason.splitlines()) == 1 and reason.startswith(f"{tmp_path / 'BU.json'}: ")
        for reason in bad.values()
    )


def _score(
    tmp_path: Path, task: str, records: list[dict[str, Any]], said: dict[str, str], **options: Any
) -> Any:
    from vidscope.evaluation.report import summarise
    from vidscope.evaluation.runs import PREDICTIONS_FILE, RunSpec, read_predictions

    folder = tmp_path / f"{task}-{options.get('parse', 'strict')}"
    folder.mkdir()
    annotations = folder / f"{task}.json"
    annotations.write_text(json.dumps(records))
    items = load_benchmark("crossvid", annotations, **options)
    lines = [{"question_id": i.question_id, "kind": i.kind, "video_ids": ["x"], "answer": said[i.question_id]}
             for i in items]  # fmt: skip
    (folder / PREDICTIONS_FILE).write_text("".join(json.dumps(line) + "\n" for line in lines))
    spec = RunSpec(name="r", benchmark="crossvid", annotations=str(annotations), root="/v", agent="dvd",
                   settings_fingerprint="-", created_at="2026-01-01T00:00:00+00:00")  # fmt: skip
    return summarise(spec, items, items, read_predictions(folder), [], [])


def test_strict_parsing_is_the_releases_string_equality_and_lenient_is_named(tmp_path: Path) -> None:
    """Single choice, gold B x6. Replies: "B" (right everywhere), " B\\n" (right: we trim, the
    script would not), "<answer>B</answer>" (the extractable prompt: right), "B." / "(B)" /
    "The answer is B" (strict: no choice read, unparsed; lenient: B) → strict 3/6 = 50.0 with 3
    unparsed, lenient 6/6 = 100.0."""
    records = [{"id": str(n), "videos": ["a.mp4", "b.mp4"], "question": "Who?", "options": OPTIONS,
                "answer": "B"} for n in range(6)]  # fmt: skip
    said = dict(enumerate([" B\n", "B", "<answer>B</answer>", "B.", "(B)", "The answer is B"]))
    said_by_id = {str(k): v for k, v in said.items()}
    strict = _score(tmp_path, "NC", records, said_by_id)
    assert round(100 * strict.scores["accuracy"], 1) == 50.0 and strict.unparsed == ["3", "4", "5"]
    assert strict.outcomes["unparsed"] == 3
    lenient = _score(tmp_path, "NC", records, said_by_id, parse="lenient")
    assert lenient.scores["accuracy"] == 1.0 and lenient.unparsed == []

    # BU: gold "A, C" (as written) x2, ["A", "C"] x2: "A, C" and "AC" right against their own
    # form; "AC" against "A, C" and "CA" against ["A", "C"] wrong → strict 2/4, lenient 4/4.
    bu = _bu(["A, C", "A, C", ["A", "C"], ["A", "C"]])
    replies = {"0": "A, C", "1": "AC", "2": "AC", "3": "CA"}
    assert _score(tmp_path, "BU", bu, replies).scores["accuracy"] == 0.5
    assert _score(tmp_path, "BU", bu, replies, parse="lenient").scores["accuracy"] == 1.0

    # FSA: FSA.py's split(","): "15, 25" is read (float() takes the spaces), "15s-25s" is not.
    fsa = [{"id": str(n), "video A": "a.mp4", "video B": "b.mp4", "ref_segment": [1, 3], "answer": [10, 20]}
           for n in range(2)]  # fmt: skip
    fsa_said = {"0": "15, 25", "1": "15s-25s"}
    assert _score(tmp_path, "FSA", fsa, fsa_said).rule_scores == {"FSA": pytest.approx(5 / 15 / 2)}
    assert _score(tmp_path, "FSA", fsa, fsa_said, parse="lenient").rule_scores == {
        "FSA": pytest.approx(5 / 15)
    }


#: The answer action as the real Qwen2.5-Coder 1.5B called it in the tier's AgentCVR compare
#: (benchmarks/out/real_model/compare-cvr.out, 2026-11-27): words, citations, no ``choice``.
RECORDED_ANSWER = {
    "answer": "The ferry ticket is cheaper at the harbour tour.",
    "citations": [{"video_id": "v1", "start": 0.0, "end": 4.0}, {"video_id": "v2", "start": 0.0, "end": 7.0}],
}


def test_strict_scoring_takes_the_choice_the_answer_action_gave_and_reads_words_as_they_are(
    tmp_path: Path,
) -> None:
    """The runtime's end of a run (``finish_answer``, DVD's finish, SAMA's and AgentCVR's answer)
    on the recorded answer action. Given a ``choice`` ("A"), strict CrossVid scoring takes it:
    right, not unparsed. Without one (as recorded) the runtime still reads "A" from the words with
    our lenient rules, but that is not the reply: strictly the words are compared as they are
    (unparsed), leniently the read choice counts. A legacy line without ``choice_source`` keeps
    its choice."""
    from vidscope.agents.runtime import LoopState, finish_answer
    from vidscope.evaluation.report import summarise
    from vidscope.evaluation.runs import Prediction, RunSpec

    options = ["the harbour tour", "the river port"]
    records = [{"id": q, "task": "CC", "videos": ["a.mp4", "b.mp4"], "question": "Where is it cheaper?",
                "options": [f"A. {options[0]}", f"B. {options[1]}"], "answer": "A"}
               for q in ("given", "read", "legacy")]  # fmt: skip

    def answered(values: dict[str, Any]) -> Any:
        state = LoopState(messages=[])
        return finish_answer(None, state, "answer", values, "v1", options, lambda step: None, citations=[])  # type: ignore[arg-type]

    given = answered({**RECORDED_ANSWER, "choice": "A"})
    read = answered(RECORDED_ANSWER)
    assert (given.choice, given.choice_source) == ("A", "given")
    assert (read.choice, read.choice_source) == ("A", "read")
    made = {"given": given, "read": read}
    predictions = {
        q: Prediction(question_id=q, kind="multiple_choice", video_ids=["v1", "v2"], answer=a.answer,
                      choice=a.choice, choice_source=a.choice_source)
        for q, a in made.items()
    }  # fmt: skip
    predictions["legacy"] = Prediction(
        question_id="legacy", kind="multiple_choice", video_ids=["v1", "v2"], answer=read.answer, choice="A"
    )
    for parse, right, unparsed in (("strict", 2, ["read"]), ("lenient", 3, [])):
        folder = tmp_path / parse
        folder.mkdir()
        (folder / "CC.json").write_text(json.dumps(records))
        items = load_benchmark("crossvid", folder / "CC.json", parse=parse)
        spec = RunSpec(name="r", benchmark="crossvid", annotations=str(folder / "CC.json"), root="/v",
                       agent="cvr", settings_fingerprint="-",
                       created_at="2026-01-01T00:00:00+00:00")  # fmt: skip
        summary = summarise(spec, items, items, predictions, [], [])
        assert summary.overall is not None and summary.overall.correct == right, parse
        assert summary.unparsed == unparsed, parse
        samples = {s.question_id: s for s in summary.samples}
        assert samples["given"].status == "scored" and samples["given"].choice_source == "given"
        assert samples["read"].status == ("unparsed" if parse == "strict" else "scored")


def test_parse_is_refused_for_other_benchmarks_and_bad_values_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "NC.json").write_text(json.dumps(_bu(["A"])))
    for args, message in (
        (["eval", "mlvu", "--parse", "lenient"], "--parse applies to crossvid"),
        (["eval", "crossvid", "--parse", "loose"], "parse='loose': choose strict"),
    ):
        overrides.clear()
        try:
            result = runner.invoke(app, ["--data-dir", str(tmp_path / "data"), *args, "--root", str(tmp_path),
                                         "--annotations", str(tmp_path / "NC.json"),
                                         "--agent", "extractive"])  # fmt: skip
        finally:
            overrides.clear()
        assert result.exit_code == 2 and "Traceback" not in result.output
        assert len(result.output.strip().splitlines()) == 1 and message in result.output


# ---------------------------------------------------------------------------- the CCQA judge

CCQA = [{"id": "q1", "video A": "a.mp4", "video B": "b.mp4", "question": "Compare the dishes.",
         "answer": "The first is spicier.", "scoring_points": ["which is spicier", "why"]}]  # fmt: skip


def test_a_run_whose_judge_would_be_the_answering_model_is_refused_in_one_line(tmp_path: Path) -> None:
    """No ``[models] judge``, or one that is the planner as served: refused before anything runs."""
    (tmp_path / "CCQA.json").write_text(json.dumps(CCQA))
    config = eval_config(tmp_path / "vidscope.toml", "http://127.0.0.1:9/v1")
    same = tmp_path / "same.toml"
    same.write_text(
        config.read_text().replace(
            'chat = "openai:scripted"', 'chat = "openai:scripted"\njudge = "openai:scripted"'
        )
    )
    for toml in (config, same):
        overrides.clear()
        try:
            result = runner.invoke(app, ["--config", str(toml), "--data-dir", str(tmp_path / "data"),
                                         "eval", "crossvid",
                                         "--agent", "dvd", "--root", str(tmp_path),
                                         "--annotations", str(tmp_path / "CCQA.json")])  # fmt: skip
        finally:
            overrides.clear()
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output
        line = " ".join(result.output.split())
        assert (
            "1 free-form answers (CrossVid CCQA) need a judge that is not the answering model "
            "(openai:scripted)" in line
        )
        assert "set [models] judge" in line and "--allow-self-judge" in line


def _settings(tmp_path: Path, server: ScriptedLLMServer, **models: Any) -> Settings:
    fields = {"chat": "openai:answerer", "captioner": None, "speech_recognizer": None, "text_reader": None,
              "options": {"openai": {"base_url": server.base_url, "max_retries": 0, "timeout_s": 20}},
              **models}  # fmt: skip
    return Settings(data_dir=tmp_path / "data", models=fields)


def test_the_judge_role_judges_and_the_report_names_it(tmp_path: Path, llm_server: ScriptedLLMServer) -> None:
    """``[models] judge`` is asked (its model name on the wire), not the answering model; the
    score is score_CCQA.py's (covered + correct) / (2 x points) = (2 + 1) / 4 = 75.0, and the report
    says who judged."""
    from vidscope.evaluation.report import report_markdown, summarise
    from vidscope.evaluation.runs import Prediction, RunSpec
    from vidscope.flows.eval_agents import choose_judge, judge_of

    (tmp_path / "CCQA.json").write_text(json.dumps(CCQA))
    items = load_benchmark("crossvid", tmp_path / "CCQA.json")
    settings = _settings(tmp_path, llm_server, judge="openai:grader")
    choice = choose_judge(settings, items, allow_self=False)
    assert choice.spec == "openai:grader" and choice.note is None
    llm_server.script([text('{"coverage": [true, true], "correctness": [true, false]}')])
    spec = RunSpec(name="r", benchmark="crossvid", annotations=str(tmp_path / "CCQA.json"), root="/v",
                   agent="dvd", settings_fingerprint="-", created_at="2026-01-01T00:00:00+00:00")  # fmt: skip
    said = {
        "q1": Prediction(question_id="q1", kind="open_ended", video_ids=["x"], answer="The first, chili.")
    }
    summary = summarise(spec, items, items, said, [], [], judge_of(settings, choice))
    summary.judge_model, summary.judge_note = choice.spec, choice.note
    assert [r["model"] for r in llm_server.chat_requests] == ["grader"]
    assert summary.rule_scores == {"CCQA": pytest.approx(0.75)} and summary.judge_model == "openai:grader"
    assert "Free-form answers judged by openai:grader." in report_markdown(summary)


def test_self_judging_is_allowed_only_by_name_and_warned(
    tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    from vidscope.flows.eval_agents import choose_judge

    items = [i for i in load_benchmark_from(tmp_path, CCQA)]
    settings = _settings(tmp_path, llm_server)
    with pytest.raises(ValueError, match="not the answering model"):
        choose_judge(settings, items, allow_self=False)
    allowed = choose_judge(settings, items, allow_self=True)
    assert allowed.spec == "openai:answerer" and allowed.self_judging
    assert allowed.note is not None and allowed.note.startswith(
        "WARNING: the answering model (openai:answerer)"
    )
    # Nothing to judge: nobody is asked, nothing refused.
    (tmp_path / "NC.json").write_text(json.dumps(_bu(["A"])))
    assert (
        choose_judge(settings, load_benchmark("crossvid", tmp_path / "NC.json"), allow_self=False).spec
        is None
    )


def load_benchmark_from(tmp_path: Path, records: list[dict[str, Any]]) -> list[Any]:
    (tmp_path / "CCQA.json").write_text(json.dumps(records))
    return load_benchmark("crossvid", tmp_path / "CCQA.json")


# ---------------------------------------------------------------------------- MVX-Bench video options


def test_mvx_video_options_are_the_candidates_the_agent_is_told_and_an_answer_naming_one_scores(
    tmp_path: Path,
) -> None:
    """Options "Video A" … "Video C" are the candidates in order (the reference video is none of
    them): Video A = c1.mp4 (video 2), B = c2.mp4 (video 3), C = c3.mp4 (video 4). Gold B x6.
    Answers: "Video B" (B), "It is c2.mp4" (B), "video 3 matches" (B), "s3 is the one" (its store id:
    B), "c1.mp4 or c2.mp4" (two videos: no choice), "the red car" (none) → 4/6 = 66.7, 2 unparsed."""
    from vidscope.evaluation.report import summarise
    from vidscope.evaluation.runs import Prediction, RunSpec
    from vidscope.flows.eval_agents import request_of

    records = [{"id": str(n), "task": "retrieval", "reference_video": "ref.mp4",
                "candidate_videos": ["c1.mp4", "c2.mp4", "c3.mp4"], "question": "Which candidate shows it?",
                "options": ["A. Video A", "B. Video B", "C. Video C"], "answer": "B"}
               for n in range(6)]  # fmt: skip
    (tmp_path / "mvx.json").write_text(json.dumps(records))
    items = load_benchmark("mvx_bench", tmp_path / "mvx.json")
    assert items[0].extra["option_videos"] == {"A": "c1.mp4", "B": "c2.mp4", "C": "c3.mp4"}
    request = request_of(items[0], ["s1", "s2", "s3", "s4"])
    assert request.options == ["Video A (video 2, video_id=s2)", "Video B (video 3, video_id=s3)",
                               "Video C (video 4, video_id=s4)"]  # fmt: skip
    said = ["Video B", "It is c2.mp4", "video 3 matches", "s3 is the one", "c1.mp4 or c2.mp4", "the red car"]
    shown = ["s1", "s2", "s3", "s4"]
    predictions = {str(n): Prediction(question_id=str(n), kind="multiple_choice", video_ids=shown, answer=a)
                   for n, a in enumerate(said)}  # fmt: skip
    spec = RunSpec(name="r", benchmark="mvx_bench", annotations=str(tmp_path / "mvx.json"), root="/v",
                   agent="sama", settings_fingerprint="-",
                   created_at="2026-01-01T00:00:00+00:00")  # fmt: skip
    summary = summarise(spec, items, items, predictions, [], [])
    assert round(100 * summary.scores["accuracy"], 1) == 66.7 and summary.unparsed == ["4", "5"]
    # Options that are not videos are left alone.
    (tmp_path / "plain.json").write_text(json.dumps([{**records[0], "options": ["A. yes", "B. no"]}]))
    (plain,) = load_benchmark("mvx_bench", tmp_path / "plain.json")
    assert "option_videos" not in plain.extra and request_of(plain, ["s1", "s2", "s3", "s4"]).options == [
        "yes",
        "no",
    ]


# ---------------------------------------------------------------------------- end to end


class CrossVidServer(ScriptedLLMServer):
    """Answers as its request asks: the judge's verdict, an agent's final answer (NC: "B", the gold;
    CCQA: words), or ingestion's own requests (an empty subject registry)."""

    def __init__(self) -> None:
        super().__init__()
        self.models: list[str] = []

    def _chat(self, handler: Any, body: dict[str, Any]) -> None:
        from vidscope.flows.eval_agents import JUDGE_SYSTEM

        system = next((m["content"] for m in body["messages"] if m["role"] == "system"), "")
        opening = next((m["content"] for m in body["messages"] if m["role"] == "user"), "")
        if JUDGE_SYSTEM[:60] in str(system):
            self.models.append(str(body.get("model")))
            reply = text('{"coverage": [true, true], "correctness": [true, false]}')
        elif isinstance(opening, str) and opening.startswith("Question: Who"):
            # The answer action as models call it: words, and the letter as its choice.
            reply = tool_call(
                "finish", {"answer": "Person y cooks in both videos.", "choice": "B", "citations": []}
            )
        elif isinstance(opening, str) and opening.startswith("Question: "):
            reply = tool_call("finish", {"answer": "The first is spicier: chili.", "citations": []})
        else:
            reply = text('{"subjects": []}')
        with self._lock:
            self._queue.appendleft(reply)
        super()._chat(handler, body)


@pytest.mark.slow  # ingests two short videos (60-80 s on 2 busy cores)
def test_a_crossvid_file_runs_end_to_end_with_its_report_naming_what_it_covers(tmp_path: Path) -> None:
    """A file of every kind: an NC question (answered in words with the choice "B": right), a CCQA
    question (judged by the judge role: 3 of 4 points), an MSR question (missing task) and a record
    whose gold names no option (skipped, one line). The report and summary say all of it; O.Avg
    is named for 2 tasks."""
    from media import text_video

    root = tmp_path / "videos"
    text_video(root / "a.mp4", duration=2.0, texts=[(0.0, 2.0, "SOUP")])
    text_video(root / "b.mp4", duration=2.0, texts=[(0.0, 2.0, "CURRY")])
    records = [
        {"id": "nc", "task": "NC", "videos": ["a.mp4", "b.mp4"], "question": "Who cooks?",
         "options": ["A. x", "B. y"], "answer": "B"},
        {**CCQA[0], "task": "CCQA"},
        {"id": "msr", "task": "MSR", "vid": "007", "question": "Is {A1} left of {B1}?",
         "options": ["A. yes", "B. no"], "objects": [{"id": 1}], "answer": "A"},
        {"id": "bad", "task": "NC", "videos": ["a.mp4", "b.mp4"], "question": "Who?",
         "options": ["A. x", "B. y"], "answer": "Z"},
    ]  # fmt: skip
    (tmp_path / "crossvid.json").write_text(json.dumps(records))
    server = CrossVidServer().start()
    try:
        config = eval_config(tmp_path / "vidscope.toml", server.base_url)
        judged = config.read_text().replace(
            'chat = "openai:scripted"', 'chat = "openai:scripted"\njudge = "openai:grader"'
        )
        config.write_text(judged)
        overrides.clear()
        try:
            result = runner.invoke(app, ["--config", str(config), "--data-dir", str(tmp_path / "data"),
                                         "eval", "crossvid", "--agent", "dvd", "--root", str(root),
                                         "--annotations", str(tmp_path / "crossvid.json"),
                                         "--concurrency", "1"])  # fmt: skip
        finally:
            overrides.clear()
    finally:
        server.stop()
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    (run_dir,) = (tmp_path / "data" / "eval").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["task_scores"] == {"CCQA": 0.75, "NC": 1.0}
    assert summary["scores"]["O.Avg (2 of 10 tasks)"] == pytest.approx(0.875)
    assert "MSR" in summary["missing_tasks"] and set(summary["unusable"]) == {"msr", "bad"}
    assert summary["judge_model"] == "openai:grader" and server.models == ["grader"]
    report = (run_dir / "report.md").read_text()
    assert (
        "| O.Avg (2 of 10 tasks) | 87.5 |" in report
        and "Free-form answers judged by openai:grader." in report
    )
    assert "**Not asked** (2 questions the loader could not use):" in report
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert {s["question_id"]: s["status"] for s in samples} == {
        "nc": "scored", "q1": "scored", "msr": "skipped", "bad": "skipped"}  # fmt: skip
    # Strict parsing scored the choice the answer action gave, not its words.
    assert [(s["choice"], s["choice_source"], s["parsed"]) for s in samples if s["question_id"] == "nc"] == [
        ("B", "given", "B")
    ]
    output = " ".join(result.output.split())
    assert "missing tasks (not in the overall score)" in output and "judged by openai:grader" in output


@pytest.mark.slow  # a cold `vidscope eval` in-process: ~40 s of the default suite on 2 busy cores
def test_a_file_of_msr_questions_only_says_why_nothing_was_scored(tmp_path: Path) -> None:
    uav = {"vid": "007", "question": "Is {A1} left of {B1}?", "options": ["A. yes", "B. no"],
           "objects": [{"id": 1}], "answer": "A"}  # fmt: skip
    (tmp_path / "MSR.json").write_text(json.dumps([{**uav, "id": 1}, {**uav, "id": 2}]))
    overrides.clear()
    try:
        result = runner.invoke(app, ["--data-dir", str(tmp_path / "data"), "eval", "crossvid", "--agent",
                                     "extractive", "--root", str(tmp_path), "--annotations",
                                     str(tmp_path / "MSR.json")])  # fmt: skip
    finally:
        overrides.clear()
    assert result.exit_code == 1 and "Traceback" not in result.output
    said = " ".join(result.output.split())
    assert "nothing was scored: none of the 2 questions could be asked" in said and "UAV views" in said
    assert said.count("not asked") == 2

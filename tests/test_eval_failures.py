"""Failures are not wrong answers (issue 37), driven through ``vidscope eval`` as a researcher runs it.

An MLVU-format benchmark of six questions: three on a good synthetic video, three on a file that is
not a video (it fails ingestion at the probe). A scripted model answers "(A)", the gold letter of
every question, so each figure below is known by hand:

* strict accuracy (failures count wrong) 3/6 = 50.0 %, Wilson 18.8–81.2; over answered questions
  3/3 = 100.0 %, Wilson 43.9–100.0 (a percentile bootstrap said 100.0–100.0);
* 3 of 6 failed is more than the default ``--max-failed`` of 20 %: exit 1, one line, by cause;
* once the file is replaced by a real video, the run resumes and asks the three failed questions
  again; ``eval compare`` of the run as it was against the run as it is now scores only the three
  questions both answered (not "+50 points over 6"), and says loudly that it left three out.

One module-scoped run sequence (one small video ingested, then the replaced one) serves all tests.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from llm_server import ScriptedLLMServer, eval_config, text, tool_call
from media import text_video
from typer.testing import CliRunner

from vidscope.cli import app
from vidscope.cli.common import overrides
from vidscope.evaluation.report import RunSummary
from vidscope.evaluation.runs import PREDICTIONS_FILE
from vidscope.evaluation.samples import SAMPLES_FILE
from vidscope.flows.evaluate import too_many_failed

runner = CliRunner()

#: (video, question, candidates, question type): the first candidate is the gold answer.
QUESTIONS = [
    ("good.mp4", "What is written on the sign?", ["BLUE BOAT", "RED CAR"], "sign"),
    ("good.mp4", "Which words does the sign show?", ["BLUE BOAT", "GREEN BUS"], "sign"),
    ("good.mp4", "What does the sign read?", ["BLUE BOAT", "YELLOW VAN"], "sign"),
    ("bad.mp4", "How many apples are offered?", ["SEVEN", "NINE"], "count"),
    ("bad.mp4", "How many pears are offered?", ["SEVEN", "TWO"], "count"),
    ("bad.mp4", "How many lemons are offered?", ["SEVEN", "SIX"], "count"),
]
ANSWER = "The answer is (A)."


class AnsweringServer(ScriptedLLMServer):
    """A model that searches the question's video once, then answers "(A)"; ingestion's own
    requests (the subject registry) get an empty list."""

    def _chat(self, handler: Any, body: dict[str, Any]) -> None:
        messages = body["messages"]
        opening = next(m["content"] for m in messages if m["role"] == "user")
        video = re.search(r"video_id=([0-9a-f]{64})", opening)
        if not re.search(r"^Question: ", opening, re.M) or video is None:
            reply = text('{"subjects": []}')
        elif not any(m["role"] == "tool" for m in messages):
            reply = tool_call("clip_search", {"video_id": video.group(1), "query": "sign", "top_k": 2})
        else:
            reply = tool_call("finish", {"answer": ANSWER, "citations": []})
        with self._lock:
            self._queue.appendleft(reply)
        super()._chat(handler, body)


def _norm(output: str) -> str:
    return " ".join(output.split())


def _read(run_dir: Path) -> dict[str, Any]:
    """A run's files as the tests read them."""
    lines = (run_dir / PREDICTIONS_FILE).read_text().splitlines()
    return {
        "summary": json.loads((run_dir / "summary.json").read_text()),
        "report": (run_dir / "report.md").read_text(),
        "samples": [json.loads(line) for line in (run_dir / SAMPLES_FILE).read_text().splitlines()],
        "predictions": [json.loads(line) for line in lines],
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """Run ``broken`` (one video does not decode), keep a copy of it as it ended, replace the file
    with a real video, resume ``broken``, and compare the copy with it."""
    folder = tmp_path_factory.mktemp("eval-failures")
    root = folder / "videos"
    text_video(root / "good.mp4", duration=1.0, texts=[(0.0, 1.0, "BLUE BOAT")])
    (root / "bad.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"not a video " * 64)
    annotations = folder / "mlvu"
    annotations.mkdir()
    records = [
        {"video": v, "duration": 1.0, "question": q, "candidates": c, "answer": c[0], "question_type": t}
        for v, q, c, t in QUESTIONS
    ]
    (annotations / "1_facts.json").write_text(json.dumps(records))
    server = AnsweringServer().start()
    config = eval_config(folder / "vidscope.toml", server.base_url)
    # Only what the agent reads: no OCR, no image-text model (the answers are scripted).
    config.write_text(
        config.read_text().replace("[models]\n", '[models]\ntext_reader = ""\nimage_text = ""\n')
    )
    data = folder / "data"

    def invoke(*args: str) -> Any:
        overrides.clear()
        try:
            return runner.invoke(app, ["--data-dir", str(data), "--config", str(config), *args])
        finally:
            overrides.clear()

    def evaluate(*extra: str) -> Any:
        command = ["eval", "mlvu", "--root", str(root), "--annotations", str(annotations), "--agent", "dvd"]
        return invoke(*command, "--run", "broken", *extra)

    out: dict[str, Any] = {"folder": folder}
    try:
        out["first"] = evaluate()
        run_dir = data / "eval" / "broken"
        out["broken"] = _read(run_dir)
        shutil.copytree(run_dir, data / "eval" / "as-broken")
        # The good video's bytes: the same store id, already ingested, so nothing is ingested again.
        (root / "bad.mp4").write_bytes((root / "good.mp4").read_bytes())
        asked_before = len(server.chat_requests)
        out["resumed"] = evaluate("--max-failed", "0.5")
        out["asked_on_resume"] = [
            next(m["content"] for m in body["messages"] if m["role"] == "user")
            for body in server.chat_requests[asked_before:]
        ]
        out["fixed"] = _read(run_dir)
        out["compare"] = invoke("eval", "compare", "as-broken", "broken")
    finally:
        server.stop()
    return out


def test_a_video_that_fails_ingestion_fails_its_questions_and_the_run(runs) -> None:
    first = runs["first"]
    assert first.exit_code == 1, first.output
    assert "Traceback" not in first.output
    # One line: how many failed, of how many, and why, grouped by cause (one cause, three questions).
    line = _norm(first.output)
    assert (
        "3 of 6 questions failed (50 %, more than --max-failed 20 %): 3 × ingest: a video could not be "
        "ingested: probe: not a readable media file" in line
    ), first.output
    summary = runs["broken"]["summary"]
    assert summary["failed"] == ["1_facts/3", "1_facts/4", "1_facts/5"]
    assert summary["outcomes"] == {"scored": 3, "unparsed": 0, "unscored": 0, "failed": 3, "skipped": 0}
    assert list(summary["failure_groups"].values()) == [3]
    assert summary["failures"]["1_facts/3"].startswith("ingest: video bad.mp4 could not be ingested: probe:")
    # Each failure is a line of the run, with its stage and error (asked again when it resumes).
    failed = [p for p in runs["broken"]["predictions"] if p["status"] == "failed"]
    assert {p["question_id"] for p in failed} == set(summary["failed"])
    assert all(p["stage"] == "ingest" and "bad.mp4" in p["error"] for p in failed)


def test_strict_and_answered_accuracy_side_by_side_with_wilson_intervals(runs) -> None:
    summary = runs["broken"]["summary"]
    assert summary["scores"]["accuracy"] == pytest.approx(0.5)
    assert summary["answered_scores"]["accuracy"] == pytest.approx(1.0)
    overall = summary["overall"]
    assert (overall["correct"], overall["total"], overall["answered"]) == (3, 6, 3)
    assert (overall["low"], overall["high"]) == pytest.approx((0.1876, 0.8124), abs=1e-4)
    assert (overall["answered_low"], overall["answered_high"]) == pytest.approx((0.4385, 1.0), abs=1e-4)
    sign, count = summary["by_category"]["sign"], summary["by_category"]["count"]
    # 3/3 is not 100.0-100.0; 0/3 (every question failed) is not 0.0-0.0.
    assert (sign["correct"], sign["total"], sign["low"], sign["high"]) == pytest.approx(
        (3, 3, 0.4385, 1.0), abs=1e-4
    )
    assert (count["correct"], count["total"], count["low"]) == (0, 3, 0.0)
    assert count["high"] == pytest.approx(0.5615, abs=1e-4)
    assert count["answered"] == 0 and count["answered_accuracy"] is None
    assert summary["interval_method"] == "Wilson score interval"

    report = runs["broken"]["report"]
    assert "| metric | strict % | 95 % interval | over answered % | 95 % interval |" in report
    assert "| accuracy | 50.0 | 18.8–81.2 | 100.0 | 43.9–100.0 |" in report
    assert "| sign | 3 | 3 | 100.0 | 43.9–100.0 | 3 | 100.0 | 43.9–100.0 |" in report
    assert "Intervals: Wilson score interval (95 %)" in report
    assert "Outcomes: scored 3, unparsed 0" in report and "failed 3, skipped 0" in report
    assert "## Failed (3 of 6 attempted)" in report and "## Wrong answers" not in report
    # The CLI table gives both, with counts.
    table = _norm(runs["first"].output)
    assert "accuracy, strict (failures wrong) │ 50.0 % (3/6) [18.8–81.2]" in table
    assert "accuracy over answered │ 100.0 % (3/3) [43.9–100.0]" in table


def test_every_question_has_one_sample_line_for_a_reviewer(runs) -> None:
    samples = {s["question_id"]: s for s in runs["broken"]["samples"]}
    assert list(samples) == [f"1_facts/{n}" for n in range(6)]  # the annotation file's order
    right = samples["1_facts/0"]
    assert right["question"] == "What is written on the sign?"
    assert right["options"] == ["A. BLUE BOAT", "B. RED CAR"] and right["gold"] == "A"
    assert right["response"] == ANSWER and right["parsed"] == "A" and right["score"] == 1.0
    assert right["status"] == "scored" and right["error"] is None and right["videos"] == ["good.mp4"]
    trace = runs["folder"] / "data" / "eval" / "broken" / right["trace"]
    assert json.loads(trace.read_text())["answer"] == ANSWER
    failed = samples["1_facts/3"]
    assert failed["status"] == "failed" and failed["stage"] == "ingest"
    assert failed["error"].startswith("video bad.mp4 could not be ingested: probe: not a readable media file")
    assert failed["response"] is None and failed["parsed"] is None and failed["score"] == 0.0
    assert failed["gold"] == "A" and failed["options"] == ["A. SEVEN", "B. NINE"]


def test_a_resumed_run_asks_its_failed_questions_again(runs) -> None:
    resumed = runs["resumed"]
    assert resumed.exit_code == 0, resumed.output
    assert "6 (3 now, 3 earlier)" in _norm(resumed.output)
    # Only the three failed questions were asked (a search and an answer each).
    asked = [re.search(r"^Question: (.*)$", o, re.M) for o in runs["asked_on_resume"]]
    questions = sorted({m.group(1) for m in asked if m})
    assert questions == sorted(q for v, q, _, _ in QUESTIONS if v == "bad.mp4")
    summary = runs["fixed"]["summary"]
    assert summary["failed"] == [] and summary["outcomes"]["scored"] == 6
    assert summary["scores"]["accuracy"] == summary["answered_scores"]["accuracy"] == 1.0
    assert {s["status"] for s in runs["fixed"]["samples"]} == {"scored"}


def test_compare_scores_only_questions_both_runs_answered_and_says_what_it_left_out(runs) -> None:
    compared = runs["compare"]
    assert compared.exit_code == 0, compared.output
    output = _norm(compared.output)
    # Not "+50 points over 6 questions": the three questions A never answered are left out, loudly.
    assert "left out 3 questions not answered by both runs: failed in A 3, failed in B 0" in output
    assert "A's failures by stage (ingest 3)" in output
    assert "Questions both runs answered: 3" in output
    # 3 vs 3 right: no difference, and an interval that does not collapse on three questions.
    assert "| **all** | 3 | 100.0 | 100.0 | +0.0 | -56.1 to +56.1 |" in output


def test_the_allowed_share_of_failures_is_a_strict_bound(runs) -> None:
    summary = RunSummary.model_validate(runs["broken"]["summary"])
    assert too_many_failed(summary, 0.5) is None  # 3 of 6 is not more than half
    message = too_many_failed(summary, 0.49)
    assert message is not None and message.startswith(
        "3 of 6 questions failed (50 %, more than --max-failed 49 %)"
    )

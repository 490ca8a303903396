"""Sim-to-real on an ingested synthetic video: import its script, compare the tools, write the report."""

from __future__ import annotations

from pathlib import Path

import pytest
from media import text_video
from test_agent_runtime import make_settings

from vidscope.agents.simulator.importer import import_script
from vidscope.agents.simulator.policies import OraclePolicy
from vidscope.agents.simulator.script import Evidence, Question
from vidscope.flows.training.sim_to_real import (
    AskedQuestion,
    Decision,
    compare,
    compare_master,
    covered_iou,
    decision_overlap,
    interval_iou,
    write_master_report,
    write_report,
)
from vidscope.models.open_store import open_store


def test_interval_iou() -> None:
    assert interval_iou([(0, 10)], [(5, 15)]) == 5 / 15
    assert interval_iou([(0, 5), (5, 10)], [(0, 10)]) == 1.0
    assert interval_iou([], []) == 1.0 and interval_iou([(0, 1)], []) == 0.0


def test_decision_overlap_counts_the_same_query_of_the_same_clips_once() -> None:
    look = Decision(tool="visual_query", video_id="v", t0=10.0, t1=15.0)
    same_clips = Decision(tool="visual_query", video_id="v", t0=11.0, t1=14.0)  # clip 2, as 10-15 s
    listen = Decision(tool="audio_query", video_id="v", t0=10.0, t1=15.0)
    assert decision_overlap([look], [same_clips], 5.0) == 1.0
    assert decision_overlap([look], [listen], 5.0) == 0.0  # another sub-agent: another decision
    assert decision_overlap([look, listen], [look], 5.0) == 0.5
    assert decision_overlap([], [], 5.0) == 1.0
    assert covered_iou([look], [same_clips]) == 3 / 5
    other_video = Decision(tool="visual_query", video_id="w", t0=10.0, t1=15.0)
    assert covered_iou([look], [other_video]) == 0.0


@pytest.mark.slow  # ingestion with OCR: about 2 minutes on a shared 2-core machine
def test_sim_to_real_report_on_an_ingested_video(tmp_path: Path) -> None:
    from vidscope.flows.ingest import run_ingest

    texts = [(1.0, 4.0, "WELCOME HOME"), (11.0, 14.0, "GATE CODE 4721"), (21.0, 24.0, "GOODBYE")]
    video = text_video(tmp_path / "notice.mp4", duration=25.0, texts=texts)
    settings = make_settings(tmp_path / "data", text_reader="rapidocr:embedded")
    (ingested,) = run_ingest([str(video)], settings)
    assert ingested.status == "ok", ingested
    store = open_store(settings)
    script = import_script(store, [ingested.video_id])
    shown = [e for e in script.videos[0].events if e.kind == "text"]
    assert any("4721" in e.label and e.start <= 12.0 <= e.end + 0.5 for e in shown)

    queries = [(ingested.video_id, q) for q in ("gate code", "welcome home", "goodbye")]
    report = compare(settings, store, script, queries)
    assert len(report.comparisons) == 3
    gate = report.comparisons[0]
    assert 2 in gate.real_clips and 2 in gate.sim_clips  # 11-14 s lies in clip 2 (10-15 s)
    assert 0.0 < report.mean_iou <= 1.0 and 0.0 < report.mean_overlap <= 1.0
    path = write_report(report, tmp_path / "report")
    print(path.read_text())  # the measured numbers, shown with -s
    assert "interval IoU" in path.read_text() and (tmp_path / "report" / "sim_to_real.png").stat().st_size > 0

    # The master's own decisions, real vs simulated, with the oracle looking where the gate code is.
    gate_event = next(e for e in shown if "4721" in e.label)
    question = Question(
        question_id="gate",
        kind="counting",
        text="How many times is the gate code shown?",
        video_ids=[ingested.video_id],
        options=["1", "2"],
        answer="1",
        evidence=[Evidence(video_id=ingested.video_id, start=gate_event.start, end=gate_event.end)],
        focus=[gate_event.label],
    )
    asked = [AskedQuestion(text=question.text, video_ids=question.video_ids, options=question.options)]
    master = compare_master(settings, store, script, asked, lambda: OraclePolicy(question))
    (gate_q,) = master.comparisons
    assert gate_q.real_decisions and gate_q.sim_decisions
    assert all(d.video_id == ingested.video_id for d in gate_q.real_decisions + gate_q.sim_decisions)
    assert 0.0 <= gate_q.decision_overlap <= 1.0 and 0.0 <= gate_q.interval_iou <= 1.0
    assert gate_q.sim_choice == "A"  # the script's OCR event answers it in the simulator
    path = write_master_report(master, tmp_path / "report")
    print(path.read_text())
    assert "decision overlap" in path.read_text()
    assert (tmp_path / "report" / "sim_to_real_master.png").stat().st_size > 0

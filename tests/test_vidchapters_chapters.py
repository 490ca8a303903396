"""VidChapters-7M chapter annotations and their overlap metrics (issue 39, optional part).

The loader reads both shapes of the release (chapters with ``time``/``label``, and the
dense-captioning conversion) and refuses other files in one line; the metrics are checked on
segments whose values are worked out by hand; and the stored chapters of a really ingested video
(three scenes, cut where its picture changes) are scored against an annotation file named after it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from media import text_video
from stores import NO_MODELS

from vidscope.core.settings import Settings
from vidscope.evaluation.chaptering import (
    Segment,
    boundary_f1,
    f1_at,
    load,
    mean_tiou,
    score,
    tiou,
)
from vidscope.evaluation.items import AnnotationError
from vidscope.flows.ingest import run_ingest

REPO = Path(__file__).resolve().parents[1]


def write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_both_shapes_load_and_bad_chapters_are_dropped(tmp_path: Path) -> None:
    raw = {
        "abc": {
            "duration": 30.0,
            "chapters": [{"time": 10, "label": " Middle "}, {"time": 0, "label": "Intro"}],
        },
        "late": {"duration": 20.0, "chapters": [{"time": 25, "label": "after the end"}]},
        "broken": {"chapters": [{"time": 0}]},
    }
    loaded = load(write(tmp_path / "chapters.json", raw))
    assert loaded.videos == {"abc": [Segment(0.0, 10.0, "Intro"), Segment(10.0, 30.0, "Middle")]}
    assert loaded.durations == {"abc": 30.0}
    assert set(loaded.skipped) == {"late", "broken"} and "duration" in loaded.skipped["broken"]
    dvc = {
        "xyz": {"duration": 40.0, "timestamps": [[0, 15], [15, 40], [30, 50]], "sentences": ["A", "B", "C"]}
    }
    assert load(write(tmp_path / "dvc.json", dvc)).videos == {
        "xyz": [Segment(0.0, 15.0, "A"), Segment(15.0, 40.0, "B")]  # [30, 50] ends past the video
    }
    for bad in ([1, 2], {"v": {"duration": 5, "chapters": [{"time": 9}]}}):
        with pytest.raises(AnnotationError) as refused:
            load(write(tmp_path / "bad.json", bad))
        assert "bad.json" in str(refused.value) and "\n" not in str(refused.value)


def test_the_metrics_on_segments_worked_out_by_hand() -> None:
    refs = [Segment(0, 10), Segment(10, 30)]
    preds = [Segment(0, 10), Segment(10, 20), Segment(20, 30)]
    assert tiou(refs[1], preds[1]) == 0.5 and tiou(refs[0], preds[2]) == 0.0
    assert f1_at(refs, preds, 0.5) == (1.0, 1.0, 1.0)
    precision, recall, f1 = f1_at(refs, preds, 0.55)
    assert (precision, recall) == pytest.approx((1 / 3, 1 / 2)) and f1 == pytest.approx(0.4)
    assert mean_tiou(refs, preds) == pytest.approx(0.75)  # 1.0 and 0.5; the third is unmatched
    assert boundary_f1(refs, preds, 3.0) == pytest.approx(2 / 3)  # cuts 10, 20 against 10
    scores = score({"v": refs}, {"v": preds, "other": refs})
    assert scores.videos == 1 and scores.f1 == pytest.approx(100 * (1 + 9 * 0.4) / 10)
    assert scores.mean_tiou == pytest.approx(75.0) and scores.boundary_f1[5.0] == pytest.approx(200 / 3)


def test_stored_chapters_of_an_ingested_video_are_scored_against_its_annotation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    from vidchapters import evaluate

    video = text_video(
        tmp_path / "dQw4w9WgXcQ.mp4",
        duration=36.0,
        fps=5,
        cuts=[(12.0, (40, 120, 200)), (24.0, (200, 180, 40))],
    )
    data = tmp_path / "data"
    (report,) = run_ingest([str(video)], Settings(data_dir=data, models=NO_MODELS))
    assert report.status == "ok", report
    chapters = [{"time": t, "label": f"Scene {i}"} for i, t in enumerate((0, 12, 24))]
    annotations = write(
        tmp_path / "chapters.json",
        {
            "dQw4w9WgXcQ": {"duration": 36.0, "chapters": chapters},
            "notHere1234": {"duration": 9, "chapters": []},
        },
    )
    result = evaluate(annotations, data)
    assert result["annotated"] == 1 and result["skipped"] == 1 and result["not_in_store"] == 0
    scores = result["scores"]
    assert scores["videos"] == 1 and scores["f1"] == pytest.approx(100.0)
    assert scores["mean_tiou"] > 95 and scores["boundary_f1"][3.0] == pytest.approx(100.0)
    # Bad input to the script is one line, no traceback.
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "vidchapters.py"), str(tmp_path / "missing.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0 and "missing.json" in done.stderr

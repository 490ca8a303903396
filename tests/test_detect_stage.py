"""The detect stage: tracked detections stored per frame, summarised into captions."""

from __future__ import annotations

from vidscope.core.settings import ModelSettings, Settings
from vidscope.flows.ingest import run_ingest
from vidscope.models.open_store import open_store


def test_detections_are_stored_tracked_and_summarised(tmp_path, shared_videos) -> None:
    # Random weights (a YOLO config, not a checkpoint) with a tiny threshold: wiring, not quality.
    models = ModelSettings(
        object_detector="yolo:yolov8n.yaml",
        speech_recognizer="",
        text_reader="",
        options={"yolo": {"conf": 0.0001, "imgsz": 320, "max_det": 5}},
    )
    settings = Settings(data_dir=tmp_path / "data", models=models)
    (report,) = run_ingest([str(shared_videos / "book.mkv")], settings)
    assert report.status == "ok", report
    statuses = {s.stage: s.status for s in report.stages}
    assert statuses["detect"] == "done"
    store = open_store(settings)
    rows = store.rows(store.detections, video_id=report.video_id).to_pylist()
    frames = store.count(store.frames, report.video_id)
    assert rows, "a near-zero threshold must let random weights produce boxes"
    assert {r["frame_index"] for r in rows} <= set(range(frames))
    assert all(len(r["box"]) == 4 and r["box"][0] <= r["box"][2] for r in rows)
    assert max(len([r for r in rows if r["frame_index"] == f]) for f in range(frames)) <= 5
    assert all(isinstance(r["track_id"], int) or r["track_id"] is None for r in rows)
    captions = store.rows(store.clips, video_id=report.video_id).column("caption").to_pylist()
    assert any("objects detected:" in c for c in captions)

    (again,) = run_ingest([str(shared_videos / "book.mkv")], settings)
    assert {s.stage: s.status for s in again.stages}["detect"] == "cached"
    assert store.count(store.detections, report.video_id) == len(rows)


def test_without_a_detector_the_stage_is_skipped(tmp_path, shared_videos) -> None:
    settings = Settings(
        data_dir=tmp_path / "data", models=ModelSettings(speech_recognizer="", text_reader="")
    )
    (report,) = run_ingest([str(shared_videos / "milk.mkv")], settings)
    assert {s.stage: s.status for s in report.stages}["detect"] == "skipped"

"""Ingestion end to end: the Prefect flows, the ledger, the embedded models, and bad input."""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import pytest
from media import noise_file, silent_video, speech_wav, text_video, truncated_copy

from vidscope.core.settings import IngestSettings, Settings
from vidscope.flows.ingest import run_ingest
from vidscope.models.open_store import open_store
from vidscope.storage import Store


def make_settings(tmp_path: Path, **ingest: object) -> Settings:
    return Settings(data_dir=tmp_path / "data", ingest=IngestSettings(**ingest))


def by_name(reports):  # type: ignore[no-untyped-def]
    return {Path(r.path).name: r for r in reports}


def stage_status(report) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {s.stage: s.status for s in report.stages}


def all_counts(store: Store, video_id: str) -> dict[str, int]:
    return {spec.name: store.count(spec, video_id) for spec in store.specs}


@pytest.fixture(scope="module")
def speech_text_video(tmp_path_factory) -> Path:
    """12 s: drawn text at 0–4 s and 6–10 s, speech from espeak-ng from 0 s."""
    folder = tmp_path_factory.mktemp("speech")
    wav = speech_wav("the quick brown fox jumps over the lazy dog", folder / "speech.wav")
    return text_video(
        folder / "talk.mp4",
        duration=12.0,
        fps=25,
        texts=[(0.0, 4.0, "WELCOME HOME"), (6.0, 10.0, "EXIT LEFT")],
        audio=wav,
    )


def test_sample_videos_give_expected_clips_and_frames_and_rerun_adds_nothing(tmp_path, shared_videos):
    settings = make_settings(tmp_path)
    inputs = [str(shared_videos / "car-detection.mp4"), str(shared_videos / "milk.mkv")]
    reports = by_name(run_ingest(inputs, settings))
    store = open_store(settings)
    for name, report in reports.items():
        assert report.status == "ok", report
        video = store.rows(store.videos, video_id=report.video_id).to_pylist()[0]
        clips = store.rows(store.clips, video_id=report.video_id).to_pylist()
        # 5 s clips; a tail under 0.25 s joins the previous clip instead of standing alone.
        assert len(clips) == math.ceil((video["duration"] - 0.25) / 5.0)
        assert clips[0]["start"] == 0.0 and clips[-1]["end"] == pytest.approx(video["duration"])
        assert all(a["end"] == b["start"] for a, b in zip(clips, clips[1:], strict=False))
        frames = store.count(store.frames, report.video_id)
        assert abs(frames - video["duration"] * 2.0) <= 1.5, (name, frames, video["duration"])
        times = store.rows(store.frames, video_id=report.video_id, columns=["t"]).column("t").to_pylist()
        assert times == sorted(times)
        # Speech recognition runs only where there is an audio track (car-detection has one).
        expected_speech = {"done", "unavailable"} if video["has_audio"] else {"skipped"}
        assert stage_status(report)["speech"] in expected_speech
    counts = {r.video_id: all_counts(store, r.video_id) for r in reports.values()}
    versions = {spec.name: store.table_version(spec) for spec in store.specs}

    again = run_ingest(inputs, settings)
    assert all(set(stage_status(r).values()) == {"cached"} for r in again)
    assert {r.video_id: all_counts(store, r.video_id) for r in again} == counts
    assert {spec.name: store.table_version(spec) for spec in store.specs} == versions


def test_speech_and_onscreen_text_reach_the_clips(tmp_path, speech_text_video):
    settings = make_settings(tmp_path)
    (report,) = run_ingest([str(speech_text_video)], settings)
    assert report.status == "ok", report
    store = open_store(settings)
    items = store.rows(store.ocr, video_id=report.video_id).to_pylist()
    welcome = [i for i in items if "WELCOME" in i["text"].upper()]
    assert len(welcome) == 1, items  # one item while the text stays on screen, not one per frame
    assert welcome[0]["t"] <= 1.0 and 3.0 <= welcome[0]["t_end"] <= 5.0
    assert any("EXIT" in i["text"].upper() and 5.0 <= i["t"] <= 7.0 for i in items)
    clips = store.rows(store.clips, video_id=report.video_id).to_pylist()
    assert "WELCOME" in (clips[0]["ocr_text"] or "").upper()
    assert "EXIT" in (clips[1]["ocr_text"] or "").upper() + (clips[2]["ocr_text"] or "").upper()
    assert all(c["caption_source"] == "signals-summary" for c in clips)
    assert all("no captioning model configured" in c["caption"] for c in clips)
    assert clips[0]["text_embedding"] is not None and clips[0]["embed_model"] == "minilm:embedded"
    if stage_status(report)["speech"] == "done":
        spoken = " ".join(store.rows(store.transcripts, video_id=report.video_id).column("text").to_pylist())
        assert "fox" in spoken.lower() and "dog" in spoken.lower()
        assert "fox" in " ".join((c["transcript_text"] or "") for c in clips).lower()
    else:
        assert stage_status(report)["speech"] == "unavailable"


def test_a_stage_failing_midway_then_succeeding_leaves_one_copy_of_every_row(
    tmp_path, shared_videos, monkeypatch
):
    import vidscope.tasks.frames as frames_stage

    settings = make_settings(tmp_path, stage_retries=0)
    video = str(shared_videos / "car-detection.mp4")
    real_sampler = frames_stage.sample_frames

    def failing_sampler(*args, **kwargs):  # type: ignore[no-untyped-def]
        for i, frame in enumerate(real_sampler(*args, **kwargs)):
            if i == 20:
                raise RuntimeError("decoder crashed")
            yield frame

    monkeypatch.setattr(frames_stage, "WRITE_BATCH", 8)
    monkeypatch.setattr(frames_stage, "sample_frames", failing_sampler)
    (first,) = run_ingest([video], settings)
    assert first.failed
    statuses = stage_status(first)
    assert statuses["frames"] == "failed" and statuses["ocr"] == "blocked"
    assert statuses["segment"] == "done" and statuses["caption"] == "done"  # independent work went on
    assert "decoder crashed" in next(s.error for s in first.stages if s.stage == "frames")
    store = open_store(settings)
    assert 0 < store.count(store.frames, first.video_id) < 61  # partial batches were written

    monkeypatch.setattr(frames_stage, "sample_frames", real_sampler)
    (second,) = run_ingest([video], settings)
    assert second.status == "ok", second
    statuses = stage_status(second)
    assert statuses["frames"] == "done" and statuses["ocr"] == "done"
    assert statuses["segment"] == "cached" and statuses["probe"] == "cached"
    assert statuses["caption"] == "done"  # it reads OCR output, which is new
    indexes = (
        store.rows(store.frames, video_id=second.video_id, columns=["frame_index"])
        .column("frame_index")
        .to_pylist()
    )
    assert indexes == list(range(61))


def test_bad_inputs_each_get_a_clear_result_and_nothing_stored_is_lost(tmp_path, shared_videos):
    settings = make_settings(tmp_path)
    good = str(shared_videos / "milk.mkv")
    (first,) = run_ingest([good], settings)
    store = open_store(settings)
    before = all_counts(store, first.video_id)

    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "empty.mp4").write_bytes(b"")
    (folder / "notes.mp4").write_text("these are my meeting notes, not a video\n" * 50)
    noise_file(folder / "noise.mkv", 20_000)
    source = text_video(tmp_path / "src.mp4", duration=4.0, texts=[(0, 4, "HELLO")])
    truncated_copy(source, folder / "truncated.mp4", fraction=0.5)
    silent_video(folder / "silent.mp4", duration=3.0)
    reports = by_name(run_ingest([str(folder), good], settings))

    assert "empty" in reports["empty.mp4"].error
    for name in ("empty.mp4", "notes.mp4", "noise.mkv", "truncated.mp4"):
        assert reports[name].failed, name
        # The reason says which step refused the file and why; the report's path names the file,
        # so the reason does not repeat it.
        assert reports[name].reasons() and name not in reports[name].reasons(), reports[name]
    assert reports["silent.mp4"].status == "ok"
    assert stage_status(reports["silent.mp4"])["speech"] == "skipped"
    assert reports["milk.mkv"].status == "ok"
    assert all_counts(store, first.video_id) == before


# Slow (~12 s: an 8K frame's decode): the default suite checks rotation against ffmpeg in
# test_decode.py and odd inputs surface by surface in test_hostile_inputs.py.
@pytest.mark.slow
def test_huge_odd_sized_rotated_and_variable_rate_videos(tmp_path):
    if shutil.which("ffmpeg") is None:
        pytest.skip("ffmpeg not installed")
    settings = make_settings(tmp_path)
    folder = tmp_path / "odd"
    folder.mkdir()
    huge = silent_video(folder / "huge.mp4", duration=1.0, size=(7680, 4320), fps=2)
    # Odd frame sizes need 4:4:4 chroma in H.264 (4:2:0 requires even sizes).
    subprocess.run(
        [
            "ffmpeg",
            "-v",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            "testsrc2=size=641x359:rate=25",
            "-t",
            "2",
            "-c:v",
            "libx264",
            "-pix_fmt",
            "yuv444p",
            str(folder / "odd.mp4"),
        ],
        check=True,
    )
    phone = silent_video(tmp_path / "phone-src.mp4", duration=2.0, size=(640, 360), fps=25)
    rotated = folder / "rotated.mp4"
    subprocess.run(
        [
            "ffmpeg",
            "-v",
            "error",
            "-y",
            "-i",
            str(phone),
            "-c",
            "copy",
            "-metadata:s:v",
            "rotate=90",
            str(rotated),
        ],
        check=True,
    )
    vfr = folder / "vfr.mp4"
    subprocess.run(
        [
            "ffmpeg",
            "-v",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            "testsrc2=size=320x240:rate=30,setpts='if(lt(T,1),PTS,PTS*2)'",
            "-t",
            "3",
            "-fps_mode",
            "vfr",
            "-pix_fmt",
            "yuv420p",
            str(vfr),
        ],
        check=True,
    )
    reports = by_name(run_ingest([str(folder)], settings))
    store = open_store(settings)
    for name in ("huge.mp4", "odd.mp4", "rotated.mp4", "vfr.mp4"):
        assert reports[name].status == "ok", reports[name]
    sizes = store.rows(
        store.frames, video_id=reports["huge.mp4"].video_id, columns=["width", "height"]
    ).to_pylist()
    assert sizes and all(max(s["width"], s["height"]) <= 640 for s in sizes)
    video = store.rows(store.videos, video_id=reports["rotated.mp4"].video_id).to_pylist()[0]
    assert (video["width"], video["height"], video["rotation"] % 180) == (360, 640, 90)
    frame = store.rows(store.frames, video_id=video["video_id"], columns=["width", "height"]).to_pylist()[0]
    assert frame["height"] > frame["width"]
    assert store.count(store.frames, reports["vfr.mp4"].video_id) >= 4

    tight = Settings(data_dir=tmp_path / "data2", ingest=IngestSettings(max_pixels=1920 * 1080))
    (refused,) = run_ingest([str(huge)], tight)
    assert refused.failed and "max_pixels" in refused.error


def test_renamed_copy_is_the_same_video_and_paths_with_spaces_work(tmp_path, shared_videos):
    settings = make_settings(tmp_path)
    (original,) = run_ingest([str(shared_videos / "thanks.mkv")], settings)
    folder = tmp_path / "my vïdeos"
    folder.mkdir()
    copy = folder / "dank je wel — ünï.mkv"
    shutil.copy(shared_videos / "thanks.mkv", copy)
    reports = run_ingest([str(copy), str(copy)], settings)
    statuses = sorted(r.status for r in reports)
    assert statuses == ["duplicate", "ok"]
    (renamed,) = [r for r in reports if r.status == "ok"]
    assert renamed.video_id == original.video_id
    assert set(stage_status(renamed).values()) == {"cached"}
    store = open_store(settings)
    assert store.count(store.videos) == 1
    assert store.rows(store.videos).to_pylist()[0]["path"] == str(copy.resolve())


@pytest.mark.slow
def test_three_hour_video(tmp_path):
    if shutil.which("ffmpeg") is None:
        pytest.skip("ffmpeg not installed")
    long_video = tmp_path / "three hours.mp4"
    subprocess.run(
        [
            "ffmpeg",
            "-v",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            "color=c=navy:size=64x64:rate=1",
            "-t",
            "10800",
            "-pix_fmt",
            "yuv420p",
            str(long_video),
        ],
        check=True,
    )
    settings = make_settings(tmp_path)
    (report,) = run_ingest([str(long_video)], settings)
    assert report.status == "ok", report
    store = open_store(settings)
    assert store.count(store.clips, report.video_id) == 2160
    # A 1 fps source gives one frame per second: never the same frame twice.
    assert abs(store.count(store.frames, report.video_id) - 10800) <= 2

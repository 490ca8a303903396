"""The library's ingestion steps are written once (issue 43): ``_ingest_library`` is handed how to
run them (Prefect tasks in the ``ingest_library`` flow, threads in ``ingest_direct``). These tests
hand it a runner that records when each step starts and is read, and check what both paths rely
on: every hash starts before any is read (Prefect hashes side by side), every distinct video starts
before the first report is read (the videos fan out), reports keep the files' order, an unreadable
file and a second copy are reported at once with a progress event, and the store is optimized once,
only when a video was ingested. The real paths run in tests/test_ingest.py (threads) and
tests/test_operations.py (Prefect server)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from vidscope.flows.ingest import LibraryRunner, StepFailed, VideoReport, _ingest_library
from vidscope.tasks.progress import listen


class Recorder:
    """A runner whose steps log ``start`` and ``read`` events; content "bad" cannot be hashed."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []

    def runner(self) -> LibraryRunner:
        return LibraryRunner(
            hash=self.hash, video=self.video, optimize=lambda: self.log.append(("optimize", ""))
        )

    def hash(self, path: Path) -> Callable[[], str]:
        self.log.append(("hash start", path.name))

        def read() -> str:
            self.log.append(("hash read", path.name))
            content = path.read_text()
            if content == "bad":
                raise StepFailed("Permission denied")
            return f"id-{content}"

        return read

    def video(self, path: Path, digest: str) -> Callable[[], VideoReport]:
        self.log.append(("video start", path.name))

        def read() -> VideoReport:
            self.log.append(("video read", path.name))
            return VideoReport(path=str(path), video_id=digest, status="ok")

        return read


def _files(folder: Path, contents: dict[str, str]) -> list[str]:
    folder.mkdir(exist_ok=True)
    for name, content in contents.items():
        (folder / name).write_text(content)
    return [str(folder / name) for name in contents]


def test_the_steps_fan_out_and_the_reports_keep_the_files_order(tmp_path: Path) -> None:
    paths = _files(tmp_path / "in", {"a.mp4": "A", "b.mp4": "B", "copy.mp4": "A", "locked.mp4": "bad"})
    recorder = Recorder()
    events: list[dict[str, Any]] = []
    with listen(events.append):
        reports = _ingest_library([*paths, str(tmp_path / "missing.mp4")], recorder.runner(), optimize=True)

    kinds = [kind for kind, _ in recorder.log]
    assert kinds.index("hash read") > max(i for i, k in enumerate(kinds) if k == "hash start")
    assert kinds.index("video read") > max(i for i, k in enumerate(kinds) if k == "video start")
    assert [name for kind, name in recorder.log if kind == "video start"] == ["a.mp4", "b.mp4"]
    assert kinds[-1] == "optimize" and kinds.count("optimize") == 1

    by_name = {Path(r.path).name: r for r in reports}
    assert by_name["missing.mp4"].status == "failed"  # expand_paths' note comes first
    assert Path(reports[0].path).name == "missing.mp4"
    assert (by_name["copy.mp4"].status, by_name["copy.mp4"].duplicate_of) == ("duplicate", paths[0])
    assert (by_name["locked.mp4"].status, by_name["locked.mp4"].error) == (
        "failed",
        "hash: Permission denied",
    )
    assert [Path(r.path).name for r in reports[-2:]] == ["a.mp4", "b.mp4"]  # the videos, in order
    # The notes, the duplicate and the failed hash are announced as they are found; the videos'
    # own "finished" events come from each video's ingestion (_video_report), not from here.
    finished = [Path(e["report"]["path"]).name for e in events if e["event"] == "finished"]
    assert finished == ["missing.mp4", "copy.mp4", "locked.mp4"]


def test_nothing_ingested_is_not_optimized(tmp_path: Path) -> None:
    paths = _files(tmp_path / "in", {"locked.mp4": "bad"})
    recorder = Recorder()
    (only,) = _ingest_library(paths, recorder.runner(), optimize=True)
    assert only.status == "failed" and ("optimize", "") not in recorder.log
    paths = _files(tmp_path / "in2", {"a.mp4": "A"})
    recorder = Recorder()
    _ingest_library(paths, recorder.runner(), optimize=False)
    assert ("optimize", "") not in recorder.log

"""Peak memory of ingesting a long 1080p video with speech, with the embedded models.

Builds a 1080p30 H.264 video with an audio track of narration (60 s made with ffmpeg + espeak-ng,
then stream-copied end to end to the requested length, default 60 minutes: no re-encoding), and
ingests it with ``run_ingest`` in this process, sampling the process's resident memory every
0.5 s. Prints the peak RSS (VmHWM), the RSS before ingestion (models loaded), and the wall time,
then, per stage (its start and end times from the stage ledger), the highest RSS sampled while it
ran and how much the RSS rose over it, and which stages were running at the highest sample: the
stage that holds the peak. The issue's goal: a 1-hour 1080p video ingests in under 2 GB RSS.

    .venv/bin/python benchmarks/ingest_memory.py [--minutes 60]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="vidscope-bench-prefect-"))
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")

from vidscope.core.settings import Settings, disable_telemetry  # noqa: E402
from vidscope.core.synthetic import speech_wav  # noqa: E402
from vidscope.flows.ingest import run_ingest  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def make_video(minutes: int) -> Path:
    OUT.mkdir(exist_ok=True)
    path = OUT / f"memory-{minutes}min-1080p.mp4"
    if path.exists():
        return path
    wav = speech_wav(
        "This hour-long recording checks how much memory ingestion needs. " * 6, OUT / "memory-narration.wav"
    )
    unit = OUT / "memory-unit-60s.mp4"
    subprocess.run(
        [
            "ffmpeg",
            "-v",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            "testsrc2=size=1920x1080:rate=30",
            "-i",
            str(wav),
            "-af",
            "apad",
            "-t",
            "60",
            "-c:v",
            "libx264",
            "-preset",
            "veryfast",
            "-pix_fmt",
            "yuv420p",
            "-c:a",
            "aac",
            str(unit),
        ],
        check=True,
    )
    listing = OUT / "memory-concat.txt"
    listing.write_text("".join(f"file '{unit.name}'\n" for _ in range(minutes)))
    subprocess.run(
        [
            "ffmpeg",
            "-v",
            "error",
            "-y",
            "-f",
            "concat",
            "-safe",
            "0",
            "-i",
            str(listing),
            "-c",
            "copy",
            str(path),
        ],
        check=True,
    )
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=int, default=60)
    args = parser.parse_args()
    disable_telemetry()
    video = make_video(args.minutes)
    settings = Settings(data_dir=Path(tempfile.mkdtemp(prefix="vidscope-bench-memory-")))
    run_ingest([], settings)  # start Prefect's ephemeral server before measuring
    samples: list[float] = []
    times: list[datetime] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            times.append(datetime.now(UTC))
            samples.append(_status_mb("VmRSS"))
            time.sleep(0.5)

    threading.Thread(target=sample, daemon=True).start()
    start = time.perf_counter()
    (report,) = run_ingest([str(video)], settings)
    wall = time.perf_counter() - start
    done.set()
    print(f"video: {video.name}, {args.minutes} min, 1920x1080 30 fps, AAC narration")
    print(f"status: {report.status}; stages: " + ", ".join(f"{s.stage}={s.status}" for s in report.stages))
    print(f"wall: {wall:.0f} s = {args.minutes * 60 / wall:.2f} video-s per wall-s")
    print(
        f"RSS: first sample {samples[0]:.0f} MB, median {sorted(samples)[len(samples) // 2]:.0f} MB, "
        f"peak (VmHWM) {_status_mb('VmHWM'):.0f} MB (goal < 2048 MB)"
    )
    by_stage(settings, report.video_id or "", times, samples)


def by_stage(settings: Settings, video_id: str, times: list[datetime], samples: list[float]) -> None:
    """The highest RSS sampled while each stage ran (ledger times), its rise over the stage, and
    the stages running at the highest sample of all."""
    from vidscope.models.open_store import open_store

    store = open_store(settings)
    rows = [r for r in store.rows(store.ledger).to_pylist() if r["video_id"] == video_id]
    spans = {r["stage"]: (r["started_at"], r["finished_at"] or times[-1]) for r in rows}
    print("\nper stage (samples while it ran): highest RSS, RSS at its end minus at its start")
    for stage, (start, end) in sorted(spans.items(), key=lambda item: item[1][0]):
        during = [mb for t, mb in zip(times, samples, strict=True) if start <= t <= end]
        if during:
            print(f"  {stage:12s} {(end - start).total_seconds():7.1f} s   highest {max(during):6.0f} MB"
                  f"   rise {during[-1] - during[0]:+6.0f} MB")  # fmt: skip
    top = max(range(len(samples)), key=samples.__getitem__)
    running = [stage for stage, (start, end) in spans.items() if start <= times[top] <= end]
    print(f"highest sample {samples[top]:.0f} MB at +{(times[top] - times[0]).total_seconds():.0f} s, "
          f"while running: {', '.join(running) or 'none (between stages)'}")  # fmt: skip


if __name__ == "__main__":
    main()

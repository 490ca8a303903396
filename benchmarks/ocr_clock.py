"""OCR on burned-in clocks, and OCR against speech on a slide lecture (issue 44), in one run.

1. *CCTV*: a generated ``--minutes`` (default 10) 320x180 5 fps video of real road footage
   (car-detection.mp4, looped) with a running clock ``YYYY-MM-DD HH:MM:SS`` top left, a frame
   counter top right (ffmpeg drawtext, :mod:`vidscope.core.synthetic_clock`) and one 20-s caption
   every ``--caption-every`` seconds. The frames stage runs once, then the ``ocr`` stage twice in
   fresh ledgers: *off* (``ingest.ocr_clock_seconds = 0``: a region that changes at every look is
   ordinary text, the behaviour before issue 44) and *on* (the default, read every 10 s). Printed
   per run: full reads, gate (detector) runs, crop reads of tickers, the stage's wall and CPU
   seconds, captions found, clock readings stored and how far their wall time is from the truth;
   then the ratio and the per-hour extrapolation: linear, and from a 2-minute video of the same
   kind as a start cost plus a cost per minute (the rule pays full reads until it knows the
   counter, then one gate run per probe and one crop read per ticker per 10 s).
2. *Lecture*: the slide lecture of ``benchmarks/ocr_cost.py`` (``--lecture-minutes``, default 12:
   30-s slides of a title and three bullet lines with a moving inset of footage, 640x360; stored
   frames are 640 px on the long side, so a 540p source costs OCR the same) with a spoken narration
   (espeak-ng) muxed in. The ``speech`` stage (faster-whisper base) and the ``ocr`` stage run on
   it; printed: each one's wall and CPU seconds and OCR / speech.

CPU seconds include onnxruntime's and CTranslate2's threads; on the shared 2-core machine compare
CPU, wall moves with the other jobs.

    .venv/bin/python benchmarks/ocr_clock.py [--minutes 10] [--lecture-minutes 12]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="vidscope-bench-prefect-"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from ocr_cost import lecture_video  # noqa: E402

from vidscope.core.settings import IngestSettings, Settings, disable_telemetry  # noqa: E402
from vidscope.core.synthetic import speech_wav  # noqa: E402
from vidscope.core.synthetic_clock import CLOCK_START, clock_video  # noqa: E402
from vidscope.models import registry  # noqa: E402
from vidscope.models.open_store import open_store  # noqa: E402
from vidscope.tasks.frames import FRAMES  # noqa: E402
from vidscope.tasks.ocr import OCR  # noqa: E402
from vidscope.tasks.probe import PROBE, content_hash, register_video  # noqa: E402
from vidscope.tasks.speech import SPEECH  # noqa: E402
from vidscope.tasks.stage import StageContext, execute  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
FOOTAGE = Path("/work/shared/videos/car-detection.mp4")
WORDS = ["NORTH GATE OPEN", "TRUCK AT DOCK FOUR", "VISITOR SIGNED IN", "ALARM RESET", "LIGHTS ON"]
LECTURE_TALK = (
    "Welcome to this lecture. On each slide we read the title first and then the three points "
    "below it, and I explain how each point follows from the one before. "
)


def cctv_video(minutes: float, every: float) -> tuple[Path, list[tuple[float, float, str]]]:
    """The CCTV-style video and its captions (t0, t1, text)."""
    seconds = minutes * 60
    starts = np.arange(every / 2, seconds - 20.0, every)
    captions = [(float(t), float(t) + 20.0, WORDS[i % len(WORDS)]) for i, t in enumerate(starts)]
    path = OUT / f"ocr-clock-cctv-{minutes:g}m-{every:g}s.mp4"
    if not path.exists():
        clock_video(path, duration=seconds, footage=FOOTAGE, captions=captions)
    return path, captions


def narrated_lecture(minutes: float) -> Path:
    """The ocr_cost lecture with a spoken narration as its audio track."""
    path = OUT / f"ocr-clock-lecture-{minutes:g}m.mp4"
    if path.exists():
        return path
    silent = lecture_video(minutes)
    words = int(minutes * 150)
    wav = speech_wav(LECTURE_TALK * (words // len(LECTURE_TALK.split()) + 1), OUT / "ocr-clock-talk.wav")
    subprocess.run(
        ["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-i", str(silent), "-i", str(wav),
         "-map", "0:v", "-map", "1:a", "-c:v", "copy", "-c:a", "aac", "-t", f"{minutes * 60:g}", str(path)],
        check=True,
    )  # fmt: skip
    return path


def prepared(video: Path, work: Path, name: str, ingest: IngestSettings) -> StageContext:
    settings = Settings(data_dir=work / name, ingest=ingest)
    store = open_store(settings)
    record = register_video(store, settings, video, content_hash(video))
    ctx = StageContext(settings=settings, store=store, video=record, path=video)
    for stage in (PROBE, FRAMES):
        assert execute(stage, ctx).status == "done"
    return ctx


def timed_stage(ctx: StageContext, stage: Any) -> tuple[dict[str, Any], float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = execute(stage, ctx)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert result.status == "done", result
    return dict(result.details or {}), wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="CCTV video length")
    parser.add_argument("--caption-every", type=float, default=150.0, help="seconds between captions")
    parser.add_argument("--lecture-minutes", type=float, default=12.0, help="0 skips the lecture")
    args = parser.parse_args()
    disable_telemetry()
    OUT.mkdir(exist_ok=True)
    print(f"{datetime.now():%Y-%m-%d %H:%M} UTC, load average {os.getloadavg()[0]:.1f}")
    work = Path(tempfile.mkdtemp(prefix="vidscope-bench-ocr-clock-"))
    try:
        reader = registry.text_reader(Settings(data_dir=work / "warm"))
        assert reader is not None
        reader.read(np.zeros((64, 64, 3), dtype=np.uint8))  # load the models before timing
        video, captions = cctv_video(args.minutes, args.caption_every)
        print(f"CCTV: {video.name}, {len(captions)} captions")
        print(f"{'run':<5}{'reads':>7}{'gate runs':>10}{'crop reads':>11}{'wall s':>9}{'CPU s':>8}"
              f"{'captions':>10}{'clock rows':>11}{'max clock error s':>18}")  # fmt: skip
        measured = {}
        for run, seconds in (("off", 0.0), ("on", 10.0)):
            ctx = prepared(video, work, f"cctv-{run}", IngestSettings(ocr_clock_seconds=seconds))
            details, wall, cpu = timed_stage(ctx, OCR)
            store, vid = ctx.store, ctx.video.video_id
            texts = store.rows(store.ocr, video_id=vid, columns=["t", "text"]).to_pylist()
            found = sum(
                any(r["text"] == c and t0 - 1 <= r["t"] <= t1 for r in texts) for t0, t1, c in captions
            )
            clocks = store.rows(store.clock_readings, video_id=vid).to_pylist()
            error = max(
                (abs((r["wall"] - CLOCK_START).total_seconds() - r["t"]) for r in clocks),
                default=float("nan"),
            )
            measured[run] = (wall, cpu)
            counts = f"{details['frames_read']:>7}{details['gate_runs']:>10}{details['ticker_reads']:>11}"
            found_clocks = f"{found:>6}/{len(captions):<3}{len(clocks):>11}{error:>18.1f}"
            print(f"{run:<5}{counts}{wall:>9.1f}{cpu:>8.1f}{found_clocks}")
        (off_wall, off_cpu), (on_wall, on_cpu) = measured["off"], measured["on"]
        hour = 60.0 / args.minutes
        print(
            f"CCTV off/on: CPU {off_cpu / on_cpu:.1f}x, wall {off_wall / on_wall:.1f}x; per hour of video, "
            f"linear (x{hour:g}): off {off_cpu * hour / 60:.1f} CPU-min, on {on_cpu * hour / 60:.2f} CPU-min"
        )
        # The rule's cost is a start (full reads until the counter is known) plus a cost per minute:
        # a second, shorter video of the same kind separates the two.
        short_minutes = min(2.0, args.minutes / 2)
        short, _ = cctv_video(short_minutes, args.caption_every)
        ctx = prepared(short, work, "cctv-short", IngestSettings())
        _, _, short_cpu = timed_stage(ctx, OCR)
        per_minute = (on_cpu - short_cpu) / (args.minutes - short_minutes)
        print(
            f"CCTV on, {short_minutes:g} min: {short_cpu:.1f} CPU s; steady {per_minute:.2f} CPU s per video "
            f"minute; 1 hour = {short_cpu:.1f} + {60 - short_minutes:g} x {per_minute:.2f} = "
            f"{(short_cpu + (60 - short_minutes) * per_minute) / 60:.2f} CPU-min"
        )
        if args.lecture_minutes > 0:
            lecture = narrated_lecture(args.lecture_minutes)
            ctx = prepared(lecture, work, "lecture", IngestSettings())
            recognizer = registry.speech_recognizer(ctx.settings)
            if recognizer is not None and hasattr(recognizer, "load"):
                recognizer.load()  # load Whisper before timing, as the reader was
            speech, speech_wall, speech_cpu = timed_stage(ctx, SPEECH)
            ocr, ocr_wall, ocr_cpu = timed_stage(ctx, OCR)
            print(
                f"Lecture {args.lecture_minutes:g} min: speech wall {speech_wall:.1f} s CPU "
                f"{speech_cpu:.1f} s; OCR wall {ocr_wall:.1f} s CPU {ocr_cpu:.1f} s (reads "
                f"{ocr['frames_read']}, gate runs {ocr['gate_runs']}); OCR/speech CPU "
                f"{ocr_cpu / speech_cpu:.2f}, wall {ocr_wall / speech_wall:.2f}"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

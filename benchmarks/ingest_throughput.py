"""Ingestion throughput per stage with the embedded models, and Prefect's share of the wall time.

Makes a narrated video with changing on-screen text (default 5 minutes, 640x360), then ingests it
twice into fresh stores, in one run of this script:

1. *direct*: every stage called in order with no Prefect at all (the floor);
2. *flow*: the real ``ingest_library`` → ``ingest_video`` Prefect flows, stages as tasks, speech
   beside frames/OCR.

Printed: video-seconds per wall-second for each stage, the flow's wall time, its critical path (the
sum of the stage times along the longest dependency chain, as measured inside the tasks), and the
Prefect overhead share = (flow wall − critical path − hashing) / flow wall. Goal: under 10 %.
Prefect's one-time ephemeral-server start and the index rebuild after ingestion are timed and
printed separately: neither is per-video orchestration.

    .venv/bin/python benchmarks/ingest_throughput.py [--minutes 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="vidscope-bench-prefect-"))
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")

from vidscope.core.settings import Settings, disable_telemetry  # noqa: E402
from vidscope.core.synthetic import speech_wav, text_video  # noqa: E402
from vidscope.flows.ingest import STAGES, run_ingest  # noqa: E402
from vidscope.models import registry  # noqa: E402
from vidscope.models.open_store import open_store  # noqa: E402
from vidscope.tasks.probe import content_hash, register_video  # noqa: E402
from vidscope.tasks.stage import StageContext, execute  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
NARRATION = (
    "This is a long recording made to measure how fast vidscope ingests video. "
    "The speaker describes a workshop: first the wood is measured and cut, then the pieces are "
    "sanded, glued and clamped, and finally the table is oiled and left to dry overnight. "
)


def make_video(minutes: float) -> Path:
    OUT.mkdir(exist_ok=True)
    path = OUT / f"throughput-{minutes:g}min.mp4"
    if path.exists():
        return path
    duration = minutes * 60
    wav = OUT / "narration.wav"
    words_needed = int(minutes * 150)
    text = NARRATION * (words_needed // len(NARRATION.split()) + 1)
    speech_wav(text, wav, rate_wpm=150)
    texts = [(t, t + 10.0, f"PART {i + 1}") for i, t in enumerate(range(0, int(duration), 10))]
    text_video(path, duration=duration, fps=25, texts=texts, audio=wav)
    return path


def warm_up(settings: Settings) -> None:
    """Load every embedded model once so neither run pays for loading."""
    import numpy as np

    registry.text_embedder(settings).embed(["warm up"])
    registry.text_reader(settings).read(np.zeros((64, 64, 3), dtype=np.uint8))
    recognizer = registry.speech_recognizer(settings)
    if hasattr(recognizer, "load"):
        recognizer.load()


def run_direct(video: Path, settings: Settings) -> tuple[float, dict[str, float]]:
    store = open_store(settings)
    start = time.perf_counter()
    video_id = content_hash(video)
    hash_seconds = time.perf_counter() - start
    record = register_video(store, settings, video, video_id)
    ctx = StageContext(settings=settings, store=store, video=record, path=video)
    seconds = {"hash": hash_seconds}
    for stage in STAGES:
        result = execute(stage, ctx)
        seconds[stage.name] = result.seconds
    return time.perf_counter() - start, seconds


def critical_path(seconds: dict[str, float]) -> float:
    visual = seconds["frames"] + max(seconds["ocr"], seconds.get("detect", 0.0))
    parallel = max(seconds["segment"], visual, seconds["speech"])
    return seconds["probe"] + parallel + seconds["caption"] + seconds["embed"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    args = parser.parse_args()
    disable_telemetry()
    video = make_video(args.minutes)
    duration = args.minutes * 60
    work = Path(tempfile.mkdtemp(prefix="vidscope-bench-"))
    try:
        direct_settings = Settings(data_dir=work / "direct")
        flow_settings = Settings(data_dir=work / "flow")
        warm_up(direct_settings)
        warm_up(flow_settings)

        direct_wall, direct = run_direct(video, direct_settings)

        # The first flow of a process starts Prefect's ephemeral API server (7-15 s); a deployment
        # talks to a running server instead, so pay that once before timing.
        start = time.perf_counter()
        run_ingest([], Settings(data_dir=work / "warm-up"))
        prefect_start = time.perf_counter() - start

        start = time.perf_counter()
        (report,) = run_ingest([str(video)], flow_settings, optimize=False)
        flow_wall = time.perf_counter() - start
        start = time.perf_counter()
        open_store(flow_settings).optimize()
        optimize_seconds = time.perf_counter() - start
        assert report.status in ("ok", "warning"), report
        flow = {s.stage: s.seconds for s in report.stages}
        hash_seconds = direct["hash"]  # the same file: hashing costs the same in both runs
        path = critical_path(flow)
        overhead = flow_wall - path - hash_seconds
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"video: {video.name}, {duration:.0f} s, 640x360 25 fps, narrated, text changes every 10 s")
    print(f"{'stage':<10}{'direct s':>10}{'flow s':>10}{'video-s per wall-s (flow)':>28}")
    for name in ["hash", *[s.name for s in STAGES]]:
        d = direct.get(name, 0.0)
        f = flow.get(name, hash_seconds if name == "hash" else 0.0)
        rate = duration / f if f > 0 else float("inf")
        print(f"{name:<10}{d:>10.2f}{f:>10.2f}{rate:>28.1f}")
    print(
        f"direct (no Prefect, sequential) wall: {direct_wall:.2f} s "
        f"= {duration / direct_wall:.2f} video-s per wall-s"
    )
    print(
        f"flow (Prefect, speech beside frames+ocr) wall: {flow_wall:.2f} s "
        f"= {duration / flow_wall:.2f} video-s per wall-s"
    )
    print(f"flow critical path (stage time inside tasks): {path:.2f} s, hashing {hash_seconds:.2f} s")
    print(
        f"Prefect overhead: {overhead:.2f} s = {100 * overhead / flow_wall:.1f}% of the flow's wall time "
        f"(goal < 10%)"
    )
    print(f"ratio direct/flow wall: {direct_wall / flow_wall:.2f}x")
    print(
        f"not counted above: Prefect ephemeral server start {prefect_start:.1f} s (once per process "
        f"without a server), index rebuild after ingestion {optimize_seconds:.1f} s"
    )
    print(f"peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()

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

    .venv/bin/python benchmarks/ingest_throughput.py [--minutes 5] [--flat]

The video's background is moving real footage (the shared ``car-detection.mp4``, looped) with the
text drawn over it, as in a recorded talk or tutorial; ``--flat`` draws the text on a flat
background instead (the video of the runs before 2026-11-22 19:00, where OCR cost almost nothing
because consecutive frames looked the same).

``--baseline COMMIT`` compares with another commit instead: the same video is ingested by the
real flows in fresh child processes, alternately with this checkout's code and with COMMIT's
(checked out into a temporary ``git worktree`` and put first on ``PYTHONPATH``), ``--rounds``
times each; models are loaded and Prefect's server started before timing in every child. Printed:
each round's wall and CPU seconds and stage times, the medians, and the ratio of video-seconds per
wall-second (and per CPU-second) of this checkout over COMMIT's:

    .venv/bin/python benchmarks/ingest_throughput.py --baseline 94b6946 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="vidscope-bench-prefect-"))
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")

from vidscope.core.settings import Settings, disable_telemetry  # noqa: E402
from vidscope.core.synthetic import speech_wav, text_video  # noqa: E402
from vidscope.flows.ingest import run_ingest  # noqa: E402
from vidscope.models import registry  # noqa: E402
from vidscope.models.open_store import open_store  # noqa: E402
from vidscope.tasks.probe import content_hash, register_video  # noqa: E402
from vidscope.tasks.stage import StageContext, execute  # noqa: E402
from vidscope.tasks.stages import stages  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
ROOT = Path(__file__).resolve().parent.parent
FOOTAGE = Path("/work/shared/videos/car-detection.mp4")
NARRATION = (
    "This is a long recording made to measure how fast vidscope ingests video. "
    "The speaker describes a workshop: first the wood is measured and cut, then the pieces are "
    "sanded, glued and clamped, and finally the table is oiled and left to dry overnight. "
)


def make_video(minutes: float, footage: Path | None = FOOTAGE) -> Path:
    OUT.mkdir(exist_ok=True)
    path = OUT / (
        f"throughput-{minutes:g}min.mp4" if footage is None else f"throughput-footage-{minutes:g}min.mp4"
    )
    if path.exists():
        return path
    duration = minutes * 60
    wav = OUT / "narration.wav"
    words_needed = int(minutes * 150)
    text = NARRATION * (words_needed // len(NARRATION.split()) + 1)
    speech_wav(text, wav, rate_wpm=150)
    texts = [(t, t + 10.0, f"PART {i + 1}") for i, t in enumerate(range(0, int(duration), 10))]
    text_video(path, duration=duration, fps=25, texts=texts, audio=wav, footage=footage)
    return path


#: Run in a child process against whichever vidscope comes first on its path: only APIs that
#: both this checkout and the baseline commit have.
CHILD = """
import json, sys, time
from pathlib import Path
import numpy as np
import vidscope
from vidscope.core.settings import Settings, disable_telemetry
from vidscope.flows.ingest import run_ingest
from vidscope.models import registry
disable_telemetry()
video, work = Path(sys.argv[1]), Path(sys.argv[2])
run_ingest([], Settings(data_dir=work / "warm-up"))  # Prefect's ephemeral server, before timing
settings = Settings(data_dir=work / "flow")
# More texts than a query's: the embedded MiniLM runs batches on torch and loads it on the first one.
registry.text_embedder(settings).embed([f"warm up {i}" for i in range(16)])
registry.text_reader(settings).read(np.zeros((64, 64, 3), dtype=np.uint8))
recognizer = registry.speech_recognizer(settings)
if hasattr(recognizer, "load"):
    recognizer.load()
wall, cpu = time.perf_counter(), time.process_time()
(report,) = run_ingest([str(video)], settings, optimize=False)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
stages = {s.stage: s.seconds for s in report.stages}
ocr = next((getattr(s, "details", None) or {} for s in report.stages if s.stage == "ocr"), {})
print("RESULT " + json.dumps({"code": vidscope.__file__, "status": report.status, "wall": wall,
                              "cpu": cpu, "stages": stages, "ocr": ocr}))
"""


def run_child(
    code_root: Path,
    video: Path,
    child: str = CHILD,
    *,
    args: Sequence[str] = (),
    extra_env: Callable[[Path], dict[str, str]] = lambda work: {},
) -> dict:
    """Ingest ``video`` with the vidscope under ``code_root`` in a fresh process running ``child``
    (argv: the video, a work folder, then ``args``; ``extra_env`` adds variables for that folder);
    the measurements it printed as its last ``RESULT {json}`` line. Other benchmarks reuse it."""
    work = Path(tempfile.mkdtemp(prefix="vidscope-bench-child-"))
    env = dict(os.environ, PYTHONPATH=str(code_root), PREFECT_HOME=str(work / "prefect"), **extra_env(work))
    try:
        done = subprocess.run(
            [sys.executable, "-c", child, str(video), str(work), *args],
            env=env,
            cwd=work,
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"child on {code_root} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result = json.loads(lines[-1][len("RESULT ") :])
    if not Path(result["code"]).resolve().is_relative_to(code_root.resolve()):
        raise RuntimeError(f"child imported vidscope from {result['code']}, not from {code_root}")
    return result


def compare(commit: str, video: Path, duration: float, rounds: int) -> None:
    """Alternate child ingestions of ``video`` with this checkout and with ``commit``; print ratios."""
    baseline = Path(tempfile.mkdtemp(prefix="vidscope-bench-baseline-")) / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(baseline), commit], check=True)
    runs: dict[str, list[dict]] = {"baseline": [], "current": []}
    try:
        for index in range(rounds):
            order = [("baseline", baseline), ("current", ROOT)]
            for name, root in order if index % 2 == 0 else order[::-1]:
                result = run_child(root, video)
                runs[name].append(result)
                stages = " ".join(f"{k}={v:.1f}" for k, v in result["stages"].items() if v >= 0.05)
                print(
                    f"round {index + 1} {name:<8} wall {result['wall']:7.1f} s  CPU {result['cpu']:7.1f} s  "
                    f"{result['status']}  {stages}  ocr {result['ocr']}",
                    flush=True,
                )
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(baseline)], check=False)
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    med = {
        name: {k: statistics.median(r[k] for r in rs) for k in ("wall", "cpu")} for name, rs in runs.items()
    }
    for name in ("baseline", "current"):
        label = commit if name == "baseline" else f"this checkout ({head.stdout.strip()} + working tree)"
        print(
            f"{name:<8} {label}: median wall {med[name]['wall']:.1f} s = "
            f"{duration / med[name]['wall']:.2f} video-s per wall-s; median CPU {med[name]['cpu']:.1f} s"
        )
    ratios = [b["wall"] / c["wall"] for b, c in zip(runs["baseline"], runs["current"], strict=True)]
    print(
        f"throughput current / baseline: {med['baseline']['wall'] / med['current']['wall']:.2f}x "
        f"(median walls; per round {', '.join(f'{r:.2f}x' for r in ratios)}; goal >= 1.5x), "
        f"CPU {med['baseline']['cpu'] / med['current']['cpu']:.2f}x less"
    )


def warm_up(settings: Settings) -> None:
    """Load every embedded model once so neither run pays for loading."""
    import numpy as np

    # More texts than a query's: the embedded MiniLM runs batches on torch, loaded on the first one.
    registry.text_embedder(settings).embed([f"warm up {i}" for i in range(16)])
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
    for stage in stages():
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
    parser.add_argument("--flat", action="store_true", help="text on a flat background, no footage")
    parser.add_argument("--baseline", metavar="COMMIT", help="compare with this commit (child processes)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each side with --baseline")
    args = parser.parse_args()
    disable_telemetry()
    video = make_video(args.minutes, None if args.flat or not FOOTAGE.exists() else FOOTAGE)
    duration = args.minutes * 60
    if args.baseline:
        print(f"video: {video.name}, {duration:.0f} s, 640x360 25 fps, narrated, text changes every 10 s")
        compare(args.baseline, video, duration, args.rounds)
        return
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

    background = "flat background" if args.flat else "over real footage"
    print(
        f"video: {video.name}, {duration:.0f} s, 640x360 25 fps, narrated, "
        f"text {background} changes every 10 s"
    )
    print(f"{'stage':<10}{'direct s':>10}{'flow s':>10}{'video-s per wall-s (flow)':>28}")
    for name in ["hash", *[s.name for s in stages()]]:
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

"""Ingestion with the image–text model on, before and after, in one run (issue 44).

The video is the narrated 12-minute slide lecture of ``benchmarks/ocr_clock.py`` (24 slides of 30 s
with a moving speaker inset, 640x360, espeak-ng narration). The image–text model is the default
``onnx-clip:clip-vit-b32-int8`` built with random weights by ``benchmarks/random_clip.py`` (same
architecture, size and int8 quantisation, so the same compute), installed into a temporary model
cache (``VIDSCOPE_MODEL_CACHE``; the user's cache's other models, Whisper base, are linked in).

Each side ingests the video through the real flow (``run_ingest``, default profile, fetching off)
in a fresh child process, with the code of this checkout or of ``--baseline COMMIT`` (``git
archive`` into a temporary folder, first on ``PYTHONPATH``); models are loaded and Prefect's server
started before timing. Printed per side: wall and CPU seconds, x real time, peak RSS, per-stage
seconds, the ``frame_embed`` stage's details (frames embedded / shared); then the ratios.

    nice -n 10 .venv/bin/python benchmarks/ingest_image_text.py --baseline 65f2728 [--minutes 12]

``--hour-1080p`` ingests the 1-hour 1080p30 narrated video of ``benchmarks/ingest_memory.py``
instead (the issue's second ingestion goal: ≥ 10x real time, peak < 1.5 GB).

``--stage`` times only the ``frame_embed`` stage (probe and frames run first, untimed), the part
the image–text model adds to ingestion: its wall and CPU seconds per side. On a machine too busy
for whole ingestions (2026-11-28: load average 20 on 2 cores) CPU seconds are the figure to read.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

import ingest_throughput  # noqa: E402  (its child runner)

#: Run in a child against whichever vidscope comes first on its path (APIs both sides have).
CHILD = """
import json, resource, sys, time
from pathlib import Path
import numpy as np
sys.path.insert(0, sys.argv[3])
import vidscope
from random_clip import install
from vidscope.core.settings import Settings, disable_telemetry, model_cache_dir
from vidscope.flows.ingest import run_ingest
from vidscope.models import registry
disable_telemetry()
video, work = Path(sys.argv[1]), Path(sys.argv[2])
install(model_cache_dir())
run_ingest([], Settings(data_dir=work / "warm-up"))  # Prefect's ephemeral server, before timing
settings = Settings(data_dir=work / "flow")
registry.text_embedder(settings).embed([f"warm up {i}" for i in range(16)])
registry.text_reader(settings).read(np.zeros((64, 64, 3), dtype=np.uint8))
model = registry.image_text(settings)
model.embed_images([np.zeros((360, 640, 3), dtype=np.uint8)])
recognizer = registry.speech_recognizer(settings)
if hasattr(recognizer, "load"):
    recognizer.load()
wall, cpu = time.perf_counter(), time.process_time()
(report,) = run_ingest([str(video)], settings, optimize=False)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
stages = {s.stage: s.seconds for s in report.stages}
details = {s.stage: getattr(s, "details", None) or {} for s in report.stages}
statuses = {s.stage: s.status for s in report.stages}
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print("RESULT " + json.dumps({"code": vidscope.__file__, "status": report.status, "wall": wall, "cpu": cpu,
                              "stages": stages, "statuses": statuses,
                              "frame_embed": details.get("frame_embed", {}),
                              "model": model.name, "peak_mb": peak}))
"""


#: ``--stage``: probe and frames, then the timed frame_embed stage alone.
CHILD_STAGE = """
import json, resource, sys, time
from pathlib import Path
import numpy as np
sys.path.insert(0, sys.argv[3])
import vidscope
from random_clip import install
from vidscope.core.settings import Settings, disable_telemetry, model_cache_dir
from vidscope.models import registry
from vidscope.models.open_store import open_store
from vidscope.tasks.frame_embed import FRAME_EMBED
from vidscope.tasks.frames import FRAMES
from vidscope.tasks.probe import PROBE, content_hash, register_video
from vidscope.tasks.stage import StageContext, execute
disable_telemetry()
video, work = Path(sys.argv[1]), Path(sys.argv[2])
install(model_cache_dir())
settings = Settings(data_dir=work / "stage")
model = registry.image_text(settings)
model.embed_images([np.zeros((360, 640, 3), dtype=np.uint8)])
store = open_store(settings)
record = register_video(store, settings, video, content_hash(video))
ctx = StageContext(settings=settings, store=store, video=record, path=video)
for stage in (PROBE, FRAMES):
    assert execute(stage, ctx).status == "done"
wall, cpu = time.perf_counter(), time.process_time()
result = execute(FRAME_EMBED, ctx)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print("RESULT " + json.dumps({"code": vidscope.__file__, "status": result.status, "wall": wall, "cpu": cpu,
                              "stages": {"frame_embed": result.seconds},
                              "statuses": {"frame_embed": result.status},
                              "frame_embed": result.details, "model": model.name, "peak_mb": peak}))
"""


def model_cache(work: Path) -> Path:
    """A temporary model cache holding links to the user's cached models (Whisper base)."""
    from vidscope.core.settings import model_cache_dir

    cache = work / "model-cache"
    cache.mkdir(parents=True)
    user = model_cache_dir()
    if user.is_dir():
        for entry in user.iterdir():
            if entry.name != "clip-vit-b32-int8":
                (cache / entry.name).symlink_to(entry)
    return cache


def run_child(code_root: Path, video: Path, child: str = CHILD) -> dict:
    """Ingest ``video`` with the vidscope under ``code_root`` in a fresh process (ingest_throughput's
    runner), the random-weight image-text model in a temporary model cache; its measurements."""
    return ingest_throughput.run_child(
        code_root,
        video,
        child,
        args=(str(BENCH),),
        extra_env=lambda work: {
            "PREFECT_LOGGING_LEVEL": "WARNING",
            "VIDSCOPE_MODEL_CACHE": str(model_cache(work)),
            "VIDSCOPE_MODEL_FETCH": "0",
        },
    )


def show(name: str, result: dict, duration: float) -> None:
    stages = " ".join(f"{k}={v:.1f}" for k, v in result["stages"].items() if v >= 0.05)
    print(
        f"{name:<9} wall {result['wall']:7.1f} s = {duration / result['wall']:5.2f}x real time, "
        f"CPU {result['cpu']:7.1f} s, peak RSS {result['peak_mb']:.0f} MB, {result['status']}, "
        f"frame_embed {result['statuses'].get('frame_embed')} {result['frame_embed']}",
        flush=True,
    )
    print(f"          stages (s): {stages}", flush=True)


def main() -> None:
    from ocr_clock import narrated_lecture

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=12.0)
    parser.add_argument("--baseline", metavar="COMMIT", help="also ingest with this commit's code, first")
    parser.add_argument("--stage", action="store_true", help="time only the frame_embed stage")
    parser.add_argument(
        "--hour-1080p",
        action="store_true",
        help="the 1-hour 1080p30 narrated video of ingest_memory.py (--minutes: its length)",
    )
    args = parser.parse_args()
    child = CHILD_STAGE if args.stage else CHILD
    import random_clip

    random_clip.build()  # once, outside the timed children
    if args.hour_1080p:
        from ingest_memory import make_video

        minutes = 60 if args.minutes == 12.0 else round(args.minutes)
        video, duration = make_video(minutes), minutes * 60.0
        print(f"video: {video.name}, {duration:.0f} s, 1920x1080 30 fps (testsrc2), narrated")
    else:
        video = narrated_lecture(args.minutes)
        duration = args.minutes * 60
        print(f"video: {video.name}, {duration:.0f} s, 640x360, 24 slides per 12 min, narrated")
    results = {}
    tree = None
    try:
        if args.baseline:
            tree = Path(tempfile.mkdtemp(prefix="vidscope-bench-baseline-"))
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", args.baseline, "vidscope"],
                capture_output=True,
                check=True,
            )
            subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
            results["baseline"] = run_child(tree, video, child)
            show(f"{args.baseline}", results["baseline"], duration)
        results["current"] = run_child(ROOT, video, child)
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True)
        show(head.stdout.decode().strip(), results["current"], duration)
    finally:
        if tree is not None:
            shutil.rmtree(tree, ignore_errors=True)
    if "baseline" in results:
        before, after = results["baseline"], results["current"]
        fe_before = before["stages"].get("frame_embed", 0.0)
        fe_after = after["stages"].get("frame_embed", 0.0)
        print(
            f"after / before: wall {before['wall'] / after['wall']:.2f}x faster, CPU "
            f"{before['cpu'] / after['cpu']:.2f}x less, "
            f"frame_embed stage {fe_before:.1f} s -> {fe_after:.1f} s"
        )
    if args.hour_1080p and not args.stage:
        print("goal: >= 10x real time (<= 360 s for 1 hour), peak RSS < 1.5 GB")
    elif not args.stage:
        print("goal: >= 15x real time (<= 48 s for 12 min), peak RSS < 1.5 GB")


if __name__ == "__main__":
    main()

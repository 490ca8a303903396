"""The OCR stage's text-region gate: how many frames it reads in full, and what text it still finds.

For each video (the shared real sample videos, a generated slide video over real footage, and a
generated slide video on a flat background) the frames stage runs once, then in one run of this
script:

1. *every frame*: the reader reads every frame the OCR stage samples (``ingest.ocr_fps``), no
   reuse at all: the reference for "distinct on-screen text";
2. *before*: the ``ocr`` stage with the gate off (``ingest.ocr_gate_side = 0``: only frames that
   look the same as the previous one keep its result; the behaviour of ocr stage version 1);
3. *gate*: the ``ocr`` stage with the default gate.

Printed per video and in total: full reads as a share of the frames OCR samples and of the frames
stored, recall of the reference's distinct texts (a text counts as found when an OCR item of the
run has the same text, compared as the stage's tracker does), and the stage's wall and CPU seconds
(CPU includes onnxruntime's threads: on a shared machine compare CPU). A "distinct text" is a
normalised line with at least 3 letters or digits: on real footage the reader also returns
single-glyph noise (``'B'``, ``'口'``) that means nothing and differs from frame to frame.

Recall is printed two ways. *all* counts every distinct text of the reference (the count of the
earlier runs). *>=2 frames* counts only the distinct texts the reference read on at least two
sampled frames: a string read once in N reads of every frame, on a video without on-screen text,
is the recogniser's noise on scene detail (bottle-detection.mp4's 'ole' and '214', each read once
in 40 frames), not text a viewer could see; on-screen text stays up for seconds, i.e. several
sampled frames at ``ingest.ocr_fps`` = 1. Texts read on one frame only are listed beside it.

    .venv/bin/python benchmarks/ocr_gate.py [--slide-seconds 120]
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="vidscope-bench-prefect-"))
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")

from vidscope.core.images import decode_jpeg  # noqa: E402
from vidscope.core.settings import IngestSettings, Settings, disable_telemetry  # noqa: E402
from vidscope.core.synthetic import text_video  # noqa: E402
from vidscope.models import registry  # noqa: E402
from vidscope.models.open_store import open_store  # noqa: E402
from vidscope.tasks.frames import FRAMES  # noqa: E402
from vidscope.tasks.ocr import OCR, SAME_TEXT_RATIO, normalise_text  # noqa: E402
from vidscope.tasks.probe import PROBE, content_hash, register_video  # noqa: E402
from vidscope.tasks.stage import StageContext, execute  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
SHARED = Path("/work/shared/videos")
#: Slide titles, every 8 s a new one, all centred in a white box: the boxes of consecutive titles
#: overlap, so the gate has to see changed pixels inside the same regions, not only new regions.
SLIDES = [
    "WELCOME TO THE WORKSHOP",
    "STEP 1 MEASURE THE WOOD",
    "STEP 2 CUT THE PIECES",
    "STEP 3 SAND THE EDGES",
    "STEP 4 GLUE AND CLAMP",
    "STEP 5 LET IT DRY",
    "DRYING TIME 12 HOURS",
    "OIL AFTER THAT",
    "APPLY OIL TWICE",
    "QUESTIONS AND ANSWERS",
    "THANK YOU FOR WATCHING",
]


def slides(seconds: float) -> list[tuple[float, float, str]]:
    """Titles every 8 s (6 s on screen, 2 s of bare footage between), cycling through SLIDES."""
    out, t, i = [], 0.0, 0
    while t < seconds:
        out.append((t, min(seconds, t + 6.0), SLIDES[i % len(SLIDES)]))
        t, i = t + 8.0, i + 1
    return out


def make_videos(slide_seconds: float) -> list[Path]:
    OUT.mkdir(exist_ok=True)
    footage = OUT / f"ocr-gate-footage-{slide_seconds:g}s.mp4"
    if not footage.exists():
        text_video(
            footage, duration=slide_seconds, texts=slides(slide_seconds), footage=SHARED / "car-detection.mp4"
        )
    flat = OUT / f"ocr-gate-flat-{slide_seconds:g}s.mp4"
    if not flat.exists():
        text_video(flat, duration=slide_seconds, texts=slides(slide_seconds))
    return [SHARED / "car-detection.mp4", SHARED / "bottle-detection.mp4", footage, flat]


def distinct(texts: list[str]) -> list[str]:
    """Normalised texts with at least 3 letters/digits, near-duplicates merged."""
    found: list[str] = []
    for text in texts:
        norm = normalise_text(text)
        if len(re.findall(r"\w", norm)) < 3:
            continue
        if not any(difflib.SequenceMatcher(None, norm, f).ratio() >= SAME_TEXT_RATIO for f in found):
            found.append(norm)
    return found


def seen_on(text: str, per_frame: list[list[str]]) -> int:
    """On how many sampled frames the reference read ``text`` (compared as the tracker does)."""
    return sum(
        any(difflib.SequenceMatcher(None, text, f).ratio() >= SAME_TEXT_RATIO for f in distinct(frame))
        for frame in per_frame
    )


def recall(reference: list[str], found: list[str]) -> tuple[int, list[str]]:
    missed = [
        r
        for r in reference
        if not any(difflib.SequenceMatcher(None, r, f).ratio() >= SAME_TEXT_RATIO for f in found)
    ]
    return len(reference) - len(missed), missed


def timed(fn):  # type: ignore[no-untyped-def]
    wall, cpu = time.perf_counter(), time.process_time()
    value = fn()
    return value, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slide-seconds", type=float, default=120.0)
    args = parser.parse_args()
    disable_telemetry()
    videos = make_videos(args.slide_seconds)
    work = Path(tempfile.mkdtemp(prefix="vidscope-bench-ocr-gate-"))
    rows = []
    try:
        gate = Settings(data_dir=work)
        before = Settings(data_dir=work, ingest=IngestSettings(ocr_gate_side=0))
        reader = registry.text_reader(gate)
        import numpy as np

        reader.read(np.zeros((64, 64, 3), dtype=np.uint8))  # load the models before timing
        store = open_store(gate)
        for video in videos:
            record = register_video(store, gate, video, content_hash(video))
            ctx = StageContext(settings=gate, store=store, video=record, path=video)
            for stage in (PROBE, FRAMES):
                assert execute(stage, ctx).status == "done"
            step = max(1, round(gate.ingest.frame_fps / gate.ingest.ocr_fps))
            stored = store.count(store.frames, record.video_id)
            jpegs = store.rows(
                store.frames, video_id=record.video_id, where=f"frame_index % {step} = 0", columns=["jpeg"]
            ).column("jpeg")

            def read_all(jpegs=jpegs) -> list[list[str]]:  # type: ignore[no-untyped-def]
                return [
                    [
                        line.text
                        for line in reader.read(decode_jpeg(jpeg))
                        if line.score >= gate.ingest.ocr_min_score
                    ]
                    for jpeg in jpegs.to_pylist()
                ]

            per_frame, every_wall, every_cpu = timed(read_all)
            reference = distinct([text for frame in per_frame for text in frame])
            steady = [text for text in reference if seen_on(text, per_frame) >= 2]
            runs = {}
            for name, settings in (("before", before), ("gate", gate)):
                run_ctx = StageContext(settings=settings, store=store, video=record, path=video)
                result, wall, cpu = timed(lambda c=run_ctx: execute(OCR, c))
                assert result.status == "done", result
                texts = (
                    store.rows(store.ocr, video_id=record.video_id, columns=["text"])
                    .column("text")
                    .to_pylist()
                )
                hits, missed = recall(reference, distinct(texts))
                steady_hits, _ = recall(steady, distinct(texts))
                runs[name] = (result.details, wall, cpu, hits, missed, steady_hits)
            rows.append((video.name, stored, len(jpegs), reference, steady, (every_wall, every_cpu), runs))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    head = f"{'video':<34}{'stored':>7}{'ocr-sampled':>12}{'distinct':>9}  run      "
    print(head + "full reads (of sampled / of stored)  recall all / >=2 frames   wall s   CPU s")
    total = {
        "sampled": 0,
        "stored": 0,
        "ref": 0,
        "steady": 0,
        "before": [0, 0, 0.0, 0.0, 0],
        "gate": [0, 0, 0.0, 0.0, 0],
    }
    for name, stored, sampled, reference, steady, (ew, ec), runs in rows:
        total["sampled"] += sampled
        total["stored"] += stored
        total["ref"] += len(reference)
        total["steady"] += len(steady)
        print(
            f"{name:<34}{stored:>7}{sampled:>12}{len(reference):>9}  every    {sampled:>4} (100%)"
            f"{'':>33}{'':>15}{ew:>8.1f}{ec:>8.1f}"
        )
        once = [text for text in reference if text not in steady]
        if once:
            print(f"{'':<62}  read on 1 frame only by 'every': {once}")
        for run in ("before", "gate"):
            details, wall, cpu, hits, missed, steady_hits = runs[run]
            reads = details["frames_read"]
            t = total[run]
            t[0] += reads
            t[1] += hits
            t[2] += wall
            t[3] += cpu
            t[4] += steady_hits
            share = f"{reads:>4} ({100 * reads / sampled:.0f}% / {100 * reads / stored:.0f}%)"
            rec = f"{hits}/{len(reference)} / {steady_hits}/{len(steady)}"
            print(f"{'':<62}{run:<9}{share:<37}{rec:>14}{wall:>9.1f}{cpu:>8.1f}")
            if missed:
                print(f"{'':<62}  missed: {missed}")
        print(f"{'':<62}gate details: {runs['gate'][0]}")
    for run in ("before", "gate"):
        reads, hits, wall, cpu, steady_hits = total[run]
        print(
            f"TOTAL {run}: full reads {reads}/{total['sampled']} OCR-sampled frames = "
            f"{100 * reads / total['sampled']:.1f}% ({100 * reads / total['stored']:.1f}% of stored frames); "
            f"recall (all distinct texts, as before) {hits}/{total['ref']} = "
            f"{100 * hits / max(1, total['ref']):.1f}%; "
            f"recall (texts read on >= 2 frames) {steady_hits}/{total['steady']} = "
            f"{100 * steady_hits / max(1, total['steady']):.1f}%; "
            f"stage wall {wall:.1f} s, CPU {cpu:.1f} s"
        )
    b, g = total["before"], total["gate"]
    print(f"gate vs before: stage wall {b[2] / g[2]:.2f}x faster, CPU {b[3] / g[3]:.2f}x less")


if __name__ == "__main__":
    main()

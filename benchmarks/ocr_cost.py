"""What the OCR stage costs on long videos: does it follow how often the text changes, or duration?

Two generated 12-minute videos (issue 27):

* *sparse*: moving real footage (car-detection.mp4, looped) with a caption now and then (five
  captions of 8 s in 12 minutes): almost every sampled frame differs from the one before, and
  almost none has text;
* *lecture*: slides (a title and three bullet lines on white) changing every 30 s, with the
  speaker's picture (moving footage) in an inset, as lecture recordings show it.

For each, the frames stage runs once, then the ``ocr`` stage twice in fresh ledgers: *before* with
``ingest.ocr_min_text_seconds = 0`` (every sampled frame is looked at: the behaviour of OCR stage
version 3) and *after* with the default (one probe per 4 s, halved where the text changed).
Printed: the sampled frames, the detector runs (the gate) and full reads (the two model costs),
the stage's wall and CPU seconds (CPU includes onnxruntime's threads; on a shared machine compare
CPU), how many of the texts shown on screen each run found (found: an item of the run reads the
same, as the stage compares reads), and the ratios before/after.

    .venv/bin/python benchmarks/ocr_cost.py [--minutes 12]
"""

from __future__ import annotations

import argparse
import difflib
import os
import random
import shutil
import tempfile
import time
from fractions import Fraction
from pathlib import Path

os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="vidscope-bench-prefect-"))

import av  # noqa: E402
import numpy as np  # noqa: E402
from PIL import Image, ImageDraw, ImageFont  # noqa: E402

from vidscope.core.settings import IngestSettings, Settings, disable_telemetry  # noqa: E402
from vidscope.core.synthetic import text_video  # noqa: E402
from vidscope.models import registry  # noqa: E402
from vidscope.models.open_store import open_store  # noqa: E402
from vidscope.tasks.frames import FRAMES  # noqa: E402
from vidscope.tasks.ocr import OCR, SAME_TEXT_RATIO, normalise_text  # noqa: E402
from vidscope.tasks.probe import PROBE, content_hash, register_video  # noqa: E402
from vidscope.tasks.stage import StageContext, execute  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
FOOTAGE = Path("/work/shared/videos/car-detection.mp4")
FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf")
CAPTIONS = ["ROAD WORKS AHEAD", "SPEED LIMIT 50", "EXIT 12 NORTH", "SLOW DOWN NOW", "END OF ROAD WORKS"]
SIZE = (640, 360)


def sparse_video(minutes: float) -> Path:
    """Moving footage with five 8-second captions spread over ``minutes``."""
    path = OUT / f"ocr-cost-sparse-{minutes:g}m.mp4"
    if not path.exists():
        seconds = minutes * 60
        gap = seconds / len(CAPTIONS)
        texts = [(gap * i + gap / 2, gap * i + gap / 2 + 8.0, text) for i, text in enumerate(CAPTIONS)]
        text_video(path, duration=seconds, fps=10, texts=texts, footage=FOOTAGE)
    return path


#: Words the slides are made of: every slide's lines differ from the next slide's by far more than
#: the 20 % a misread character may change (the stage merges reads at >= 0.8 similarity).
WORDS = [
    "ocean",
    "river",
    "granite",
    "maple",
    "copper",
    "violet",
    "tundra",
    "harbor",
    "lantern",
    "meadow",
    "falcon",
    "quartz",
    "canyon",
    "glacier",
    "orchard",
    "pepper",
    "saddle",
    "timber",
    "velvet",
    "walnut",
    "anchor",
    "bamboo",
    "cobalt",
    "dune",
    "ember",
    "fjord",
    "garnet",
    "hazel",
    "iris",
    "jasper",
    "kelp",
    "lotus",
    "marble",
    "nectar",
    "onyx",
    "pearl",
    "quill",
    "raven",
    "sienna",
    "thistle",
    "umber",
    "willow",
    "yarrow",
    "zephyr",
]


def slide_lines(slide: int) -> list[str]:
    """The title and three bullet lines of slide ``slide`` (deterministic, distinct per slide)."""
    rng = random.Random(slide)
    title = f"PART {slide + 1} {rng.choice(WORDS).upper()} AND {rng.choice(WORDS).upper()}"
    return [title] + [" ".join(rng.sample(WORDS, 3)).upper() for _ in range(3)]


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.truetype(str(FONT), size) if FONT.exists() else ImageFont.load_default(size=size)


def lecture_video(minutes: float, slide_seconds: float = 30.0, fps: int = 10) -> Path:
    """Slides changing every ``slide_seconds``, with a moving inset of the speaker (footage)."""
    path = OUT / f"ocr-cost-lecture-v2-{minutes:g}m.mp4"
    if path.exists():
        return path
    OUT.mkdir(exist_ok=True)
    title, body = _font(30), _font(20)
    width, height = SIZE
    inset = (192, 108)
    footage = av.open(str(FOOTAGE))
    frames = footage.decode(video=0)
    with av.open(str(path), mode="w") as out:
        stream = out.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"preset": "ultrafast", "crf": "23"}
        for index in range(round(minutes * 60 * fps)):
            slide = int(index / fps // slide_seconds)
            image = Image.new("RGB", SIZE, (250, 250, 245))
            draw = ImageDraw.Draw(image)
            heading, *bullets = slide_lines(slide)
            draw.text((24, 20), heading, font=title, fill=(20, 20, 120))
            for line, words in enumerate(bullets):
                draw.text((36, 90 + 40 * line), words, font=body, fill=(0, 0, 0))
            try:
                speaker = next(frames)
            except StopIteration:
                footage.close()
                footage = av.open(str(FOOTAGE))
                frames = footage.decode(video=0)
                speaker = next(frames)
            image.paste(speaker.to_image().resize(inset), (width - inset[0] - 8, height - inset[1] - 8))
            frame = av.VideoFrame.from_ndarray(np.asarray(image), format="rgb24")
            frame.pts, frame.time_base = index, Fraction(1, fps)
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    footage.close()
    return path


def similar(a: str, b: str) -> bool:
    """The same text as the stage compares reads (a misread character or two allowed)."""
    return difflib.SequenceMatcher(None, a, b).ratio() >= SAME_TEXT_RATIO


def timed(fn):  # type: ignore[no-untyped-def]
    wall, cpu = time.perf_counter(), time.process_time()
    value = fn()
    return value, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=12.0)
    args = parser.parse_args()
    disable_telemetry()
    OUT.mkdir(exist_ok=True)
    videos = {"sparse": sparse_video(args.minutes), "lecture": lecture_video(args.minutes)}
    slides = round(args.minutes * 60 / 30.0)
    expected = {
        "sparse": [normalise_text(t) for t in CAPTIONS],
        "lecture": [normalise_text(t) for s in range(slides) for t in slide_lines(s)],
    }
    work = Path(tempfile.mkdtemp(prefix="vidscope-bench-ocr-cost-"))
    runs = {
        "before": IngestSettings(ocr_min_text_seconds=0),
        "after": IngestSettings(),
    }
    try:
        reader = registry.text_reader(Settings(data_dir=work / "warm"))
        assert reader is not None
        reader.read(np.zeros((64, 64, 3), dtype=np.uint8))  # load the models before timing
        columns = f"{'video':<9}{'run':<8}{'sampled':>8}{'gate runs':>10}{'reads':>7}"
        print(columns + f"{'wall s':>9}{'CPU s':>8}  texts")
        for name, video in videos.items():
            measured = {}
            for run, ingest in runs.items():
                settings = Settings(data_dir=work / f"{name}-{run}", ingest=ingest)
                store = open_store(settings)
                record = register_video(store, settings, video, content_hash(video))
                ctx = StageContext(settings=settings, store=store, video=record, path=video)
                for stage in (PROBE, FRAMES):
                    assert execute(stage, ctx).status == "done"
                result, wall, cpu = timed(lambda c=ctx: execute(OCR, c))
                assert result.status == "done", result
                texts = store.rows(store.ocr, video_id=record.video_id, columns=["text"]).column("text")
                read = [normalise_text(t) for t in texts.to_pylist()]
                found = [e for e in expected[name] if any(similar(e, r) for r in read)]
                d = result.details
                measured[run] = (d, wall, cpu, found)
                print(
                    f"{name:<9}{run:<8}{d['frames_sampled']:>8}{d['gate_runs']:>10}{d['frames_read']:>7}"
                    f"{wall:>9.1f}{cpu:>8.1f}  {len(found)}/{len(expected[name])} shown texts found"
                )
            (bd, bw, bc, bf), (ad, aw, ac, af) = measured["before"], measured["after"]
            lost = sorted(set(bf) - set(af))
            print(
                f"{name}: before/after gate runs {bd['gate_runs'] / max(1, ad['gate_runs']):.2f}x, "
                f"reads {bd['frames_read'] / max(1, ad['frames_read']):.2f}x, wall {bw / aw:.2f}x, "
                f"CPU {bc / ac:.2f}x; found by before but not after: {lost if lost else 'none'}"
            )
            print(f"  after details: {ad}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

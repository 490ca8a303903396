"""Does the ``chapters`` stage, and ``summarize`` over what it wrote, stay bounded on a long video?

Issue 39: "a 3-hour video is summarised with bounded memory and time". Ingesting three hours of
real video on two cores takes hours, and the stage reads only what the earlier stages stored, so
this benchmark writes those rows directly into a scratch store — a lecture of 5-minute parts on
rotating subjects (:data:`benchmarks.chapters.SUBJECTS`), a sentence said every 7 s (a transcript
segment with word timings, as Whisper stores them), a title slide read by OCR at each part's start,
and 5-s clips with their MiniLM text vectors (the ``embed`` stage's, computed here with the
configured text embedder) — then runs the real stage body (``CHAPTERS.run``) and the real
``read_summary`` and its Markdown and WebVTT forms, for several durations. A benchmark may fake its
inputs; the tests of the real path ingest real videos (tests/test_summaries.py).

Per duration (after an unreported warm-up run on 6 minutes) it prints the stage's wall and CPU
seconds, the peak resident memory above the process's before the stage (sampled every 10 ms from
/proc, so Arrow's and LanceDB's buffers count), chapters found and boundary F1 within 10 s, and the
same for ``summarize``. Bounded means: time grows about linearly with duration and memory by the
stored rows' size, not the square.

    .venv/bin/python benchmarks/chapters_long.py [--hours 0.75 1.5 3] [--data DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.pop("PREFECT_API_URL", None)
sys.path.insert(0, str(Path(__file__).resolve().parent))

from chapters import SUBJECTS, boundary_f1  # noqa: E402  (the sibling benchmark's subjects)

PART_SECONDS = 300.0
SENTENCE_EVERY = 7.0
CLIP_SECONDS = 5.0
SLIDE_SECONDS = 4.0


@dataclass
class Lecture:
    """The rows of a generated lecture and its true part starts."""

    duration: float
    starts: list[float]
    segments: list[dict[str, Any]]
    ocr: list[dict[str, Any]]
    clip_texts: list[str]


def lecture(video_id: str, hours: float) -> Lecture:
    """A lecture of ``hours``: parts of :data:`PART_SECONDS` on the subjects in turn."""
    duration = round(hours * 3600.0)
    names = list(SUBJECTS)
    starts = [float(t) for t in range(0, int(duration), int(PART_SECONDS))]
    segments: list[dict[str, Any]] = []
    ocr: list[dict[str, Any]] = []
    for number, start in enumerate(starts):
        subject = names[number % len(names)]
        lines = SUBJECTS[subject][1]
        end = min(duration, start + PART_SECONDS)
        box = [40.0, 100.0, 600.0, 100.0, 600.0, 145.0, 40.0, 145.0]  # a 45-px line: a title
        text = f"{subject.upper()} LESSON {number + 1}"
        ocr.append(
            {"video_id": video_id, "item_index": len(ocr), "t": start, "t_end": start + SLIDE_SECONDS}
            | {"text": text, "box": box, "score": 0.95}
        )
        t, k = start + SLIDE_SECONDS + 0.5, 0
        while t + 5.0 <= end:
            said = lines[k % len(lines)]
            words = said.split()
            step = 5.0 / len(words)
            segments.append(
                {
                    "video_id": video_id,
                    "segment_index": len(segments),
                    "start": t,
                    "end": t + 5.0,
                    "text": said,
                    "language": "en",
                    "avg_logprob": -0.2,
                    "words": [
                        {"word": w, "start": t + i * step, "end": t + (i + 1) * step, "probability": 0.9}
                        for i, w in enumerate(words)
                    ],
                }
            )
            t, k = t + SENTENCE_EVERY, k + 1
    from vidscope.tasks.caption import clip_texts

    clips = [
        {"start": i * CLIP_SECONDS, "end": min(duration, (i + 1) * CLIP_SECONDS)}
        for i in range(int(-(-duration // CLIP_SECONDS)))
    ]
    texts = [" ".join(p for p in pair if p) for pair in clip_texts(clips, segments, ocr)]
    return Lecture(float(duration), starts, segments, ocr, texts)


def write_rows(store: Any, embed: Callable[[list[str]], Any], video_id: str, talk: Lecture) -> None:
    """The lecture's transcript, OCR and clip rows (vectors by ``embed``) into ``store``."""
    unique = sorted(set(talk.clip_texts))
    vectors = dict(zip(unique, embed(unique), strict=True))
    clips = [
        {
            "video_id": video_id,
            "clip_index": i,
            "start": i * CLIP_SECONDS,
            "end": min(talk.duration, (i + 1) * CLIP_SECONDS),
            "caption": None,
            "caption_source": None,
            "transcript_text": text,
            "ocr_text": None,
            "text_embedding": vectors[text].tolist() if text else None,
            "embed_model": "benchmark",
        }
        for i, text in enumerate(talk.clip_texts)
    ]
    store.replace_video_rows(store.transcripts, video_id, talk.segments)
    store.replace_video_rows(store.ocr, video_id, talk.ocr)
    store.replace_video_rows(store.clips, video_id, clips)


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@dataclass
class Cost:
    wall: float = 0.0
    cpu: float = 0.0
    peak_mb: float = 0.0


@contextmanager
def measured() -> Iterator[Cost]:
    """Wall and CPU seconds of the block, and its peak RSS above the RSS before it (MB)."""
    cost, base, peak = Cost(), _rss(), [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _rss())
            done.wait(0.01)

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        yield cost
    finally:
        cost.wall, cost.cpu = time.perf_counter() - wall, time.process_time() - cpu
        done.set()
        watcher.join()
        cost.peak_mb = max(0, max(peak[0], _rss()) - base) / 2**20


def run(root: Path, hours: list[float]) -> list[dict[str, Any]]:
    from vidscope.core.settings import Settings
    from vidscope.flows.summarize import as_markdown, as_webvtt, read_summary
    from vidscope.models import registry
    from vidscope.models.open_store import open_store
    from vidscope.storage.videos import VideoRecord
    from vidscope.tasks.chapters import CHAPTERS
    from vidscope.tasks.stage import StageContext

    settings = Settings(data_dir=root / "store")
    store = open_store(settings)
    embedder = registry.text_embedder(settings)
    embedder.embed(["warm up the text embedder"])  # its loading is not the stage's cost
    out = []
    # A first, unreported run on a 6-minute lecture: the process's first stage run also pays for
    # lazy imports and the embedder's first buffers, which are not the duration's cost.
    for number, h in enumerate([0.1, *hours]):
        video_id = f"long-{h:g}h"
        talk = lecture(video_id, h)
        write_rows(store, embedder.embed, video_id, talk)
        record = VideoRecord(
            video_id=video_id,
            path=str(root / f"{video_id}.mp4"),
            file_name=f"{video_id}.mp4",
            size_bytes=0,
            duration=talk.duration,
            fps=25.0,
            width=640,
            height=360,
            rotation=0,
            has_audio=True,
        )
        ctx = StageContext(settings=settings, store=store, video=record, path=Path(record.path))
        with measured() as stage:
            outcome = CHAPTERS.run(ctx)
        with measured() as summarize:
            overview = read_summary(store, record)
            markdown, vtt = as_markdown(overview), as_webvtt(overview)
        found = [c.start for c in overview.chapters[1:]]
        if number == 0:
            continue
        out.append(
            {
                "hours": h,
                "clips": len(talk.clip_texts),
                "segments": len(talk.segments),
                "parts": len(talk.starts),
                "chapters": len(overview.chapters),
                "rows": outcome.rows,
                "f1_10": boundary_f1(found, talk.starts[1:], 10.0),
                "stage": stage,
                "summarize": summarize,
                "output_chars": len(markdown) + len(vtt),
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hours", type=float, nargs="+", default=[0.75, 1.5, 3.0])
    parser.add_argument("--data", type=Path, help="Keep the scratch store here.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vidscope-chapters-long-") as scratch:
        rows = run(args.data or Path(scratch), sorted(args.hours))
    print(
        "| hours | clips | segments | parts | chapters | F1 ≤10 s | stage wall s | stage CPU s "
        "| stage peak MB | summarize s | summarize peak MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        stage, summ = r["stage"], r["summarize"]
        print(
            f"| {r['hours']:g} | {r['clips']} | {r['segments']} | {r['parts']} | {r['chapters']} | "
            f"{r['f1_10']:.2f} | {stage.wall:.1f} | {stage.cpu:.1f} | {stage.peak_mb:.0f} | "
            f"{summ.wall:.2f} | {summ.peak_mb:.0f} |"
        )


if __name__ == "__main__":
    main()

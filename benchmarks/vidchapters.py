"""Score the ``chapters`` stage against VidChapters-7M chapters, for people who have those videos.

Ingest the videos first (``vidscope ingest DIR``, files named after their YouTube id, e.g.
``-IXKOGg_Vos.mp4``), then::

    .venv/bin/python benchmarks/vidchapters.py ANNOTATIONS.json [--data DIR] [--json]

Each annotated video is matched to the stored video whose file name (without its extension) is its
id; its stored chapters are scored against the annotation (:mod:`vidscope.evaluation.chaptering`:
F1 averaged over tIoU 0.5-0.95, mean tIoU, boundary F1 within 3 s and 5 s). Annotated videos that
are not in the store are counted, not scored. Bad input (no such file, not JSON, another shape) is
one line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def stored_chapters(store: Any, ids: list[str]) -> dict[str, list[Any]]:
    """The stored chapters of each of ``ids`` found in ``store`` by file name (stem)."""
    from vidscope.evaluation.chaptering import Segment
    from vidscope.storage.chapters import KIND_CHAPTER

    wanted = set(ids)
    videos = store.rows(store.videos, columns=["video_id", "file_name"]).to_pylist()
    found: dict[str, list[Segment]] = {}
    for video in videos:
        stem = Path(video["file_name"]).stem
        if stem not in wanted:
            continue
        rows = store.rows(store.chapters, video_id=video["video_id"], where=f"kind = '{KIND_CHAPTER}'")
        chapters = sorted(rows.to_pylist(), key=lambda r: r["start"])
        if chapters:
            found[stem] = [Segment(r["start"], r["end"], r["title"] or "") for r in chapters]
    return found


def evaluate(annotations: Path, data_dir: Path | None) -> dict[str, Any]:
    """The scores of the stored chapters against ``annotations``, with what could not be scored."""
    from vidscope.core.settings import Settings
    from vidscope.evaluation.chaptering import load, score
    from vidscope.models.open_store import open_store

    refs = load(annotations)
    settings = Settings(data_dir=data_dir) if data_dir else Settings()
    preds = stored_chapters(open_store(settings), list(refs.videos))
    result: dict[str, Any] = {
        "annotated": len(refs.videos),
        "skipped": len(refs.skipped),
        "not_in_store": len([v for v in refs.videos if v not in preds]),
    }
    if preds:
        result["scores"] = asdict(score(refs.videos, preds))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("annotations", type=Path, help="A VidChapters-7M chapters JSON file.")
    parser.add_argument("--data", type=Path, help="The data dir the videos were ingested into.")
    parser.add_argument("--json", action="store_true", help="Print the result as JSON.")
    args = parser.parse_args()
    from vidscope.evaluation.items import AnnotationError

    try:
        result = evaluate(args.annotations, args.data)
    except (AnnotationError, OSError) as exc:
        sys.exit(f"vidchapters: {' '.join(str(exc).split())}")
    if args.json:
        print(json.dumps(result, indent=2))
        return
    line = (
        f"{result['annotated']} annotated videos ({result['skipped']} skipped), "
        f"{result['not_in_store']} not in the store"
    )
    if "scores" not in result:
        print(f"{line}: nothing to score")
        return
    s = result["scores"]
    bounds = ", ".join(f"≤{tol:g} s {value:.1f}" for tol, value in s["boundary_f1"].items())
    print(
        f"{line}; {s['videos']} scored: F1 {s['f1']:.1f} (P {s['precision']:.1f}, R {s['recall']:.1f}; "
        f"tIoU 0.5-0.95), mean tIoU {s['mean_tiou']:.1f}, boundary F1 {bounds}"
    )


if __name__ == "__main__":
    main()

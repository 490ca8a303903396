"""MSR-VTT 1k-A test split (text-to-video retrieval; MAVIS reports R@1 78.6).

Format (``MSRVTT_JSFUSION_test.csv``, the 1,000-pair split of Yu et al. used by CLIP4Clip and
successors): a header ``key,vid_key,video_id,sentence`` then one query per video. Videos are
``video7010.mp4`` etc. The query id is the ``key`` column (``ret0``...).
"""

from __future__ import annotations

import csv
from pathlib import Path

from vidscope.evaluation.items import AnnotationError, BenchmarkItem, unique_ids

NAME = "msrvtt"
COLUMNS = ("key", "vid_key", "video_id", "sentence")


def load(path: Path | str) -> list[BenchmarkItem]:
    """The queries of the MSR-VTT 1k-A CSV, one per video."""
    with Path(path).open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise AnnotationError(f"{path}: expected columns {COLUMNS}, found {reader.fieldnames}")
        items = [
            BenchmarkItem(
                benchmark=NAME,
                question_id=row["key"],
                kind="retrieval",
                video_ids=(row["video_id"],),
                question=row["sentence"].strip(),
            )
            for row in reader
        ]
    return list(unique_ids(items))

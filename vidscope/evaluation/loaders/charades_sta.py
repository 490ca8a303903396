"""Charades-STA (temporal grounding; AVI reports mIoU 60.0 on its test split).

Format (the release used by 2D-TAN, VSLNet and others): one query per line,
``VIDEO_ID START END##sentence`` with times in seconds, e.g. ``3MSZA 24.3 30.4##person turn a light
on.``. Videos are Charades files named ``VIDEO_ID.mp4``. A video has several queries, so a query's
id is ``VIDEO_ID#n`` with n its 0-based position among that video's lines.
"""

from __future__ import annotations

from pathlib import Path

from vidscope.evaluation.items import AnnotationError, BenchmarkItem, unique_ids

NAME = "charades_sta"


def load(path: Path | str) -> list[BenchmarkItem]:
    """Every query of a Charades-STA annotation file (e.g. ``charades_sta_test.txt``)."""
    path = Path(path)
    counts: dict[str, int] = {}
    items = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        head, sep, sentence = line.partition("##")
        parts = head.split()
        if not sep or len(parts) != 3:
            raise AnnotationError(f"{path}:{number}: expected 'VIDEO START END##sentence'")
        video, start, end = parts[0], float(parts[1]), float(parts[2])
        n = counts.get(video, 0)
        counts[video] = n + 1
        items.append(
            BenchmarkItem(
                benchmark=NAME,
                question_id=f"{video}#{n}",
                kind="grounding",
                video_ids=(video,),
                question=sentence.strip(),
                intervals=((start, end),),
            )
        )
    return list(unique_ids(items))

"""ActivityNet Captions (dense captions; used for temporal grounding and paragraph retrieval).

Format (``val_1.json`` / ``val_2.json`` of the original release): ``{VIDEO_ID: {"duration": s,
"timestamps": [[start, end], ...], "sentences": [...]}}`` with ids like ``v_uqiMw7tQ1Cc``. Videos
are distributed both with and without the ``v_`` prefix, so both names are tried.

* ``task="grounding"``: one query per sentence, id ``VIDEO_ID#n``. A few gold ends lie past the
  video's duration (a quirk of the original annotations); they are clamped to the duration, as
  grounding code commonly does, so IoU is computed inside the video. Reversed pairs are sorted.
* ``task="retrieval"``: one query per video, its sentences joined in order (paragraph-to-video
  retrieval as reported by CLIP4Clip and successors).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from vidscope.evaluation.items import AnnotationError, BenchmarkItem, read_json, unique_ids

NAME = "activitynet_captions"


def aliases(video: str) -> Sequence[str]:
    """ActivityNet files are also named without the ``v_`` prefix."""
    return (video[2:],) if video.startswith("v_") else ()


def load(path: Path | str, task: Literal["grounding", "retrieval"] = "grounding") -> list[BenchmarkItem]:
    """The queries of an ActivityNet Captions annotation file, for grounding or retrieval."""
    data = read_json(Path(path))
    if not isinstance(data, dict):
        raise AnnotationError(f"{path}: expected {{video_id: {{duration, timestamps, sentences}}}}")
    items = []
    for video, entry in data.items():
        sentences = [str(s).strip() for s in entry["sentences"]]
        stamps = entry["timestamps"]
        duration = float(entry["duration"])
        if len(sentences) != len(stamps):
            raise AnnotationError(f"{path}: {video} has {len(sentences)} sentences, {len(stamps)} times")
        if task == "retrieval":
            items.append(
                BenchmarkItem(
                    benchmark=NAME,
                    question_id=video,
                    kind="retrieval",
                    video_ids=(video,),
                    question=" ".join(sentences),
                    duration=duration,
                )
            )
            continue
        for n, (sentence, (a, b)) in enumerate(zip(sentences, stamps, strict=True)):
            start, end = sorted((float(a), float(b)))
            items.append(
                BenchmarkItem(
                    benchmark=NAME,
                    question_id=f"{video}#{n}",
                    kind="grounding",
                    video_ids=(video,),
                    question=sentence,
                    duration=duration,
                    intervals=((min(start, duration), min(end, duration)),),
                )
            )
    return list(unique_ids(items))

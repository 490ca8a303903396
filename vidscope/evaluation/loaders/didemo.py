"""DiDeMo paragraph-to-video retrieval (the CLIP4Clip protocol; R@1/5/10, MdR, MnR).

Format: LocalizingMoments' ``test_data.json`` (Hendricks et al., 2017), a JSON list of moments,
each ``{"video": name, "description": sentence, "times": [[start, end], ...], ...}`` with times in
5-second segments, one pair per annotator. Retrieval follows CLIP4Clip's DiDeMo loader: one query
per video, its descriptions joined with spaces in file order, the video as gold; the whole video
is the target (the times are not used). Video names carry their original extension (``.mov``,
``.avi``, ...); they are found under the root by stem when the files were re-encoded.
"""

from __future__ import annotations

from pathlib import Path

from vidscope.evaluation.items import AnnotationError, BenchmarkItem, read_records, unique_ids

NAME = "didemo"


def load(path: Path | str) -> list[BenchmarkItem]:
    """One paragraph query per video of a DiDeMo ``test_data.json``."""
    paragraphs: dict[str, list[str]] = {}
    for n, record in enumerate(read_records(Path(path))):
        video, description = record.get("video"), record.get("description")
        if not isinstance(video, str) or not isinstance(description, str):
            raise AnnotationError(f"{path}[{n}]: a moment needs a 'video' and a 'description' (text)")
        paragraphs.setdefault(video, []).append(description.strip())
    items = [
        BenchmarkItem(
            benchmark=NAME,
            question_id=video,
            kind="retrieval",
            video_ids=(video,),
            question=" ".join(d for d in descriptions if d),
        )
        for video, descriptions in paragraphs.items()
    ]
    return list(unique_ids(items))

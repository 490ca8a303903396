"""MSVD (YouTube2Text; text-to-video retrieval, every caption of a test video a query).

Two annotation forms are read:

* ``raw-captions.pkl`` as distributed with CLIP4Clip's MSVD data: a pickled ``{video_name:
  [[token, ...], ...]}``. It is read with an unpickler that refuses every class and function, so
  a hostile file can only fail, never run code; tokens are joined with spaces.
* The original ``MSR Video Description Corpus.csv`` (``VideoID,Start,End,WorkerID,Source,
  AnnotationTime,Language,Description``): English rows only; the video name is
  ``VideoID_Start_End`` (how the YouTubeClips ``.avi`` files are named).

The standard split (1,200 train / 100 val / 670 test) comes as a list file, one video per line
(``test_list.txt``); entries given as ``vidN`` are translated with ``youtube_mapping.txt``
(``video_name vidN`` per line) when it is passed. Query ids are ``video_name#n``.
"""

from __future__ import annotations

import csv
import io
import pickle
from pathlib import Path
from typing import Any

from vidscope.evaluation.items import AnnotationError, BenchmarkItem, unique_ids

NAME = "msvd"


class _DataOnlyUnpickler(pickle.Unpickler):
    """Builtin containers and strings only: any global (class, function) is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise AnnotationError(f"refusing to load {module}.{name} from a captions pickle")


def _pickled_captions(path: Path) -> dict[str, list[str]]:
    data = _DataOnlyUnpickler(io.BytesIO(path.read_bytes())).load()
    if not isinstance(data, dict):
        raise AnnotationError(f"{path}: expected a pickled {{video: [[tokens]]}}")
    return {
        str(video): [" ".join(c) if isinstance(c, list | tuple) else str(c) for c in caps]
        for video, caps in data.items()
    }


def _corpus_captions(path: Path) -> dict[str, list[str]]:
    captions: dict[str, list[str]] = {}
    with path.open(encoding="utf-8", errors="replace", newline="") as handle:
        for row in csv.DictReader(handle):
            if row.get("Language") != "English" or not (row.get("Description") or "").strip():
                continue
            video = f"{row['VideoID']}_{row['Start']}_{row['End']}"
            captions.setdefault(video, []).append(row["Description"].strip())
    return captions


def _names(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load(
    captions: Path | str, split: Path | str | None = None, mapping: Path | str | None = None
) -> list[BenchmarkItem]:
    """Every caption of the videos in ``split`` (all videos when None) as a retrieval query."""
    captions = Path(captions)
    by_video = _pickled_captions(captions) if captions.suffix == ".pkl" else _corpus_captions(captions)
    videos = list(by_video)
    if split is not None:
        names = _names(Path(split))
        if mapping is not None:
            to_name = {vid: name for name, vid in (line.split()[:2] for line in _names(Path(mapping)))}
            names = [to_name.get(n, n) for n in names]
        unknown = [n for n in names if n not in by_video]
        if unknown:
            raise AnnotationError(f"{split}: {len(unknown)} videos have no captions, e.g. {unknown[0]!r}")
        videos = names
    items = [
        BenchmarkItem(
            benchmark=NAME,
            question_id=f"{video}#{n}",
            kind="retrieval",
            video_ids=(video,),
            question=caption,
        )
        for video in videos
        for n, caption in enumerate(by_video[video])
    ]
    return list(unique_ids(items))

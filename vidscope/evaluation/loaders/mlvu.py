"""MLVU dev set (multi-task long video understanding).

Format (``MLVU/json/`` of the release, one file per task, ``1_plotQA.json`` ... ``9_summary.json``):
a list of ``{"video", "duration", "question", "candidates", "answer", "question_type"}`` where the
answer is the text of one candidate. The generation tasks (sub-scene captioning, video summary)
have no candidates, a reference answer and for sub-scene ``scoring_points``; they load as
open-ended items. Videos sit in one folder per task (``MLVU/video/1_plotQA/movie101_66.mp4``),
which the recursive video index finds by file name.

Two quirks of the release are kept visible rather than mended: some questions list the same
candidate twice (either letter is then right, see :func:`vidscope.evaluation.scoring.is_correct`),
and two ``2_needle`` questions give an answer that is none of their candidates; those load with no
answer (``extra["unmatched_answer"]`` holds it) and are left out of accuracy.

A question's id is ``<file stem>/<position>`` (``1_plotQA/0``): the release has no ids, and a
video can carry several questions. MLVU reports M-Avg, the mean of the multiple-choice tasks'
accuracies (see :func:`vidscope.evaluation.scoring.macro_accuracy`).
"""

from __future__ import annotations

from pathlib import Path

from vidscope.evaluation.items import (
    AnnotationError,
    BenchmarkItem,
    letter,
    question_text,
    read_records,
    unique_ids,
)

NAME = "mlvu"


def load_file(path: Path | str) -> list[BenchmarkItem]:
    """The questions of one MLVU task file."""
    path = Path(path)
    items = []
    for n, record in enumerate(read_records(path)):
        candidates = record.get("candidates")
        options = tuple(str(c).strip() for c in candidates) if candidates else ()
        extra = {"scoring_points": record["scoring_points"]} if "scoring_points" in record else {}
        answer: str | None = str(record["answer"])
        if options:
            matches = [i for i, text in enumerate(options) if text == str(answer).strip()]
            if matches:
                answer = letter(matches[0], len(options), f"{path}[{n}]")
            else:
                extra["unmatched_answer"], answer = answer, None
        items.append(
            BenchmarkItem(
                benchmark=NAME,
                question_id=f"{path.stem}/{n}",
                kind="multiple_choice" if options else "open_ended",
                video_ids=(str(record["video"]),),
                question=question_text(record.get("question"), f"{path}[{n}]"),
                options=options,
                answer=answer,
                categories=(str(record["question_type"]),),
                duration=float(record["duration"]),
                extra=extra,
            )
        )
    return items


def load(folder: Path | str) -> list[BenchmarkItem]:
    """Every task file (``*.json``) of an MLVU annotation folder, in file-name order."""
    files = sorted(Path(folder).glob("*.json"))
    if not files:
        raise AnnotationError(f"{folder}: no MLVU task files (*.json)")
    return list(unique_ids(item for path in files for item in load_file(path)))

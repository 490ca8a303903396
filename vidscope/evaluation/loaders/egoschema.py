"""EgoSchema (5-way multiple choice over 3-minute egocentric clips; DVD reports 76.6).

Files of the EgoSchema repository:

* ``questions.json``: a list of ``{"q_uid", "google_drive_id", "question", "option 0", ...,
  "option 4"}`` (all 5,031 questions);
* ``subset_answers.json``: ``{q_uid: 0..4}`` for the 500-question public subset (the answers of
  the full set are only scored by the benchmark's server, so those items carry no answer);
* ``uid_to_ego4d.json``: ``{q_uid: {"video_uid", "starting_sec", "ending_sec"}}``, where each clip
  sits in its Ego4D source video (kept as ``clip`` and ``extra["ego4d_video"]``).

The released clips are named ``{q_uid}.mp4``. ``subset=True`` keeps the questions with an answer.
"""

from __future__ import annotations

from pathlib import Path

from vidscope.evaluation.items import (
    AnnotationError,
    BenchmarkItem,
    letter,
    question_text,
    read_json,
    read_records,
)

NAME = "egoschema"
N_OPTIONS = 5


def load_answers(path: Path | str) -> dict[str, int]:
    """``{q_uid: option index}`` from ``subset_answers.json``."""
    data = read_json(Path(path))
    if not isinstance(data, dict) or not all(isinstance(v, int) for v in data.values()):
        raise AnnotationError(f"{path}: expected {{q_uid: option index}}")
    return {str(k): int(v) for k, v in data.items()}


def load_clip_map(path: Path | str) -> dict[str, tuple[str, float, float]]:
    """``{q_uid: (ego4d video uid, start s, end s)}`` from ``uid_to_ego4d.json``."""
    data = read_json(Path(path))
    if not isinstance(data, dict):
        raise AnnotationError(f"{path}: expected {{q_uid: {{video_uid, starting_sec, ending_sec}}}}")
    return {
        str(q): (str(v["video_uid"]), float(v["starting_sec"]), float(v["ending_sec"]))
        for q, v in data.items()
    }


def load(
    questions: Path | str,
    answers: Path | str | None = None,
    clip_map: Path | str | None = None,
    *,
    subset: bool = False,
) -> list[BenchmarkItem]:
    """EgoSchema questions with their answers (where public) and Ego4D clip bounds (when given)."""
    gold = load_answers(answers) if answers is not None else {}
    clips = load_clip_map(clip_map) if clip_map is not None else {}
    items = []
    for record in read_records(Path(questions)):
        uid = str(record["q_uid"])
        if subset and uid not in gold:
            continue
        options = tuple(str(record[f"option {i}"]).strip() for i in range(N_OPTIONS))
        where = f"{questions}: {uid}"
        source = clips.get(uid)
        items.append(
            BenchmarkItem(
                benchmark=NAME,
                question_id=uid,
                kind="multiple_choice",
                video_ids=(uid,),
                question=question_text(record.get("question"), where),
                options=options,
                answer=letter(gold[uid], N_OPTIONS, where) if uid in gold else None,
                duration=180.0,
                clip=(source[1], source[2]) if source else None,
                extra={"ego4d_video": source[0]} if source else {},
            )
        )
    if subset and len(items) != len(gold):
        raise AnnotationError(f"{questions}: {len(gold) - len(items)} answered questions are missing")
    return items

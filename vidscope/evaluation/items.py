"""The one item model every benchmark loader returns, and the helpers loaders share.

A benchmark item is a question (or a grounding/retrieval query) about one or more videos, with its
gold answer. Loaders keep the benchmark's own names for videos (``video_ids``): a YouTube id, a file
name, a Charades id. :mod:`vidscope.evaluation.videos` turns those names into files under a root.
"""

from __future__ import annotations

import json
import string
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: What an item asks for, and so how it is scored.
ItemKind = Literal["multiple_choice", "open_ended", "grounding", "retrieval"]

#: Option letters in order: a question has at most 26 options (A-Z). No benchmark here has more
#: than five (EgoSchema), a few questions elsewhere up to eight; a file with more is refused.
LETTERS = string.ascii_uppercase
MAX_OPTIONS = len(LETTERS)
#: Letters read as an option's label (``"B. a dog"``); beyond J, ``"I. …"`` is more likely a word.
LABEL_LETTERS = LETTERS[:10]

Interval = tuple[float, float]


class BenchmarkItem(BaseModel):
    """One question of a benchmark, in the same shape for every benchmark."""

    model_config = ConfigDict(frozen=True)

    benchmark: str = Field(description="Loader name, e.g. 'lvbench', 'videomme', 'charades_sta'.")
    question_id: str = Field(description="Unique within the benchmark (the official id when it has one).")
    kind: ItemKind
    video_ids: tuple[str, ...] = Field(
        description="The videos the question is about, by the benchmark's own names; several for "
        "multi-video benchmarks (MVX-Bench, CrossVid), in the order the question refers to them."
    )
    question: str = Field(description="The question, query sentence or caption, without the options.")
    options: tuple[str, ...] = Field(default=(), description="Option texts without their letters.")
    answer: str | None = Field(
        default=None,
        description="Gold answer: an option letter ('B') for multiple choice (the letters in order, "
        "'AC', for a multi-select question), the reference text for open-ended items; None when "
        "the benchmark withholds it (EgoSchema full set).",
    )
    categories: tuple[str, ...] = Field(
        default=(), description="Task / question type(s); LVBench gives several per question."
    )
    dimension: str | None = Field(
        default=None, description="A coarser grouping of tasks (CrossVid's dimension, Video-MME's domain)."
    )
    duration_group: str | None = Field(
        default=None, description="The benchmark's duration bucket ('long', '600', ...), when it has one."
    )
    duration: float | None = Field(default=None, description="Video duration in seconds, when given.")
    intervals: tuple[Interval, ...] = Field(
        default=(), description="Gold time interval(s) in seconds (grounding; LVBench time references)."
    )
    clip: Interval | None = Field(
        default=None,
        description="The part of the source video the question covers, when the benchmark cuts it "
        "from a longer video (EgoSchema's 3-minute Ego4D clips).",
    )
    subtitles: str | None = Field(default=None, description="Subtitle file name to give the model, if any.")
    extra: dict[str, Any] = Field(default_factory=dict, description="Other fields the format carries.")

    @field_validator("options")
    @classmethod
    def _at_most_26_options(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(value) > MAX_OPTIONS:
            raise ValueError(f"{len(value)} options; at most {MAX_OPTIONS} (A-Z) are supported")
        return value

    @property
    def video_id(self) -> str:
        """The first (for most benchmarks the only) video."""
        return self.video_ids[0]

    @property
    def answer_index(self) -> int | None:
        """The gold option's position, for multiple-choice items with a known answer."""
        if self.kind != "multiple_choice" or self.answer is None or len(self.answer) != 1:
            return None  # no answer, or a multi-select one ("AC")
        return LETTERS.index(self.answer)


class AnnotationError(ValueError):
    """An annotation file does not have the shape its benchmark's loader expects."""


#: ``extra`` key of an item a loader could not use (its one-line reason): a malformed record, or a
#: task whose inputs are not modelled (CrossVid MSR/MOC). The run skips it and reports why.
UNUSABLE = "unusable"


def unusable_item(
    benchmark: str,
    question_id: str,
    reason: str,
    categories: tuple[str, ...] = (),
    dimension: str | None = None,
) -> BenchmarkItem:
    """A record that cannot be asked, kept so the run can report it (no videos, never ready)."""
    return BenchmarkItem(
        benchmark=benchmark,
        question_id=question_id,
        kind="open_ended",
        video_ids=(),
        question="",
        categories=categories,
        dimension=dimension,
        extra={UNUSABLE: reason},
    )


def unusable(item: BenchmarkItem) -> str | None:
    """Why ``item`` cannot be asked (None: it can)."""
    reason = item.extra.get(UNUSABLE)
    return str(reason) if reason else None


def question_text(value: Any, where: str) -> str:
    """A record's question: text, never ``None`` read as the word "None" (a blank one stays blank:
    MLVU's dev set has one, and the benchmark is scored as released)."""
    if not isinstance(value, str):
        raise AnnotationError(f"{where}: the question is {'missing' if value is None else repr(value)[:60]}")
    return value.strip()


def letter(index: int, n_options: int, where: str) -> str:
    """The option letter of ``index``, checked against the number of options."""
    if n_options > MAX_OPTIONS:
        raise AnnotationError(f"{where}: {n_options} options; at most {MAX_OPTIONS} (A-Z) are supported")
    if not 0 <= index < n_options:
        raise AnnotationError(f"{where}: answer index {index} outside {n_options} options")
    return LETTERS[index]


def answer_letter_of_text(answer: str, options: tuple[str, ...], where: str) -> str:
    """The letter of the option whose text is ``answer`` (formats that give the answer as text)."""
    matches = [i for i, text in enumerate(options) if text.strip() == answer.strip()]
    if not matches:
        raise AnnotationError(f"{where}: answer {answer!r} is none of the options {list(options)}")
    return letter(matches[0], len(options), where)


def strip_option_label(option: str) -> str:
    """``"B. a dog"`` / ``"(B) a dog"`` / ``"B) a dog"`` → ``"a dog"``; unlabelled text unchanged."""
    text = option.strip()
    if len(text) >= 2 and text[0] == "(" and text[1] in LABEL_LETTERS and text[2:3] == ")":
        return text[3:].strip()
    if len(text) >= 2 and text[0] in LABEL_LETTERS and text[1] in ".):":
        return text[2:].strip()
    return text


def read_json(path: Path) -> Any:
    """A JSON document, with the file named in the error when it is not JSON."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise AnnotationError(f"{path}: not JSON ({exc})") from exc


def read_records(path: Path) -> list[dict[str, Any]]:
    """Records from a JSON list, a JSON Lines file, or a Parquet file (Hugging Face releases)."""
    path = Path(path)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return list(pq.read_table(path).to_pylist())
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return [_record(json.loads(line), path) for line in text.splitlines() if line.strip()]
    data = read_json(path)
    if isinstance(data, dict):  # some releases wrap the list: {"data": [...]}
        lists = [v for v in data.values() if isinstance(v, list)]
        if len(lists) != 1:
            raise AnnotationError(f"{path}: expected a list of records")
        data = lists[0]
    if not isinstance(data, list):
        raise AnnotationError(f"{path}: expected a list of records")
    return [_record(r, path) for r in data]


def _record(value: Any, path: Path) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise AnnotationError(f"{path}: a record is {type(value).__name__}, not an object")
    return value


def first(record: dict[str, Any], names: Iterable[str], where: str, default: Any = ...) -> Any:
    """The value of the first of ``names`` present in ``record`` (formats name fields variously)."""
    for name in names:
        if name in record and record[name] is not None:
            return record[name]
    if default is ...:
        raise AnnotationError(f"{where}: none of the fields {list(names)} is present")
    return default


def options_of(value: Any, where: str) -> tuple[str, ...]:
    """Options given as a list (labelled or not) or as a ``{"A": text, ...}`` mapping."""
    if isinstance(value, dict):
        return tuple(str(value[k]).strip() for k in sorted(value))
    if isinstance(value, list | tuple):
        return tuple(strip_option_label(str(v)) for v in value)
    raise AnnotationError(f"{where}: options are neither a list nor a mapping")


def choice_answer(value: Any, options: tuple[str, ...], where: str) -> str:
    """A gold answer given as a letter, a ``"(B)"``-style label, an index, or the option text."""
    if isinstance(value, bool):
        raise AnnotationError(f"{where}: answer {value!r} is not a choice")
    if isinstance(value, int):
        return letter(value, len(options), where)
    text = str(value).strip()
    label = text.strip("().: ")
    if len(label) == 1 and label.upper() in LETTERS[: len(options)]:
        return label.upper()
    if text.isdigit():
        return letter(int(text), len(options), where)
    return answer_letter_of_text(text, options, where)


def unique_ids(items: Iterable[BenchmarkItem]) -> Iterator[BenchmarkItem]:
    """Pass items through, refusing a repeated question id (it would merge two questions' scores)."""
    seen: set[str] = set()
    for item in items:
        if item.question_id in seen:
            raise AnnotationError(f"{item.benchmark}: question id {item.question_id!r} appears twice")
        seen.add(item.question_id)
        yield item

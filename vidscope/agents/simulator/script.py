"""The script a simulated video is made of: timed events, audio lines, cross-video relations.

AgentCVR's observation: an agent's tool-use policy needs only what a video *says* at each moment,
not its pixels. A :class:`Script` holds that for one or more videos, plus the questions asked of
them with their known answers, and validates itself (every time inside its video, events and audio
lines in time order, ids unique, relations pointing at events that exist), so a simulator can trust
it and a generated or imported script fails loudly at construction rather than mid-rollout.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from vidscope.agents.cvr.tasks import TASKS as CVR_TASKS

#: What an event is about. ``text`` events are read on screen (OCR), ``object`` events are seen
#: (detections), ``action`` and ``scene`` events are what a captioner would describe.
EventKind = Literal["action", "object", "text", "scene"]

#: Relations between events, possibly of different videos.
RelationKind = Literal["same_subject", "same_time", "before", "after", "causes"]

#: The question families the template generator writes.
QuestionKind = Literal["comparison", "temporal_alignment", "counting", "ordering", "open"]

AttributeValue = str | int | float | bool


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Event(_Strict):
    """Something that happens, is seen or is shown during [start, end] of one video."""

    event_id: str = Field(min_length=1)
    start: float = Field(ge=0)
    end: float = Field(ge=0)
    kind: EventKind = "action"
    #: The event in a few words, as a caption would say it ("a man opens the red door").
    label: str = Field(min_length=1)
    #: Who or what the event is about ("man", "dog", "sign"), the unit counting questions count.
    subject: str | None = None
    #: Further facts a tool may report: colour, count, text shown, confidence…
    attributes: dict[str, AttributeValue] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _ordered(self) -> Event:
        if self.end < self.start:
            raise ValueError(f"event {self.event_id}: end {self.end} is before start {self.start}")
        return self

    def overlaps(self, t0: float, t1: float) -> bool:
        """Whether the event shares time with [t0, t1] (an instant event counts when inside)."""
        return self.start <= t1 and t0 <= self.end and (self.start < t1 or self.start == self.end == t1)


class AudioLine(_Strict):
    """Words spoken (or a sound heard) during [start, end]."""

    start: float = Field(ge=0)
    end: float = Field(ge=0)
    text: str = Field(min_length=1)
    speaker: str | None = None

    @model_validator(mode="after")
    def _ordered(self) -> AudioLine:
        if self.end < self.start:
            raise ValueError(f"audio line {self.text[:30]!r}: end {self.end} is before start {self.start}")
        return self

    def overlaps(self, t0: float, t1: float) -> bool:
        """Whether the line is heard at some time of [t0, t1]."""
        return self.start <= t1 and t0 <= self.end


class ScriptVideo(_Strict):
    """One video of a script: its duration, events and audio, each in time order."""

    video_id: str = Field(min_length=1)
    file_name: str = ""
    duration: float = Field(gt=0)
    #: The language spoken in the audio lines (ISO 639-1), what the real audio agent detects;
    #: None when unknown (an imported video whose speech stage recorded none).
    language: str | None = "en"
    events: list[Event] = Field(default_factory=list)
    audio: list[AudioLine] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> ScriptVideo:
        ids = [e.event_id for e in self.events]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"video {self.video_id}: duplicate event ids {duplicates}")
        for what, items in (("event", self.events), ("audio line", self.audio)):
            for item in items:
                if item.end > self.duration:
                    raise ValueError(
                        f"video {self.video_id}: {what} at {item.start:g}-{item.end:g}s ends after the "
                        f"video (duration {self.duration:g}s)"
                    )
            starts = [i.start for i in items]
            if starts != sorted(starts):
                raise ValueError(f"video {self.video_id}: {what}s are not ordered by start time")
        return self

    def event(self, event_id: str) -> Event:
        """The event called ``event_id``; ``KeyError`` if there is none."""
        for event in self.events:
            if event.event_id == event_id:
                return event
        raise KeyError(f"video {self.video_id} has no event {event_id!r}")


class EventRef(_Strict):
    """An event of one video of the script."""

    video_id: str
    event_id: str


class Relation(_Strict):
    """A fact linking two events, e.g. the same person in two videos, or two simultaneous events."""

    kind: RelationKind
    source: EventRef
    target: EventRef
    note: str = ""


class Evidence(_Strict):
    """A time range of one video that supports a question's answer."""

    video_id: str
    start: float
    end: float


class Question(_Strict):
    """A question about the script's videos with its known answer (and the moments showing it)."""

    question_id: str = Field(min_length=1)
    kind: QuestionKind = "open"
    text: str = Field(min_length=1)
    video_ids: list[str] = Field(min_length=1)
    #: Multiple-choice options; empty for a free-form answer.
    options: list[str] = Field(default_factory=list)
    #: The correct option text (multiple choice; for a multi-select question one of ``answers``),
    #: or the expected answer (free form: an order "2->3->1" for PSS, an interval "40,52" for FSA,
    #: a sentence for CCQA).
    answer: str = Field(min_length=1)
    #: Every correct option of a multi-select question (CrossVid's BU: "1-3 correct choices"),
    #: ``answer`` among them; empty for a single-answer question.
    answers: list[str] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)
    #: What the question is about (event labels, an object): what a policy searches for.
    focus: list[str] = Field(default_factory=list)
    #: The CrossVid task the question was written for (AgentCVR's codes: BU, FSA, …), so the master
    #: is asked it with that task's prompt, as it is deployed; None for the templates' questions.
    task: str | None = None

    @model_validator(mode="after")
    def _task_is_known(self) -> Question:
        if self.task is not None and self.task not in CVR_TASKS:
            raise ValueError(
                f"question {self.question_id}: unknown task {self.task!r}, one of {', '.join(CVR_TASKS)}"
            )
        return self

    @model_validator(mode="after")
    def _answer_is_an_option(self) -> Question:
        if self.options and self.answer not in self.options:
            raise ValueError(f"question {self.question_id}: the answer {self.answer!r} is not an option")
        if self.answers:
            wrong = [a for a in self.answers if a not in self.options]
            if wrong:
                raise ValueError(f"question {self.question_id}: the answers {wrong} are not options")
            if self.answer not in self.answers:
                raise ValueError(f"question {self.question_id}: the answer is not among its answers")
            if len(set(self.answers)) >= len(self.options):
                raise ValueError(f"question {self.question_id}: a multi-select question has a wrong option")
        return self

    @property
    def multi_select(self) -> bool:
        """Whether several option letters may be right: the question lists ``answers``, or its task
        is deployed multi-select (BU)."""
        deployed = self.task is not None and CVR_TASKS[self.task].multi_select
        return bool(self.options) and (bool(self.answers) or deployed)

    @property
    def is_order(self) -> bool:
        """Whether the answer is an order of the videos ("2->3->1->4", CrossVid's PSS)."""
        return not self.options and (self.task == "PSS" or "->" in self.answer)

    @property
    def answer_letter(self) -> str | None:
        """The letter of the correct option (A, B, …); for a multi-select question the letters of
        all correct options, sorted and joined ("AC", the form CrossVid's BU answers take); None
        for a free-form question."""
        if not self.options:
            return None
        correct = self.answers if self.multi_select and self.answers else [self.answer]
        return "".join(sorted(chr(ord("A") + self.options.index(a)) for a in set(correct)))


class Script(_Strict):
    """Videos as timed events and audio, relations between their events, questions with answers."""

    script_id: str = Field(min_length=1)
    videos: list[ScriptVideo] = Field(min_length=1)
    relations: list[Relation] = Field(default_factory=list)
    questions: list[Question] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> Script:
        ids = [v.video_id for v in self.videos]
        if len(set(ids)) != len(ids):
            raise ValueError(f"script {self.script_id}: duplicate video ids")
        for relation in self.relations:
            for ref in (relation.source, relation.target):
                self.video(ref.video_id).event(ref.event_id)  # raises naming what is missing
        question_ids = [q.question_id for q in self.questions]
        if len(set(question_ids)) != len(question_ids):
            raise ValueError(f"script {self.script_id}: duplicate question ids")
        for question in self.questions:
            for video_id in question.video_ids:
                self.video(video_id)
            for ev in question.evidence:
                video = self.video(ev.video_id)
                if not 0 <= ev.start <= ev.end <= video.duration:
                    raise ValueError(f"question {question.question_id}: evidence outside {ev.video_id}")
        return self

    def video(self, video_id: str) -> ScriptVideo:
        """The video called ``video_id``; ``KeyError`` naming the known ids if absent."""
        for video in self.videos:
            if video.video_id == video_id:
                return video
        known = ", ".join(v.video_id for v in self.videos)
        raise KeyError(f"unknown video_id {video_id!r}; known videos: {known}")

    def question(self, question_id: str) -> Question:
        """The question called ``question_id``."""
        for question in self.questions:
            if question.question_id == question_id:
                return question
        raise KeyError(f"script {self.script_id} has no question {question_id!r}")


def load_script(path: Path | str) -> Script:
    """A script read from a JSON file (validated)."""
    return Script.model_validate_json(Path(path).read_text(encoding="utf-8"))


def save_script(script: Script, path: Path | str) -> Path:
    """Write ``script`` as indented JSON to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(script.model_dump(mode="json"), indent=1, ensure_ascii=False), encoding="utf-8"
    )
    return path

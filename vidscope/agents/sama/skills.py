"""SAMA's skills: markdown files with a front matter (name, description, question type, trigger
words, tool order, stopping rule) and a body of instructions for the planner.

Bundled skills live beside this module (``skills/*.md``); a user adds one by dropping a file into
the folder ``[agent] skills_dir`` names. A user skill with the name or question type of a bundled
one replaces it. The meta planner (the ``meta-planner`` skill) classifies the question; the skill of
that type is then loaded into the planner's context and orders the tools it is offered.
"""

from __future__ import annotations

import logging
from pathlib import Path

import yaml  # type: ignore[import-untyped]  # PyYAML comes with Prefect; no stubs here
from pydantic import BaseModel, Field, ValidationError

from vidscope.agents.multi_video import json_object
from vidscope.core.lexicon import tokens
from vidscope.models.protocols.chat import ChatMessage, ChatModel, Usage

log = logging.getLogger(__name__)

BUNDLED = Path(__file__).with_name("skills")
META = "meta"


class Skill(BaseModel):
    """One skill file."""

    name: str
    description: str
    question_type: str
    triggers: list[str] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=list)
    stop: str = ""
    body: str = ""
    path: str = ""
    bundled: bool = True


class SkillError(ValueError):
    """A skill file that cannot be read (named in the message)."""


def read_skill(path: Path, *, bundled: bool) -> Skill:
    """Parse one skill file; a :class:`SkillError` naming the file and the problem."""
    text = path.read_text(encoding="utf-8")
    if not text.startswith("---"):
        raise SkillError(f"{path}: a skill starts with a '---' front matter block")
    try:
        _, header, body = text.split("---", 2)
        meta = yaml.safe_load(header) or {}
        return Skill(**meta, body=body.strip(), path=str(path), bundled=bundled)
    except (ValueError, yaml.YAMLError, ValidationError, TypeError) as exc:
        first = str(exc).splitlines()[0]
        raise SkillError(f"{path}: not a valid skill ({first})") from exc


def load_skills(user_dir: Path | None) -> list[Skill]:
    """Bundled skills, then the user's (which replace bundled ones of the same name or type).
    An unreadable user file is skipped with a warning, never fatal."""
    skills = {s.question_type: s for s in (read_skill(p, bundled=True) for p in sorted(BUNDLED.glob("*.md")))}
    if user_dir is not None and user_dir.is_dir():
        for path in sorted(user_dir.glob("*.md")):
            try:
                skill = read_skill(path, bundled=False)
            except SkillError as exc:
                log.warning("skipping skill: %s", exc)
                continue
            skills = {k: v for k, v in skills.items() if v.name != skill.name}
            skills[skill.question_type] = skill
    return list(skills.values())


def by_triggers(question: str, skills: list[Skill], video_count: int) -> Skill | None:
    """The skill whose trigger words or phrases occur most in ``question`` (ties: user skills,
    then comparison when several videos are asked about)."""
    words = " " + " ".join(tokens(question)) + " "
    best: tuple[int, int, int] | None = None
    chosen = None
    for skill in skills:
        if skill.question_type == META:
            continue
        hits = sum(1 for t in skill.triggers if f" {' '.join(tokens(t))} " in words)
        rank = (hits, int(not skill.bundled), int(skill.question_type == "comparison" and video_count > 1))
        if hits and (best is None or rank > best):
            best, chosen = rank, skill
    return chosen


class Classification(BaseModel):
    """The meta planner's decision."""

    question_type: str | None
    skill: Skill | None
    how: str
    usage: Usage | None = None


def classify(
    question: str, skills: list[Skill], planner: ChatModel | None, video_count: int
) -> Classification:
    """The skill for ``question``: the planner's choice guided by the meta-planner skill, or the
    trigger words when there is no planner or its reply is not a known type."""
    by_type = {s.question_type: s for s in skills}
    meta = by_type.get(META)
    usage = None
    if planner is not None and meta is not None:
        types = "\n".join(f"- {s.question_type}: {s.description}" for s in skills if s.question_type != META)
        reply = planner.chat(
            [
                ChatMessage(role="system", content=f"{meta.body}\n\nThe types:\n{types}"),
                ChatMessage(role="user", content=f"Question about {video_count} video(s): {question}"),
            ],
            max_tokens=64,
            temperature=0.0,
        )
        usage = reply.usage
        data = json_object(reply.text) or {}
        chosen = str(data.get("type", "")).strip().lower()
        if chosen in by_type and chosen != META:
            return Classification(
                question_type=chosen, skill=by_type[chosen], how="meta planner", usage=usage
            )
        how = f"trigger words (the meta planner's reply {(reply.text or '')[:60]!r} named no known type)"
    else:
        how = "trigger words"
    skill = by_triggers(question, skills, video_count)
    return Classification(
        question_type=skill.question_type if skill else None, skill=skill, how=how, usage=usage
    )

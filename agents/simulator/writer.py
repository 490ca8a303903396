"""Scripts written by the planner model, one per task (AgentCVR's LLM-generated semantic scripts),
with the seeded templates as the offline fallback.

The model is shown the script schema (:class:`~vidscope.agents.simulator.script.Script`'s JSON
schema), a worked example (a template script) and the task to write questions for, and replies with
one script as JSON. The reply is validated as a script (times ordered and inside the videos, every
answer one of its options, evidence inside its video); a reply that is not a valid script is
re-asked once with the validation error, then replaced by a template script, so training data is
always there. Options are shuffled here (seeded), so the answer's letter carries no prior whatever
order the model wrote them in.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

from pydantic import ValidationError

from vidscope.agents.multi_video import json_object
from vidscope.agents.simulator.script import Script
from vidscope.agents.simulator.templates import generate_script
from vidscope.models.protocols.chat import ChatMessage, ChatModel

SYSTEM = (
    "You write scripts for a text simulator of videos. A script lists videos (id, file name, "
    "duration), their timed events (actions, objects, on-screen text with attributes) and audio lines, "
    "relations across videos, and multiple-choice questions whose one correct answer follows from the "
    "script, with the evidence intervals that show it. Reply with ONE JSON object that validates "
    "against the schema, and nothing else."
)


#: The tasks scripts are written for when none are named: the kinds of question a script holds.
TASKS = (
    "counting (how many times something happens in one video)",
    "ordering (which of several events comes first)",
    "temporal_alignment (what is said or shown while an event happens)",
    "comparison (which video shows more of something, across videos)",
)


def _prompt(task: str, script_id: str, example: Script) -> str:
    schema = json.dumps(Script.model_json_schema(), separators=(",", ":"))
    return (
        f"Schema: {schema}\n\nExample script: {example.model_dump_json(exclude_none=True)}\n\n"
        f"Write a new script with script_id {script_id!r}: two or three videos of everyday scenes, and "
        f"three questions of this task: {task}. Each question has 3 to 5 options, the answer is one "
        "of them word for word, and its evidence intervals hold the events that decide it."
    )


def shuffled_options(script: Script, rng: random.Random) -> Script:
    """``script`` with every question's options in a random order (the answer text unchanged)."""
    questions = []
    for q in script.questions:
        options = list(q.options)
        rng.shuffle(options)
        questions.append(q.model_copy(update={"options": options}))
    return script.model_copy(update={"questions": questions})


def write_script(chat: ChatModel, task: str, seed: int, *, script_id: str | None = None) -> Script | None:
    """A script for ``task`` written by ``chat`` (re-asked once when invalid), or None."""
    sid = script_id or f"llm-{seed}"
    messages = [
        ChatMessage(role="system", content=SYSTEM),
        ChatMessage(role="user", content=_prompt(task, sid, generate_script(seed))),
    ]
    for _ in range(2):
        reply = chat.chat(messages, temperature=1.0, json_output=True)
        data = json_object(reply.text)
        problem = "the reply is not one JSON object"
        if data is not None:
            try:
                script = Script.model_validate({**data, "script_id": sid})
            except ValidationError as exc:
                problem = f"the script is invalid: {str(exc.errors()[0]['msg'])[:300]}"
            else:
                if script.questions:
                    return shuffled_options(script, random.Random(seed))
                problem = "the script has no questions"
        messages += [
            ChatMessage(role="assistant", content=reply.text or ""),
            ChatMessage(role="user", content=f"{problem}. Reply again with the whole script."),
        ]
    return None


def written_scripts(chat: ChatModel | None, tasks: Sequence[str], count: int, seed: int) -> list[Script]:
    """``count`` scripts, the tasks taken in turn: written by ``chat`` when given, and a template
    script (``generate_script``) wherever the model gave none or no model is configured."""
    scripts = []
    for i in range(count):
        sid = f"gen-{seed}-{i}"
        written = (
            write_script(chat, tasks[i % len(tasks)], seed * 100_003 + i, script_id=sid) if chat else None
        )
        scripts.append(written or generate_script(seed * 100_003 + i, script_id=sid))
    return scripts

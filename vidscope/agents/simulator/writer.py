"""Scripts written by the planner model, one per task (AgentCVR's LLM-generated semantic scripts),
with the seeded templates as the offline fallback.

The tasks are AgentCVR's ten CrossVid tasks (BU, NC, CC, PEA, PI, FSA, PSS, MSR, MOC, CCQA), each
told with the description its master prompt gives (:mod:`vidscope.agents.cvr.tasks`). Each is asked
in the form the deployed master answers it: BU multi-select (options, 1 to 3 right, ``answers``),
PSS an order of the videos ("2->3->1"), CCQA free text, FSA an interval "start,end" (scored as
:func:`vidscope.flows.training.rollout.answer_score` says), the others one option of several. The
templates (counting, ordering, temporal alignment, comparison) stay the fallback without a model.

The model is shown the script schema (:class:`~vidscope.agents.simulator.script.Script`'s JSON
schema), a worked example (a template script) and the task to write questions for, and replies with
one script as JSON. The reply is validated as a script (times ordered and inside the videos, every
answer one of its options, evidence inside its video); a reply that is not a valid script is
re-asked once with the validation error, then replaced by a template script, so training data is
always there. A reply the client cannot use at all (no JSON twice, cut off at the output limit
twice, a timeout) is a failed task too, not a failed run. Each script keeps where it came from and,
for a template, why (:class:`WrittenScript`). Options are shuffled here (seeded), so the answer's
letter carries no prior whatever order the model wrote them in.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from vidscope.agents.cvr.tasks import TASKS as CVR_TASKS
from vidscope.agents.cvr.tasks import TaskPrompt
from vidscope.agents.multi_video import json_object
from vidscope.agents.simulator.script import Script
from vidscope.agents.simulator.templates import generate_script
from vidscope.core.errors import ModelOutputError, OutputCutOff
from vidscope.evaluation.metrics import interval_of, order_of
from vidscope.models.protocols.chat import ChatMessage, ChatModel

log = logging.getLogger(__name__)

#: Output tokens one reply may take: a script of three questions over two or three videos takes
#: about 1,500; a reply past this is a model that does not stop (at temperature 1 small ones can).
MAX_TOKENS = 4096

SYSTEM = (
    "You write scripts for a text simulator of videos. A script lists videos (id, file name, "
    "duration), their timed events (actions, objects, on-screen text with attributes) and audio lines, "
    "relations across videos, and questions whose answer follows from the script, in the form the "
    "task asks, with the evidence intervals that show it. Reply with ONE JSON object that validates "
    "against the schema, and nothing else."
)


#: The tasks asked free-form with an interval answer, as CrossVid asks FSA and the master answers it
#: ("[start, end]"): training the master on options would train what it never deploys.
INTERVAL_TASKS = frozenset({"FSA"})

#: The tasks asked as the deployed master answers them, when that is not one option of several:
#: BU multi-select ("1-3 correct choices", answered "AC"), PSS an order of the videos
#: ("2->4->3->1"), CCQA free text, FSA an interval (the release's master prompts,
#: ``agent_system/prompts/master_{BU,PSS,CCQA,FSA}.prompt``, ask for these forms).
_FORMS = {
    "BU": "Give 4 or 5 options, each one intention or feeling (or a combination); 1 to 3 of them are "
    "right and never all: list every right option word for word in 'answers', and put the first of "
    "them in 'answer'.",
    "FSA": "Ask it free-form, with no options: the answer is the segment of the other video that serves "
    "the same purpose, written 'start,end' in seconds (like '40,52'), and its evidence is that segment.",
    "PSS": "Ask it free-form, with no options: each video shows one step, out of order; the answer is the "
    "videos' numbers (1 for the first video listed in video_ids) in the order the procedure needs, "
    "written like '2->3->1' with every video once.",
    "CCQA": "Ask it free-form, with no options: the answer is one short sentence on how the dishes "
    "differ or agree, in words the script's events and lines support.",
}

#: The tasks asked without options (their answer is an interval, an order or free text).
FREE_FORM_TASKS = frozenset({"FSA", "PSS", "CCQA"})


def _task(prompt: TaskPrompt) -> str:
    """A CrossVid task as the writer is told it: code, name, what its solver is told, the form."""
    form = _FORMS.get(prompt.code, "")
    return f"{prompt.code}, {prompt.name} (its solver is told: {prompt.brief}) {form}".strip()


#: The tasks scripts are written for, one after another: AgentCVR's ten CrossVid tasks, with the
#: task descriptions the master is given (:mod:`vidscope.agents.cvr.tasks`).
TASKS = tuple(_task(t) for t in CVR_TASKS.values())


def task_code_of(task: str) -> str:
    """The CrossVid code a task of :data:`TASKS` starts with ("FSA, functional step …" → "FSA")."""
    return task.split(",", 1)[0].strip()


def _interval_task(task: str) -> bool:
    """Whether ``task`` (one of :data:`TASKS`) is asked free-form with an interval answer."""
    return task_code_of(task) in INTERVAL_TASKS


def with_task(script: Script, task: str) -> Script:
    """``script`` with every question marked as written for ``task`` (the master is asked it with
    that task's prompt); a task that is no CrossVid code leaves the questions unmarked."""
    code = task_code_of(task)
    if code not in CVR_TASKS:
        return script
    questions = [q.model_copy(update={"task": code}) for q in script.questions]
    return script.model_copy(update={"questions": questions})


def _prompt(task: str, script_id: str, example: Script) -> str:
    schema = json.dumps(Script.model_json_schema(), separators=(",", ":"))
    code = task_code_of(task)
    form = (
        "Each question has no options; its answer is an interval 'start,end' in seconds"
        if _interval_task(task)
        else "Each question has no options; its answer is the order of its videos, like '2->3->1'"
        if code == "PSS"
        else "Each question has no options; its answer is one short sentence"
        if code == "CCQA"
        else "Each question has 4 or 5 options; 'answers' lists the 1 to 3 right ones word for word"
        if code == "BU"
        else "Each question has 3 to 5 options, the answer is one of them word for word"
    )
    return (
        f"Schema: {schema}\n\nExample script: {example.model_dump_json(exclude_none=True)}\n\n"
        f"Write a new script with script_id {script_id!r}: two or three videos of scenes this task is "
        f"about, and three questions of this task: {task}. {form}, and its evidence intervals hold the "
        "events that decide it."
    )


def _form_problem(script: Script, task: str) -> str | None:
    """Why the script's questions are not in the task's deployed answer form (None when they are):
    an interval task's questions have no options and an answer 'start,end' inside one of its
    videos; PSS's an order of its videos, each once; CCQA's free text; BU's options with 1 to 3 of
    them right (``answers``); the other tasks' options with one right."""
    code = task_code_of(task)
    for q in script.questions:
        if code in FREE_FORM_TASKS - INTERVAL_TASKS and q.options:  # FSA: told below
            return f"question {q.question_id}: ask it without options"
        if code not in FREE_FORM_TASKS and code in CVR_TASKS and not q.options:
            return f"question {q.question_id}: give it options"
        if code == "PSS" and sorted(order_of(q.answer) or ()) != list(range(1, len(q.video_ids) + 1)):
            return (
                f"question {q.question_id}: the answer must order its {len(q.video_ids)} videos like "
                "'2->3->1', each once"
            )
        if code == "BU" and not 1 <= len(q.answers or [q.answer]) <= 3:
            return f"question {q.question_id}: 1 to 3 options are right"
        if code != "BU" and len(set(q.answers)) > 1:
            return f"question {q.question_id}: exactly one option is right; leave 'answers' empty"
    if not _interval_task(task):
        return None
    durations = {v.video_id: v.duration for v in script.videos}
    for q in script.questions:
        gold = interval_of(q.answer)
        if q.options or gold is None:
            return f"question {q.question_id}: with no options, the answer must be an interval 'start,end'"
        start, end = gold
        if not 0 <= start < end <= max(durations.get(v, 0.0) for v in q.video_ids):
            return f"question {q.question_id}: the interval {q.answer!r} is not inside its video"
    return None


def shuffled_options(script: Script, rng: random.Random) -> Script:
    """``script`` with every question's options in a random order (the answer text unchanged)."""
    questions = []
    for q in script.questions:
        options = list(q.options)
        rng.shuffle(options)
        questions.append(q.model_copy(update={"options": options}))
    return script.model_copy(update={"questions": questions})


@dataclass(frozen=True)
class WrittenScript:
    """One generated script, the task it was asked for, and where it came from."""

    script: Script
    task: str
    #: Whether the model wrote it (else it is the template script).
    by_model: bool
    #: Why the template stands in: the model's last problem (None when the model wrote it).
    reason: str | None = None


def write_script(
    chat: ChatModel,
    task: str,
    seed: int,
    *,
    script_id: str | None = None,
    max_tokens: int | None = MAX_TOKENS,
) -> Script | str:
    """The script ``chat`` wrote for ``task`` (re-asked once when invalid), or why it wrote none."""
    sid = script_id or f"llm-{seed}"
    messages = [
        ChatMessage(role="system", content=SYSTEM),
        ChatMessage(role="user", content=_prompt(task, sid, generate_script(seed))),
    ]
    problem = "no reply"
    for _ in range(2):
        try:
            reply = chat.chat(messages, max_tokens=max_tokens, temperature=1.0, json_output=True)
        except OutputCutOff:
            # The client's own message advises [agent] max_tokens, which is not the writer's limit.
            return f"the reply was cut off at the writer's output limit ({max_tokens} tokens) twice"
        except (ModelOutputError, TimeoutError) as exc:
            # The client already re-asked (no JSON): this task gets no script from it.
            return f"the model gave no usable reply: {str(exc)[:300]}"
        data = json_object(reply.text)
        problem = "the reply is not one JSON object"
        if data is not None:
            try:
                script = Script.model_validate({**data, "script_id": sid})
            except ValidationError as exc:
                problem = f"the script is invalid: {str(exc.errors()[0]['msg'])[:300]}"
            else:
                wrong = _form_problem(script, task) if script.questions else "the script has no questions"
                if wrong is None:
                    return with_task(shuffled_options(script, random.Random(seed)), task)
                problem = wrong
        messages += [
            ChatMessage(role="assistant", content=reply.text or ""),
            ChatMessage(role="user", content=f"{problem}. Reply again with the whole script."),
        ]
    return problem


def write_scripts(
    chat: ChatModel | None,
    tasks: Sequence[str],
    count: int,
    seed: int,
    *,
    max_tokens: int | None = MAX_TOKENS,
) -> list[WrittenScript]:
    """``count`` scripts, the tasks taken in turn: written by ``chat`` when given, and a template
    script (``generate_script``) wherever the model gave none (with the reason) or no model is
    configured. Each fallback is logged with its reason."""
    scripts = []
    for i in range(count):
        sid, task, seed_i = f"gen-{seed}-{i}", tasks[i % len(tasks)], seed * 100_003 + i
        written = (
            write_script(chat, task, seed_i, script_id=sid, max_tokens=max_tokens)
            if chat
            else "no model is configured"
        )
        if isinstance(written, Script):
            scripts.append(WrittenScript(written, task, by_model=True))
            continue
        if chat:
            log.warning("script %s (task %s): a template stands in, %s", sid, task.split(",")[0], written)
        scripts.append(WrittenScript(generate_script(seed_i, script_id=sid), task, False, written))
    return scripts


def written_scripts(chat: ChatModel | None, tasks: Sequence[str], count: int, seed: int) -> list[Script]:
    """The scripts of :func:`write_scripts` (where each came from left out)."""
    return [w.script for w in write_scripts(chat, tasks, count, seed)]

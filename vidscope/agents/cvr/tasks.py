"""AgentCVR's task prompts: one instruction per CrossVid task, told to the master before the question.

The paper gives its master one prompt per task of the CrossVid benchmark (the released prompts are
``agent_system/prompts/master_<TASK>.prompt`` in wang-jh24/AgentCVR); these are ours, in our own
words, with the same substance: what the task asks, how to look (the videos side by side first,
then narrower), and what the answer is. Every one ends with the paper's rule, which its prompts
state as "MINIMUM 4 TOOL CALLS ... before you are allowed to call the `answer` tool"; the master
loop enforces it for a task (``[agent] cvr_min_queries``): an earlier answer is set aside, and only
answered queries count (a refused one does not).

As the released prompts do, each prompt walks through a worked episode in the master's own JSON
actions, each with a ``thought`` saying why: a first look at all videos over the same span side by
side, a narrower look (or a listen) at the likely ones, and the answer in the task's form. The
episodes are ours (:class:`Step`), written for each task's kind of evidence.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class Step:
    """One turn of a worked example: why (``thought``) and what to look for (``focus``); a listen
    (``audio_query``) when ``listen`` is set."""

    thought: str
    focus: str = ""
    listen: bool = False


def _example_action(step: Step, turn: int) -> dict[str, Any]:
    """A worked example's query as the master writes it (videos named by placeholders)."""
    if step.listen:
        return {"action": "audio_query", "thought": step.thought, "video_id": "<video 2>", "t0": 20, "t1": 45}
    if turn == 0:  # the first look: every video over the same span, side by side
        targets = [{"video_id": f"<video {i}>", "t0": 0, "t1": 30, "frames": 16} for i in (1, 2, 3)]
    else:  # then closer, on fewer ranges, with more frames
        targets = [{"video_id": f"<video {i}>", "t0": 20, "t1": 45, "frames": 32} for i in (1, 2)]
    return {"action": "visual_query", "thought": step.thought, "targets": targets, "focus": step.focus}


@dataclass(frozen=True)
class TaskPrompt:
    """One CrossVid task: its code, its name, what the master is told, and the answer's form."""

    code: str
    name: str
    brief: str
    answer_form: str
    #: Several option letters may be right (BU: "1-3 correct choices"); the choice is their set.
    multi_select: bool = False
    #: The answer's form when the question comes without options (CrossVid's own PSS records ask
    #: for the order itself; the simulator's scripts ask it as options); empty: ``answer_form``.
    open_form: str = ""
    #: A worked episode: the queries (two or three turns) and the answer's thought.
    steps: tuple[Step, ...] = field(default_factory=tuple)
    final_thought: str = ""
    #: The example answer without options (FSA's interval, PSS's order, CCQA's sentence).
    example_answer: str = ""

    def example(self, *, with_options: bool, min_queries: int = 0) -> str:
        """The worked episode, one JSON reply a turn (empty when the task has none); with fewer
        example queries than ``min_queries``, a line says the rest are asked before the answer."""
        if not self.steps:
            return ""
        turns = [{"actions": [_example_action(step, i)]} for i, step in enumerate(self.steps)]
        final: dict[str, Any] = {"action": "answer", "thought": self.final_thought}
        if with_options or not self.example_answer:
            letters = "BD" if self.multi_select else "B"
            final |= {"answer": " and ".join(f"({x})" for x in letters), "choice": letters}
        else:
            final["answer"] = self.example_answer
        final["citations"] = [{"video_id": "<video 2>", "start": 24, "end": 41}]
        turns.append({"actions": [final]})
        lines = [f"Turn {i + 1}: {json.dumps(t, ensure_ascii=False)}" for i, t in enumerate(turns)]
        asked = len(self.steps)
        if min_queries > asked:  # the rule holds in the example too
            more = f"Turns {asked + 1}-{min_queries}: further queries on the moments that decide."
            lines.insert(asked, more)
            lines[-1] = lines[-1].replace(f"Turn {asked + 1}:", f"Turn {min_queries + 1}:", 1)
        return "Worked example (one JSON object a turn, read each result before the next):\n" + "\n".join(
            lines
        )

    def render(self, min_queries: int, *, with_options: bool = True, example: bool = True) -> str:
        """The instruction the master reads before the question (``with_options``: the question
        lists options): the task, how to work and a worked example (unless ``example`` is off: an
        ablation whose master could not follow them), the answer's form and the rule."""
        form = self.answer_form if with_options or not self.open_form else self.open_form
        rule = (
            f"Make at least {min_queries} queries (visual_query or audio_query) that return a result "
            "before you answer: a refused query does not count, and an earlier answer is set aside."
            if min_queries > 0
            else ""
        )
        parts = [f"Task: {self.name} ({self.code}). {self.brief}"]
        if example:
            parts += [_METHOD, self.example(with_options=with_options, min_queries=min_queries)]
        return "\n".join(p for p in [*parts, f"Answer: {form}", rule] if p).strip()


#: How every task is worked, before its example (the released prompts' three stages, in our words).
_METHOD = (
    "How to work: first look at all videos over the same span side by side to see what each shows; "
    "then look closer at the ones that could fit, on the moments that differ, with more frames; "
    "listen where words decide; check the one detail your answer rests on before answering. Put "
    'your reasoning in each action\'s "thought"; placeholders like <video 1> stand for the ids listed '
    "with the question."
)

_LETTERS = 'the option letters you choose, in "choice" (one letter, or several in alphabetical order).'

#: The ten CrossVid tasks, by the codes the paper uses.
TASKS: dict[str, TaskPrompt] = {
    t.code: t
    for t in (
        TaskPrompt(
            "BU",
            "behavioural understanding",
            "The videos may be silent: judge what each subject intends or feels from what is seen "
            "(posture, speed, expression, what it does to its surroundings). Look at all videos over "
            "the same moment first, then compare the likely ones closely. Several videos may fit; "
            "never all of them.",
            _LETTERS,
            multi_select=True,
        ),
        TaskPrompt(
            "NC",
            "narrative comprehension",
            "The videos are parts of one or more stories. Follow who does what, and why, across them: "
            "listen to the dialogue and look at the key scenes before judging the story.",
            _LETTERS,
        ),
        TaskPrompt(
            "CC",
            "culinary comparison",
            "The videos cook similar dishes. Compare ingredients, tools, steps and their order across "
            "them, side by side on the matching steps.",
            _LETTERS,
        ),
        TaskPrompt(
            "PEA",
            "procedural error analysis",
            "The videos carry out the same procedure; find the step one of them does wrongly or "
            "leaves out, by comparing each step against the others.",
            _LETTERS,
        ),
        TaskPrompt(
            "PI",
            "plot inference",
            "The videos are clips of a film or series. Infer what happens between them, or next, from "
            "what is seen and said; check the scenes your inference rests on.",
            _LETTERS,
        ),
        TaskPrompt(
            "FSA",
            "functional step alignment",
            "A segment of one video is given. Find the segment of the other video that serves the "
            "same purpose, even if it looks different (another tool, another way). Look at the given "
            "segment first, search the other video, then compare both side by side to fix the start "
            "and the end.",
            'the interval in seconds of the other video, as "answer": "[start, end]" and one citation.',
        ),
        TaskPrompt(
            "PSS",
            "procedural step sequencing",
            "The videos each show one step of a procedure, out of order. Find what each shows and put "
            "them in the order the procedure needs.",
            _LETTERS,
            open_form='the videos\' numbers in the order the procedure needs, as "answer": "2->3->1->4" '
            "(every video once).",
        ),
        TaskPrompt(
            "MSR",
            "multi-view spatial reasoning",
            "The videos film one scene from different viewpoints. Relate what each view shows to the "
            "others to judge where things are, and how they are placed relative to each other.",
            _LETTERS,
        ),
        TaskPrompt(
            "MOC",
            "multi-view object counting",
            "The videos film one scene from different viewpoints. Count the objects asked about once "
            "each: the same object seen in two views is one.",
            _LETTERS,
        ),
        TaskPrompt(
            "CCQA",
            "comparative culinary question answering",
            "The videos cook similar dishes. Answer the open question about how they differ or agree, "
            "from what is seen and said in each.",
            "a short sentence, with the moments that support it as citations.",
        ),
    )
}


#: Each task's worked episode: its turns, the answer's thought and (without options) its answer.
_EXAMPLES: dict[str, tuple[tuple[Step, ...], str, str]] = {
    "BU": (
        (
            Step(
                "The question asks who is on guard. A first look at every subject as the stranger "
                "comes near tells calm ones from tense ones.",
                "How does each subject react as someone approaches: body low or relaxed, tail and "
                "ears, moving towards or away?",
            ),
            Step(
                "Videos 1 and 2 both back off; the others stay relaxed. Backing off while watching the "
                "stranger is guarding, turning to run is fear: compare the two closely.",
                "While moving back, does the subject keep facing the person, or turn and flee?",
            ),
        ),
        "Video 2 faces the stranger while backing off (guarding); video 4 does the same at its end. "
        "Two videos fit, so two letters.",
        "",
    ),
    "NC": (
        (
            Step(
                "The story runs across the videos. First see who is in each and what happens.",
                "Who appears in each clip, and what do they do?",
            ),
            Step(
                "The turn in the story is a conversation in video 2: hear what is said.",
                listen=True,
            ),
        ),
        "The conversation in video 2 explains why she leaves in video 3; option B says that.",
        "",
    ),
    "CC": (
        (
            Step(
                "Compare the dishes step by step: first what each kitchen starts with.",
                "Which ingredients and tools are on the counter, and what is done first?",
            ),
            Step(
                "Videos 1 and 2 differ at the frying step: look at it side by side.",
                "What goes into the pan, in what order, and for how long is it stirred?",
            ),
        ),
        "Only video 2 adds the garlic after the onions; option B.",
        "",
    ),
    "PEA": (
        (
            Step(
                "The same procedure in every video: line the steps up to find where one departs.",
                "Which step is carried out here, and with which part or tool?",
            ),
            Step(
                "Video 2 seems to skip tightening the bolt: check that moment against video 1.",
                "Is the bolt tightened before the next part goes on?",
            ),
        ),
        "Video 2 fits the next part without tightening the bolt; option B names that error.",
        "",
    ),
    "PI": (
        (
            Step(
                "The clips are scenes of one film. First what each scene shows.",
                "Who is in each scene, where, and what state are they in?",
            ),
            Step(
                "The last line of video 2 may say what happens next: listen to it.",
                listen=True,
            ),
        ),
        "What is said at the end of video 2 and the packed bags in video 3 point to the departure; option B.",
        "",
    ),
    "FSA": (
        (
            Step(
                "First the given segment of video 1: what is it for?",
                "What is done in this segment, and what is it for?",
            ),
            Step(
                "Now the candidates in video 2 that serve that purpose, side by side with the given segment.",
                "Where does the same purpose start and end here, even if done another way?",
            ),
        ),
        "Video 2 serves the same purpose from 24 s to 41 s.",
        "[24, 41]",
    ),
    "PSS": (
        (
            Step(
                "Each video is one step. First what each shows.",
                "Which step of the procedure does this show: what state are the materials in?",
            ),
            Step(
                "Videos 1 and 2 could come either way round: compare their start and end states.",
                "What is the state of the work at the start and at the end of each?",
            ),
        ),
        "Video 2 ends where video 3 starts, and video 1 finishes the work: 2, then 3, then 1.",
        "2->3->1",
    ),
    "MSR": (
        (
            Step(
                "The views show one scene. First what each view sees and from where.",
                "Which landmarks does each view show, and on which side of the frame?",
            ),
            Step(
                "The table appears in views 1 and 2: use it to relate them.",
                "Where is the chair relative to the table in this view?",
            ),
        ),
        "Seen from both views, the chair stands left of the table; option B.",
        "",
    ),
    "MOC": (
        (
            Step(
                "Count in every view first, noting where each object stands.",
                "How many bicycles are there, and where is each one?",
            ),
            Step(
                "Views 1 and 2 overlap: check which bicycles are the same ones.",
                "Which bicycles seen here are also seen in the other view (same place, same colour)?",
            ),
        ),
        "Three in view 1, two in view 2, one of them the same: four bicycles; option B.",
        "",
    ),
    "CCQA": (
        (
            Step(
                "Compare how each dish is made: first the steps in each video.",
                "Which ingredients and cooking method does each video use?",
            ),
            Step(
                "The narrator of video 2 explains the pressure cooker: listen.",
                listen=True,
            ),
        ),
        "Video 1 simmers in a pot; video 2 uses a pressure cooker and says why.",
        "Video 1 simmers the beans in a pot for an hour, while video 2 cooks them in a pressure "
        "cooker to save time.",
    ),
}

TASKS = {
    code: replace(
        task, steps=_EXAMPLES[code][0], final_thought=_EXAMPLES[code][1], example_answer=_EXAMPLES[code][2]
    )
    for code, task in TASKS.items()
}


#: Other spellings of task names that benchmark files use (CrossVid's task list).
_ALIASES = {"behavioral understanding": "BU", "comparative culinary qa": "CCQA"}


def task_code(label: str) -> str | None:
    """The task code a benchmark's task label names (its code or full name, any case); None for
    a label that is no CrossVid task."""
    key = " ".join(label.split()).lower()
    if key.upper() in TASKS:
        return key.upper()
    by_name = {t.name: t.code for t in TASKS.values()} | _ALIASES
    return by_name.get(key)


def task_prompt(code: str) -> TaskPrompt:
    """The task of ``code`` (case-insensitive); a ``ValueError`` naming the known codes otherwise."""
    found = TASKS.get(code.strip().upper())
    if found is None:
        raise ValueError(f"unknown AgentCVR task {code!r}: one of {', '.join(TASKS)}")
    return found

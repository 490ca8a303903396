"""AgentCVR's task prompts: one instruction per CrossVid task, told to the master before the question.

The paper gives its master one prompt per task of the CrossVid benchmark (the released prompts are
``agent_system/prompts/master_<TASK>.prompt`` in wang-jh24/AgentCVR); these are ours, in our own
words, with the same substance: what the task asks, how to look (the videos side by side first,
then narrower), and what the answer is. Every one ends with the paper's rule, which its prompts
state as "MINIMUM 4 TOOL CALLS ... before you are allowed to call the `answer` tool"; the master
loop enforces it for a task (``[agent] cvr_min_queries``): an earlier answer is set aside.
"""

from __future__ import annotations

from dataclasses import dataclass


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

    def render(self, min_queries: int, *, with_options: bool = True) -> str:
        """The instruction the master reads before the question (``with_options``: the question
        lists options)."""
        form = self.answer_form if with_options or not self.open_form else self.open_form
        rule = (
            f"Make at least {min_queries} queries (visual_query or audio_query) before you answer; "
            "an earlier answer is set aside."
            if min_queries > 0
            else ""
        )
        return f"Task: {self.name} ({self.code}). {self.brief}\nAnswer: {form}\n{rule}".strip()


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

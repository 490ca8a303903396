"""The commands the real-model tier runs, their outcomes, and the quality table it records.

Each :class:`Command` is one vidscope invocation a user would type, over the library of
``conftest.py`` (two narrated harbour videos with known facts, and the shared car footage); those
with a known right answer carry a ``judge``. :class:`Run` is what came back: exit status, output,
the parsed JSON result, the model exchanges the recording proxy saw, and the wall time.
:class:`SimRun` is one job of the training simulator run against the model (scripts written,
answers phrased): what it produced, counted, and why anything fell back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recorder import Exchange

# Questions over the synthetic facts (facts.HARBOUR_FACTS / RIVER_FACTS).
PIER_OPTIONS = ["pier three", "pier five", "pier seven", "pier nine"]
YEAR_OPTIONS = ["1975", "1985", "1990", "2001"]
CHEAPER_OPTIONS = ["the harbour tour", "the river port"]


@dataclass(frozen=True)
class Command:
    """One vidscope invocation of the tier and, where one is known, how to judge its answer."""

    name: str
    agent: str
    args: Callable[[Any], list[str]]
    #: The right answer as the agent should give it: a choice letter, or a regex on the answer text.
    gold: str | None = None
    #: Settings for this command only (``VIDSCOPE_*`` variables), e.g. a smaller step budget.
    env: dict[str, str] = field(default_factory=dict)


def _choice_or_text(answer: dict[str, Any], gold: str) -> bool:
    if len(gold) == 1:
        return (answer.get("choice") or "").strip().upper() == gold
    return re.search(gold, str(answer.get("answer", "")), re.IGNORECASE) is not None


#: The eval questions' right letters (filled when the benchmark files are written).
EVAL_GOLD: dict[str, str] = {}


def _eval_args(lib: Any) -> list[str]:
    """An EgoSchema-format benchmark of two questions over the harbour tour (real loader). The
    pier question is ``ask-dvd``'s, the same agent on the same video: asking it here too cost ~85 s
    of the tier's 15 minutes and showed nothing new, so eval asks the two others."""
    root = lib.data_dir.parent / "egoschema"
    root.mkdir(exist_ok=True)
    questions = [
        (
            "harbour-q2",
            "In which year was the lighthouse painted green?",
            ["1990", "1975", "1985", "2001", "never"],
            0,
        ),
        ("harbour-q3", "How much does a ferry ticket cost?", ["$5", "$12", "$8", "$20", "free"], 1),
    ]
    records = []
    for uid, question, options, _ in questions:
        link = root / f"{uid}.mp4"
        if not link.exists():
            link.symlink_to(lib.harbour)
        records.append(
            {"q_uid": uid, "google_drive_id": "", "question": question}
            | {f"option {i}": option for i, option in enumerate(options)}
        )
    (root / "questions.json").write_text(json.dumps(records))
    (root / "subset_answers.json").write_text(json.dumps({uid: gold for uid, _q, _o, gold in questions}))
    EVAL_GOLD.update({uid: "ABCDE"[gold] for uid, _q, _o, gold in questions})
    return [
        "eval", "egoschema", "--root", str(root), "--annotations", str(root / "questions.json"),
        "--option", f"answers={root / 'subset_answers.json'}", "--agent", "dvd", "--concurrency", "1",
        # The harbour facts are partly spoken, and the library was ingested with speech: keep it
        # (EgoSchema's own protocol is without transcripts, which would re-ingest without them).
        "--option", "transcripts=true",
        "--retries", "0", "--run", "real-model", "--json",
    ]  # fmt: skip


def json_result(stdout: str) -> dict[str, Any] | None:
    """The one JSON object a ``--json`` command printed, or None when it printed something else."""
    try:
        value = json.loads(stdout.strip())
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def extractive_args(args: list[str]) -> list[str]:
    """``args`` for the same question answered with no model: an eval gets a run of its own and
    asks for the extractive strategy by name (``eval`` refuses a planner strategy without one)."""
    out = list(args)
    if "--run" in out:
        out[out.index("--run") + 1] += "-extractive"
        if "--agent" in out:
            out[out.index("--agent") + 1] = "extractive"
    return out


def compare_args(lib: Any, agent: str) -> list[str]:
    """``compare`` of the two harbour tours with ``agent``: where is the ticket cheaper?"""
    options = [arg for option in CHEAPER_OPTIONS for arg in ("--options", option)]
    question = "Where is the ferry ticket cheaper?"
    return [
        "compare",
        str(lib.harbour),
        str(lib.river),
        question,
        *options,
        "--agent",
        agent,
        "--json",
        "--trace",
    ]


COMMANDS: dict[str, Command] = {
    command.name: command
    for command in (
        Command(
            "ask-dvd",
            "dvd",
            lambda lib: (
                ["ask", str(lib.harbour), "Which pier does the ferry to North Point leave from?"]
                + ["--options", *PIER_OPTIONS, "--json", "--trace"]
            ),
            gold="C",
        ),
        # Real footage without speech or text and no judged answer: what it checks (a clean exit,
        # parsed calls, honest levels, no data echo, the floor) shows within 3 steps, as eval's.
        Command(
            "ask-shared",
            "dvd",
            lambda lib: [
                "ask",
                str(lib.sample),
                "What moves through the scene, and when?",
                "--json",
                "--trace",
            ],
            env={"VIDSCOPE_AGENT__MAX_STEPS": "3"},
        ),
        Command(
            "ask-avi",
            "avi",
            lambda lib: (
                ["ask", str(lib.harbour), "In which year was the lighthouse painted green?"]
                + ["--options", *YEAR_OPTIONS, "--agent", "avi", "--json", "--trace"]
            ),
            gold="C",
        ),
        Command(
            "ask-library",
            "dvd (library)",
            lambda lib: [
                "ask",
                "--library",
                "How much does a ferry ticket cost at the harbour tour?",
                "--json",
                "--trace",
            ],
            gold=r"\b(12|twelve)\b",
        ),
        Command("compare-sama", "sama", lambda lib: compare_args(lib, "sama"), gold="B"),
        Command("compare-cvr", "cvr", lambda lib: compare_args(lib, "cvr"), gold="B"),
        Command(
            "search",
            "mavis",
            lambda lib: ["search", "ferry leaving from a pier at the harbour", "--json"],
        ),
        # Two questions, each with a budget of 3 steps, so the tier keeps within its 15 minutes.
        Command("eval", "dvd (eval)", _eval_args, env={"VIDSCOPE_AGENT__MAX_STEPS": "3"}),
    )
}


@dataclass
class Run:
    """What one command did."""

    command: Command
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    exchanges: list[Exchange]
    result: dict[str, Any] | None = None
    run_dir: Path | None = None
    predictions: list[dict[str, Any]] = field(default_factory=list)
    #: (right, judged) of the same command with no model configured: the extractive answer, the
    #: floor every agent must not fall below.
    extractive: tuple[int, int] | None = None

    @property
    def model_requests(self) -> int:
        return sum(1 for e in self.exchanges if e.path.endswith("/chat/completions"))

    def answers(self) -> dict[str, dict[str, Any]]:
        """Each question's answer object (one for ask/compare; one per prediction for eval)."""
        if self.command.name == "eval":
            return {p["question_id"]: self._with_trace(p) for p in self.predictions}
        if self.command.name == "search" or self.result is None:
            return {}
        return {self.command.name: self.result}

    def _with_trace(self, prediction: dict[str, Any]) -> dict[str, Any]:
        """An eval prediction with its answer's steps: a prediction names the file under the run
        directory (``traces/…json``) that holds the whole answer, trace included."""
        path = prediction.get("trace")
        if not isinstance(path, str) or self.run_dir is None:
            return prediction
        whole = json.loads((Path(self.run_dir) / path).read_text(encoding="utf-8"))
        # The whole answer's citations are objects (level, support); the prediction's are tuples.
        return {**prediction, "trace": whole.get("trace", []), "citations": whole.get("citations", [])}

    def questions(self) -> dict[str, list[dict[str, Any]]]:
        """Each question's trace. Eval predictions keep no trace: their tool-call count stands in."""
        if self.command.name == "eval":
            return {
                p["question_id"]: [{"kind": "tool", "tool": "?"}] * int(p["tool_calls"])
                for p in self.predictions
            }
        if self.command.name == "search":
            planned = (self.result or {}).get("planner", "")
            # The MAVIS planner's "tool" is its JSON plan: parsed when the plan came from the model.
            return {"search": [{"kind": "tool", "tool": "plan"}] if str(planned).startswith("chat:") else []}
        return {self.command.name: list((self.result or {}).get("trace", []))}

    def right(self) -> tuple[int, int]:
        """(right answers, judged questions) on the synthetic facts."""
        if self.command.name == "eval":
            right = sum(_choice_or_text(p, EVAL_GOLD[p["question_id"]]) for p in self.predictions)
            return right, len(self.predictions)
        if self.command.gold is None or self.result is None:
            return 0, 0
        return int(_choice_or_text(self.result, self.command.gold)), 1

    def forced(self) -> int:
        return sum(bool(a.get("forced")) for a in self.answers().values())

    def fallbacks(self) -> int:
        """Answers where the agent reached none and the extractive answer stood in."""
        return sum(bool(a.get("fallback")) for a in self.answers().values())

    def against_extractive(self) -> str:
        """Whether the agent beat, matched or fell below the extractive answer on the same
        questions ("–" where nothing is judged)."""
        right, judged = self.right()
        if not judged or self.extractive is None or not self.extractive[1]:
            return "–"
        floor = self.extractive[0]
        verdict = "beat" if right > floor else "matched" if right == floor else "below"
        return f"{verdict} ({right}/{judged} vs {floor}/{self.extractive[1]})"

    def steps(self) -> int:
        return sum(len(trace) for trace in self.questions().values())

    def tokens(self) -> tuple[int, int, int]:
        """Prompt tokens sent, prompt tokens the server processed (not from its cache), output."""
        return (
            sum(e.prompt_tokens for e in self.exchanges),
            sum(e.prompt_tokens - e.cached_tokens for e in self.exchanges),
            sum(e.completion_tokens for e in self.exchanges),
        )


def quality_table(runs: list[Run], *, commit: str, date: str, model: str, threads: int) -> str:
    """The markdown block RESULTS.md keeps per tier run."""
    lines = [
        f"### Real-model tier, {date}, commit {commit}",
        "",
        f"Model: {model} (llama.cpp server, {threads} thread(s), temperature 0, seed 1234). "
        "Command: `bash scripts/real_model.sh`.",
    ]
    if runs:  # a session of simulator jobs only (``-k``) ran no command
        lines += [
            "",
            "| command | agent | exit | right | vs extractive | steps | model requests "
            "| prompt (processed) / output tokens | forced | fallback | seconds |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
    for run in runs:
        right, judged = run.right()
        prompt, processed, output = run.tokens()
        lines.append(
            f"| {run.command.name} | {run.command.agent} | {run.returncode} | "
            f"{f'{right}/{judged}' if judged else '–'} | {run.against_extractive()} | {run.steps()} | "
            f"{run.model_requests} | {prompt:,} ({processed:,}) / {output:,} | {run.forced()} | "
            f"{run.fallbacks()} | "
            f"{run.seconds:.0f} |"
        )
    return "\n".join(lines) + "\n"


@dataclass
class SimRun:
    """One simulator job against the real model: its counts (e.g. scripts by the model and by the
    template), the reasons of the fallbacks, the exchanges and the wall time."""

    name: str
    counts: dict[str, int]
    exchanges: list[Exchange]
    seconds: float
    reasons: list[str] = field(default_factory=list)

    @property
    def model_requests(self) -> int:
        return sum(1 for e in self.exchanges if e.path.endswith("/chat/completions"))


def sim_table(runs: list[SimRun]) -> str:
    """The markdown block of the simulator jobs (appended to the quality table)."""
    lines = [
        "Training simulator against the same model:",
        "",
        "| job | outcome | model requests | prompt / output tokens | seconds |",
        "|---|---|---|---|---|",
    ]
    for run in runs:
        prompt = sum(e.prompt_tokens for e in run.exchanges)
        output = sum(e.completion_tokens for e in run.exchanges)
        outcome = ", ".join(f"{key}: {value}" for key, value in run.counts.items())
        lines.append(
            f"| {run.name} | {outcome} | {run.model_requests} | {prompt:,} / {output:,} | {run.seconds:.0f} |"
        )
    reasons = [f"- {run.name}: {reason}" for run in runs for reason in run.reasons]
    return "\n".join(lines + ([""] + reasons if reasons else [])) + "\n"

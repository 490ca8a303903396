"""Rollouts of an agent strategy against the simulator: rewards, groups, Parquet trajectories.

A *group* is one question answered ``group_size`` times by the same strategy with sampling on (the
unit GRPO normalises rewards over). Each sample runs the strategy's real loop (any strategy of
:mod:`vidscope.agents.strategies` with a planner and simulated tools: DVD's ReAct loop, AVI's
three phases, SAMA's skill-guided loop, AgentCVR's master agent, or a ReAct loop over AgentCVR's
actions) with simulated tools, tool caching off and its own seed, and is scored as AgentCVR's
release scores it: 1 for a correct answer *given through the answer action* (a best guess forced
at a limit, or a letter written in plain text, earns no answer reward: the release's reward script
returns 0 when it finds no answer call) plus 0.1 when every tool call was well formed. Answers are
scored in their deployed form (letters, a set of letters for BU, an order for PSS, free text for
CCQA, an interval for FSA: exact by default, :class:`Scoring`). When a model is given as the
simulator (M_sim) it phrases the simulated results. The conversation is stored in the
conversational format TRL's trainers read: ``prompt`` (system and question) and ``completion``
(everything the policy did and saw after it), also whole as ``messages``, with ``group_id`` and
``reward`` per sample.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from vidscope.agents import strategies
from vidscope.agents.runtime import Answer
from vidscope.agents.simulator.script import Question, Script
from vidscope.agents.simulator.simulator import ScriptSimulator, SimContext
from vidscope.agents.strategies import Scope, StrategyRequest
from vidscope.agents.tools import AgentConfig
from vidscope.core.hashing import stable_hash
from vidscope.core.settings import Settings
from vidscope.evaluation.metrics import (
    interval_of,
    order_match,
    order_of,
    temporal_iou,
    within_tolerance,
)
from vidscope.models.protocols.chat import ChatMessage, ChatModel, ChatReply, ToolSpec

#: The strategy rolled out when none is named: AgentCVR's master agent (``run_cvr``), the loop
#: ``compare --agent cvr`` runs and ``train grpo`` trains.
DEFAULT_STRATEGY = "cvr"


def rollout_strategies() -> tuple[str, ...]:
    """The strategies that can be rolled out: those a policy drives (they need a planner) whose
    tools the simulator answers."""
    return tuple(
        s.name for s in strategies.STRATEGIES.values() if s.needs_planner and s.sim_tools is not None
    )


#: Reward parts (AgentCVR): a correct answer, and well-formed tool calls.
CORRECT_REWARD = 1.0
FORMAT_REWARD = 0.1

#: How an interval answer (CrossVid FSA, "start,end") earns the answer reward.
#: ``exact``: both ends equal the gold's — the release's reward script
#: (``verl/utils/reward_score/crossvid.py`` in wang-jh24/AgentCVR) compares the final answer with
#: the ground truth as strings; we compare the two numbers, so "[40, 52]" and "40,52" agree.
#: ``iou``: the temporal IoU with the gold, as the release's FSA evaluation (``run_FSA_agent.py``)
#: and CrossVid's ``eval/FSA.py`` score it (the reward is then fractional).
#: ``within``: both ends within ``interval_seconds`` of the gold's — ours, an option only; it no
#: longer carries the paper's name T_tol, which is a bound on turns (App. B).
IntervalScoring = Literal["exact", "iou", "within"]
INTERVAL_SCORINGS: tuple[IntervalScoring, ...] = ("exact", "iou", "within")
DEFAULT_INTERVAL_SCORING: IntervalScoring = "exact"

#: Seconds either end of an interval answer may be off under ``interval_scoring = "within"``
#: (ours: about one ingested frame step at the default sampling and a fifth of a template event).
WITHIN_SECONDS = 2.0


@dataclass(frozen=True)
class Scoring:
    """How answers are scored for the reward: interval answers by ``interval`` (seconds: the
    zone of ``within``)."""

    interval: IntervalScoring = DEFAULT_INTERVAL_SCORING
    seconds: float = WITHIN_SECONDS

    def __post_init__(self) -> None:
        if self.interval not in INTERVAL_SCORINGS:
            raise ValueError(
                f"interval scoring is one of {', '.join(INTERVAL_SCORINGS)}, not {self.interval!r}"
            )
        if self.seconds < 0:
            raise ValueError(f"the interval zone is seconds >= 0, not {self.seconds}")


#: The release's scoring: exact match of interval answers.
RELEASED = Scoring()

#: Sampling temperature of the LLM simulator M_sim when a model phrases the simulated results (the
#: release's simulator tool, ``verl/tools/video_analysis_tools.py``, asks its model at 0.1).
SIMULATOR_TEMPERATURE = 0.1

#: Tool-call errors that mean the call itself was malformed (not a refusal of a valid call).
_MALFORMED = ("invalid arguments", "unknown tool", "ends the conversation")

#: Builds the policy of one sample from its random generator (seeded per sample).
PolicyFactory = Callable[[Question, random.Random], ChatModel]


# ============================================================================ reward


@dataclass(frozen=True)
class Reward:
    """A sample's score and its parts.

    ``answered``: the run ended in an answer given through the answer action (a ``finish`` step,
    not a best guess forced at a limit). The release's reward script returns 0 "when no valid
    answer tool call" is found (``crossvid.py``: ``if final_submission is None: return 0.0``), so a
    correct letter written in plain text earns no answer reward. ``answer_score`` is the answer's
    score in [0, 1] (1 or 0, or an IoU under ``iou`` interval scoring).
    """

    correct: bool
    well_formed: bool
    answered: bool = True
    answer_score: float | None = None

    @property
    def answer_reward(self) -> float:
        """What the answer earns: its score when given through the answer action, else 0."""
        if not self.answered:
            return 0.0
        return self.answer_score if self.answer_score is not None else float(self.correct)

    @property
    def total(self) -> float:
        """1 for a correct answer given through the answer action + 0.1 for well-formed calls."""
        return CORRECT_REWARD * self.answer_reward + FORMAT_REWARD * self.well_formed


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def answer_score(
    question: Question,
    answer_text: str,
    choice: str | None,
    scoring: Scoring = RELEASED,
) -> float:
    """How right an answer is, in [0, 1], in the question's deployed form: the correct option's
    letter (the set of letters, sorted, for a multi-select question: CrossVid's BU); the exact
    order for an order question (PSS, "2->3->1->4", no partial credit as CrossVid's ``eval/PSS.py``);
    an interval question (FSA) by ``scoring.interval``; else the expected text in the answer (case
    and spacing ignored; the release's exact string match would never pay a free-text CCQA
    paragraph, and its evaluation asks a judge model instead)."""
    if question.options:
        return float(choice is not None and choice == question.answer_letter)
    if question.is_order:
        gold = order_of(question.answer)
        return float(gold is not None and order_match(order_of(answer_text), gold))
    interval = interval_of(question.answer)
    if interval is not None:
        predicted = interval_of(answer_text)
        if scoring.interval == "iou":
            return temporal_iou(predicted, interval) if predicted is not None else 0.0
        if scoring.interval == "within":
            return float(within_tolerance(predicted, interval, scoring.seconds))
        return float(predicted is not None and sorted(predicted) == sorted(interval))
    return float(_norm(question.answer) in _norm(answer_text))


def is_correct(
    question: Question,
    answer_text: str,
    choice: str | None,
    scoring: Scoring = RELEASED,
) -> bool:
    """Whether an answer is fully right (:func:`answer_score` of 1)."""
    return answer_score(question, answer_text, choice, scoring) >= 1.0


def answered_by_action(answer: Answer) -> bool:
    """Whether the run ended in an answer given through the answer action: an answer not forced at
    a limit, recorded by a ``finish`` step (the answer tool: DVD, SAMA, AgentCVR) or an ``answer``
    step (AVI's review verdict); a plain-text reply is never one."""
    return not answer.forced and any(s.kind in ("finish", "answer") and s.ok for s in answer.trace)


def score(
    question: Question,
    answer: Answer,
    scoring: Scoring = RELEASED,
) -> Reward:
    """The reward of one finished conversation (the answer reward only for an answer given through
    the answer action; interval answers scored by ``scoring``)."""
    calls = [s for s in answer.trace if s.kind in ("tool", "finish")]
    malformed = any(
        s.kind == "model-error" or (not s.ok and s.observation.startswith(_MALFORMED)) for s in answer.trace
    )
    value = answer_score(question, answer.answer, answer.choice, scoring)
    return Reward(
        correct=value >= 1.0,
        well_formed=bool(calls) and not malformed,
        answered=answered_by_action(answer),
        answer_score=value,
    )


# ============================================================================ recording


class RecordingChat:
    """Wraps a policy and keeps its conversation (messages + reply), and the tools it was offered,
    so a sample's full conversation can be stored.

    A loop that keeps a growing history (DVD, AgentCVR) sends the whole conversation each call: the
    last call is the conversation. SAMA rebuilds its prompt every turn (system, then one user
    message with the question and the evidence memory): a call with the same system prompt and one
    new user message continues the conversation, that message appended after the last reply. A
    call under another system prompt starts a new conversation (SAMA's skill classification comes
    before its loop and is not kept; the chosen skill is in the loop's system prompt).
    """

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.name = inner.name
        self.messages: list[ChatMessage] = []
        self.tools: list[ToolSpec] = []

    def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        json_output: bool = False,
    ) -> ChatReply:
        """The inner policy's reply; the conversation so far is kept."""
        reply = self.inner.chat(
            messages, tools=tools, max_tokens=max_tokens, temperature=temperature, json_output=json_output
        )
        for spec in tools or []:
            if all(spec.name != t.name for t in self.tools):
                self.tools.append(spec)
        said = ChatMessage(role="assistant", content=reply.text, tool_calls=list(reply.tool_calls))
        rebuilt = len(messages) == 2 and len(self.messages) > 2 and messages[0] == self.messages[0]
        self.messages = [*self.messages, messages[1], said] if rebuilt else [*messages, said]
        return reply


def message_row(message: ChatMessage) -> dict[str, Any]:
    """A message as the chat-template dict TRL and transformers read (arguments as JSON text)."""
    return {
        "role": message.role,
        "content": message.content or "",
        "tool_calls": [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)},
            }
            for c in message.tool_calls
        ],
        "tool_call_id": message.tool_call_id,
        "name": message.name,
    }


_TOOL_CALL = pa.struct(
    [
        ("id", pa.string()),
        ("type", pa.string()),
        ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())])),
    ]
)
_MESSAGE = pa.struct(
    [
        ("role", pa.string()),
        ("content", pa.string()),
        ("tool_calls", pa.list_(_TOOL_CALL)),
        ("tool_call_id", pa.string()),
        ("name", pa.string()),
    ]
)
#: The Parquet schema of trajectories (one row per sample).
TRAJECTORY_SCHEMA = pa.schema(
    [
        ("group_id", pa.string()),
        ("sample", pa.int32()),
        ("seed", pa.int64()),
        ("strategy", pa.string()),
        ("script_id", pa.string()),
        ("question_id", pa.string()),
        ("question_kind", pa.string()),
        ("prompt", pa.list_(_MESSAGE)),
        ("completion", pa.list_(_MESSAGE)),
        ("messages", pa.list_(_MESSAGE)),
        ("tools", pa.string()),
        ("answer", pa.string()),
        ("choice", pa.string()),
        ("expected", pa.string()),
        ("correct", pa.bool_()),
        ("answered", pa.bool_()),
        ("well_formed", pa.bool_()),
        ("reward", pa.float64()),
        ("tool_calls", pa.int32()),
        ("forced", pa.bool_()),
    ]
)


# ============================================================================ rollouts


def sample_seed(seed: int, group_id: str, sample: int) -> int:
    """The seed of one sample: a function of the run's seed, the group and the sample's index only,
    so any sample can be replayed alone and adding questions does not change the others."""
    return int(stable_hash(seed, group_id, sample)[:15], 16)


def run_strategy(strategy: str, ctx: SimContext, question: Question) -> Answer:
    """``question`` answered by ``strategy``'s loop with simulated tools in ``ctx``."""
    scope: Scope = "video" if len(question.video_ids) == 1 else "videos"
    request = StrategyRequest(
        question.text,
        question.video_ids,
        scope,
        question.options or None,
        task=question.task,
        multi_select=question.multi_select,
    )
    return strategies.answer(strategy, ctx, request)


def rollout_config(
    config: AgentConfig, *, temperature: float, max_turns: int, turn_tolerance: int | None = None
) -> AgentConfig:
    """``config`` for rollouts: sampling at ``temperature``, no tool cache, ``max_turns`` model
    turns (T_max) and, for AgentCVR, ``turn_tolerance`` turns without progress (T_tol; None keeps
    ``[agent] cvr_turn_tolerance``)."""
    tolerance = {} if turn_tolerance is None else {"cvr_turn_tolerance": turn_tolerance}
    return config.model_copy(
        update={
            **tolerance,
            "temperature": temperature,
            "tool_cache": False,
            "max_steps": max_turns,
            "avi_max_iterations": max_turns,
            "sama_max_turns": max_turns,
            "cvr_max_turns": max_turns,
        }
    )


def rollout_group(
    settings: Settings,
    script: Script,
    question: Question,
    policy: PolicyFactory,
    *,
    strategy: str = DEFAULT_STRATEGY,
    group_size: int = 8,
    seed: int = 0,
    temperature: float = 1.0,
    max_turns: int = 20,
    scoring: Scoring = RELEASED,
    simulator_model: ChatModel | None = None,
    turn_tolerance: int | None = None,
) -> list[dict[str, Any]]:
    """``group_size`` samples of ``strategy`` on ``question``, as trajectory rows."""
    if strategy not in rollout_strategies():
        raise ValueError(f"unknown strategy {strategy!r}; choose one of: {', '.join(rollout_strategies())}")
    config = rollout_config(
        settings.agent, temperature=temperature, max_turns=max_turns, turn_tolerance=turn_tolerance
    )
    group_id = f"{script.script_id}/{question.question_id}"
    rows = []
    for index in range(group_size):
        this_seed = sample_seed(seed, group_id, index)
        chat = RecordingChat(policy(question, random.Random(this_seed)))
        simulator = ScriptSimulator(
            script,
            clip_seconds=settings.ingest.clip_seconds,
            phraser=simulator_model,
            temperature=SIMULATOR_TEMPERATURE,
        )
        ctx = SimContext(settings, simulator, chat=chat, config=config)
        answer = run_strategy(strategy, ctx, question)
        reward = score(question, answer, scoring)
        messages = [message_row(m) for m in chat.messages]
        split = next((i + 1 for i, m in enumerate(messages) if m["role"] == "user"), len(messages))
        rows.append(
            {
                "group_id": group_id,
                "sample": index,
                "seed": this_seed,
                "strategy": strategy,
                "script_id": script.script_id,
                "question_id": question.question_id,
                "question_kind": question.kind,
                "prompt": messages[:split],
                "completion": messages[split:],
                "messages": messages,
                "tools": json.dumps([t.model_dump() for t in chat.tools], ensure_ascii=False),
                "answer": answer.answer,
                "choice": answer.choice,
                "expected": question.answer_letter or question.answer,
                "correct": reward.correct,
                "answered": reward.answered,
                "well_formed": reward.well_formed,
                "reward": reward.total,
                "tool_calls": answer.usage.tool_calls,
                "forced": answer.forced,
            }
        )
    return rows


def rollout(
    settings: Settings,
    scripts: Sequence[Script],
    policy: PolicyFactory,
    *,
    strategy: str = DEFAULT_STRATEGY,
    group_size: int = 8,
    seed: int = 0,
    temperature: float = 1.0,
    max_turns: int = 20,
    scoring: Scoring = RELEASED,
    simulator_model: ChatModel | None = None,
    turn_tolerance: int | None = None,
) -> pa.Table:
    """Every question of every script answered ``group_size`` times: one table row per sample.

    For a language-model policy turn its response cache off (``[models.options.openai] cache =
    false``), or a group's samples would all be the first one.
    """
    rows: list[dict[str, Any]] = []
    for script in scripts:
        for question in script.questions:
            rows += rollout_group(
                settings,
                script,
                question,
                policy,
                strategy=strategy,
                group_size=group_size,
                seed=seed,
                temperature=temperature,
                max_turns=max_turns,
                scoring=scoring,
                simulator_model=simulator_model,
                turn_tolerance=turn_tolerance,
            )
    return pa.Table.from_pylist(rows, schema=TRAJECTORY_SCHEMA)


def write_trajectories(table: pa.Table, path: Path | str) -> Path:
    """Write rollouts to Parquet (``group_id`` and ``reward`` per sample, conversations nested)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path

"""GRPO training of a tool-use policy on the script simulator, with TRL's ``GRPOTrainer``.

Each training example is one generated (or loaded) question; TRL samples ``group_size``
completions of it, running the multi-turn tool loop itself: the policy's tool calls are answered by
a :class:`SimEnvironment` (one per rollout) whose methods are AgentCVR's actions over the simulator
— ``visual_query``, ``audio_query``, ``clip_search`` and ``finish`` — with the simulated tools'
results as observations, for at most ``max_turns`` tool turns. The reward is the rollouts' reward:
1 for a correct answer plus 0.1 when every tool call was well formed.

:func:`train_grpo` is what ``vidscope train grpo`` calls; docs/training.md describes real GPU runs.
TRL is an optional dependency (``pip install 'vidscope[train]'``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from vidscope.agents import prompts, strategies
from vidscope.agents.runtime import format_observation, pick_choice
from vidscope.agents.simulator.script import Question, Script, load_script
from vidscope.agents.simulator.simulator import ScriptSimulator, SimContext
from vidscope.agents.simulator.templates import generate_scripts
from vidscope.agents.tools import execute_tool
from vidscope.core.settings import Settings
from vidscope.flows.training.rollout import (
    CORRECT_REWARD,
    DEFAULT_STRATEGY,
    FORMAT_REWARD,
    is_correct,
    rollout_config,
)

#: Tool errors that mean the call itself was malformed (the format reward is lost).
_MALFORMED = ("invalid arguments", "unknown tool")


class GrpoOptions(BaseModel):
    """Options of ``vidscope train grpo`` (defaults: AgentCVR's group size and turn limit)."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(description="Policy to train: a Hugging Face model id or a local directory.")
    output_dir: Path = Field(description="Where checkpoints, logs and the final model are written.")
    scripts: Path | None = Field(
        None, description="A script JSON file or a directory of them; default: generated scripts."
    )
    generated_scripts: int = Field(64, ge=1, description="Scripts to generate when none are given.")
    seed: int = 0
    group_size: int = Field(8, ge=2, description="Completions per question (GRPO's group).")
    max_turns: int = Field(20, ge=1, description="Tool-calling turns per rollout.")
    max_steps: int = Field(500, ge=1, description="Optimisation steps.")
    learning_rate: float = 1e-6
    temperature: float = Field(1.0, gt=0, description="Sampling temperature of rollouts.")
    max_completion_length: int = Field(2048, ge=1, description="Tokens per completion, tool turns included.")
    per_device_batch_size: int = Field(8, ge=1, description="Completions per device and step.")
    gradient_accumulation_steps: int = Field(1, ge=1)
    beta: float = Field(0.0, ge=0, description="KL coefficient (0: no reference model).")
    bf16: bool = False
    use_vllm: bool = Field(False, description="Generate with vLLM (colocated), for real GPU runs.")
    logging_steps: int = Field(1, ge=1)
    save_steps: int = Field(100, ge=1)
    report_to: str = Field("none", description="TRL/transformers loggers: none, tensorboard, wandb…")


class TrainResult(BaseModel):
    """What a training run did: where the model went, its steps and the logged rewards."""

    output_dir: Path
    steps: int
    questions: int
    rewards: list[float] = Field(description="Mean reward of each logged step.")
    log_history: list[dict[str, Any]] = Field(default_factory=list)


# ============================================================================ the environment


class SimEnvironment:
    """One rollout's environment for TRL: its public methods are the tools the policy may call
    (so everything else is private).

    TRL builds the tool schema from each method's signature and Google-style docstring, calls
    :meth:`reset` with the example's columns before generating, and reads the outcome through
    :func:`grpo_reward`.
    """

    def __init__(self, settings: Settings, scripts: dict[str, Script], max_turns: int) -> None:
        self._settings = settings
        self._scripts = scripts
        self._config = rollout_config(settings.agent, temperature=1.0, max_turns=max_turns)
        self._ctx: SimContext | None = None
        self.question: Question | None = None
        self.answer: str | None = None
        self.choice: str | None = None
        self.calls = 0
        self.malformed = 0

    def reset(self, **example: Any) -> None:
        """Start a rollout of the example's question (its ``script_id`` and ``question_id``)."""
        script = self._scripts[str(example["script_id"])]
        self.question = script.question(str(example["question_id"]))
        simulator = ScriptSimulator(script, clip_seconds=self._settings.ingest.clip_seconds)
        # GRPO trains the rollouts' default strategy: its simulated tools are the policy's actions.
        tools = strategies.get(DEFAULT_STRATEGY).tool_registry(simulated=True)
        self._ctx = SimContext(self._settings, simulator, config=self._config, registry=tools)
        self.answer = self.choice = None
        self.calls = self.malformed = 0

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        assert self._ctx is not None, "reset() starts a rollout"
        self.calls += 1
        outcome = execute_tool(self._ctx, name, arguments)
        if outcome.error is not None and outcome.error.startswith(_MALFORMED):
            self.malformed += 1
        return format_observation(outcome)

    def visual_query(self, video_id: str, t0: float, t1: float, focus: str) -> str:
        """Watch an interval of a video and report what is seen there, with times.

        Args:
            video_id: Id of the video.
            t0: Start of the interval, in seconds.
            t1: End of the interval, in seconds.
            focus: What to look for (an action, object, person, colour, count).
        """
        return self._call(
            "visual_query", {"targets": [{"video_id": video_id, "t0": t0, "t1": t1}], "focus": focus}
        )

    def audio_query(self, video_id: str, t0: float, t1: float) -> str:
        """Listen to an interval of a video and report what is said there, with times.

        Args:
            video_id: Id of the video.
            t0: Start of the interval, in seconds.
            t1: End of the interval, in seconds.
        """
        return self._call("audio_query", {"video_id": video_id, "t0": t0, "t1": t1})

    def clip_search(self, video_id: str, query: str) -> str:
        """Find the 5-second clips of a video that match a query, with their times and content.

        Args:
            video_id: Id of the video to search.
            query: What to look for: words spoken or shown, objects, actions.
        """
        return self._call("clip_search", {"video_id": video_id, "query": query})

    def finish(self, answer: str, choice: str) -> str:
        """Give the final answer. This ends the task.

        Args:
            answer: The final answer in plain words.
            choice: The letter of the chosen option.
        """
        self.calls += 1
        self.answer, self.choice = answer, choice
        return "Answer recorded."

    def _reward(self, final_text: str, failed_calls: int) -> float:
        """1 for a correct answer (``finish``, else the final message) + 0.1 for well-formed calls."""
        assert self.question is not None
        q = self.question
        text = self.answer if self.answer is not None else final_text
        choice = pick_choice(self.choice, text, q.options)
        correct = is_correct(q, text, choice)
        well_formed = self.calls > 0 and self.malformed == 0 and failed_calls == 0
        return CORRECT_REWARD * correct + FORMAT_REWARD * well_formed


def grpo_reward(
    completions: list[Any], environments: Sequence[SimEnvironment], **_: Any
) -> list[float | None]:
    """TRL reward function: each rollout scored by its environment (AgentCVR's reward)."""
    rewards: list[float | None] = []
    for completion, environment in zip(completions, environments, strict=True):
        messages = (
            completion if isinstance(completion, list) else [{"role": "assistant", "content": completion}]
        )
        final = next(
            (str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "assistant"), ""
        )
        # TRL answers a call it could not make (unknown tool, wrong arguments) with an error dict.
        failed = sum(
            1
            for m in messages
            if m.get("role") == "tool" and str(m.get("content", "")).startswith("{'error'")
        )
        rewards.append(environment._reward(final, failed))
    return rewards


# ============================================================================ data


def load_scripts(source: Path | None, *, generated: int, seed: int) -> list[Script]:
    """Scripts from ``source`` (a script JSON file or a folder of them), else ``generated`` ones."""
    if source is None:
        return generate_scripts(generated, seed)
    paths = sorted(source.glob("*.json")) if source.is_dir() else [source]
    scripts = [load_script(p) for p in paths]
    if not any(s.questions for s in scripts):
        raise ValueError(f"no questions in the scripts at {source}")
    return scripts


def question_prompt(script: Script, question: Question, clip_seconds: float) -> list[dict[str, str]]:
    """The conversation a rollout starts from: the agent's system prompt and the question."""
    simulator = ScriptSimulator(script, clip_seconds=clip_seconds)
    videos = []
    for video_id in question.video_ids:
        record = simulator.video_record(video_id)
        videos.append(
            {
                "video_id": video_id,
                "file_name": record.file_name,
                "duration": record.duration,
                "clips": len(simulator.clips(video_id)),
            }
        )
    return [
        {"role": "system", "content": prompts.SYSTEM},
        {"role": "user", "content": prompts.question_prompt(question.text, videos, question.options)},
    ]


def training_rows(scripts: Sequence[Script], settings: Settings, seed: int) -> list[dict[str, Any]]:
    """One row per question (prompt, script id, question id), shuffled with ``seed``."""
    rows = [
        {
            "prompt": question_prompt(s, q, settings.ingest.clip_seconds),
            "script_id": s.script_id,
            "question_id": q.question_id,
        }
        for s in scripts
        for q in s.questions
    ]
    random.Random(seed).shuffle(rows)
    return rows


# ============================================================================ training


def train_grpo(
    settings: Settings,
    options: GrpoOptions,
    *,
    model: Any = None,
    tokenizer: Any = None,
) -> TrainResult:
    """Train ``options.model`` (or the given ``model`` and ``tokenizer`` objects) with GRPO on the
    simulator; the final model and tokenizer are saved to ``options.output_dir``."""
    try:
        from datasets import Dataset  # type: ignore[import-untyped]
        from trl import GRPOConfig, GRPOTrainer
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise RuntimeError("GRPO training needs TRL: pip install 'vidscope[train]'") from exc

    scripts = load_scripts(options.scripts, generated=options.generated_scripts, seed=options.seed)
    by_id = {s.script_id: s for s in scripts}
    rows = training_rows(scripts, settings, options.seed)
    config = GRPOConfig(
        output_dir=str(options.output_dir),
        seed=options.seed,
        num_generations=options.group_size,
        max_tool_calling_iterations=options.max_turns,
        max_steps=options.max_steps,
        learning_rate=options.learning_rate,
        temperature=options.temperature,
        max_completion_length=options.max_completion_length,
        per_device_train_batch_size=options.per_device_batch_size,
        gradient_accumulation_steps=options.gradient_accumulation_steps,
        beta=options.beta,
        bf16=options.bf16,
        use_vllm=options.use_vllm,
        vllm_mode="colocate",
        logging_steps=options.logging_steps,
        save_steps=options.save_steps,
        report_to=options.report_to,
    )
    trainer = GRPOTrainer(
        model=model if model is not None else options.model,
        reward_funcs=[grpo_reward],
        args=config,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        environment_factory=lambda: SimEnvironment(settings, by_id, options.max_turns),
    )
    trainer.train()
    trainer.save_model(str(options.output_dir))
    history = list(trainer.state.log_history)
    rewards = [float(h["reward"]) for h in history if "reward" in h]
    return TrainResult(
        output_dir=options.output_dir,
        steps=int(trainer.state.global_step),
        questions=len(rows),
        rewards=rewards,
        log_history=history,
    )

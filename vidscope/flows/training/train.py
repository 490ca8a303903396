"""GRPO training of AgentCVR's master agent on the script simulator, with TRL's ``GRPOTrainer``.

Train what you deploy: each training example is one generated (or loaded) question, started from
the master's own opening messages (:mod:`vidscope.agents.cvr.master`); TRL asks for ``group_size``
rollouts of it, and each rollout is :func:`~vidscope.agents.cvr.agent.run_cvr` itself — the loop
``compare --agent cvr`` runs — with the policy being trained as its chat model (through TRL's
``rollout_func``) and the simulated ``visual_query`` / ``audio_query`` / ``answer`` answering it.
The policy's tokens are trained, the environment's (observations, format notes) masked out. The
reward is the rollouts' reward: 1 for a correct answer given through the answer action plus 0.1
when every action was well formed; a rollout ends at T_max = 20 turns or after T_tol = 10 turns in
a row without progress (:func:`~vidscope.agents.cvr.agent.run_cvr`). Batches, epochs and the
ratio follow the release (:class:`GrpoOptions`).

:func:`train_grpo` is what ``vidscope train grpo`` calls; docs/training.md describes real GPU runs.
TRL is an optional dependency (``pip install 'vidscope[train]'``).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from vidscope.agents.cvr.master import opening_messages
from vidscope.agents.simulator.script import Question, Script, load_script
from vidscope.agents.simulator.simulator import ScriptSimulator, SimContext
from vidscope.agents.simulator.templates import generate_scripts
from vidscope.agents.simulator.writer import TASKS, written_scripts
from vidscope.core.settings import Settings
from vidscope.flows.training.rollout import (
    DEFAULT_INTERVAL_SCORING,
    DEFAULT_STRATEGY,
    SIMULATOR_TEMPERATURE,
    WITHIN_SECONDS,
    IntervalScoring,
    Scoring,
    rollout_config,
    run_strategy,
    score,
)
from vidscope.models import registry
from vidscope.models.protocols.chat import ChatMessage, ChatModel, ChatReply, ToolSpec
from vidscope.models.transformers_chat import TransformersChat, template_messages

#: The strategy GRPO trains: AgentCVR's master agent, the loop ``compare --agent cvr`` runs.
MASTER = DEFAULT_STRATEGY


#: How the policy-gradient ratio is taken: per token (the release's verl actor: its default policy
#: loss with ``loss_agg_mode: token-mean``), or per sequence (TRL's ``importance_sampling_level =
#: "sequence"``: the mean log-ratio over the policy's own tokens of the trajectory, GSPO's
#: length-normalised form). A ratio over the whole trajectory as one product is not in TRL.
RatioLevel = Literal["token", "sequence"]


class GrpoOptions(BaseModel):
    """Options of ``vidscope train grpo`` (defaults: AgentCVR's and its release's).

    Batches as the release's training scripts (``verl/crossvid_agent_{4b,8b}.sh`` and
    ``examples/sglang_multiturn/config/crossvid_qwen3_grpo.yaml`` in wang-jh24/AgentCVR):
    ``data.train_batch_size=32`` questions per step, ``rollout.n=8`` completions each,
    ``ppo_mini_batch_size=16`` questions per optimiser update, ``ppo_epochs: 4`` passes over each
    generated batch. In TRL these are ``generation_batch_size`` (32 × 8 completions), the
    completions per optimiser step (16 × 8, reached with gradient accumulation over
    ``per_device_batch_size`` chunks, :func:`trl_batches`) and ``num_iterations`` (4).
    """

    model_config = ConfigDict(extra="forbid")

    model: str = Field(description="Policy to train: a Hugging Face model id or a local directory.")
    output_dir: Path = Field(description="Where checkpoints, logs and the final model are written.")
    scripts: Path | None = Field(
        None, description="A script JSON file or a directory of them; default: generated scripts."
    )
    generated_scripts: int = Field(64, ge=1, description="Scripts to generate when none are given.")
    llm_scripts: bool = Field(
        True,
        description="Generated scripts are written by the planner when one is configured (else templates).",
    )
    seed: int = 0
    group_size: int = Field(8, ge=2, description="Completions per question (GRPO's group).")
    max_turns: int = Field(20, ge=1, description="Master turns per rollout (T_max = 20).")
    turn_tolerance: int = Field(
        10, ge=1, description="T_tol: master turns in a row without progress before a rollout ends (10)."
    )
    questions_per_step: int = Field(
        32, ge=1, description="Questions rolled out per generation batch (release: train_batch_size 32)."
    )
    mini_batch_questions: int = Field(
        16, ge=1, description="Questions per optimiser update (release: ppo_mini_batch_size 16)."
    )
    ppo_epochs: int = Field(4, ge=1, description="Passes over each generated batch (release: ppo_epochs 4).")
    ratio_level: RatioLevel = Field("token", description="Policy ratio per token (release) or per sequence.")
    max_steps: int = Field(500, ge=1, description="Optimisation steps.")
    learning_rate: float = Field(1e-7, gt=0, description="Optimiser learning rate (AgentCVR's: 1e-7).")
    temperature: float = Field(1.0, gt=0, description="Sampling temperature of rollouts.")
    max_completion_length: int = Field(
        4096, ge=1, description="Tokens per rollout, observations included (AgentCVR: 4096)."
    )
    per_device_batch_size: int = Field(
        8, ge=1, description="Completions per device and forward pass (memory; updates are accumulated)."
    )
    beta: float = Field(0.005, ge=0, description="KL coefficient (AgentCVR: 0.005; 0: no reference model).")
    interval_scoring: IntervalScoring = Field(
        DEFAULT_INTERVAL_SCORING,
        description="Interval answers: exact (release reward), iou (release eval), within (ours).",
    )
    interval_seconds: float = Field(
        WITHIN_SECONDS, ge=0, description="Seconds each end may be off under interval_scoring 'within'."
    )
    simulator_model: bool = Field(
        True, description="The configured vlm/planner phrases simulated results (M_sim); off: rule-based."
    )
    bf16: bool = False
    use_vllm: bool = Field(
        False, description="TRL's colocated vLLM; master rollouts still generate with transformers."
    )
    logging_steps: int = Field(1, ge=1)
    save_steps: int = Field(100, ge=1)
    report_to: str = Field("none", description="TRL/transformers loggers: none, tensorboard, wandb…")

    @model_validator(mode="after")
    def _batches_divide(self) -> GrpoOptions:
        if self.questions_per_step % self.mini_batch_questions:
            raise ValueError(
                f"questions per step ({self.questions_per_step}) must be a multiple of the mini-batch "
                f"({self.mini_batch_questions} questions)"
            )
        return self


class TrainResult(BaseModel):
    """What a training run did: where the model went, its steps and the logged rewards."""

    output_dir: Path
    steps: int
    questions: int
    rewards: list[float] = Field(description="Mean reward of each logged step.")
    log_history: list[dict[str, Any]] = Field(default_factory=list)


# ============================================================================ rollouts


class BudgetSpent(Exception):
    """A rollout used its ``max_completion_length`` tokens before the master answered."""


class RecordingPolicy(TransformersChat):
    """The policy being trained, as the master's chat model in one rollout: each turn continues
    the token sequence of the conversation so far, and every token is recorded with whether the
    policy wrote it (1) or the environment did (0: observations, format notes, template tokens).
    """

    def __init__(self, model: Any, tokenizer: Any, *, budget: int, chat_template: str | None = None) -> None:
        super().__init__(model, tokenizer, name="policy")
        self.chat_template = chat_template
        self.budget = budget
        self.prompt_ids: list[int] = []
        self.completion_ids: list[int] = []
        self.mask: list[int] = []
        self._rendered = ""

    def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        json_output: bool = False,
    ) -> ChatReply:
        """The policy's next reply, sampled after the recorded sequence plus the new messages."""
        rows = template_messages(messages, tools)
        text = self.render(rows)
        if not self.prompt_ids:
            self.prompt_ids, self._rendered = self.encode(text), text
        elif text.startswith(self._rendered):
            said = self.encode(text[len(self._rendered) :])
            self.completion_ids += said
            self.mask += [0] * len(said)
        else:  # the loop rewrote earlier turns (a trimmed context): not one sequence any more
            raise BudgetSpent("the conversation was rewritten")
        room = self.budget - len(self.completion_ids)
        if room <= 0:
            raise BudgetSpent("max_completion_length reached")
        new = self.generate(
            self.prompt_ids + self.completion_ids,
            max_new_tokens=min(room, max_tokens or room),
            temperature=temperature,
        )
        self.completion_ids += new
        self.mask += [1] * len(new)
        reply = str(self.tokenizer.decode(new, skip_special_tokens=True)).strip()
        self._rendered = self.render(
            [*rows, {"role": "assistant", "content": reply}], generation_prompt=False
        )
        return ChatReply(text=reply, model=self.name, finish_reason="stop")


def master_rollout(
    settings: Settings,
    script: Script,
    question: Question,
    policy: ChatModel,
    max_turns: int,
    temperature: float,
    scoring: Scoring | None = None,
    *,
    turn_tolerance: int | None = None,
    simulator_model: ChatModel | None = None,
) -> float:
    """One rollout of the deployed master agent (``run_cvr``) driven by ``policy`` on the simulator
    (its results phrased by ``simulator_model``, M_sim, when given); its reward (0 when the token
    budget ran out before an answer)."""
    config = rollout_config(
        settings.agent, temperature=temperature, max_turns=max_turns, turn_tolerance=turn_tolerance
    )
    simulator = ScriptSimulator(
        script,
        clip_seconds=settings.ingest.clip_seconds,
        phraser=simulator_model,
        temperature=SIMULATOR_TEMPERATURE,
    )
    ctx = SimContext(settings, simulator, chat=policy, config=config)
    try:
        answer = run_strategy(MASTER, ctx, question)
    except BudgetSpent:
        return 0.0
    return score(question, answer, scoring or Scoring()).total


def master_rollout_func(
    settings: Settings,
    scripts: Sequence[Script],
    options: GrpoOptions,
    simulator_model: ChatModel | None = None,
) -> Callable[[list[Any], Any], dict[str, Any]]:
    """TRL's ``rollout_func``: each prompt (one master opening conversation) rolled out once by
    the trainer's current model through ``run_cvr``; prompt and completion token ids, the mask of
    the policy's own tokens (``env_mask``) and the reward (``rollout_reward``)."""
    by_prompt = {
        prompt_key(row["prompt"]): (script, script.question(row["question_id"]))
        for script in scripts
        for row in training_rows([script], settings, 0)
    }

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        model = trainer.accelerator.unwrap_model(trainer.model)
        tokenizer = trainer.processing_class
        template = training_template(tokenizer)
        budget = options.max_completion_length
        out: dict[str, list[Any]] = {
            "prompt_ids": [],
            "completion_ids": [],
            "logprobs": [],
            "env_mask": [],
            "rollout_reward": [],
        }
        was_training = model.training
        model.eval()
        try:
            for prompt in prompts:
                script, question = by_prompt[prompt_key(prompt)]
                policy = RecordingPolicy(model, tokenizer, budget=budget, chat_template=template)
                reward = master_rollout(
                    settings,
                    script,
                    question,
                    policy,
                    options.max_turns,
                    options.temperature,
                    Scoring(options.interval_scoring, options.interval_seconds),
                    turn_tolerance=options.turn_tolerance,
                    simulator_model=simulator_model,
                )
                if not policy.completion_ids:  # nothing generated (cannot happen with a turn): one EOS
                    policy.completion_ids, policy.mask = [tokenizer.eos_token_id], [1]
                out["prompt_ids"].append(policy.prompt_ids)
                out["completion_ids"].append(policy.completion_ids[:budget])
                out["env_mask"].append(policy.mask[:budget])
                out["logprobs"].append(None)
                out["rollout_reward"].append(reward)
        finally:
            model.train(was_training)
        out["logprobs"] = None  # type: ignore[assignment]  # computed by the trainer
        return out

    return rollout_func


def training_template(tokenizer: Any) -> str | None:
    """TRL's prefix-preserving twin of the tokenizer's chat template when it has one (Qwen3's own
    drops earlier turns' thinking, so a conversation would not stay one token sequence), else None."""
    from trl.chat_template_utils import get_training_chat_template

    try:
        return get_training_chat_template(tokenizer)
    except (ValueError, KeyError):  # a template TRL does not know: rendered as it is
        return None


def rollout_reward(completions: list[Any], rollout_reward: list[float], **_: Any) -> list[float | None]:
    """TRL reward function: each rollout's reward as the master's run scored it (AgentCVR's)."""
    return [float(r) for r in rollout_reward]


def prompt_key(prompt: Sequence[dict[str, Any]]) -> str:
    """A training prompt's identity (its messages' text), to find its script and question."""
    return "\x00".join(str(m.get("content") or "") for m in prompt)


# ============================================================================ data


def load_scripts(
    source: Path | None, *, generated: int, seed: int, writer: ChatModel | None = None
) -> list[Script]:
    """Scripts from ``source`` (a script JSON file or a folder of them), else ``generated`` ones:
    written by ``writer`` (the planner) per task, the templates wherever it gives none."""
    if source is None:
        return (
            written_scripts(writer, TASKS, generated, seed) if writer else generate_scripts(generated, seed)
        )
    paths = sorted(source.glob("*.json")) if source.is_dir() else [source]
    scripts = [load_script(p) for p in paths]
    if not any(s.questions for s in scripts):
        raise ValueError(f"no questions in the scripts at {source}")
    return scripts


def question_prompt(script: Script, question: Question, settings: Settings) -> list[dict[str, str]]:
    """The conversation a rollout starts from: the master agent's opening messages
    (:func:`vidscope.agents.cvr.master.opening_messages`), as ``compare --agent cvr`` sends them."""
    simulator = ScriptSimulator(script, clip_seconds=settings.ingest.clip_seconds)
    ctx = SimContext(settings, simulator)
    opening = opening_messages(
        ctx, question.text, question.video_ids, question.options or None, task=question.task
    )
    return [{"role": m.role, "content": m.content or ""} for m in opening]


def training_rows(scripts: Sequence[Script], settings: Settings, seed: int) -> list[dict[str, Any]]:
    """One row per question (prompt, script id, question id), shuffled with ``seed``."""
    rows = [
        {
            "prompt": question_prompt(s, q, settings),
            "script_id": s.script_id,
            "question_id": q.question_id,
        }
        for s in scripts
        for q in s.questions
    ]
    random.Random(seed).shuffle(rows)
    return rows


# ============================================================================ training


def simulator_model(settings: Settings) -> ChatModel | None:
    """The LLM simulator M_sim: the configured vision model, else the planner (phrasing is text in,
    text out); None when neither is configured (the simulator answers rule-based)."""
    return registry.vision_model(settings) or registry.planner_model(settings)


def trl_batches(options: GrpoOptions, processes: int = 1) -> dict[str, int]:
    """The release's batches as TRL's settings: ``generation_batch_size`` (questions per step ×
    group), ``per_device_train_batch_size`` and the ``gradient_accumulation_steps`` that make one
    optimiser step ``mini_batch_questions`` × group completions, and ``num_iterations`` (PPO
    epochs). A ``ValueError`` names what does not divide."""
    group = options.group_size
    update = options.mini_batch_questions * group
    chunk = options.per_device_batch_size * processes
    if options.questions_per_step % options.mini_batch_questions:
        raise ValueError(
            f"questions per step ({options.questions_per_step}) must be a multiple of the "
            f"mini-batch ({options.mini_batch_questions} questions)"
        )
    if update % chunk:
        raise ValueError(
            f"a mini-batch of {update} completions ({options.mini_batch_questions} questions × "
            f"{group}) does not split into chunks of {chunk} (batch size × {processes} processes)"
        )
    return {
        "generation_batch_size": options.questions_per_step * group,
        "per_device_train_batch_size": options.per_device_batch_size,
        "gradient_accumulation_steps": update // chunk,
        "num_iterations": options.ppo_epochs,
    }


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

    writer = registry.planner_model(settings) if options.llm_scripts else None
    scripts = load_scripts(
        options.scripts, generated=options.generated_scripts, seed=options.seed, writer=writer
    )
    rows = training_rows(scripts, settings, options.seed)
    simulator = simulator_model(settings) if options.simulator_model else None
    batches = trl_batches(options, int(os.environ.get("WORLD_SIZE", "1")))
    config = GRPOConfig(
        generation_batch_size=batches["generation_batch_size"],
        per_device_train_batch_size=batches["per_device_train_batch_size"],
        gradient_accumulation_steps=batches["gradient_accumulation_steps"],
        num_iterations=batches["num_iterations"],
        output_dir=str(options.output_dir),
        seed=options.seed,
        num_generations=options.group_size,
        max_steps=options.max_steps,
        learning_rate=options.learning_rate,
        temperature=options.temperature,
        max_completion_length=options.max_completion_length,
        beta=options.beta,
        importance_sampling_level=options.ratio_level,
        bf16=options.bf16,
        use_vllm=options.use_vllm,
        vllm_mode="colocate",
        logging_steps=options.logging_steps,
        save_steps=options.save_steps,
        report_to=options.report_to,
    )
    trainer = GRPOTrainer(
        model=model if model is not None else options.model,
        reward_funcs=[rollout_reward],
        args=config,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        rollout_func=master_rollout_func(settings, scripts, options, simulator),
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

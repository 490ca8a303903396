"""``vidscope train grpo``: optimise an agent policy with GRPO on the script simulator (AgentCVR)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from vidscope.cli.common import app, console, errors, safe, settings

train_app = typer.Typer(
    help="Train agent policies against the script-simulated environment (docs/training.md).",
    no_args_is_help=True,
)
app.add_typer(train_app, name="train")


@train_app.command("grpo")
def grpo(
    model: Annotated[
        str, typer.Argument(help="Policy to train: a Hugging Face model id or a local directory.")
    ],
    out: Annotated[Path, typer.Option("--out", help="Where checkpoints, logs and the final model go.")],
    scripts: Annotated[
        Path | None, typer.Option(help="A script JSON file or a folder of them (default: generated scripts).")
    ] = None,
    generated: Annotated[int, typer.Option(help="Scripts to generate when --scripts is not given.")] = 64,
    llm_scripts: Annotated[
        bool,
        typer.Option(
            help="Generated scripts are written by the planner when one is configured, else templates."
        ),
    ] = True,
    steps: Annotated[int, typer.Option(help="Optimisation steps.")] = 500,
    group_size: Annotated[int, typer.Option(help="Completions per question (GRPO's group).")] = 8,
    max_turns: Annotated[int, typer.Option(help="Tool-calling turns per rollout.")] = 20,
    learning_rate: Annotated[float, typer.Option(help="Learning rate (AgentCVR's: 1e-7).")] = 1e-7,
    beta: Annotated[
        float, typer.Option(help="KL coefficient (AgentCVR's: 0.005; 0: no reference model).")
    ] = 0.005,
    interval_scoring: Annotated[
        str,
        typer.Option(
            help="Interval answers (FSA): exact (the release's reward), iou (its evaluation), within "
            "(ours: both ends within --interval-seconds)."
        ),
    ] = "exact",
    interval_seconds: Annotated[
        float, typer.Option(min=0.0, help="Seconds either end may be off under --interval-scoring within.")
    ] = 2.0,
    turn_tolerance: Annotated[
        int, typer.Option(min=1, help="T_tol: master turns in a row without progress before a rollout ends.")
    ] = 10,
    simulator_model: Annotated[
        bool,
        typer.Option(
            help="The configured vlm (else planner) phrases the simulated results (M_sim); else rule-based."
        ),
    ] = True,
    temperature: Annotated[float, typer.Option(help="Sampling temperature of rollouts.")] = 1.0,
    questions_per_step: Annotated[
        int, typer.Option(min=1, help="Questions per generation batch (release: 32).")
    ] = 32,
    mini_batch: Annotated[
        int, typer.Option(min=1, help="Questions per optimiser update (release: PPO mini-batch 16).")
    ] = 16,
    ppo_epochs: Annotated[
        int, typer.Option(min=1, help="Passes over each generated batch (release: 4).")
    ] = 4,
    ratio_level: Annotated[
        str, typer.Option(help="Policy ratio per token (the release's) or per sequence (TRL's GSPO form).")
    ] = "token",
    batch_size: Annotated[
        int, typer.Option(help="Completions per device and forward pass (updates are accumulated).")
    ] = 8,
    max_completion_length: Annotated[
        int, typer.Option(help="Tokens per completion, tool turns included.")
    ] = 4096,
    seed: Annotated[int, typer.Option(help="Seed of script generation, sampling and training.")] = 0,
    bf16: Annotated[bool, typer.Option(help="Train in bfloat16 (GPUs that support it).")] = False,
    vllm: Annotated[
        bool,
        typer.Option(
            "--vllm",
            help="Start TRL's colocated vLLM (the master's rollouts still generate with transformers).",
        ),
    ] = False,
    report_to: Annotated[str, typer.Option(help="Loggers: none, tensorboard, wandb…")] = "none",
) -> None:
    """Train MODEL as AgentCVR's master agent with GRPO on the simulator (reward: 1 if answered right
    through the answer action + 0.1 for well-formed actions); defaults are the paper's and its
    release's (G = 8, T_max = 20, T_tol = 10, KL 0.005, lr 1e-7, 32 questions a step, mini-batch 16,
    4 epochs)."""
    from pydantic import ValidationError

    from vidscope.flows.training.train import GrpoOptions, train_grpo

    try:
        options = GrpoOptions(
            model=model,
            output_dir=out,
            scripts=scripts,
            generated_scripts=generated,
            llm_scripts=llm_scripts,
            seed=seed,
            group_size=group_size,
            max_turns=max_turns,
            max_steps=steps,
            learning_rate=learning_rate,
            beta=beta,
            interval_scoring=interval_scoring,  # validated by GrpoOptions
            interval_seconds=interval_seconds,
            turn_tolerance=turn_tolerance,
            simulator_model=simulator_model,
            temperature=temperature,
            questions_per_step=questions_per_step,
            mini_batch_questions=mini_batch,
            ppo_epochs=ppo_epochs,
            ratio_level=ratio_level,  # validated by GrpoOptions
            per_device_batch_size=batch_size,
            max_completion_length=max_completion_length,
            bf16=bf16,
            use_vllm=vllm,
            report_to=report_to,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"]))
        message = str(first["msg"]).removeprefix("Value error, ")
        errors.print(f"[red]train grpo:[/red] {f'{where}: ' if where else ''}{message}")
        raise typer.Exit(2) from None
    if scripts is not None and not scripts.exists():
        errors.print(f"[red]train grpo:[/red] no scripts at {scripts}")
        raise typer.Exit(2)
    try:
        result = train_grpo(settings(), options)
    except (RuntimeError, ValueError, OSError) as exc:
        errors.print(f"[red]train grpo:[/red] {safe(exc)}")  # names an extra: [train] is not markup
        raise typer.Exit(1) from None
    last = f"{result.rewards[-1]:.3f}" if result.rewards else "none logged"
    console.print(
        f"trained {result.steps} steps on {result.questions} questions; last mean reward {last}; "
        f"model saved to {result.output_dir}"
    )


#: Policies ``train rollouts`` can roll out: the scripted ones, or the configured planner model.
ROLLOUT_POLICIES = ("oracle", "random", "model")


@train_app.command("rollouts")
def rollouts(
    out: Annotated[Path, typer.Option("--out", help="Parquet file the trajectories are written to.")],
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            help="Strategy: any with a planner and simulated tools (vidscope.agents.strategies); "
            "default cvr, the master agent train grpo trains.",
            show_default=False,
        ),
    ] = None,
    policy: Annotated[
        str,
        typer.Option(help="oracle (reads the script's answer), random (seeded), or model (the planner)."),
    ] = "model",
    scripts: Annotated[
        Path | None, typer.Option(help="A script JSON file or a folder of them (default: generated scripts).")
    ] = None,
    generated: Annotated[int, typer.Option(help="Scripts to generate when --scripts is not given.")] = 8,
    group_size: Annotated[int, typer.Option(help="Samples per question (GRPO's group).")] = 8,
    max_turns: Annotated[int, typer.Option(help="Tool-calling turns per sample.")] = 20,
    temperature: Annotated[float, typer.Option(help="Sampling temperature of the model policy.")] = 1.0,
    interval_scoring: Annotated[
        str,
        typer.Option(
            help="Interval answers (FSA): exact (the release's reward), iou (its evaluation), within "
            "(ours: both ends within --interval-seconds)."
        ),
    ] = "exact",
    interval_seconds: Annotated[
        float, typer.Option(min=0.0, help="Seconds either end may be off under --interval-scoring within.")
    ] = 2.0,
    turn_tolerance: Annotated[
        int, typer.Option(min=1, help="T_tol: AgentCVR turns in a row without progress before a sample ends.")
    ] = 10,
    simulator_model: Annotated[
        bool,
        typer.Option(
            help="The configured vlm (else planner) phrases the simulated results (M_sim); else rule-based."
        ),
    ] = True,
    seed: Annotated[int, typer.Option(help="Seed of script generation and of each sample.")] = 0,
) -> None:
    """Roll a strategy out against the script simulator and store rewarded trajectories as Parquet."""
    import random as random_module

    from vidscope.agents.simulator.policies import OraclePolicy, RandomPolicy
    from vidscope.agents.simulator.script import Question
    from vidscope.core.errors import VidscopeError
    from vidscope.flows.training.rollout import (
        DEFAULT_STRATEGY,
        Scoring,
        rollout,
        rollout_strategies,
        write_trajectories,
    )
    from vidscope.flows.training.train import load_scripts
    from vidscope.flows.training.train import simulator_model as sim_model
    from vidscope.models import registry
    from vidscope.models.protocols.chat import ChatModel

    agent = agent or DEFAULT_STRATEGY
    if agent not in rollout_strategies():
        errors.print(
            f"[red]train rollouts:[/red] unknown agent {agent!r}; "
            f"choose one of: {', '.join(rollout_strategies())}"
        )
        raise typer.Exit(2)
    if policy not in ROLLOUT_POLICIES:
        errors.print(
            f"[red]train rollouts:[/red] unknown policy {policy!r}; "
            f"choose one of: {', '.join(ROLLOUT_POLICIES)}"
        )
        raise typer.Exit(2)
    if scripts is not None and not scripts.exists():
        errors.print(f"[red]train rollouts:[/red] no scripts at {scripts}")
        raise typer.Exit(2)
    config = settings()
    planner = registry.planner_model(config) if policy == "model" else None
    if policy == "model" and planner is None:
        errors.print(
            "[red]train rollouts:[/red] no planner or chat model is configured "
            "(set \\[models] planner or chat, or use --policy oracle/random)"
        )
        raise typer.Exit(2)

    def factory(question: Question, rng: random_module.Random) -> ChatModel:
        if policy == "oracle":
            return OraclePolicy(question)
        if policy == "random":
            return RandomPolicy(rng)  # every choice from the sample's seeded generator
        assert planner is not None
        return planner

    try:
        scoring = Scoring(interval_scoring, interval_seconds)  # type: ignore[arg-type]  # checked here
    except ValueError as exc:
        errors.print(f"[red]train rollouts:[/red] {safe(exc)}")
        raise typer.Exit(2) from None
    try:
        loaded = load_scripts(scripts, generated=generated, seed=seed)
        with console.status(f"rolling out {agent} with the {policy} policy…"):
            table = rollout(
                config,
                loaded,
                factory,
                strategy=agent,
                group_size=group_size,
                seed=seed,
                temperature=temperature,
                max_turns=max_turns,
                scoring=scoring,
                simulator_model=sim_model(config) if simulator_model else None,
                turn_tolerance=turn_tolerance,
            )
    except (VidscopeError, ValueError, OSError) as exc:
        errors.print(f"[red]train rollouts:[/red] {safe(exc)}")
        raise typer.Exit(1) from None
    path = write_trajectories(table, out)
    rewards = table.column("reward").to_pylist()
    mean = sum(rewards) / len(rewards) if rewards else 0.0
    groups = len(set(table.column("group_id").to_pylist()))
    console.print(f"{len(rewards)} samples in {groups} groups; mean reward {mean:.3f}; written to {path}")


@train_app.command("sim-to-real")
def sim_to_real(
    videos: Annotated[list[str], typer.Argument(help="Ingested videos (id prefix, path or file name).")],
    out: Annotated[Path, typer.Option("--out", help="Folder for sim_to_real_master.md and its plot.")],
    question: Annotated[
        list[str], typer.Option("--question", help="A question about the videos (repeat it for more).")
    ],
    options: Annotated[
        list[str] | None,
        typer.Option("--options", help="Multiple-choice options of every question (repeat it)."),
    ] = None,
) -> None:
    """Run AgentCVR's master (the planner) on the videos and on the script imported from them;
    compare its decisions (actions, covered time) and answers in a Markdown report with a plot."""
    from vidscope.agents.simulator.importer import import_script
    from vidscope.core.errors import VidscopeError
    from vidscope.flows.training.sim_to_real import AskedQuestion, compare_master, write_master_report
    from vidscope.models import registry
    from vidscope.models.open_store import open_store
    from vidscope.storage.videos import find_video

    config = settings()
    planner = registry.planner_model(config)
    if planner is None:
        errors.print(
            "[red]train sim-to-real:[/red] no planner or chat model is configured (\\[models] planner)"
        )
        raise typer.Exit(2)
    try:
        store = open_store(config)
        ids = list(dict.fromkeys(find_video(store, ref).video_id for ref in videos))
        asked = [AskedQuestion(text=q, video_ids=ids, options=options or None) for q in question]
        with console.status("running the master in both environments…"):
            report = compare_master(config, store, import_script(store, ids), asked, lambda: planner)
    except (VidscopeError, ValueError, KeyError, OSError, RuntimeError) as exc:  # a model server down
        errors.print(f"[red]train sim-to-real:[/red] {safe(exc)}")
        raise typer.Exit(1) from None
    path = write_master_report(report, out)
    n, agree = len(report.comparisons), sum(c.answers_agree for c in report.comparisons)
    console.print(
        f"{n} questions; mean decision overlap {report.mean('decision_overlap'):.2f}, "
        f"mean interval IoU {report.mean('interval_iou'):.2f}, answers agree {agree}/{n}; "
        f"report written to {safe(path)}"
    )

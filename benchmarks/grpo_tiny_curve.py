"""GRPO training curve of the tiny test policy on the script simulator (issue 29).

The policy is the two-layer random Qwen2-style model with a word-level tokenizer of
tests/test_simulator_train.py; each rollout is the deployed master agent (``run_cvr``) on generated
scripts. Prints the mean reward of every optimisation step and the mean of the first and last
thirds. Run: ``PYTHONPATH=$PWD .venv/bin/python benchmarks/grpo_tiny_curve.py --steps 12``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def main() -> None:
    """Train for ``--steps`` steps and print the reward curve."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()

    from test_simulator_train import tiny_policy

    from vidscope.core.settings import Settings
    from vidscope.flows.training.train import GrpoOptions, train_grpo

    tmp = Path(tempfile.mkdtemp(prefix="grpo-curve-"))
    model, tokenizer = tiny_policy(tmp)
    options = GrpoOptions(
        model="tiny-random-qwen2",
        output_dir=tmp / "out",
        generated_scripts=8,
        seed=args.seed,
        group_size=8,
        max_turns=1,
        max_steps=args.steps,
        learning_rate=args.lr,
        max_completion_length=32,
        per_device_batch_size=8,
        save_steps=10_000,
        beta=0.0,
    )
    result = train_grpo(Settings(data_dir=tmp / "data"), options, model=model, tokenizer=tokenizer)
    third = max(1, len(result.rewards) // 3)
    print("step  mean reward")
    for step, reward in enumerate(result.rewards, 1):
        print(f"{step:4d}  {reward:.3f}")
    first, last = result.rewards[:third], result.rewards[-third:]
    before, after = sum(first) / len(first), sum(last) / len(last)
    print(f"first {third} steps: {before:.3f}; last {third} steps: {after:.3f}")


if __name__ == "__main__":
    main()

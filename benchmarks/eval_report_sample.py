"""Write sample evaluation reports over a real annotation file, to look at the plots at any size.

The questions are the real MLVU dev questions (``../shared/benchmarks/mlvu``); the answers are a
seeded synthetic agent (right with a per-category probability, latency, tokens and cost drawn
from skewed distributions), so no video or model is needed. One report per size, e.g.::

    python benchmarks/eval_report_sample.py --sizes 10 2000 --out benchmarks/out/eval-report

prints each report's folder, its plots' pixel sizes and how long writing it took.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

from PIL import Image

from vidscope.evaluation.items import LETTERS
from vidscope.evaluation.loaders import load_benchmark
from vidscope.evaluation.report import PLOT_FILES, REPORT_FILE, summarise, write_report
from vidscope.evaluation.runs import Prediction, RunSpec

#: The MLVU dev files next to the checkout (``../shared/benchmarks``; /work/shared from a worktree).
SHARED = (
    next(
        (p for p in (Path(__file__).resolve().parents[2] / "shared", Path("/work/shared")) if p.is_dir()),
        Path(),
    )
    / "benchmarks"
    / "mlvu"
)


def synthetic_predictions(items: list, seed: int = 0) -> dict[str, Prediction]:
    """A prediction per item: right with a probability that depends on the item's category."""
    rng = random.Random(seed)
    skill = {}
    out = {}
    for item in items:
        category = item.categories[0] if item.categories else ""
        p = skill.setdefault(category, rng.uniform(0.3, 0.9))
        letters = LETTERS[: len(item.options)]
        right = rng.random() < p
        choice = item.answer if right else rng.choice([x for x in letters if x != item.answer] or letters)
        tokens = int(rng.lognormvariate(8.5, 0.5))
        out[item.question_id] = Prediction(
            question_id=item.question_id,
            kind=item.kind,
            video_ids=[f"{abs(hash(v)):064x}"[:64] for v in item.video_ids],
            answer=f"The answer is ({choice}).",
            choice=choice,
            steps=rng.randint(2, 12),
            input_tokens=tokens,
            output_tokens=tokens // 20,
            cost_usd=tokens * 2.5e-7,
            seconds=round(rng.lognormvariate(1.5, 0.6), 3),
            citations=[(f"{abs(hash(item.video_ids[0])):064x}"[:64], 10.0, 15.0)],
            trace=f"traces/{item.question_id.replace('/', '_')}.json",
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotations", type=Path, default=SHARED)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 2000])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out/eval-report"))
    args = parser.parse_args()
    items = [i for i in load_benchmark("mlvu", args.annotations) if i.kind == "multiple_choice"]
    for size in args.sizes:
        chosen = random.Random(size).sample(items, min(size, len(items)))
        predictions = synthetic_predictions(chosen)
        run_dir = args.out / f"mlvu-{len(chosen)}"
        run_dir.mkdir(parents=True, exist_ok=True)
        spec = RunSpec(
            name=run_dir.name,
            benchmark="mlvu",
            annotations=str(args.annotations),
            root="(synthetic)",
            agent="dvd",
            settings_fingerprint="sample",
            created_at="2026-01-01T00:00:00+00:00",
        )
        started = time.perf_counter()
        summary = summarise(spec, items, chosen, predictions, [], [])
        write_report(run_dir, summary, [predictions[i.question_id] for i in chosen])
        seconds = time.perf_counter() - started
        sizes = []
        for name in PLOT_FILES:
            with Image.open(run_dir / name) as image:
                sizes.append(f"{name} {image.width}x{image.height}")
        print(f"{len(chosen)} questions: {run_dir / REPORT_FILE} ({seconds:.1f} s); {', '.join(sizes)}")


if __name__ == "__main__":
    main()

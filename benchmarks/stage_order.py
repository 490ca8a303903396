"""Does the registered order of the stages decide how long a video's ingestion takes? (issue 43)

Toy stages that sleep (so the figure is the schedule's, not the machine's load) are registered in
two orders of one DAG: ``slow`` (an independent stage listed after a slow stage's dependant) and
``fast`` (the independent stage listed first). Each order runs through the real ingestion path
without a server (``ingest_video_direct``, the same scheduler the Prefect flow uses), and through
the pre-issue-43 loop (kept here only as the baseline: it waited for a listed stage's dependencies
before submitting the next). Prints the median of three runs per order and scheduler (after a
warm-up), and the ratios.

    python benchmarks/stage_order.py
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from media import silent_video  # noqa: E402  (the tests' synthetic media)

from vidscope.core.settings import Settings  # noqa: E402
from vidscope.flows import stage_schedule  # noqa: E402
from vidscope.flows.ingest import ingest_video_direct  # noqa: E402
from vidscope.tasks import stages as registry  # noqa: E402
from vidscope.tasks.stage import Stage, StageContext, StageOutcome, StageResult  # noqa: E402

SLOW_SECONDS = 1.0
QUICK_SECONDS = 0.2
INDEPENDENT_SECONDS = 0.8
#: Runs per (order, scheduler); the median is printed.
REPEATS = 3


def toy(name: str, seconds: float, needs: tuple[str, ...]) -> Stage:
    def run(ctx: StageContext) -> StageOutcome:
        time.sleep(seconds)
        return StageOutcome(rows=1)

    return Stage(name, 1, run, config=lambda settings: {}, needs=needs)


def orders() -> dict[str, list[tuple[str, str | Stage]]]:
    slow = toy("slow", SLOW_SECONDS, ("segment",))
    after = toy("after_slow", QUICK_SECONDS, ("slow",))
    chain = [toy(f"independent_{i}", INDEPENDENT_SECONDS, ("segment",)) for i in range(2)]
    base = registry.STAGES[:2]
    return {
        "slow": [*base, ("slow", slow), ("after_slow", after), *((s.name, s) for s in chain)],
        "fast": [*base, *((s.name, s) for s in chain), ("slow", slow), ("after_slow", after)],
    }


def old_loop(
    registered: tuple[Stage, ...], submit: Callable[[Stage], stage_schedule.StageRun]
) -> dict[str, StageResult]:
    """The loop before issue 43, as the baseline: before submitting a stage, wait for what it needs."""
    runs: dict[str, stage_schedule.StageRun] = {}
    results: dict[str, StageResult] = {}
    for stage in registered:
        for dependency in (*stage.needs, *stage.reads):
            if dependency in runs and dependency not in results:
                results[dependency] = runs[dependency].result()
        runs[stage.name] = submit(stage)
    return {name: results.get(name) or run.result() for name, run in runs.items()}


def timed(
    order: list[tuple[str, str | Stage]], scheduler: Callable[..., dict[str, StageResult]], root: Path
) -> float:
    import vidscope.flows.ingest as ingest

    registry.STAGES[:] = order
    ingest.run_stages = scheduler
    try:
        video = silent_video(root / "v.mp4", duration=1.0)
        started = time.perf_counter()
        report = ingest_video_direct(video, Settings(data_dir=root / f"data-{time.time_ns()}"))
        seconds = time.perf_counter() - started
        assert all(s.status == "done" for s in report.stages), report.stages
        return seconds
    finally:
        ingest.run_stages = stage_schedule.run_stages


def main() -> None:
    original = list(registry.STAGES)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            timed(orders()["fast"], stage_schedule.run_stages, root)  # warm-up: imports, the store
            figures = {
                (order, name): statistics.median(timed(stages, scheduler, root) for _ in range(REPEATS))
                for order, stages in orders().items()
                for name, scheduler in (("old loop", old_loop), ("run_stages", stage_schedule.run_stages))
            }
    finally:
        registry.STAGES[:] = original
    for (order, name), seconds in figures.items():
        print(f"{name:10s} {order} order: {seconds:.2f} s")
    for name in ("old loop", "run_stages"):
        ratio = figures[("slow", name)] / figures[("fast", name)]
        print(f"{name}: slow order / fast order = {ratio:.2f}x")
    speedup = figures[("slow", "old loop")] / figures[("slow", "run_stages")]
    print(f"slow order: old loop / run_stages = {speedup:.2f}x")


if __name__ == "__main__":
    main()

"""A stage starts as soon as what it needs has finished, whatever the registered order (issue 43).

The issue measured the old loop on toy stages: the same DAG took 2.13 s or 1.24 s depending on the
list's order, because a stage listed after a slow one was not submitted until the slow one's
dependants could be. Here the registered order is the slow one on purpose, and the test asserts
what the order must not decide: the independent stage starts while the slow one still runs (start
and end times, not a wall-clock threshold, so a loaded machine cannot flip it).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from media import silent_video

from vidscope.core.settings import Settings
from vidscope.flows.ingest import ingest_video_direct
from vidscope.tasks import stages as registry
from vidscope.tasks.stage import Stage, StageContext, StageOutcome

#: When each toy stage started and ended (monotonic seconds), by name.
times: dict[str, tuple[float, float]] = {}
lock = threading.Lock()


def toy(name: str, seconds: float, needs: tuple[str, ...]) -> Stage:
    def run(ctx: StageContext) -> StageOutcome:
        started = time.monotonic()
        time.sleep(seconds)
        with lock:
            times[name] = (started, time.monotonic())
        return StageOutcome(rows=1)

    return Stage(name, 1, run, config=lambda settings: {}, needs=needs, description=f"sleeps {seconds} s")


def test_an_independent_stage_listed_after_a_slow_ones_dependant_runs_beside_the_slow_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Registered as [slow, after_slow, independent]: the old loop waited for `slow` before it
    # submitted `after_slow`, and so before `independent`, which needs only the segment.
    slow = toy("slow", 1.0, ("segment",))
    after_slow = toy("after_slow", 0.1, ("slow",))
    independent = toy("independent", 0.1, ("segment",))
    monkeypatch.setattr(
        registry,
        "STAGES",
        [*registry.STAGES[:2], ("slow", slow), ("after_slow", after_slow), ("independent", independent)],
    )
    times.clear()
    video = silent_video(tmp_path / "v.mp4", duration=1.0)
    report = ingest_video_direct(video, Settings(data_dir=tmp_path / "data"))
    assert [s.stage for s in report.stages] == ["probe", "segment", "slow", "after_slow", "independent"]
    assert all(s.status == "done" for s in report.stages[2:]), report.stages
    slow_start, slow_end = times["slow"]
    assert times["independent"][0] < slow_end, times  # it did not wait for the slow stage
    assert times["after_slow"][0] >= slow_end, times  # what needs it still did


def test_stages_that_wait_on_each_other_are_refused_in_one_line() -> None:
    from vidscope.flows.stage_schedule import run_stages

    a, b = toy("a", 0.0, ("b",)), toy("b", 0.0, ("a",))
    with pytest.raises(ValueError, match="can never start: a, b"):
        run_stages([a, b], lambda stage: pytest.fail("nothing may start"))

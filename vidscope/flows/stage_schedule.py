"""Run a video's stages as their declarations allow: each one starts as soon as everything it needs
or reads has finished, whatever the order they are registered in (issue 43).

Before, the ingestion loop walked the registered list and, before submitting a stage, waited for
that stage's dependencies: a stage listed after a slow one waited for it even when it did not depend
on it, so the same DAG took 2.13 s or 1.24 s depending on the list's order. Here the list's order
decides nothing but ties: a finished stage releases every stage it was holding back, at once.

The scheduler knows nothing of Prefect: it is handed ``submit``, which starts one stage (a Prefect
task, or a thread of this process without a server) and returns a :class:`StageRun`. The two
ingestion paths share it, so they cannot drift apart.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from vidscope.tasks.stage import Stage, StageResult


@dataclass(frozen=True)
class StageRun:
    """A stage that was started: how to be told it is over, and then what it did."""

    #: Registers a callback run (on any thread) once the stage is over, or at once if it already is.
    when_done: Callable[[Callable[[], None]], None]
    #: What the stage did; a stage that raised is a ``failed`` :class:`StageResult`, never raises.
    result: Callable[[], StageResult]

    @classmethod
    def of_future(cls, future: Any, result: Callable[[], StageResult]) -> StageRun:
        """The run of a stage started as ``future``: a Prefect task future or a thread pool's,
        both of which call back with themselves when done; ``result`` reads it."""
        return cls(when_done=lambda callback: future.add_done_callback(lambda _: callback()), result=result)


def run_stages(registered: Sequence[Stage], submit: Callable[[Stage], StageRun]) -> dict[str, StageResult]:
    """Run every stage of ``registered`` once, each as soon as what it needs or reads has finished;
    their results by stage name, in the registered order.

    A dependency that is not registered (a stage run before, such as the probe) holds nothing back.
    Raises ``ValueError`` if the declarations leave stages that can never start (a cycle).
    """
    names = {stage.name for stage in registered}
    waiting_on = {
        stage.name: {d for d in (*stage.needs, *stage.reads) if d in names and d != stage.name}
        for stage in registered
    }
    pending = list(registered)
    running: dict[str, StageRun] = {}
    finished: dict[str, StageResult] = {}
    over: queue.SimpleQueue[str] = queue.SimpleQueue()
    while pending or running:
        ready = [stage for stage in pending if waiting_on[stage.name] <= finished.keys()]
        for stage in ready:
            pending.remove(stage)
            run = submit(stage)
            running[stage.name] = run
            run.when_done(partial(over.put, stage.name))
        if not running:
            stuck = ", ".join(stage.name for stage in pending)
            raise ValueError(f"stages that wait on each other can never start: {stuck}")
        name = over.get()
        finished[name] = running.pop(name).result()
    return {stage.name: finished[stage.name] for stage in registered}

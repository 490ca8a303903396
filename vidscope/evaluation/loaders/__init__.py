"""Benchmark loaders, one module per benchmark family, all returning :class:`BenchmarkItem` lists.

:data:`BENCHMARKS` names each loader with what it reads and what the papers report on it; the
``evaluate`` flow and the CLI look benchmarks up here (:func:`load_benchmark`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from vidscope.evaluation.items import BenchmarkItem
from vidscope.evaluation.loaders import (
    activitynet_captions,
    charades_sta,
    crossvid,
    didemo,
    egoschema,
    longvideobench,
    lvbench,
    mlvu,
    msrvtt,
    msvd,
    mvx_bench,
    videomme,
)
from vidscope.evaluation.protocol import Protocol
from vidscope.evaluation.videos import Aliases, no_aliases

LETTER = "option letter"
INTERVAL = "interval [start, end] in seconds"
RANKING = "ranked videos (the benchmark's gallery)"
DVD = "DVD"


@dataclass(frozen=True)
class BenchmarkSpec:
    """A benchmark: its loader, the annotation it reads, how the papers score it, and the protocol
    (inputs, answer format) under which its published number was measured."""

    name: str
    load: Callable[..., list[BenchmarkItem]]
    annotations: str
    reported: str
    protocol: Protocol
    aliases: Aliases = no_aliases
    #: How a dimension's score is formed: pooled over its questions, or the mean of its tasks'
    #: scores (CrossVid's leaderboard; the overall score is then the mean over tasks too).
    dimension_average: Literal["questions", "tasks"] = "questions"
    #: Every task of the benchmark, when its overall score is a mean over tasks (CrossVid's ten):
    #: a run that scores fewer labels its overall score with how many it covers.
    tasks: tuple[str, ...] = ()
    #: A task as the items name it → its name in ``tasks`` (None: not one of them).
    task_name: Callable[[str], str | None] = lambda task: task  # noqa: E731 - a default, per instance


BENCHMARKS: dict[str, BenchmarkSpec] = {
    spec.name: spec
    for spec in (
        BenchmarkSpec(
            "lvbench",
            lvbench.load,
            "video_info.meta.jsonl",
            "accuracy (DVD 74.2)",
            Protocol(
                answer=LETTER,
                published=f"74.2 accuracy without transcripts; 76.0 with them ({DVD})",
            ),
        ),
        BenchmarkSpec(
            "videomme",
            videomme.load,
            "videomme/test-*.parquet or its JSON (split='long', subtitles=False)",
            "accuracy on the long split (DVD 67.3)",
            Protocol(answer=LETTER, published=f"67.3 accuracy, long split without subtitles ({DVD})"),
        ),
        BenchmarkSpec(
            "longvideobench",
            longvideobench.load,
            "lvb_val.json",
            "accuracy (DVD 71.6)",
            Protocol(answer=LETTER, published=f"71.6 accuracy on val, no subtitles stated ({DVD})"),
        ),
        BenchmarkSpec(
            "egoschema",
            egoschema.load,
            "questions.json (answers=subset_answers.json, clip_map=uid_to_ego4d.json, subset=True)",
            "accuracy on the 500-question subset (DVD 76.6)",
            Protocol(answer=LETTER, published=f"76.6 accuracy on the 500-question subset ({DVD})"),
        ),
        BenchmarkSpec(
            "mlvu",
            mlvu.load,
            "folder of task files 1_plotQA.json ...",
            "M-Avg over MC tasks",
            Protocol(answer=LETTER, published="M-Avg over the multiple-choice tasks (MLVU dev)"),
        ),
        BenchmarkSpec(
            "charades_sta",
            charades_sta.load,
            "charades_sta_test.txt",
            "R@0.3/0.5/0.7, mIoU (AVI 60.0)",
            Protocol(answer=INTERVAL, published="60.0 mIoU on the test split (AVI)"),
        ),
        BenchmarkSpec(
            "msrvtt",
            msrvtt.load,
            "MSRVTT_JSFUSION_test.csv",
            "R@1/5/10 (MAVIS R@1 78.6)",
            Protocol(answer=RANKING, published="78.6 R@1 on the 1k-A test split (MAVIS)"),
        ),
        BenchmarkSpec(
            "msvd",
            msvd.load,
            "raw-captions.pkl or the corpus CSV (split=test_list.txt)",
            "R@1/5/10",
            Protocol(answer=RANKING),
        ),
        BenchmarkSpec(
            "didemo",
            didemo.load,
            "test_data.json (LocalizingMoments; one paragraph query per video)",
            "R@1/5/10, MdR, MnR",
            Protocol(answer=RANKING),
        ),
        BenchmarkSpec(
            "activitynet_captions",
            activitynet_captions.load,
            "val_1.json (task='grounding' or 'retrieval')",
            "R@0.3/0.5/0.7, mIoU; or R@1/5/10",
            # The answer format follows the task option; the flow records the items' kind.
            Protocol(answer=f"{INTERVAL} (task=grounding) or {RANKING} (task=retrieval)"),
            aliases=activitynet_captions.aliases,
        ),
        BenchmarkSpec(
            "mvx_bench",
            mvx_bench.load,
            "question file (JSON/JSONL)",
            "accuracy per task (SAMA 52.7)",
            # SAMA's tools read the videos' speech: transcripts on, as the paper's agent had them.
            Protocol(transcripts=True, answer=LETTER, published="52.7 accuracy (SAMA)"),
        ),
        BenchmarkSpec(
            "crossvid",
            crossvid.load,
            "question file (JSON/JSONL)",
            "accuracy per dimension (AgentCVR 42.0)",
            # AgentCVR's audio sub-agent reads the transcripts.
            Protocol(transcripts=True, answer=LETTER, published="42.0 accuracy (AgentCVR)"),
            dimension_average=crossvid.DIMENSION_AVERAGE,
            tasks=crossvid.TASKS,
            task_name=crossvid.task_abbreviation,
        ),
    )
}


def load_benchmark(name: str, annotations: Path | str, **options: Any) -> list[BenchmarkItem]:
    """The items of benchmark ``name`` from its annotation file or folder (loader options pass on)."""
    if name not in BENCHMARKS:
        raise KeyError(f"unknown benchmark {name!r}; known: {', '.join(sorted(BENCHMARKS))}")
    return BENCHMARKS[name].load(annotations, **options)


__all__ = ["BENCHMARKS", "BenchmarkSpec", "Protocol", "load_benchmark"]

"""Benchmark loaders, one module per benchmark family, all returning :class:`BenchmarkItem` lists.

:data:`BENCHMARKS` names each loader with what it reads and what the papers report on it; the
``evaluate`` flow and the CLI look benchmarks up here (:func:`load_benchmark`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vidscope.evaluation.items import BenchmarkItem
from vidscope.evaluation.loaders import (
    activitynet_captions,
    charades_sta,
    crossvid,
    egoschema,
    longvideobench,
    lvbench,
    mlvu,
    msrvtt,
    msvd,
    mvx_bench,
    videomme,
)
from vidscope.evaluation.videos import Aliases, no_aliases


@dataclass(frozen=True)
class BenchmarkSpec:
    """A benchmark: its loader, the annotation it reads, and how the papers score it."""

    name: str
    load: Callable[..., list[BenchmarkItem]]
    annotations: str
    reported: str
    aliases: Aliases = no_aliases


BENCHMARKS: dict[str, BenchmarkSpec] = {
    spec.name: spec
    for spec in (
        BenchmarkSpec("lvbench", lvbench.load, "video_info.meta.jsonl", "accuracy (DVD 74.2)"),
        BenchmarkSpec(
            "videomme",
            videomme.load,
            "videomme/test-*.parquet or its JSON (split='long', subtitles=False)",
            "accuracy on the long split (DVD 67.3)",
        ),
        BenchmarkSpec("longvideobench", longvideobench.load, "lvb_val.json", "accuracy (DVD 71.6)"),
        BenchmarkSpec(
            "egoschema",
            egoschema.load,
            "questions.json (answers=subset_answers.json, clip_map=uid_to_ego4d.json, subset=True)",
            "accuracy on the 500-question subset (DVD 76.6)",
        ),
        BenchmarkSpec("mlvu", mlvu.load, "folder of task files 1_plotQA.json ...", "M-Avg over MC tasks"),
        BenchmarkSpec(
            "charades_sta", charades_sta.load, "charades_sta_test.txt", "R@0.3/0.5/0.7, mIoU (AVI 60.0)"
        ),
        BenchmarkSpec("msrvtt", msrvtt.load, "MSRVTT_JSFUSION_test.csv", "R@1/5/10 (MAVIS R@1 78.6)"),
        BenchmarkSpec(
            "msvd", msvd.load, "raw-captions.pkl or the corpus CSV (split=test_list.txt)", "R@1/5/10"
        ),
        BenchmarkSpec(
            "activitynet_captions",
            activitynet_captions.load,
            "val_1.json (task='grounding' or 'retrieval')",
            "R@0.3/0.5/0.7, mIoU; or R@1/5/10",
            aliases=activitynet_captions.aliases,
        ),
        BenchmarkSpec(
            "mvx_bench", mvx_bench.load, "question file (JSON/JSONL)", "accuracy per task (SAMA 52.7)"
        ),
        BenchmarkSpec(
            "crossvid", crossvid.load, "question file (JSON/JSONL)", "accuracy per dimension (AgentCVR 42.0)"
        ),
    )
}


def load_benchmark(name: str, annotations: Path | str, **options: Any) -> list[BenchmarkItem]:
    """The items of benchmark ``name`` from its annotation file or folder (loader options pass on)."""
    if name not in BENCHMARKS:
        raise KeyError(f"unknown benchmark {name!r}; known: {', '.join(sorted(BENCHMARKS))}")
    return BENCHMARKS[name].load(annotations, **options)


__all__ = ["BENCHMARKS", "BenchmarkSpec", "load_benchmark"]

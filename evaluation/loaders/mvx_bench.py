"""MVX-Bench (multi-video questions; SAMA reports 52.7, accuracy per task).

The question file is not available here; records are read as described in
:mod:`vidscope.evaluation.loaders.multivideo` (a JSON/JSONL list of questions, each with its task,
its list of videos, options and a gold letter). Results are reported per task (the items'
categories) and overall. A ``dimension`` field, when a record has one, is kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vidscope.evaluation.items import BenchmarkItem
from vidscope.evaluation.loaders.multivideo import load_records

NAME = "mvx_bench"


def _dimension(record: dict[str, Any], task: str) -> str | None:
    value = record.get("dimension")
    return str(value) if value is not None else None


def load(path: Path | str) -> list[BenchmarkItem]:
    """Every question of an MVX-Bench question file."""
    return load_records(path, NAME, _dimension)

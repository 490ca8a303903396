"""vidscope: ask questions about, search and compare your own videos with AI agents.

The Python API is :class:`Library` (``vidscope/library.py``); the names below are its public
surface, imported on first use so that ``import vidscope`` stays cheap. ``__all__`` lists them,
and ``tests/test_python_api.py`` fails when one disappears.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Public name -> the module defining it.
_PUBLIC = {
    "Library": "vidscope.library",
    "Settings": "vidscope.core.settings",
    # results (the pydantic models the --json outputs print)
    "AskResult": "vidscope.agents.answers",
    "TraceStep": "vidscope.agents.answers",
    "Citation": "vidscope.agents.answers",
    "CompareResult": "vidscope.flows.compare",
    "SearchResult": "vidscope.agents.mavis.search",
    "MomentSearch": "vidscope.agents.moments",
    "MomentFilters": "vidscope.agents.moments",
    "VideoReport": "vidscope.flows.ingest_plan",
    "VideoRecord": "vidscope.storage.videos",
    "VideoOverview": "vidscope.flows.summarize",
    "Digest": "vidscope.flows.summarize",
    "TranscriptLine": "vidscope.flows.summarize",
    # errors
    "VidscopeError": "vidscope.core.errors",
    "BackendUnavailable": "vidscope.core.errors",
    "VideoNotFound": "vidscope.storage.videos",
    "LibraryEmpty": "vidscope.agents.mavis.search",
    "VisualSearchOff": "vidscope.flows.search",
    "BundleError": "vidscope.storage.bundle_files",
    "SqlError": "vidscope.storage.sql",
    "NotSummarized": "vidscope.flows.summarize",
}

__all__ = [
    "__version__",
    "Library",
    "Settings",
    "AskResult",
    "TraceStep",
    "Citation",
    "CompareResult",
    "SearchResult",
    "MomentSearch",
    "MomentFilters",
    "VideoReport",
    "VideoRecord",
    "VideoOverview",
    "Digest",
    "TranscriptLine",
    "VidscopeError",
    "BackendUnavailable",
    "VideoNotFound",
    "LibraryEmpty",
    "VisualSearchOff",
    "BundleError",
    "SqlError",
    "NotSummarized",
]
assert set(__all__) == {"__version__", *_PUBLIC}  # one list, spelled out for type checkers and linters

if TYPE_CHECKING:
    from vidscope.agents.answers import AskResult, Citation, TraceStep
    from vidscope.agents.mavis.search import LibraryEmpty, SearchResult
    from vidscope.agents.moments import MomentFilters, MomentSearch
    from vidscope.core.errors import BackendUnavailable, VidscopeError
    from vidscope.core.settings import Settings
    from vidscope.flows.compare import CompareResult
    from vidscope.flows.ingest_plan import VideoReport
    from vidscope.flows.search import VisualSearchOff
    from vidscope.flows.summarize import Digest, NotSummarized, TranscriptLine, VideoOverview
    from vidscope.library import Library
    from vidscope.storage.bundle_files import BundleError
    from vidscope.storage.sql import SqlError
    from vidscope.storage.videos import VideoNotFound, VideoRecord


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'vidscope' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)

"""Directories under the data dir that hold files other than tables (model caches, exports).

Modules that need to write a file ask for a directory here instead of inventing paths, so
everything vidscope writes stays under the data dir and is listed in one place.
"""

from __future__ import annotations

from pathlib import Path

#: The subdirectories vidscope may create under the data dir, and what each holds.
MANAGED_DIRS = {
    "models": "model files vidscope assembles itself (e.g. the embedded Whisper base)",
    "prefect": "Prefect results and task caches",
    "cache": "vidscope's own caches in files (tools/: one JSON file per tool-call result)",
    "exports": "graph and report exports",
    "demo": "the synthetic narrated video `vidscope demo` makes",
    "server": "the local Prefect server's database, logs and pid files (`vidscope server`)",
    "logs": "vidscope.log: full tracebacks and library messages the terminal leaves out",
}


def managed_dir(data_dir: Path, name: str) -> Path:
    """The managed directory ``name`` under ``data_dir``, created if needed."""
    if name not in MANAGED_DIRS:
        raise ValueError(f"unknown managed directory {name!r}; known: {sorted(MANAGED_DIRS)}")
    path = Path(data_dir).expanduser().resolve() / name
    path.mkdir(parents=True, exist_ok=True)
    return path

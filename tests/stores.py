"""Stores many tests start from, built once per test process and copied into each test's data dir.

A build (ingesting a video, or filling tables with embedded text) costs a second or more; a data
dir of a few small LanceDB tables copies in milliseconds. Each test gets its own copy, so it may
change it freely; the templates live in a temporary directory of their own.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: Every model role of the ingestion off: a store ingested with these holds only what the video's
#: pixels give without a model (frames, segments, tags, chapters from picture changes).
NO_MODELS: dict[str, Any] = {
    "speech_recognizer": None,
    "text_reader": None,
    "captioner": None,
    "chat": None,
    "image_text": None,
    "object_detector": None,
}

_TEMPLATES: dict[tuple[object, ...], Path] = {}


def stored_copy(key: tuple[object, ...], data_dir: Path, build: Callable[[Path], object]) -> bool:
    """Give ``data_dir`` a copy of what ``build(data_dir)`` writes there, building it once per process.

    ``key`` names everything the build depends on other than the directory. Returns True when
    ``data_dir`` was copied from an earlier build (the caller then puts right whatever the build
    recorded about its own directory, such as absolute paths), False when ``build`` just wrote it.
    """
    template = _TEMPLATES.get(key)
    if data_dir.exists() and any(data_dir.iterdir()):
        # A store already there (a server's data dir that a test ingested into): copying the
        # template's tables over it would mix two tables' versions. Build into it instead.
        build(data_dir)
        return False
    if template is None:
        build(data_dir)
        template = Path(tempfile.mkdtemp(prefix="vidscope-test-store-")) / "data"
        shutil.copytree(data_dir, template, symlinks=True)
        _TEMPLATES[key] = template
        return False
    shutil.copytree(template, data_dir, symlinks=True, dirs_exist_ok=True)
    return True

"""Run Python in a fresh process as if some packages were not installed (a core install, in effect).

The shared test environment has every extra installed; a user's core install has none of them.
:func:`run_without` starts ``python -c CODE`` with the path finder wrapped so that the named
top-level packages are not found: ``import torch`` raises ``ModuleNotFoundError`` and
``importlib.util.find_spec("torch")`` returns ``None``, as when the package is absent, whoever
asks (vidscope or a library probing for it); only its distribution metadata stays visible.
``_report_hidden()`` prints which of the hidden names ended up in ``sys.modules`` (none can,
unless something bypasses the finders).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence

#: The packages the embedded default profile must run without (the extras install them).
EXTRAS_ONLY = (
    "torch",
    "torchvision",
    "transformers",
    "sentence_transformers",
    "ultralytics",
    "paddle",
    "paddleocr",
    "paddlex",
    "decord",
    "open_clip",
    "trl",
    "prefect_dask",
    "prefect_ray",
)

_PRELUDE = """
import importlib.machinery, json, sys
HIDDEN = set(json.loads(sys.argv.pop(1)))

class _Hiding:
    '''The path finder, minus the hidden packages.'''
    def __init__(self, inner):
        self._inner = inner
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            return None
        return self._inner.find_spec(name, path, target)
    def __getattr__(self, attribute):  # invalidate_caches, find_distributions, …
        return getattr(self._inner, attribute)

sys.meta_path[:] = [
    _Hiding(f) if f is importlib.machinery.PathFinder else f for f in sys.meta_path
]

def _report_hidden():
    print("HIDDEN-IMPORTED " + json.dumps(sorted({m.partition(".")[0] for m in sys.modules} & HIDDEN)))
"""


def run_without(
    hidden: Sequence[str], code: str, *args: str, timeout: float = 300, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run ``code`` (which may call ``_report_hidden()`` last) with ``hidden`` packages missing.

    Returns the finished process and the hidden packages found imported (from its report line;
    an empty list if it printed none).
    """
    environment = {**os.environ, **(env or {})}
    done = subprocess.run(
        [sys.executable, "-c", _PRELUDE + code, json.dumps(list(hidden)), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment,
    )
    imported: list[str] = []
    for line in done.stdout.splitlines():
        if line.startswith("HIDDEN-IMPORTED "):
            imported = json.loads(line.removeprefix("HIDDEN-IMPORTED "))
    return done, imported

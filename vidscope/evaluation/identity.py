"""What makes two evaluation runs the same run, and where a run was made.

A run's *identity* is everything that can change its answers: the benchmark, the annotation file
(path and content), the video root, the agent, the loader options, the protocol, every model role
as it is really served (its fallback's spec when unset) with its backend options, and the ingest,
agent and search settings, and the code that answers (:func:`code_identity`: vidscope's version
and a hash of the agents' source, prompts and skills included). A resumed run must have the same
identity; :func:`differences` says, in one line, what is not the same.

Left out, because they change cost or speed but not answers: prices, timeouts, retries,
concurrency, caches, devices and batch sizes, the task runner; secrets are never recorded (only
the name of the variable holding an API key would be, and that is left out too).
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import vidscope
from vidscope.core.hashing import stable_hash
from vidscope.core.settings import ModelSettings, Settings
from vidscope.models import registry

#: Backend options that change speed, cost or robustness, never an answer.
OPERATIONAL_OPTIONS = frozenset(
    {
        "prices",
        "timeout_s",
        "max_retries",
        "max_concurrency",
        "retry_base_s",
        "retry_after_max_s",
        "cache",
        "api_key_env",
        "device",
        "batch_size",
        "embed_batch",
        "cpu_threads",
    }
)
#: Option names that may hold a secret: never written to ``run.json``.
_SECRET = re.compile(r"(^|_)(api_key|key|secret|password|token)$", re.IGNORECASE)
#: Settings sections and the fields of each that do not change answers.
SETTINGS_SECTIONS: dict[str, frozenset[str]] = {
    "ingest": frozenset(
        {"concurrency", "stage_retries", "task_runner", "dask_address", "dask_workers", "ray_address"}
    ),
    "agent": frozenset({"tool_cache"}),
    "search": frozenset(),
}
#: The model roles, in the order ``ModelSettings`` declares them.
ROLES = tuple(name for name in ModelSettings.model_fields if name != "options")


def _answer_options(value: Any) -> Any:
    """Backend options without the operational and secret keys (nested role tables too)."""
    if isinstance(value, dict):
        return {
            k: _answer_options(v)
            for k, v in sorted(value.items())
            if k not in OPERATIONAL_OPTIONS and not _SECRET.search(str(k))
        }
    return value


def model_identity(settings: Settings) -> dict[str, Any]:
    """``{role: {"spec", "options"}}`` of every role as it is really served."""
    roles: dict[str, Any] = {}
    for role in ROLES:
        spec = registry.effective_spec(settings, role) or None
        roles[role] = {"spec": spec, "options": _answer_options(registry.backend_options(settings, spec))}
    return roles


def settings_identity(settings: Settings) -> dict[str, Any]:
    """The ingest, agent and search settings that change answers."""
    return {
        section: getattr(settings, section).model_dump(mode="json", exclude=set(excluded))
        for section, excluded in SETTINGS_SECTIONS.items()
    }


def file_digest(path: Path) -> str:
    """SHA-256 of a file, or of a folder's files (names and contents, sorted): the annotations."""
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        digest.update(str(file.relative_to(path) if file != path else file.name).encode())
        with file.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


#: The agents' source, read as text (the evaluation layer does not import the agents): prompts,
#: skills, loops and tools, everything that turns a question into an answer.
AGENT_SOURCES = ("*.py", "*.md")


def code_identity() -> dict[str, Any]:
    """The code a run answers with (a copy: see :func:`_code_identity`)."""
    return dict(_code_identity())


@cache
def _code_identity() -> dict[str, Any]:
    """The code a run answers with: ``{"vidscope_version", "agents"}``, the second a SHA-256 of the
    text of every module and skill file of :mod:`vidscope.agents` (paths and contents, sorted).

    Issue 37 asks for the git commit, else the version and a hash of the prompt module. The hash is
    what a resume is refused on instead, deliberately: a commit changes with unrelated work (a doc,
    a test) and does not see uncommitted edits (a checkout ``+dirty`` is the same string whatever
    the edit), whereas the agents' text changes exactly when a prompt, a skill or a loop does —
    including in a dirty checkout. The commit is still recorded per session (:func:`provenance`).

    Read once per process: the process answers with the code it imported, whatever is edited on
    disk after that (a run and its resume in one process agree)."""
    agents = (Path(vidscope.__file__).parent / "agents").resolve()
    digest = hashlib.sha256()
    files = sorted(
        {p for pattern in AGENT_SOURCES for p in agents.rglob(pattern) if "__pycache__" not in p.parts}
    )
    for file in files:
        digest.update(str(file.relative_to(agents)).encode() + b"\0" + file.read_bytes() + b"\0")
    return {"vidscope_version": vidscope.__version__, "agents": digest.hexdigest()[:16]}


def run_identity(
    settings: Settings,
    *,
    benchmark: str,
    annotations: Path,
    root: Path,
    agent: str,
    options: dict[str, Any],
    protocol: dict[str, Any],
) -> dict[str, Any]:
    """Everything a run's answers depend on (see the module docstring), JSON-ready."""
    return {
        "benchmark": benchmark,
        "annotations": str(annotations),
        "annotations_sha256": file_digest(annotations),
        "root": str(root),
        "agent": agent,
        "options": dict(sorted(options.items())),
        "protocol": protocol,
        "models": model_identity(settings),
        "settings": settings_identity(settings),
        "code": code_identity(),
    }


def identity_hash(identity: dict[str, Any]) -> str:
    """A stable hash of an identity (the run's ``settings_fingerprint``)."""
    return stable_hash(identity)


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        flat: dict[str, Any] = {}
        for key, inner in value.items():
            flat.update(_flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: value}


def _short(value: Any, limit: int = 100) -> str:
    """A value as the refusal shows it; a long one keeps its end (where paths differ)."""
    text = "unset" if value is None else str(value)
    return text if len(text) <= limit else "..." + text[-(limit - 3) :]


def differences(before: dict[str, Any], now: dict[str, Any], shown: int = 3) -> str:
    """What differs between two identities, as one line (``""`` when nothing does), e.g.
    ``root (/videos/a -> /videos/b), models.chat.options.base_url (... -> ...)``."""
    old, new = _flatten(before), _flatten(now)
    keys = [k for k in dict.fromkeys([*old, *new]) if old.get(k) != new.get(k)]
    if not keys:
        return ""
    parts = [f"{k} ({_short(old.get(k))} -> {_short(new.get(k))})" for k in keys[:shown]]
    if len(keys) > shown:
        parts.append(f"and {len(keys) - shown} more")
    return ", ".join(parts)


# ---------------------------------------------------------------------------- provenance


def _git_commit() -> str | None:
    """The commit of the vidscope checkout in use (``+dirty`` with local changes), when it is one."""
    source = Path(vidscope.__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        )
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(source), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def provenance() -> dict[str, Any]:
    """The vidscope version and commit, and the machine facts, of the process making a run."""
    return {
        "vidscope_version": vidscope.__version__,
        "commit": _git_commit(),
        "machine": {
            "platform": platform.platform(),
            "machine": platform.machine(),
            "cpu_count": os.cpu_count(),
            "python": sys.version.split()[0],
        },
    }

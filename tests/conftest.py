"""Test-wide setup: offline, telemetry off, a private Prefect home, and shared fixtures."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

# Before anything imports prefect or a model library: nothing may reach for the network, and Prefect
# must not touch the developer's own ~/.prefect (its ephemeral API server lives in a temp dir).
_PREFECT_HOME = tempfile.mkdtemp(prefix="vidscope-test-prefect-")
os.environ.update(
    {
        "PREFECT_HOME": _PREFECT_HOME,
        "PREFECT_API_URL": "",
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "YOLO_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "VIDSCOPE_CONFIG": os.path.join(_PREFECT_HOME, "no-such-vidscope.toml"),
        # The default profile's CLIP is fetched on first use; no test data dir may download it.
        "VIDSCOPE_MODEL_FETCH": "0",
    }
)
os.environ.pop("PREFECT_API_URL")
_KEEP = {"VIDSCOPE_CONFIG", "VIDSCOPE_MODEL_FETCH"}
# The real-model tier's own knobs (VIDSCOPE_REAL_MODEL_DIR, ..._THREADS) are no settings: they stay,
# or the tier re-assembles its model under the repo whatever directory it was told.
for _key in [
    k
    for k in os.environ
    if k.startswith("VIDSCOPE_") and k not in _KEEP and not k.startswith("VIDSCOPE_REAL_MODEL_")
]:
    del os.environ[_key]

from hypothesis import settings as hypothesis_settings  # noqa: E402
from llm_server import llm_server  # noqa: E402,F401  (fixture re-export)

# Property-based tests draw the same examples on every run unless a test asks otherwise (the slow,
# randomised runs do): the default suite passes or fails for the code, never for the draw.
hypothesis_settings.register_profile("vidscope", derandomize=True, database=None)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "vidscope"))

SHARED_VIDEOS = Path(__file__).resolve().parents[2] / "shared" / "videos"


@pytest.fixture(scope="session")
def shared_videos() -> Path:
    """The CC BY 4.0 sample videos beside the repository (see their README for attribution)."""
    if not SHARED_VIDEOS.is_dir():
        pytest.skip(f"sample videos not found at {SHARED_VIDEOS}")
    return SHARED_VIDEOS


def _untracked_files(root: Path) -> set[str] | None:
    """Files git sees as untracked (and not ignored) under ``root``; None outside a checkout."""
    import subprocess

    try:
        out = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=all"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return {line[3:] for line in out.splitlines() if line.startswith("?? ")}


@pytest.fixture(scope="session", autouse=True)
def _tests_leave_the_working_tree_alone():
    """Tests write under tmp paths only: fail the run if it left new files in the repository."""
    root = Path(__file__).resolve().parents[1]
    before = _untracked_files(root)
    yield
    from vidscope.models.usage import flush_all

    flush_all()  # buffered model-call records are written late; write them before looking
    after = _untracked_files(root)
    if before is not None and after is not None:
        new = sorted(after - before)
        assert not new, f"tests wrote files into the working tree: {new[:10]}"

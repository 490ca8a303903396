"""Test-wide setup: offline, telemetry off, a private Prefect home, shared fixtures, and the default
suite's time budget."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

# Some machines (this project's CI among them) set PYTHONDONTWRITEBYTECODE. Under it pytest rewrites
# every test module's asserts again in each worker and every run (7 s a process), and each `vidscope`
# the tests start compiles vidscope's modules from source. The suite writes its compiled files (in
# the ignored __pycache__ folders) as a normal install does: later processes and runs read them.
sys.dont_write_bytecode = False

# Before anything imports prefect or a model library: nothing may reach for the network, and Prefect
# must not touch the developer's own ~/.prefect (its ephemeral API server lives in a temp dir).
_PREFECT_HOME = tempfile.mkdtemp(prefix="vidscope-test-prefect-")
atexit.register(shutil.rmtree, _PREFECT_HOME, True)
# Models are cached per user (~/.cache/vidscope): the suite's own cache, shared by its tests (the
# embedded Whisper is joined once per process) and removed when the process ends.
_MODEL_CACHE = tempfile.mkdtemp(prefix="vidscope-test-models-")
atexit.register(shutil.rmtree, _MODEL_CACHE, True)
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
        "VIDSCOPE_MODEL_CACHE": _MODEL_CACHE,
    }
)
os.environ.pop("PREFECT_API_URL")
# VIDSCOPE_TEST_BUDGET_S is the suite's own knob (see the budget below), not a setting.
_KEEP = {"VIDSCOPE_CONFIG", "VIDSCOPE_MODEL_FETCH", "VIDSCOPE_MODEL_CACHE", "VIDSCOPE_TEST_BUDGET_S"}
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


# ---------------------------------------------------------------------------- isolation between tests


#: The suite's own VIDSCOPE_* environment, as set above: every test ends with it put back.
_BASE_ENVIRONMENT = {k: v for k, v in os.environ.items() if k.startswith("VIDSCOPE_")}


@pytest.fixture(autouse=True)
def _process_state_is_put_back() -> Iterator[None]:
    """What a CLI command invoked in-process leaves behind does not reach the next test: the
    ``--config`` option sets ``VIDSCOPE_CONFIG`` for the process and ``--data-dir`` fills the CLI's
    overrides. Both are put back as the suite set them after each test, also when a module-scoped
    fixture invoked the command (a config with ``text_reader = ""`` left that way turned OCR off
    for every later test of the process). A wider fixture cannot hand its tests a VIDSCOPE_*
    variable: it passes settings or a config path instead."""
    yield
    for key in [k for k in os.environ if k.startswith("VIDSCOPE_") and k not in _BASE_ENVIRONMENT]:
        del os.environ[key]
    os.environ.update(_BASE_ENVIRONMENT)
    common = sys.modules.get("vidscope.cli.common")
    if common is not None:
        common.overrides.clear()


def _harness_threads_are_not_the_programs() -> None:
    """Under pytest-xdist the worker talks to the controller through execnet, whose I/O thread is
    started with ``_thread`` and runs Python: exactly what ``core.exits`` waits for at exit (it
    cannot tell it from LanceDB's workers). The threads present when the worker starts are the
    harness's, not the code under test's, so the exit logic is shown the process as it would be
    without the harness."""
    from vidscope.core import exits

    harness = set(exits.native_threads_in_python())
    if not harness:
        return
    program_threads = exits.native_threads_in_python

    def native_threads_in_python() -> list[int]:
        return [ident for ident in program_threads() if ident not in harness]

    native_threads_in_python.__doc__ = program_threads.__doc__
    exits.native_threads_in_python = native_threads_in_python  # type: ignore[assignment]


# ---------------------------------------------------------------------------- the suite's budget
#
# The README's test command (the default suite: slow and real-model tests deselected) has a wall
# time budget, `suite_budget_seconds` in pyproject's [tool.pytest.ini_options], or the
# VIDSCOPE_TEST_BUDGET_S environment variable (0 turns the check off). When the whole default suite
# ran and took longer, the run fails and names its slowest tests: the budget is kept by the change
# that would break it. A subset (paths, -k, -m, --lf, --deselect, ...) is never judged.

_BUDGET_ENV = "VIDSCOPE_TEST_BUDGET_S"
_SESSION: dict[str, float] = {}  # start, wall, budget; status (the run's exit status)
_TEST_SECONDS: dict[str, float] = {}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "suite_budget_seconds",
        f"wall-time budget of the whole default suite in seconds; 0 = none ({_BUDGET_ENV} overrides)",
        default="0",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Two processes (addopts' ``-n 2``) are for the default suite and the slow tests (``-m
    slow``: their files use under one core on average, waiting on servers and subprocesses); a run
    selecting other marks (the real-model tier with its one llama.cpp server, the wheel's fresh
    virtualenv) or asking for ``--pdb`` runs in one process. Runs before pytest-xdist reads the
    option."""
    marks = config.option.markexpr or None
    if getattr(config.option, "numprocesses", None) and (
        marks not in (_default_marks(config), "slow") or config.getoption("usepdb", False)
    ):
        config.option.numprocesses = 0


#: The costliest files of the default suite and of the slow tests (test seconds on 2 cores,
#: November 2026), started first. Under ``--dist loadfile`` each file runs whole on one process,
#: handed out in order; pytest-xdist orders files by their number of tests unless told not to
#: (``--no-loadscope-reorder`` in pyproject), so a file of few slow tests could start last and run
#: alone at the end. Heaviest first, the many light files even out the end.
HEAVIEST_FILES = (
    "test_cluster.py",  # slow tests only: ~160 s, two hosts through faults
    "test_operations.py",  # ~69 s: a Prefect server, flows and CLI runs against it
    "test_clean_stops.py",  # slow tests only: ~140 s, APIs and ingests stopped by signals
    "test_ingest.py",  # ~34 s
    "test_web.py",  # ~30 s: a browser
    "test_ocr_gate.py",  # ~25 s: real OCR over footage, every frame read once
    "test_compare_tools.py",
    "test_cold_cli.py",
    "test_bundle.py",
    "test_whisper.py",
    "test_summaries.py",
    "test_rapidocr.py",
    "test_object_storage.py",
    "test_api.py",
    "test_caption_registry.py",
    "test_backend_vlm.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The heaviest files first (:data:`HEAVIEST_FILES`), each file's tests in their own order."""
    rank = {name: i for i, name in enumerate(HEAVIEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep order


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):  # a pytest-xdist worker
        _harness_threads_are_not_the_programs()


def pytest_sessionstart(session: pytest.Session) -> None:
    _SESSION["start"] = time.monotonic()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Under pytest-xdist the controller receives every worker's reports here.
    _TEST_SECONDS[report.nodeid] = _TEST_SECONDS.get(report.nodeid, 0.0) + report.duration


def _suite_budget(config: pytest.Config) -> float:
    raw = os.environ.get(_BUDGET_ENV) or str(config.getini("suite_budget_seconds"))
    try:
        return float(raw)
    except ValueError:
        raise pytest.UsageError(f"suite budget {raw!r} is not a number of seconds") from None


def _default_marks(config: pytest.Config) -> str | None:
    """The ``-m`` expression of the ini file's addopts: what the README's command selects."""
    words = list(config.getini("addopts"))  # already split as a shell would
    for i, word in enumerate(words[:-1]):
        if word == "-m":
            return words[i + 1]
    return None


def _whole_default_suite(config: pytest.Config) -> bool:
    """True when this run selected the default suite and nothing less (or more)."""
    option = config.option
    return (
        config.args_source == pytest.Config.ArgsSource.TESTPATHS
        and (option.markexpr or None) == _default_marks(config)
        and not option.keyword
        and not option.deselect
        and not option.ignore
        and not option.ignore_glob
        and not getattr(option, "lf", False)
        and not getattr(option, "stepwise", False)
        and not option.collectonly
        and not option.maxfail
    )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _keep_to_the_budget(session, exitstatus)
    _SESSION["status"] = int(session.exitstatus)  # the verdict, for pytest_unconfigure


def _keep_to_the_budget(session: pytest.Session, exitstatus: int) -> None:
    """The whole default suite fails when it took longer than its budget."""
    config = session.config
    if hasattr(config, "workerinput") or "start" not in _SESSION:
        return
    budget = _suite_budget(config)
    if budget <= 0 or exitstatus == pytest.ExitCode.INTERRUPTED or not _whole_default_suite(config):
        return
    wall = time.monotonic() - _SESSION["start"]
    _SESSION["wall"], _SESSION["budget"] = wall, budget
    if wall > budget and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: object, exitstatus: int, config: pytest.Config) -> None:
    if "wall" not in _SESSION:
        return
    wall, budget = _SESSION["wall"], _SESSION["budget"]
    write = terminalreporter.write_line  # type: ignore[attr-defined]
    if wall <= budget:
        write(f"default suite: {wall:.0f} s of its {budget:.0f} s budget ({len(_TEST_SECONDS)} tests)")
        return
    terminalreporter.section("default suite over its time budget", sep="=", red=True, bold=True)  # type: ignore[attr-defined]
    write(
        f"The default suite took {wall:.1f} s, over its budget of {budget:.0f} s "
        f"(suite_budget_seconds in pyproject.toml, or {_BUDGET_ENV}). Make the slow tests cheaper "
        "(build expensive stores once: tests/stores.py), or move a test that is inherently "
        "multi-minute to -m slow. Slowest tests (setup + call + teardown):"
    )
    for nodeid, seconds in sorted(_TEST_SECONDS.items(), key=lambda item: -item[1])[:15]:
        write(f"  {seconds:7.2f} s  {nodeid}")


#: How long the test process waits for Prefect's log and event workers to drain once the tests end.
#: To a server still up they drain in well under a second; one that did not drain is sending to a
#: test's server that is gone (the slow suite waited out 15 s for it at every end), nothing to keep.
PREFECT_DRAIN_SECONDS = 5.0
#: How long a worker process may then take to exit before every thread's stack is printed and it
#: exits 1 (the main process exits with the tests' own status instead, see below).
EXIT_WATCHDOG_SECONDS = 120


def _undrained_prefect_workers() -> list[str]:
    """Drain Prefect's queue services (log and event workers) with a bound; those that did not
    finish, by type name."""
    if "prefect" not in sys.modules:
        return []
    import concurrent.futures

    from prefect._internal.concurrency.services import _QueueServiceBase

    with _QueueServiceBase._instance_lock:
        instances = tuple(_QueueServiceBase._instances.values())
    futures = {instance._drain(at_exit=True): type(instance).__name__ for instance in instances}
    _, stuck = concurrent.futures.wait(futures, timeout=PREFECT_DRAIN_SECONDS)
    return sorted(futures[f] for f in stuck)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Bound the wait at interpreter exit.

    Prefect drains its log and event workers at interpreter exit without a time limit. In CI
    (2026-11-28) an events worker that never finished sending held the slow suite for an hour after
    pytest printed its verdict (py-spy: the main thread in ``_QueueServiceBase._at_exit``), twice in
    a row, the second time with every test passed. Here the workers drain with a bound; when one
    does not, the main process says so in one line and exits at once with the tests' own status
    (``os._exit``: Prefect's at-exit drain would wait forever). A worker process that still does not
    exit prints every thread's stack (faulthandler) and exits 1 instead of hanging.
    """
    import faulthandler

    try:
        stuck = _undrained_prefect_workers()
    except Exception as exc:  # noqa: BLE001 — a failing drain must not hide the verdict
        stuck = [f"(the drain failed: {exc})"]
    if stuck and not hasattr(config, "workerinput"):
        print(
            f"\nPrefect's {', '.join(stuck)} did not drain in {PREFECT_DRAIN_SECONDS:g} s; "
            "exiting without waiting for it",
            file=sys.stderr,
        )
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(_SESSION.get("status", 1)))
    faulthandler.dump_traceback_later(EXIT_WATCHDOG_SECONDS, exit=True)

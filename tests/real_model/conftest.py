"""Fixtures of the real-model tier: a llama.cpp server with a real instruct model, and a library.

The server is started once per session in a process group of its own and stopped (SIGTERM, then
SIGKILL) whatever ends the session; it also ends itself if pytest dies without cleaning up. The
library holds two synthetic narrated harbour videos with known facts and one shared sample video,
ingested once with the embedded default (no model needed); the commands then run with the real
model as the only configured model (``models.planner``): text-only, as the issue prescribes.

Set ``VIDSCOPE_REAL_MODEL_DIR`` to keep the assembled model between runs (default:
``<repo>/.real-model``, ignored by git).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from facts import HARBOUR_FACTS, RIVER_FACTS
from record import COMMANDS, Run, SimRun, extractive_args, json_result, quality_table, sim_table
from recorder import RecordingProxy, exchange_lines

from vidscope.core.synthetic import narration_wav, text_video

REPO = Path(__file__).resolve().parents[2]
MODEL_ALIAS = "qwen2.5-coder-1.5b-instruct"
#: Threads of the llama.cpp server: the machines have 2 cores.
THREADS = int(os.environ.get("VIDSCOPE_REAL_MODEL_THREADS", "2"))
#: Context of the one server slot: room for the agents' prompts with their observations.
CONTEXT = 8192


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/real_model carries the ``real_model`` marker (selected by ``-m``)."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.real_model)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class LlamaServer:
    """The running server: its OpenAI-compatible base URL and the process serving it."""

    base_url: str
    process: subprocess.Popen[str]
    #: The name the server serves the model under (what clients ask for).
    model: str = MODEL_ALIAS


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama.cpp's server with Qwen2.5-Coder-1.5B-Instruct on 127.0.0.1, for the whole session."""
    model_dir = Path(os.environ.get("VIDSCOPE_REAL_MODEL_DIR", REPO / ".real-model"))
    prepared = subprocess.run(
        [sys.executable, "-m", "tests.real_model.llama_server", "prepare", str(model_dir)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert prepared.returncode == 0, prepared.stdout + prepared.stderr
    model = Path(prepared.stdout.strip().splitlines()[-1])
    port = _free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with log.open("w") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.real_model.llama_server", "serve", str(model)]
            + ["--port", str(port), "--threads", str(THREADS), "--ctx", str(CONTEXT)]
            + ["--alias", MODEL_ALIAS],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=sink,
            text=True,
            start_new_session=True,  # its own process group: killed as one, whatever happens
        )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # "listening <url>" once healthy, "" if it died
        assert line.startswith("listening "), f"llama.cpp server did not start: {log.read_text()[-3000:]}"
        yield LlamaServer(base_url=line.split()[1] + "/v1", process=process)
    finally:
        _stop_group(process)


def _stop_group(process: subprocess.Popen[str]) -> None:
    """SIGTERM the server's process group, SIGKILL it if it has not ended in 10 s."""
    for signum, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


# ------------------------------------------------------------------------------------- library


def _narrated(path: Path, facts: tuple[tuple[float, float, str, str], ...], footage: Path) -> Path:
    wav = narration_wav(
        [(t0, said) for t0, _t1, said, _shown in facts], path.with_suffix(".wav"), duration=40
    )
    return text_video(
        path,
        duration=40.0,
        fps=10,
        texts=[(t0, t1, shown) for t0, t1, _said, shown in facts],
        audio=wav,
        footage=footage,
    )


@dataclass
class Library:
    """The ingested library and how to run vidscope against it with the real model."""

    data_dir: Path
    config: Path
    harbour: Path
    river: Path
    sample: Path
    ids: dict[str, str] = field(default_factory=dict)

    def vidscope(
        self, *args: str, timeout: float = 900, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run ``vidscope`` as a user would, with the real model configured (``env``: more settings)."""
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "vidscope.cli",
                "--config",
                str(self.config),
                "--data-dir",
                str(self.data_dir),
            ]
            + list(args),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.data_dir.parent,
            env=os.environ | {"VIDSCOPE_CONFIG": str(self.config)} | (env or {}),
        )


@pytest.fixture(scope="session")
def recorder(llama_server: LlamaServer) -> Iterator[RecordingProxy]:
    """The recording proxy in front of the server: what vidscope sends and what it gets back."""
    proxy = RecordingProxy(llama_server.base_url)
    yield proxy
    proxy.close()


@pytest.fixture(scope="session")
def library(recorder: RecordingProxy, tmp_path_factory: pytest.TempPathFactory) -> Library:
    """Two narrated harbour videos and the shared car footage, ingested with the embedded default."""
    root = tmp_path_factory.mktemp("real-model")
    shared = REPO.parent / "shared" / "videos"
    footage = shared / "car-detection.mp4"
    if not footage.exists():
        pytest.fail(f"the shared sample videos are required: {footage} is missing")
    videos = root / "videos"
    harbour = _narrated(videos / "harbour-tour.mp4", HARBOUR_FACTS, footage)
    river = _narrated(videos / "river-port.mp4", RIVER_FACTS, footage)
    data_dir = root / "data"
    config = root / "vidscope.toml"
    # Ingestion needs no model: write the model config only afterwards.
    config.write_text(f'data_dir = "{data_dir}"\nprofile = "embedded"\n')
    lib = Library(data_dir=data_dir, config=config, harbour=harbour, river=river, sample=footage)
    started = time.monotonic()
    done = lib.vidscope("ingest", str(harbour), str(river), str(footage), "--json", timeout=1800)
    assert done.returncode == 0, done.stdout + done.stderr
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            lib.ids[Path(record["path"]).name] = record["video_id"]
    print(f"[real-model] ingestion of 3 videos took {time.monotonic() - started:.0f} s")
    config.write_text(
        f'data_dir = "{data_dir}"\nprofile = "embedded"\n\n'
        "[models]\n"
        f'planner = "openai:{MODEL_ALIAS}"\n'
        # No CLIP weights exist offline: the default image-text model is named off, as docs/models.md
        # says a text-only setup does (else `models --check` rightly reports it cannot load).
        'image_text = ""\n\n'
        "[models.options.openai]\n"
        f'base_url = "{recorder.base_url}"\n'
        'api_key_env = "VIDSCOPE_REAL_MODEL_NO_KEY"\n'
        "timeout_s = 600\n"
        "max_retries = 1\n"
        "max_concurrency = 1\n"
        'tool_calling = "native"\n\n'
        "[agent]\n"
        "max_steps = 6\n"
        "top_k = 8\n"
        "max_tokens = 384\n"
        "temperature = 0.0\n"
        "avi_max_iterations = 6\n"
        "sama_max_turns = 6\n"
        "cvr_max_turns = 6\n"
    )
    return lib


# ------------------------------------------------------------------------------------ the runs

RESULTS_DIR = REPO / "benchmarks" / "out"


@pytest.fixture(scope="session")
def quality_path() -> Path:
    """Where the session's quality table is written (``benchmarks/out``, ignored by git)."""
    return RESULTS_DIR / "real_model.md"


@dataclass
class Quality:
    """What the session measured: the commands' runs and the simulator's jobs, written to ``path``
    after each one (and printed at the end of the session)."""

    path: Path
    runs: dict[str, Run] = field(default_factory=dict)
    sims: list[SimRun] = field(default_factory=list)

    def write(self) -> None:
        _write_quality(self.path, list(self.runs.values()), self.sims)

    def record(self, sim: SimRun) -> None:
        """Add a simulator job to the table."""
        self.sims.append(sim)
        self.write()


@pytest.fixture(scope="session")
def quality(quality_path: Path) -> Iterator[Quality]:
    """The session's quality record; printed at the end when anything was measured."""
    record = Quality(quality_path)
    yield record
    if record.runs or record.sims:
        print("\n" + quality_path.read_text())


@pytest.fixture(scope="session")
def runs(library: Library, recorder: RecordingProxy, quality: Quality) -> Callable[[str], Run]:
    """``runs(name)``: the outcome of the tier's command ``name``, run once per session."""
    done = quality.runs
    quality_path = quality.path

    def run(name: str) -> Run:
        if name not in done:
            command = COMMANDS[name]
            mark = recorder.mark()
            started = time.monotonic()
            proc = library.vidscope(*command.args(library), env=command.env)
            outcome = Run(
                command=command,
                returncode=proc.returncode,
                stdout=proc.stdout,
                stderr=proc.stderr,
                seconds=time.monotonic() - started,
                exchanges=recorder.since(mark),
                result=json_result(proc.stdout),
            )
            _read_eval(outcome)
            if command.gold is not None or name == "eval":
                # The same question with no model configured: the extractive floor.
                floor_args = extractive_args(command.args(library))
                floor_env = {**command.env, "VIDSCOPE_MODELS__PLANNER": ""}
                plain = library.vidscope(*floor_args, env=floor_env)
                floor = Run(command, plain.returncode, plain.stdout, plain.stderr, 0.0, [])
                floor.result = json_result(plain.stdout)
                _read_eval(floor)
                outcome.extractive = floor.right()
            done[name] = outcome
            quality.write()
            # What the command printed, to read after a failure (benchmarks/out is ignored by git).
            outputs = quality_path.with_suffix("")
            outputs.mkdir(parents=True, exist_ok=True)
            (outputs / f"{name}.out").write_text(
                f"exit {proc.returncode}\n{proc.stdout}\n--- stderr\n{proc.stderr}"
            )
            (outputs / f"{name}.exchanges.jsonl").write_text(exchange_lines(outcome.exchanges))
        return done[name]

    return run


def _read_eval(outcome: Run) -> None:
    """An eval run's directory and predictions, read into ``outcome``."""
    if outcome.command.name != "eval" or outcome.result is None:
        return
    run_dir = outcome.result.get("run_dir")
    outcome.run_dir = Path(run_dir) if run_dir else None
    if outcome.run_dir and (outcome.run_dir / "predictions.jsonl").exists():
        text = (outcome.run_dir / "predictions.jsonl").read_text()
        outcome.predictions = [json.loads(line) for line in text.splitlines() if line.strip()]


def _write_quality(path: Path, done: list[Run], sims: list[SimRun]) -> None:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    ordered = [r for name in COMMANDS for r in done if r.command.name == name]
    table = quality_table(
        ordered,
        commit=commit or "?",
        date=time.strftime("%Y-%m-%d"),
        model="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
        threads=THREADS,
    )
    path.write_text(table + ("\n" + sim_table(sims) if sims else ""))

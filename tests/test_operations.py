"""Operations against a REAL local Prefect server: runs, task runs and artifacts read back through the
Prefect client; the deployments; ``vidscope server up|status|down``; Dask scale-out.

One server (with a process worker) is started per module by ``deployments.server.start`` on a free
port, with its database under a temporary data dir, and stopped at the end even on failure.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from llm_server import ScriptedLLMServer, error
from media import text_video
from prefect import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterKey,
    FlowRunFilter,
    FlowRunFilterId,
    FlowRunFilterName,
    LogFilter,
    LogFilterFlowRunId,
)
from prefect.client.schemas.objects import FlowRun, StateType, TaskRun
from prefect.settings import PREFECT_API_URL, temporary_settings
from typer.testing import CliRunner

from vidscope.core.settings import ApiSettings, IngestSettings, ServerSettings, Settings
from vidscope.deployments import server
from vidscope.deployments.deploy import (
    CRASH_AUTOMATION,
    HEARTBEAT_SECONDS,
    LOST_AFTER_SECONDS,
    apply_deployments,
    check_schedule,
)
from vidscope.flows.ask import run_ask
from vidscope.flows.ingest import ingest_video, run_ingest
from vidscope.flows.nightly import nightly
from vidscope.models.open_store import open_store
from vidscope.storage import Store
from vidscope.tasks.stages import stages


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def prefect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """A real Prefect server + process worker; flows of the module's tests report to it."""
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("server") / "data",
        server=ServerSettings(port=free_port()),
    )
    try:
        # Without the vidscope API: these tests ask in the CLI's process (the API's turn is
        # test_a_cold_cli_ask_is_answered_by_the_running_api_as_a_recorded_flow_run).
        server.start(settings, timeout=240, api=False)
        with temporary_settings({PREFECT_API_URL: server.api_url(settings)}):
            yield settings
    finally:
        server.stop(settings)  # an idle worker stuck in Prefect's shutdown is killed after 3 s


# ---------------------------------------------------------------------------- reading back


def flow_runs_named(name: str) -> list[FlowRun]:
    with get_client(sync_client=True) as client:
        return client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[name])))


def task_runs_of(flow_run: FlowRun) -> dict[str, TaskRun]:
    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run.id])))
    return {run.name: run for run in runs}


def artifacts_keyed(key: str) -> list[Any]:
    with get_client(sync_client=True) as client:
        return client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])))


def table_rows(artifact: Any) -> list[dict[str, Any]]:
    data = json.loads(artifact.data) if isinstance(artifact.data, str) else artifact.data
    return list(data)


def one_run(name: str) -> FlowRun:
    runs = flow_runs_named(name)
    assert len(runs) == 1, f"expected one flow run named {name!r}, got {[r.name for r in runs]}"
    return runs[0]


# ---------------------------------------------------------------------------- monitoring


def test_ingest_and_ask_runs_task_runs_and_artifacts_are_on_the_server(
    prefect_server: Settings, tmp_path: Path
) -> None:
    video = text_video(tmp_path / "doorsign.mp4", duration=3.0, fps=10, texts=[(0, 3, "OPEN DOOR")])
    settings = Settings(data_dir=tmp_path / "data")
    [report] = run_ingest([str(video)], settings)
    assert report.status == "ok", report

    run = one_run("ingest doorsign.mp4")
    assert run.state_type == StateType.COMPLETED
    tasks = task_runs_of(run)
    for stage in stages():
        name = f"{stage.name} · doorsign.mp4"
        assert name in tasks, (name, sorted(tasks))
        assert tasks[name].state_type == StateType.COMPLETED
    # A stage that did no work is a completed task run under its own state name, with the ledger's
    # reason (issue 41): the UI says "Skipped" and why, not a green "Completed".
    skipped = {n: t for n, t in tasks.items() if t.state is not None and t.state.name == "Skipped"}
    assert "detect · doorsign.mp4" in skipped, {n: t.state.name for n, t in tasks.items() if t.state}
    assert all(t.state.message for t in skipped.values())
    assert tasks["ocr · doorsign.mp4"].state.name == "Completed"
    library = one_run("ingest library (1 inputs)")
    assert {"hash · doorsign.mp4", "ingest · doorsign.mp4"} <= set(task_runs_of(library))

    [artifact] = artifacts_keyed(f"ingest-{report.video_id[:12]}")
    assert artifact.flow_run_id == run.id and artifact.type == "table"
    rows = {row["stage"]: row for row in table_rows(artifact)}
    assert list(rows) == [s.name for s in stages()]
    for stage in report.stages:
        row = rows[stage.stage]
        assert set(row) >= {"status", "seconds", "rows", "error"}
        assert (row["status"], row["rows"], row["error"]) == (stage.status, stage.rows, None)
    assert rows["frames"]["rows"] == 6 and rows["ocr"]["status"] == "done"

    result = run_ask(settings, report.video_id, "What does the sign on the screen say?")
    # The run is named after the video and the question, as the UI lists it.
    ask_run = one_run(f"ask {report.video_id[:12]}: What does the sign on the screen say?")
    assert ask_run.state_type == StateType.COMPLETED
    assert "clip_search" in task_runs_of(ask_run)  # tools run as task runs named after the tool
    [ask_artifact] = artifacts_keyed(f"ask-{report.video_id[:12]}")
    assert ask_artifact.flow_run_id == ask_run.id and ask_artifact.type == "markdown"
    markdown = ask_artifact.data
    assert result.answer and result.answer in markdown  # the answer
    assert result.citations and "**Citations:**" in markdown  # its cited moments
    assert "| # | kind | tool |" in markdown and len(result.trace) >= 1  # the trace
    assert f"tool calls {result.usage.tool_calls}" in markdown  # usage


@pytest.mark.slow  # ~11 s: an evaluation as a flow run on the server (the slow phase shares it)
def test_an_evaluation_with_a_server_up_is_a_flow_run_with_a_task_per_video_and_question(
    prefect_server: Settings, tmp_path: Path
) -> None:
    """With a Prefect server answering, ``vidscope eval`` runs as the ``evaluate`` flow (each video
    hashed and ingested, each question answered, as a task run; the report as an artifact), the
    same steps it runs in-process when no server is up (the rest of the eval tests)."""
    from vidscope.flows.evaluate import prepare_run, run_evaluate

    root = tmp_path / "videos"
    text_video(root / "quay.mp4", duration=2.0, fps=10, texts=[(0, 2, "BLUE BOAT")])
    annotations = tmp_path / "mlvu"
    annotations.mkdir()
    record = {
        "video": "quay.mp4",
        "duration": 2.0,
        "question": "What colour is the boat on the sign?",
        "candidates": ["RED", "BLUE"],
        "answer": "BLUE",
        "question_type": "sign",
    }
    (annotations / "1_quay.json").write_text(json.dumps([record]))
    settings = Settings(data_dir=tmp_path / "data", models={"chat": "", "speech_recognizer": ""})
    run_dir = prepare_run(settings, "mlvu", annotations, root, "extractive", name="on-the-server")
    outcome = run_evaluate(settings, run_dir)
    assert outcome.summary.answered == 1 and not outcome.failures, outcome

    run = one_run("evaluate on-the-server")
    assert run.state_type == StateType.COMPLETED
    tasks = task_runs_of(run)
    assert {"hash · quay.mp4", "ingest · quay.mp4", "question · 1_quay/0"} <= set(tasks), sorted(tasks)
    assert tasks["question · 1_quay/0"].state_type == StateType.COMPLETED
    [report] = artifacts_keyed("eval-mlvu-extractive")
    assert report.flow_run_id == run.id and "on-the-server" in (report.description or "")


def test_in_a_flow_run_tool_calls_are_task_runs_over_the_same_cache_files(
    prefect_server: Settings, tmp_path: Path
) -> None:
    """vidscope's tool-result cache (tests/test_tool_cache.py) is the same files in and out of a
    flow run, and each call in a run is a task run (here, where a Prefect server is up anyway)."""
    from prefect import flow
    from test_agent_runtime import VIDEO_ID, build_store, make_settings
    from test_tool_cache import context

    from vidscope.agents.tools import execute_tool

    world = (settings := make_settings(tmp_path / "data"), build_store(settings))

    outside = {"video_id": VIDEO_ID, "query": "bake for how long", "top_k": 2}
    inside = {"video_id": VIDEO_ID, "query": "cool the bread where", "top_k": 2}
    before = execute_tool(context(world), "clip_search", outside)

    @flow(name="tool-cache-test")
    def ask_twice() -> tuple[object, object, str]:
        from prefect.runtime import flow_run

        return (
            execute_tool(context(world), "clip_search", outside),
            execute_tool(context(world), "clip_search", inside),
            str(flow_run.id),
        )

    hit, fresh, run_id = ask_twice()
    assert hit.cached and hit.result == before.result  # written outside a flow, read inside
    assert fresh.ok and not fresh.cached
    after = execute_tool(context(world), "clip_search", inside)
    assert after.cached and after.result == fresh.result  # written inside, read outside

    async def task_names() -> list[str]:
        async with get_client() as client:
            runs = await client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run_id]))
            )
        return sorted(r.name for r in runs)

    import asyncio

    assert asyncio.run(task_names()) == ["clip_search", "clip_search"]  # both calls recorded
    assert not (world[0].data_dir / "prefect").exists()  # and nothing persisted by Prefect


def test_a_failing_stage_is_a_failed_task_run_with_its_reason(
    prefect_server: Settings, tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    llm_server.default = error(500, "the model server is down")
    options = {"openai": {"base_url": llm_server.base_url, "timeout_s": 5, "max_retries": 0}}
    settings = Settings(
        data_dir=tmp_path / "data",
        ingest=IngestSettings(stage_retries=0),
        models={"captioner": "openai:scripted", "options": options},
    )
    video = text_video(tmp_path / "modeldown.mp4", duration=3.0, fps=10, texts=[(0, 3, "HI")])
    state = ingest_video(video, settings, return_state=True)
    # The stages that call the model are optional enrichments (parse, …): their failure leaves the
    # video ingested, "degraded", and the flow run completed (issue 37); the failed task runs keep
    # their reason.
    report = state.result(raise_on_failure=False)
    assert state.is_completed() and report.status == "degraded", report

    run = one_run("ingest modeldown.mp4")
    assert run.state_type == StateType.COMPLETED
    failed = {n: t for n, t in task_runs_of(run).items() if t.state_type == StateType.FAILED}
    assert failed, "a stage calling the unreachable model should fail"
    for name, task_run in failed.items():
        assert name.endswith(" · modeldown.mp4")
        assert "the model server is down" in (task_run.state.message or ""), task_run.state
    assert task_runs_of(run)["frames · modeldown.mp4"].state_type == StateType.COMPLETED
    # What each stage did is in the flow run's log; a failure as a warning with its reason (the
    # suite keeps Prefect's loggers at WARNING, so the lines of stages that ran are not sent here).
    flow_run_logs = LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run.id]))

    def failed_line(messages: list[str]) -> bool:
        return any(
            m.startswith("modeldown.mp4 · ") and ": failed · " in m and "the model server is down" in m
            for m in messages
        )

    logs: list[str] = []
    deadline = time.monotonic() + 30  # Prefect sends run logs in batches, every few seconds
    while not failed_line(logs) and time.monotonic() < deadline:
        time.sleep(1)
        with get_client(sync_client=True) as client:
            logs = [r.message for r in client.read_logs(log_filter=flow_run_logs)]
    assert failed_line(logs), logs

    [artifact] = artifacts_keyed(f"ingest-{report.video_id[:12]}")
    rows = {row["stage"]: row for row in table_rows(artifact)}
    for name in failed:
        row = rows[name.split(" · ")[0]]
        assert row["status"] == "failed" and "the model server is down" in row["error"]


def test_a_corrupt_file_is_a_failed_flow_run_with_its_reason(
    prefect_server: Settings, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"\x00\x01 not a video " * 500)
    state = ingest_video(broken, Settings(data_dir=tmp_path / "data"), return_state=True)
    assert state.is_failed()
    run = one_run("ingest broken.mp4")
    assert run.state_type == StateType.FAILED
    assert "broken.mp4" in run.state.message and "not a readable media file" in run.state.message


@pytest.mark.slow  # three nightly flow runs on the server (~20 s of the default suite's 420-s guard)
def test_the_nightly_flow_counts_new_changed_and_unchanged_videos(
    prefect_server: Settings, tmp_path: Path
) -> None:
    watch = tmp_path / "watch"
    text_video(watch / "a.mp4", duration=2.0, fps=10, texts=[(0, 2, "ALPHA")])
    missing = str(tmp_path / "not-there")
    settings = Settings(
        data_dir=tmp_path / "data", server=ServerSettings(watch_folders=[watch, Path(missing)])
    )
    first = nightly(settings=settings)
    assert (first.new, first.changed, first.unchanged, first.failed) == (1, 0, 0, 0)
    assert first.missing_folders == [missing]

    # A new file, and a setting that changes the OCR stage: a is re-read, b is new.
    text_video(watch / "b.mp4", duration=2.0, fps=10, texts=[(0, 2, "BRAVO")])
    changed = settings.model_copy(update={"ingest": IngestSettings(ocr_min_score=0.6)})
    second = nightly(settings=changed)
    assert (second.new, second.changed, second.unchanged, second.failed) == (1, 1, 0, 0)
    assert {Path(v["path"]).name: v["result"] for v in second.videos} == {"a.mp4": "changed", "b.mp4": "new"}

    third = nightly(settings=changed)
    assert (third.new, third.changed, third.unchanged, third.failed) == (0, 0, 2, 0)

    artifacts = sorted(artifacts_keyed("nightly-ingest"), key=lambda a: a.created)
    assert len(artifacts) >= 3
    assert "new 0, changed 0, unchanged 2, failed 0" in artifacts[-1].description
    assert {row["result"] for row in table_rows(artifacts[-1])} == {"unchanged"}
    with get_client(sync_client=True) as client:
        last = client.read_flow_run(artifacts[-1].flow_run_id)
    assert last.name.startswith("nightly ") and last.state_type == StateType.COMPLETED
    # Each run publishes the digest of the last day: both videos, each with its chapter titles.
    digests = sorted(artifacts_keyed("nightly-digest"), key=lambda a: a.created)
    assert len(digests) == len(artifacts) and digests[-1].flow_run_id == last.id
    assert digests[-1].type == "markdown" and third.digest_videos == 2
    assert "2 video(s)" in digests[-1].data and "## b.mp4" in digests[-1].data and "1. " in digests[-1].data


# ---------------------------------------------------------------------------- deployments


@pytest.mark.slow  # ~11 s: three deployments applied; the worker test runs them in the slow phase
def test_deployments_are_applied_with_their_schedule_and_pool(prefect_server: Settings) -> None:
    settings = prefect_server.model_copy(
        update={
            "server": prefect_server.server.model_copy(
                update={"timezone": "Europe/Berlin", "nightly_cron": "30 2 * * *"}
            )
        }
    )
    results = {r.full_name: r for r in apply_deployments(settings)}
    assert all(r.error is None for r in results.values()), results
    assert set(results) == {"nightly-ingest/nightly", "ask/on-demand", "search/on-demand"}
    again = apply_deployments(settings)  # applying twice updates, never duplicates
    assert [r.deployment_id for r in again] == [r.deployment_id for r in results.values()]

    with get_client(sync_client=True) as client:
        pool = client.read_work_pool(settings.server.work_pool)
        assert pool.type == "process"
        nightly_dep = client.read_deployment_by_name("nightly-ingest/nightly")
        [schedule] = nightly_dep.schedules
        assert (schedule.schedule.cron, schedule.schedule.timezone) == ("30 2 * * *", "Europe/Berlin")
        assert schedule.active
        assert nightly_dep.work_pool_name == settings.server.work_pool
        assert nightly_dep.entrypoint == "vidscope.flows.nightly.nightly"
        env = nightly_dep.job_variables["env"]
        assert env["VIDSCOPE_DATA_DIR"] == str(settings.data_dir.resolve())
        assert env["DO_NOT_TRACK"] == "1"
        # A run that stops beating (its host lost) is marked Crashed: one automation, however often applied.
        assert env["PREFECT_FLOWS_HEARTBEAT_FREQUENCY"] == str(HEARTBEAT_SECONDS)
        [crash] = client.read_automations_by_name(CRASH_AUTOMATION)
        assert crash.trigger.within.total_seconds() == LOST_AFTER_SECONDS  # type: ignore[union-attr]
        for name in ("ask/on-demand", "search/on-demand"):
            deployment = client.read_deployment_by_name(name)
            assert deployment.schedules == [] and deployment.work_pool_name == pool.name
            assert "question" in json.dumps(deployment.parameter_openapi_schema) or name.startswith("search")


def test_bad_schedule_settings_are_refused_clearly() -> None:
    with pytest.raises(ValueError, match="Mars/Olympus"):
        check_schedule(Settings(server=ServerSettings(timezone="Mars/Olympus")))
    with pytest.raises(ValueError, match="nightly_cron"):
        check_schedule(Settings(server=ServerSettings(nightly_cron="at two")))


@pytest.mark.slow
def test_the_worker_runs_the_nightly_deployment(prefect_server: Settings, tmp_path: Path) -> None:
    from prefect.deployments import run_deployment

    apply_deployments(prefect_server)
    watch = tmp_path / "watch"
    text_video(watch / "c.mp4", duration=2.0, fps=10, texts=[(0, 2, "CHARLIE")])
    run = run_deployment("nightly-ingest/nightly", parameters={"folders": [str(watch)]}, timeout=600)
    assert run.state is not None and run.state.is_completed(), run.state
    store = open_store(prefect_server)  # the worker's runs use the deployment's data dir
    assert store.count(store.videos) >= 1
    artifacts = [a for a in artifacts_keyed("nightly-ingest") if a.flow_run_id == run.id]
    assert artifacts and "new 1," in artifacts[0].description


# ---------------------------------------------------------------------------- the CLI


def test_server_status_reports_the_running_server_and_worker(prefect_server: Settings) -> None:
    from vidscope.cli import app

    result = CliRunner().invoke(
        app,
        ["--data-dir", str(prefect_server.data_dir), "server", "status"],
        env={"VIDSCOPE_SERVER__PORT": str(prefect_server.server.port)},
    )
    assert result.exit_code == 0, result.output
    assert "healthy" in result.output and "online" in result.output


# Slow: four CLI processes (~11 s). The default suite finds the server from a cold CLI by its pid
# file in test_cold_library_queries_are_flow_runs_only_while_a_server_runs (ask --library).
@pytest.mark.slow
def test_a_cold_cli_ask_finds_the_running_server_and_its_run_is_recorded(prefect_server: Settings) -> None:
    """No PREFECT_API_URL in the CLI's environment: it finds the data dir's server by its pid file.

    The tool cache is shared with questions answered without a server, in both directions.
    """
    import os
    import subprocess
    import sys

    from test_agent_runtime import VIDEO_ID, build_store, make_settings

    build_store(make_settings(prefect_server.data_dir))
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}

    def ask(question: str, *, server_running: bool) -> dict[str, Any]:
        # Another port: the pid file's server is not found there, as if it were not running.
        port = prefect_server.server.port if server_running else free_port()
        done = subprocess.run(
            [sys.executable, "-m", "vidscope.cli", "--data-dir", str(prefect_server.data_dir)]
            + ["ask", VIDEO_ID[:8], question, "--json"],
            capture_output=True,
            text=True,
            env={**env, "VIDSCOPE_SERVER__PORT": str(port)},
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout))

    question = "Which room is the vault in?"
    alone = ask(question, server_running=False)
    assert alone["usage"]["tool_cache_hits"] == 0 and not flow_runs_named(f"ask {VIDEO_ID[:12]}: {question}")
    answer = ask(question, server_running=True)
    run = one_run(f"ask {VIDEO_ID[:12]}: {question}")
    assert run.state_type == StateType.COMPLETED
    assert "clip_search" in task_runs_of(run)  # the tool calls are its task runs …
    assert answer["usage"]["tool_cache_hits"] == answer["usage"]["tool_calls"]  # … read from that cache
    [artifact] = [a for a in artifacts_keyed(f"ask-{VIDEO_ID[:12]}") if a.flow_run_id == run.id]
    assert answer["answer"] == alone["answer"] and answer["answer"] in artifact.data

    other = "Is the vault door open?"
    assert ask(other, server_running=True)["usage"]["tool_cache_hits"] == 0
    again = ask(other, server_running=False)  # Prefect's task records, read without Prefect
    assert again["usage"]["tool_cache_hits"] == again["usage"]["tool_calls"] >= 1


def test_a_cold_cli_ask_is_answered_by_the_running_api_as_a_recorded_flow_run(
    prefect_server: Settings,
) -> None:
    """``server up`` also runs the vidscope API; ``vidscope ask`` hands the question to it, and the
    API's flow run (task runs, artifact) is on the server, as when the CLI ran the flow itself."""
    import os
    import subprocess
    import sys

    from test_agent_runtime import VIDEO_ID, build_store, make_settings

    from vidscope.cli.running_api import registration_path

    build_store(make_settings(prefect_server.data_dir))
    settings = prefect_server.model_copy(update={"api": ApiSettings(port=free_port())})
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(
        {"VIDSCOPE_SERVER__PORT": str(settings.server.port), "VIDSCOPE_API__PORT": str(settings.api.port)}
    )

    def ask(question: str, *extra: str, video: str = VIDEO_ID[:8]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "vidscope.cli", "--data-dir", str(settings.data_dir)]
            + ["ask", video, question, *extra],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )

    try:
        state = server.start(settings, timeout=240)  # the server and worker run: only the API starts
        assert state.api_healthy and state.processes["api"].alive
        registered = json.loads(registration_path(settings).read_text())
        assert registered["pid"] == state.processes["api"].pid

        question = "Which room is the vault in, asked through the API?"
        done = ask(question)
        assert done.returncode == 0, done.stderr
        assert "step 1: clip_search" in done.stdout and "answered by the vidscope API" in done.stderr
        run = one_run(f"ask {VIDEO_ID[:12]}: {question}")
        assert run.state_type == StateType.COMPLETED and "clip_search" in task_runs_of(run)
        [artifact] = [a for a in artifacts_keyed(f"ask-{VIDEO_ID[:12]}") if a.flow_run_id == run.id]
        assert "vault" in artifact.data.lower()

        missing = ask("Anything?", "--json", video="nosuchvideo")  # one JSON line, exit 1
        assert missing.returncode == 1 and json.loads(missing.stdout)["type"] == "VideoNotFound"
    finally:
        assert server.stop(settings, processes=("api",)) == ["api"]
    assert not registration_path(settings).exists()


@pytest.mark.slow  # two CLI processes and one real ingest
def test_a_cold_cli_ingest_reports_to_the_running_server_and_a_rerun_needs_none(
    prefect_server: Settings, tmp_path: Path
) -> None:
    """``vidscope ingest`` with no PREFECT_API_URL finds the data dir's server as questions do: its
    runs are on the server. Run again, the file is up to date: no run is made at all."""
    import subprocess
    import sys

    video = text_video(tmp_path / "cold-ingest.mp4", duration=3.0, fps=10, texts=[(0, 3, "COLD START")])
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}

    def ingest() -> str:
        done = subprocess.run(
            [sys.executable, "-m", "vidscope.cli", "--data-dir", str(prefect_server.data_dir)]
            + ["ingest", str(video)],
            capture_output=True,
            text=True,
            env={**env, "VIDSCOPE_SERVER__PORT": str(prefect_server.server.port), "COLUMNS": "200"},
            timeout=600,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    first = ingest()
    assert "1 new, 0 up to date, 0 failed" in first and "runs recorded in the Prefect UI" in first
    run = one_run("ingest cold-ingest.mp4")
    assert run.state_type == StateType.COMPLETED
    assert "1 new" not in (again := ingest()) and "0 new, 1 up to date, 0 failed" in again
    assert len(flow_runs_named("ingest cold-ingest.mp4")) == 1


@pytest.mark.parametrize(
    ("command", "run_name", "artifact_key"),
    [
        # One in the default suite: the three share flows.runs.run_query, so one run there shows the
        # path; the other two (12 s of subprocesses) are checked in the slow suite.
        pytest.param(["search", "--moments"], "moments {q}", "search-moments", marks=pytest.mark.slow),
        pytest.param(["compare", "{video}"], "compare {q}", "compare", marks=pytest.mark.slow),
        (["ask", "--library"], "ask library: {q}", "ask-library"),
    ],
)
def test_cold_library_queries_are_flow_runs_only_while_a_server_runs(
    prefect_server: Settings, command: list[str], run_name: str, artifact_key: str
) -> None:
    """search --moments, compare and ask --library take ask's path (flows.runs.run_query): a flow
    run with its artifact on the data dir's server when it runs, in-process (no run) otherwise."""
    import os
    import subprocess
    import sys

    from test_agent_runtime import VIDEO_ID, build_store, make_settings

    build_store(make_settings(prefect_server.data_dir))
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    args = [a.format(video=VIDEO_ID[:8]) for a in command]

    def query(text: str, *, server_running: bool) -> dict[str, Any]:
        port = prefect_server.server.port if server_running else free_port()
        done = subprocess.run(
            [sys.executable, "-m", "vidscope.cli", "--data-dir", str(prefect_server.data_dir)]
            + [*args, text, "--json"],
            capture_output=True,
            text=True,
            env={**env, "VIDSCOPE_SERVER__PORT": str(port)},
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout))

    alone_text = f"the vault code, asked alone via {command[0]}"
    query(alone_text, server_running=False)
    assert not flow_runs_named(run_name.format(q=alone_text))
    text = f"the vault code, asked via {command[0]}"
    result = query(text, server_running=True)
    run = one_run(run_name.format(q=text))
    assert run.state_type == StateType.COMPLETED
    [artifact] = [a for a in artifacts_keyed(artifact_key) if a.flow_run_id == run.id]
    assert text in artifact.data
    assert result.get("moments") or result.get("citations")


@pytest.mark.slow
def test_server_up_status_down(tmp_path: Path) -> None:
    from vidscope.cli import app

    runner = CliRunner()
    env = {"VIDSCOPE_SERVER__PORT": str(free_port()), "VIDSCOPE_API__PORT": str(free_port())}
    data = tmp_path / "data"

    def cli(*args: str):  # type: ignore[no-untyped-def]
        return runner.invoke(app, ["--data-dir", str(data), "server", *args], env=env)

    settings = Settings(
        data_dir=data,
        server=ServerSettings(port=int(env["VIDSCOPE_SERVER__PORT"])),
        api=ApiSettings(port=int(env["VIDSCOPE_API__PORT"])),
    )
    try:
        up = cli("up")
        assert up.exit_code == 0, up.output
        paths = server.server_paths(settings)
        pids = {name: int(paths.pid_file(name).read_text()) for name in server.PROCESSES}
        status = cli("status")
        assert status.exit_code == 0 and "healthy" in status.output and "online" in status.output
        assert f"vidscope API http://127.0.0.1:{settings.api.port}: answering" in status.output
        assert (paths.database).exists()  # the server's database lives under the data dir
        assert cli("up").exit_code == 0  # already running: nothing new is started
        deploy = cli("deploy")
        assert deploy.exit_code == 0, deploy.output
        assert "nightly-ingest/nightly" in deploy.output and "'0 2 * * *' in UTC" in deploy.output
        assert {name: int(paths.pid_file(name).read_text()) for name in server.PROCESSES} == pids

        # The API killed (no chance to clean up): status says so and fails; up starts it again.
        os.killpg(pids["api"], signal.SIGKILL)
        deadline = time.monotonic() + 30
        while server._is_ours(pids["api"], "api") and time.monotonic() < deadline:
            time.sleep(0.2)
        dead = cli("status")
        assert dead.exit_code == 1 and "not running" in dead.output, dead.output
        assert not (data / "server" / "api.json").exists()
        assert cli("up").exit_code == 0
        assert cli("status").exit_code == 0
        pids["api"] = int(paths.pid_file("api").read_text())

        down = cli("down")
        assert down.exit_code == 0 and all(name in down.output for name in ("api", "worker", "server"))
        assert not any(paths.pid_file(name).exists() for name in server.PROCESSES)
        assert not any(server._is_ours(pid, name) for name, pid in pids.items())
        after = cli("status")
        assert after.exit_code == 1 and "not answering" in after.output
    finally:
        server.stop(settings)


# ---------------------------------------------------------------------------- scale-out


def table_digest(store: Store) -> dict[str, list[str]]:
    """Every table's rows, order-free, without run-specific times (floats rounded, bytes hashed)."""

    def clean(value: Any) -> Any:
        if isinstance(value, float):
            return round(value, 4) if math.isfinite(value) else str(value)
        if isinstance(value, bytes):
            return hashlib.sha1(value).hexdigest()
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        return value

    digest = {}
    for spec in store.specs:
        table = store.rows(spec)
        keep = [
            f.name
            for f in table.schema
            # A stage's config_hash covers its upstream stages' finishing times: run-specific.
            if not pa.types.is_timestamp(f.type) and f.name not in ("seconds", "details_json", "config_hash")
        ]
        digest[spec.name] = sorted(
            json.dumps(clean(row), sort_keys=True, default=str) for row in table.select(keep).to_pylist()
        )
    return digest


@pytest.mark.slow
def test_a_two_worker_dask_cluster_stores_exactly_what_a_sequential_run_stores(
    prefect_server: Settings, tmp_path: Path
) -> None:
    videos = tmp_path / "videos"
    for index, word in enumerate(["APPLE", "BANANA", "CHERRY", "DATE"]):
        text_video(videos / f"v{index}.mp4", duration=2.0 + index, fps=10, texts=[(0, 2, word)])
    sequential = Settings(data_dir=tmp_path / "seq", ingest=IngestSettings(concurrency=1))
    dask = Settings(data_dir=tmp_path / "dask", ingest=IngestSettings(task_runner="dask", dask_workers=2))
    seq_reports = run_ingest([str(videos)], sequential)
    dask_reports = run_ingest([str(videos)], dask)
    assert [r.status for r in seq_reports] == ["ok"] * 4
    assert sorted(r.video_id for r in dask_reports if r.status == "ok") == sorted(
        r.video_id for r in seq_reports
    )
    expected, got = table_digest(open_store(sequential)), table_digest(open_store(dask))
    assert {k: len(v) for k, v in got.items()} == {k: len(v) for k, v in expected.items()}
    assert sorted(json.loads(r)["text"] for r in got["ocr_items"]) == ["APPLE", "BANANA", "CHERRY", "DATE"]
    for name in expected:
        assert got[name] == expected[name], name


@pytest.mark.slow
def test_ray_runs_the_ingestion_fan_out(
    prefect_server: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    videos = tmp_path / "videos"
    for index, word in enumerate(["ECHO", "FOXTROT"]):
        text_video(videos / f"r{index}.mp4", duration=2.0, fps=10, texts=[(0, 2, word)])
    settings = Settings(data_dir=tmp_path / "ray", ingest=IngestSettings(task_runner="ray"))
    reports = run_ingest([str(videos)], settings)
    assert [r.status for r in reports] == ["ok", "ok"], reports
    store = open_store(settings)
    assert store.count(store.videos) == 2
    assert sorted(r["text"] for r in store.rows(store.ocr).to_pylist()) == ["ECHO", "FOXTROT"]

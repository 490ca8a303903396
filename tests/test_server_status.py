"""A killed ``vidscope api`` is seen as gone: its registration is removed and ``server status``
does not report success while the API it started is dead."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from vidscope.cli import app
from vidscope.cli.common import overrides
from vidscope.cli.running_api import find_running_api, registration_path
from vidscope.core.settings import ApiSettings, Settings
from vidscope.deployments.server import ProcessStatus, ServerStatus


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_registration_of_a_killed_api_is_removed(tmp_path: Path) -> None:
    port = free_port()
    settings = Settings(data_dir=tmp_path / "data", api=ApiSettings(port=port))
    command = [sys.executable, "-m", "vidscope.cli", "--data-dir", str(settings.data_dir), "api"]
    api = subprocess.Popen(
        [*command, "--port", str(port)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        path = registration_path(settings)
        deadline = time.monotonic() + 120
        while not path.exists() and api.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert path.exists(), "the API never registered"
        assert find_running_api(settings) is not None
        os.killpg(api.pid, signal.SIGKILL)  # no chance to unregister
        api.wait(timeout=30)
        assert path.exists()

        overrides.clear()
        result = CliRunner().invoke(app, ["--data-dir", str(settings.data_dir), "server", "status"])
        overrides.clear()
        assert result.exit_code == 1 and "Traceback" not in result.output
        assert not path.exists()
        assert find_running_api(settings) is None
    finally:
        if api.poll() is None:
            os.killpg(api.pid, signal.SIGKILL)
            api.wait(timeout=30)


def test_status_is_not_running_while_the_api_it_started_is_dead(tmp_path: Path) -> None:
    def state(api: ProcessStatus, answering: bool) -> ServerStatus:
        processes = {
            "server": ProcessStatus("server", 1, True, tmp_path / "s.log"),
            "worker": ProcessStatus("worker", 2, True, tmp_path / "w.log"),
            "api": api,
        }
        return ServerStatus("http://x", True, True, "pool", processes, "http://a", answering)

    assert state(ProcessStatus("api", None, False, tmp_path / "a.log"), False).running  # --no-api
    assert state(ProcessStatus("api", 3, True, tmp_path / "a.log"), True).running
    assert not state(ProcessStatus("api", 3, False, tmp_path / "a.log"), False).running  # killed
    assert not state(ProcessStatus("api", 3, True, tmp_path / "a.log"), False).running  # hung


def test_a_process_that_ends_while_starting_is_reported_with_how_it_ended(tmp_path: Path) -> None:
    from vidscope.deployments import server

    settings = Settings(data_dir=tmp_path / "data")
    paths = server.server_paths(settings)
    paths.home.mkdir(parents=True, exist_ok=True)
    log = paths.log_file("server")
    log.write_text("boom: the database is locked\n")
    ended = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])
    paths.pid_file("server").write_text(f"{ended.pid}\n")
    try:
        server._wait(lambda: False, "never healthy", 30, "server", settings)
    except server.ServerError as exc:
        message = str(exc)
    else:
        raise AssertionError("an ended server was waited for")
    assert "exited while starting (exit status 3)" in message and "boom" in message, message


def test_a_running_process_whose_command_line_does_not_name_it_is_still_waited_for(tmp_path: Path) -> None:
    # The pid file names a running process that does not look like Prefect's (its command line is
    # not "prefect ..."): starting is not declared failed while it runs; the check decides.
    from vidscope.deployments import server

    settings = Settings(data_dir=tmp_path / "data")
    paths = server.server_paths(settings)
    paths.home.mkdir(parents=True, exist_ok=True)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    paths.pid_file("server").write_text(f"{sleeper.pid}\n")
    started = time.monotonic()
    try:
        server._wait(lambda: time.monotonic() - started > 1.0, "never healthy", 30, "server", settings)
    finally:
        sleeper.kill()
        sleeper.wait()

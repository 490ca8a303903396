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

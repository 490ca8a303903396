"""The Prefect server on PostgreSQL: ``vidscope server up --database postgres-local`` starts a real
PostgreSQL cluster under the data dir and a real Prefect server on it; a flow run reported there is
read back from the Prefect API and found in PostgreSQL's own tables; ``server down`` leaves no
process. A database that does not answer is refused in one line with nothing started."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from media import text_video
from prefect import get_client
from prefect.client.schemas.objects import StateType
from prefect.settings import PREFECT_API_URL, temporary_settings
from typer.testing import CliRunner, Result

from vidscope.cli import app
from vidscope.cli.common import overrides
from vidscope.core.settings import ServerSettings, Settings
from vidscope.deployments import server
from vidscope.flows.nightly import nightly


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cli(data: Path, env: dict[str, str], *args: str) -> Result:
    overrides.clear()
    try:
        return CliRunner().invoke(app, ["--data-dir", str(data), "server", *args], env=env)
    finally:
        overrides.clear()


def processes_under(path: Path) -> list[psutil.Process]:
    """Live processes whose command line names ``path`` (the postmaster names its PGDATA)."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if str(path) in cmdline and process.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(process)
    return found


@pytest.fixture
def reachable_root() -> Iterator[Path]:
    """A directory every user may enter: as root, the cluster runs as the ``postgres`` user, which
    cannot pass pytest's own 0700 temporary directory."""
    root = Path(tempfile.mkdtemp(prefix="vidscope-pg-"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def flow_runs_in_postgres(database_url: str) -> list[tuple[str, str]]:
    """(name, state type) of every flow run, read with SQL from the server's PostgreSQL database."""
    import asyncpg  # type: ignore[import-untyped]
    from sqlalchemy.engine import make_url

    url = make_url(database_url)

    async def read() -> list[tuple[str, str]]:
        connection = await asyncpg.connect(
            host=url.host, port=url.port, user=url.username, password=url.password, database=url.database
        )
        try:
            rows = await connection.fetch("SELECT name, state_type::text FROM flow_run")
        finally:
            await connection.close()
        return [(row["name"], row["state_type"]) for row in rows]

    return asyncio.run(read())


@pytest.mark.slow  # a PostgreSQL cluster, a Prefect server and its worker, one ingest: ~60 s
def test_the_server_runs_on_a_local_postgres_cluster_and_down_leaves_nothing(
    reachable_root: Path, tmp_path: Path
) -> None:
    data = reachable_root / "data"
    port = free_port()
    env = {"VIDSCOPE_SERVER__PORT": str(port), "COLUMNS": "300"}  # no wrapped lines
    settings = Settings(data_dir=data, server=ServerSettings(port=port, database="postgres-local"))
    try:
        up = cli(data, env, "up", "--no-api", "--database", "postgres-local")
        assert up.exit_code == 0, up.output
        assert "database: PostgreSQL (local cluster) 127.0.0.1:" in up.output and "reachable" in up.output
        paths = server.server_paths(settings)
        cluster = server.local_postgres(settings)
        postmaster = cluster.pid()
        assert postmaster is not None and (cluster.cluster / "PG_VERSION").exists()
        pids = [postmaster] + [int(paths.pid_file(name).read_text()) for name in ("server", "worker")]
        assert not paths.database.exists()  # no SQLite stand-in
        # status without the flag still knows the database the server was started with
        status = cli(data, env, "status")
        assert status.exit_code == 0, status.output
        assert f"PostgreSQL (local cluster) 127.0.0.1:{cluster.port()}/prefect: reachable" in status.output

        watch = tmp_path / "watch"
        text_video(watch / "a.mp4", duration=2.0, fps=10, texts=[(0, 2, "ALPHA")])
        with temporary_settings({PREFECT_API_URL: server.api_url(settings)}):
            report = nightly(settings=Settings(data_dir=data, server=ServerSettings(watch_folders=[watch])))
            assert (report.new, report.failed) == (1, 0)
            with get_client(sync_client=True) as client:
                runs = client.read_flow_runs()
        [run] = [r for r in runs if r.name.startswith("nightly ")]
        assert run.state_type == StateType.COMPLETED
        # The run the API returned is a row of PostgreSQL's flow_run table.
        assert (run.name, "COMPLETED") in flow_runs_in_postgres(cluster.database().url)

        # The cluster stopped under a running server: status fails and says so; up starts it again,
        # on the port the server was given.
        assert cluster.stop() and cluster.pid() is None
        lost = cli(data, env, "status")
        said = " ".join(lost.output.split())  # the terminal wraps long lines
        assert lost.exit_code == 1 and "not reachable (the local cluster is not running)" in said
        again = cli(data, env, "up", "--no-api")
        assert again.exit_code == 0, again.output
        postmaster = cluster.pid()
        assert postmaster is not None and f"127.0.0.1:{cluster.port()}/prefect: reachable" in again.output
        assert int(paths.pid_file("server").read_text()) == pids[1]  # the same server
        pids[0] = postmaster
        # The server reads from the restarted database (status asks it for the pool's workers).
        back = cli(data, env, "status")
        assert back.exit_code == 0 and "online" in back.output, back.output

        down = cli(data, env, "down")
        assert down.exit_code == 0 and "postgres" in down.output and "server" in down.output, down.output
        assert not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
        assert not processes_under(data)
        after = cli(data, env, "status")
        assert after.exit_code == 1 and "not reachable" in after.output
    finally:
        server.stop(settings)


def test_a_database_that_does_not_answer_is_refused_in_one_line_with_nothing_started(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    url = f"postgresql+asyncpg://vidscope:s3cret@127.0.0.1:{free_port()}/prefect"
    env = {"VIDSCOPE_SERVER__PORT": str(free_port()), "VIDSCOPE_SERVER__DATABASE_URL": url, "COLUMNS": "300"}
    up = cli(data, env, "up", "--no-api")
    assert up.exit_code == 1, up.output
    lines = [line for line in up.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "cannot reach the database" in lines[0], up.output
    assert "s3cret" not in up.output and "vidscope:***@127.0.0.1" in up.output
    paths = server.server_paths(Settings(data_dir=data))
    assert not any(paths.pid_file(name).exists() for name in server.PROCESSES)
    assert not processes_under(data)

    bad = cli(data, {**env, "VIDSCOPE_SERVER__DATABASE_URL": "mysql://u:p@h/db"}, "up", "--no-api")
    assert bad.exit_code == 1 and "must be a PostgreSQL URL" in bad.output and "Traceback" not in bad.output


def test_the_postgres_binaries_are_where_the_settings_say() -> None:
    # The slow test above needs them; a missing package should fail loudly here, not be skipped.
    bin_dir = ServerSettings().postgres_bin
    assert all(os.access(bin_dir / name, os.X_OK) for name in ("initdb", "pg_ctl", "postgres"))


@pytest.mark.skipif(os.geteuid() != 0, reason="only root hands the cluster to another user")
def test_as_root_a_data_dir_the_postgres_user_cannot_enter_is_refused_in_one_line(
    reachable_root: Path,
) -> None:
    locked = reachable_root / "locked"
    locked.mkdir(mode=0o700)
    data = locked / "data"
    env = {"VIDSCOPE_SERVER__PORT": str(free_port()), "COLUMNS": "300"}
    up = cli(data, env, "up", "--no-api", "--database", "postgres-local")
    assert up.exit_code == 1, up.output
    lines = [line for line in up.output.splitlines() if line.strip()]
    assert len(lines) == 1 and f"cannot enter {locked}" in lines[0], up.output
    assert not (data / "server" / "postgres" / "cluster").exists()
    assert not processes_under(data)

"""The local Prefect server, its process worker and the vidscope API, run in the background
(``vidscope server``).

``start`` launches ``prefect server start``, ``prefect worker start --type process`` and (unless
asked not to) ``vidscope api`` as detached processes (each the leader of its own process group)
with their logs and pid files under the data dir's ``server`` directory; the server keeps its
SQLite database there too, never in ``~/.prefect`` -- or uses PostgreSQL: the database at ``[server]
database_url``, or (``database = "postgres-local"``) a cluster it starts under that directory and
stops with the server (:mod:`vidscope.deployments.postgres`). A database that does not answer is
refused before anything is started. The API reports its flow runs to the server and
keeps the store and the query models warm: ``vidscope ask`` hands its question to it (see
:mod:`vidscope.cli.running_api`), so a question costs the CLI's start-up, not Prefect's and the
models'. ``status`` reads the pid files and asks the APIs whether they are healthy and the worker
online; ``stop`` ends the process groups (TERM, then KILL after a grace period) and removes the pid
files.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from vidscope.core.settings import OFFLINE_ENVIRONMENT, Settings
from vidscope.core.tls import httpx_tls
from vidscope.deployments.database import (
    Database,
    DatabaseError,
    DatabaseStatus,
    probe,
    record,
    recorded,
    resolve,
)
from vidscope.deployments.postgres import LocalPostgres
from vidscope.storage.files import managed_dir

#: The background processes, in start order (stopped in reverse).
PROCESSES = ("server", "worker", "api")
#: What each process's command line contains (a pid file's pid reused by another program is not it).
_COMMAND_MARK = {"server": b"prefect", "worker": b"prefect", "api": b"vidscope"}


class ServerError(RuntimeError):
    """The server or its worker could not be started or reached."""


@dataclass(frozen=True)
class ServerPaths:
    """Where the background processes keep their state, under ``<data_dir>/server``."""

    root: Path

    @property
    def home(self) -> Path:
        """PREFECT_HOME of the server and the worker (profiles, storage, caches)."""
        return self.root / "prefect-home"

    @property
    def database(self) -> Path:
        """The SQLite database (when the server uses SQLite)."""
        return self.root / "prefect.db"

    @property
    def database_record(self) -> Path:
        """Which database the server was last started with (password hidden)."""
        return self.root / "database.json"

    @property
    def postgres(self) -> Path:
        """The local PostgreSQL cluster's directory (``[server] database = "postgres-local"``)."""
        return self.root / "postgres"

    def pid_file(self, process: str) -> Path:
        return self.root / f"{process}.pid"

    def log_file(self, process: str) -> Path:
        return self.root / f"{process}.log"


@dataclass
class ProcessStatus:
    """One background process as its pid file and the process table see it."""

    name: str
    pid: int | None
    alive: bool
    log: Path


@dataclass
class ServerStatus:
    """The server's URL and health, and the state of both processes."""

    url: str
    healthy: bool
    worker_online: bool
    work_pool: str
    processes: dict[str, ProcessStatus]
    #: The vidscope API's address, and whether it answers there.
    api_url: str = ""
    api_healthy: bool = False
    #: The server's database and whether it answers (``None``: never started).
    database: DatabaseStatus | None = None

    @property
    def api_managed(self) -> bool:
        """``vidscope server up`` started the API (its pid file is there), so it should answer."""
        api = self.processes.get("api")
        return api is not None and api.pid is not None

    @property
    def running(self) -> bool:
        """The server answers, the worker process is alive and online, and the API started with
        them (if any) is alive and answering: ``vidscope ask`` relies on all three."""
        api_ok = not self.api_managed or (self.processes["api"].alive and self.api_healthy)
        database_ok = self.database is None or self.database.reachable
        running = self.healthy and self.processes["worker"].alive and self.worker_online
        return running and api_ok and database_ok


def server_paths(settings: Settings) -> ServerPaths:
    """The ``server`` managed directory of the configured data dir (created if needed)."""
    return ServerPaths(managed_dir(settings.data_dir, "server"))


def local_postgres(settings: Settings) -> LocalPostgres:
    """The PostgreSQL cluster ``vidscope server up`` owns under the data dir (whether or not it exists)."""
    server = settings.server
    return LocalPostgres(server_paths(settings).postgres, Path(server.postgres_bin), server.postgres_user)


def ui_url(settings: Settings) -> str:
    """The address of the Prefect UI."""
    return f"http://{settings.server.host}:{settings.server.port}"


def api_url(settings: Settings) -> str:
    """The address of the Prefect API (what ``PREFECT_API_URL`` must be set to)."""
    return ui_url(settings) + "/api"


def process_environment(settings: Settings, process: str, database_url: str | None = None) -> dict[str, str]:
    """The environment of the server or worker process: private home, telemetry off, our config.

    The worker's flow runs inherit it, so they find the same data dir and config file. Only the
    server is given ``database_url`` (a PostgreSQL password stays out of the flow runs' environment).
    """
    paths = server_paths(settings)
    env = dict(os.environ)
    env.update(OFFLINE_ENVIRONMENT)
    env.update(
        {
            "PREFECT_HOME": str(paths.home),
            "PREFECT_SERVER_API_HOST": settings.server.host,
            "PREFECT_SERVER_API_PORT": str(settings.server.port),
            "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{paths.database}",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "DO_NOT_TRACK": "1",
            "VIDSCOPE_DATA_DIR": str(Path(settings.data_dir).expanduser().resolve()),
        }
    )
    config = Path(os.environ.get("VIDSCOPE_CONFIG", "vidscope.toml"))
    if config.exists():
        env["VIDSCOPE_CONFIG"] = str(config.resolve())
    if process == "server":
        env.pop("PREFECT_API_URL", None)
        if database_url:
            env["PREFECT_API_DATABASE_CONNECTION_URL"] = database_url
    else:
        env["PREFECT_API_URL"] = api_url(settings)
    return env


def vidscope_api_url(settings: Settings) -> str:
    """The address of the vidscope API ``start`` runs (its ``[api]`` host and port)."""
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(settings.api.host, settings.api.host)
    return f"http://{f'[{host}]' if ':' in host else host}:{settings.api.port}"


def _command(settings: Settings, process: str) -> list[str]:
    if process == "server":
        return [sys.executable, "-m", "prefect", "server", "start", "--analytics-off"]
    if process == "api":
        api = settings.api
        return [sys.executable, "-m", "vidscope.cli", "api", "--host", api.host, "--port", str(api.port)]
    return [
        sys.executable, "-m", "prefect", "worker", "start",
        "--pool", settings.server.work_pool,
        "--type", "process",
        "--name", f"vidscope-{socket.gethostname()}",
    ]  # fmt: skip


# ---------------------------------------------------------------------------- processes


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _running(pid: int | None) -> bool:
    """Whether ``pid`` is a process that has not ended, whatever it runs (no /proc: unknown, False)."""
    if pid is None:
        return False
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _is_ours(pid: int, process: str) -> bool:
    """``pid`` runs and is ``process`` (not a recycled pid of something else)."""
    proc = Path("/proc") / str(pid)
    if proc.is_dir():
        if not _running(pid):
            return False
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            return False
        return _COMMAND_MARK[process] in cmdline
    try:  # no /proc (macOS): trust the pid
        os.kill(pid, 0)
    except OSError:
        return False
    return True


#: How the children this process collected ended (pid -> wait status), for error messages.
_ENDINGS: dict[int, int] = {}


def _reap(pid: int) -> None:
    """Collect an exited child of this process so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            _ENDINGS[pid] = status


def _ending(pid: int | None) -> str:
    """`` (exit status N)`` or `` (killed by signal S)`` when this process collected ``pid``'s end."""
    status = _ENDINGS.get(pid) if pid is not None else None
    if status is None:
        return ""
    if os.WIFSIGNALED(status):
        return f" (killed by signal {os.WTERMSIG(status)})"
    return f" (exit status {os.waitstatus_to_exitcode(status)})"


def process_status(settings: Settings, process: str) -> ProcessStatus:
    """What the pid file of ``process`` says, checked against the process table."""
    paths = server_paths(settings)
    pid = _read_pid(paths.pid_file(process))
    if pid is not None:
        _reap(pid)
    return ProcessStatus(process, pid, pid is not None and _is_ours(pid, process), paths.log_file(process))


def _spawn(settings: Settings, process: str, database_url: str | None = None) -> int:
    paths = server_paths(settings)
    paths.home.mkdir(parents=True, exist_ok=True)
    log = paths.log_file(process).open("ab")
    try:
        child = subprocess.Popen(
            _command(settings, process),
            env=process_environment(settings, process, database_url),
            cwd=paths.root,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stop() ends it with its children
        )
    finally:
        log.close()
    paths.pid_file(process).write_text(f"{child.pid}\n")
    return child.pid


#: Seconds the Prefect worker with nothing running under it gets to stop on SIGTERM before it is
#: killed. Prefect's worker turns SIGTERM into a SIGINT to itself and, now and then, an idle worker then
#: hangs in its shutdown until killed (its log ends at "Received SIGINT"; 15 s per stop in the
#: default suite twice a run, and in ``server down``). A worker with flow runs under it keeps
#: the full grace: its shutdown waits for them.
IDLE_GRACE = 3.0


def _has_children(pid: int) -> bool:
    import psutil

    try:
        return bool(psutil.Process(pid).children())
    except psutil.Error:
        return False


def _end(pid: int, process: str, grace: float) -> None:
    """TERM the process group led by ``pid``; KILL it if it is still there after ``grace`` s (the
    worker: after :data:`IDLE_GRACE` s when no flow run runs under it)."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        except PermissionError:  # not a group leader we own: signal the process alone
            os.kill(pid, sig)
        started = time.monotonic()
        while time.monotonic() < started + wait:
            _reap(pid)
            if not _is_ours(pid, process):
                return
            hung = process == "worker" and sig == signal.SIGTERM and time.monotonic() > started + IDLE_GRACE
            if hung and not _has_children(pid):
                break  # idle, and stuck in Prefect's shutdown: kill it
            time.sleep(0.1)


# ---------------------------------------------------------------------------- health


def is_healthy(settings: Settings, timeout: float = 2.0) -> bool:
    """The API at the configured address answers its health check."""
    try:
        url = api_url(settings) + "/health"
        response = httpx.get(url, timeout=timeout, verify=httpx_tls(url))
    except httpx.HTTPError:
        return False
    return response.status_code == 200


def api_is_healthy(settings: Settings, timeout: float = 2.0) -> bool:
    """A vidscope API answers its health check at the configured ``[api]`` address."""
    try:
        url = vidscope_api_url(settings) + "/api/health"
        response = httpx.get(url, timeout=timeout, verify=httpx_tls(url))
    except httpx.HTTPError:
        return False
    return response.status_code == 200


def worker_online(settings: Settings, timeout: float = 5.0) -> bool:
    """A worker of the configured pool has sent a heartbeat recently (status ONLINE)."""
    try:
        response = httpx.post(
            f"{api_url(settings)}/work_pools/{settings.server.work_pool}/workers/filter",
            json={"workers": {"status": {"any_": ["ONLINE"]}}},
            timeout=timeout,
            verify=httpx_tls(api_url(settings)),
        )
    except httpx.HTTPError:
        return False
    return response.status_code == 200 and bool(response.json())


def _port_taken(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((host, port)) == 0


def _wait(check: object, what: str, timeout: float, process: str, settings: Settings) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        state = process_status(settings, process)
        # Not alive by its pid file and command line, and not running at all: a process seen
        # running whose command line could not be read is not taken for one that ended.
        if not state.alive and not _running(state.pid):
            log = server_paths(settings).log_file(process)
            raise ServerError(
                f"the {process} exited while starting{_ending(state.pid)}; see {log}:\n{_tail(log)}"
            )
        time.sleep(0.25)
    raise ServerError(f"{what} within {timeout:.0f} s; see {server_paths(settings).log_file(process)}")


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# ---------------------------------------------------------------------------- database


def _prepare_database(settings: Settings) -> tuple[Database, bool]:
    """The database to start the server with, answering ``SELECT 1``; and whether this call started
    the local cluster. Raises :class:`ServerError` in one line (stopping a cluster it started)."""
    paths = server_paths(settings)
    cluster = local_postgres(settings)
    started = False
    try:
        database = resolve(settings.server, paths.database)
        if database is None:
            started = cluster.pid() is None
            database = cluster.start()
    except DatabaseError as exc:
        raise ServerError(str(exc)) from exc
    if database.kind != "sqlite":
        reason = probe(database.url)
        if reason:
            if started:
                cluster.stop()
            raise ServerError(f"cannot reach the database {database.shown}: {reason}")
    return database, started


def database_status(settings: Settings) -> DatabaseStatus | None:
    """The database the server was last started with (else the configured one) and whether it answers."""
    paths = server_paths(settings)
    shown = recorded(paths.database_record)
    try:
        configured = resolve(settings.server, paths.database)
        if shown is None:
            shown = configured
        if shown is None or shown.kind == "postgres-local":
            cluster = local_postgres(settings)
            if cluster.port() is None:
                if shown is None:
                    return None
                return DatabaseStatus(shown.kind, shown.where, False, "never started")
            actual = cluster.database()
            if cluster.pid() is None:
                return DatabaseStatus(actual.kind, actual.where, False, "the local cluster is not running")
            reason = probe(actual.url)
            return DatabaseStatus(actual.kind, actual.where, not reason, reason)
    except DatabaseError as exc:
        where = shown.where if shown else "?"
        return DatabaseStatus(shown.kind if shown else "?", where, False, str(exc))
    if shown.kind == "sqlite":
        present = Path(shown.where).exists()
        return DatabaseStatus("sqlite", shown.where, present, "" if present else "no database file yet")
    if configured is None or configured.where != shown.where:
        # The settings name another database now: the recorded one's password is not kept.
        return DatabaseStatus(shown.kind, shown.where, False, "not in the settings any more")
    reason = probe(configured.url)
    return DatabaseStatus(shown.kind, shown.where, not reason, reason)


# ---------------------------------------------------------------------------- public


def status(settings: Settings) -> ServerStatus:
    """The server's health, whether a worker of the pool is online, the API's, the database's, and
    the processes."""
    processes = {name: process_status(settings, name) for name in PROCESSES}
    healthy = is_healthy(settings)
    return ServerStatus(
        url=ui_url(settings),
        healthy=healthy,
        worker_online=healthy and worker_online(settings),
        work_pool=settings.server.work_pool,
        processes=processes,
        api_url=vidscope_api_url(settings),
        api_healthy=api_is_healthy(settings),
        database=database_status(settings),
    )


def start(settings: Settings, timeout: float = 120.0, api: bool = True, worker: bool = True) -> ServerStatus:
    """Start the server, (with ``worker``) a worker of the work pool and (with ``api``) the vidscope
    API in the background; what already runs is left as it is.

    The server's database must answer first (a local PostgreSQL cluster is started for
    ``database = "postgres-local"``). Waits until the server is healthy, the worker has registered
    and the API answers; raises :class:`ServerError` with the end of the log when one fails to come
    up, after stopping what this call started.
    """
    spawned: list[str] = []
    cluster_started = False
    try:
        shown = recorded(server_paths(settings).database_record)
        cluster = local_postgres(settings)
        if process_status(settings, "server").alive:
            if shown is not None and shown.kind == "postgres-local" and cluster.pid() is None:
                # The server outlived its cluster: start it again, on the port the server was given.
                try:
                    back = cluster.start()
                except DatabaseError as exc:
                    raise ServerError(str(exc)) from exc
                if back.where != shown.where:  # its port was taken meanwhile
                    raise ServerError(
                        f"the local PostgreSQL cluster is back on {back.where}, but the running server "
                        f"uses {shown.where}: run `vidscope server down`, then `vidscope server up`"
                    )
        else:
            if _port_taken(settings.server.host, settings.server.port):
                raise ServerError(
                    f"{settings.server.host}:{settings.server.port} is already in use by another "
                    "program; set [server] port in vidscope.toml to a free port"
                )
            database, cluster_started = _prepare_database(settings)
            record(server_paths(settings).database_record, database)
            _spawn(settings, "server", database.url)
            spawned.append("server")
        _wait(lambda: is_healthy(settings), "the Prefect server did not become healthy", timeout,
              "server", settings)  # fmt: skip
        if worker and not process_status(settings, "worker").alive:
            _spawn(settings, "worker")
            spawned.append("worker")
        if worker:
            _wait(lambda: worker_online(settings), "the worker did not come online", timeout, "worker",
                  settings)  # fmt: skip
        if api and not process_status(settings, "api").alive and not api_is_healthy(settings):
            # A vidscope API already answering there (``vidscope api`` run by hand) is used as it is.
            if _port_taken(settings.api.host, settings.api.port):
                raise ServerError(
                    f"{settings.api.host}:{settings.api.port} ([api] port) is already in use by another "
                    "program; set [api] port in vidscope.toml, or start without it: "
                    "vidscope server up --no-api"
                )
            _spawn(settings, "api")
            spawned.append("api")
            _wait(lambda: api_is_healthy(settings), "the vidscope API did not answer", timeout, "api",
                  settings)  # fmt: skip
    except ServerError:
        stop(settings, processes=tuple(spawned), database=cluster_started)
        raise
    return status(settings)


def stop(
    settings: Settings,
    grace: float = 15.0,
    processes: tuple[str, ...] = PROCESSES,
    database: bool | None = None,
) -> list[str]:
    """Stop the API, the worker, then the server (or only ``processes``); remove their pid files.
    With the server (or ``database=True``), the local PostgreSQL cluster under this data dir is
    stopped too, if it runs ("postgres"); never another cluster. Returns what was stopped."""
    stopped = []
    paths = server_paths(settings)
    for name in [p for p in reversed(PROCESSES) if p in processes]:
        state = process_status(settings, name)
        if state.alive and state.pid is not None:
            _end(state.pid, name, grace)
            stopped.append(name)
        paths.pid_file(name).unlink(missing_ok=True)
    if (("server" in processes) if database is None else database) and local_postgres(settings).stop():
        stopped.append("postgres")
    return stopped

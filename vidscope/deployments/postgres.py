"""A PostgreSQL cluster that ``vidscope server up`` owns, under ``<data_dir>/server/postgres``
(``[server] database = "postgres-local"``).

``initdb`` makes the cluster once (superuser ``vidscope`` with a random password kept in
``postgres/password``, mode 0600; password authentication over TCP; no Unix socket, so nothing is
written outside the data dir), ``pg_ctl`` starts it on a free loopback port and stops it. The
``prefect`` database is created on first start; Prefect's server runs its own migrations on it.

PostgreSQL refuses to run as root. When vidscope runs as root, the cluster is owned by and runs as
``[server] postgres_user`` (default ``postgres``, the user the Debian package creates): the cluster
directory is given to that user and every directory above it must let that user pass
(``chmod o+x``), which :meth:`LocalPostgres.start` checks and says in one line if not. As any other
user the cluster runs as that user.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import secrets
import signal
import socket
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from vidscope.deployments.database import Database, DatabaseError

#: The cluster's superuser and the database Prefect's server uses.
SUPERUSER = "vidscope"
DATABASE = "prefect"


@dataclass(frozen=True)
class LocalPostgres:
    """The cluster under ``root`` (``<data_dir>/server/postgres``), run with the binaries in ``bin_dir``."""

    root: Path
    bin_dir: Path
    #: The system user that owns and runs the cluster when vidscope runs as root.
    root_user: str = "postgres"

    @property
    def cluster(self) -> Path:
        """PGDATA."""
        return self.root / "cluster"

    @property
    def log(self) -> Path:
        """The server's log (inside the cluster directory: the cluster's user must write it)."""
        return self.cluster / "postgres.log"

    @property
    def password_file(self) -> Path:
        return self.root / "password"

    @property
    def port_file(self) -> Path:
        return self.root / "port"

    # ------------------------------------------------------------------ state

    def pid(self) -> int | None:
        """The postmaster's pid if it runs (read from ``postmaster.pid``, checked in the process table)."""
        try:
            pid = int((self.cluster / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return None
        # A postmaster.pid left by a crash may name a recycled pid: it must be a postgres of this PGDATA.
        if state in ("Z", "X") or b"postgres" not in cmdline or str(self.cluster).encode() not in cmdline:
            return None
        return pid

    def port(self) -> int | None:
        try:
            return int(self.port_file.read_text())
        except (OSError, ValueError):
            return None

    def database(self) -> Database:
        """The ``prefect`` database of the cluster as Prefect is given it (needs a started cluster)."""
        port = self.port()
        if port is None:
            raise DatabaseError(f"the local PostgreSQL cluster under {self.root} was never started")
        password = self.password_file.read_text().strip()
        url = f"postgresql+asyncpg://{SUPERUSER}:{password}@127.0.0.1:{port}/{DATABASE}"
        return Database("postgres-local", url, f"127.0.0.1:{port}/{DATABASE}")

    # ------------------------------------------------------------------ running the binaries

    def _owner(self) -> tuple[int, int] | None:
        """(uid, gid) to run the binaries as, or ``None`` for the current user."""
        if os.geteuid() != 0:
            return None
        try:
            entry = pwd.getpwnam(self.root_user)
        except KeyError as exc:
            raise DatabaseError(
                f"PostgreSQL does not run as root and there is no user {self.root_user!r} to run it as; "
                "set [server] postgres_user to an unprivileged user"
            ) from exc
        if entry.pw_uid == 0:
            raise DatabaseError(f"[server] postgres_user {self.root_user!r} is root; PostgreSQL refuses it")
        return entry.pw_uid, entry.pw_gid

    def _run(self, *args: str, timeout: float = 120.0) -> None:
        """Run a PostgreSQL binary as the cluster's user; its output goes to ``postgres/ctl.log``."""
        program = self.bin_dir / args[0]
        if not program.exists():
            raise DatabaseError(f"{program} not found: install PostgreSQL or set [server] postgres_bin")
        owner = self._owner()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "TZ": "UTC"}
        with (self.root / "ctl.log").open("ab") as out:
            result = subprocess.run(
                [str(program), *args[1:]],
                cwd=self.root,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                # The postmaster pg_ctl forks stays in this new session, not in the CLI's.
                start_new_session=True,
                user=owner[0] if owner else None,
                group=owner[1] if owner else None,
                extra_groups=[] if owner else None,
                timeout=timeout,
                check=False,
            )
        if result.returncode != 0:
            raise DatabaseError(
                f"{args[0]} {args[1] if len(args) > 1 else ''} failed (exit {result.returncode}); "
                f"see {self.root / 'ctl.log'} and {self.log}"
            )

    def _check_reachable(self, uid: int, gid: int) -> None:
        """Every directory above the cluster lets ``uid`` pass, or one line saying which does not."""
        for directory in reversed(self.root.parents):
            info = directory.stat()
            mode = info.st_mode
            can = (
                (info.st_uid == uid and mode & stat.S_IXUSR)
                or (info.st_gid == gid and mode & stat.S_IXGRP)
                or mode & stat.S_IXOTH
            )
            if not can:
                raise DatabaseError(
                    f"the PostgreSQL user {self.root_user!r} cannot enter {directory} (mode "
                    f"{stat.filemode(mode)}); PostgreSQL does not run as root: use a data dir that user "
                    f"can reach (chmod o+x {directory}) or run vidscope as an unprivileged user"
                )

    def _initialise(self) -> None:
        owner = self._owner()
        if owner:
            self._check_reachable(*owner)
            self.root.chmod(0o755)  # the cluster's user passes through, reads nothing here
        self.password_file.write_text(secrets.token_hex(16) + "\n")
        self.password_file.chmod(0o600)
        # initdb reads the password from a file the cluster's user can read; it is removed after.
        handover = self.root / "initdb-password"
        handover.write_text(self.password_file.read_text())
        handover.chmod(0o600)
        self.cluster.mkdir(mode=0o700)
        if owner:
            os.chown(handover, *owner)
            os.chown(self.cluster, *owner)
        try:
            self._run(
                "initdb", "-D", str(self.cluster), "-U", SUPERUSER, f"--pwfile={handover}",
                "--auth=scram-sha-256", "--encoding=UTF8", "--locale=C",
            )  # fmt: skip
        except DatabaseError:
            # A failed initdb leaves a half cluster: remove it so the next start begins afresh.
            import shutil

            shutil.rmtree(self.cluster, ignore_errors=True)
            raise
        finally:
            handover.unlink(missing_ok=True)
        with (self.cluster / "postgresql.conf").open("a") as conf:
            # Loopback only; no Unix socket (it would go to /var/run/postgresql, outside the data dir).
            conf.write("\n# vidscope\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\n")

    def _create_database(self, port: int, password: str) -> None:
        import asyncpg  # type: ignore[import-untyped]

        async def create() -> None:
            connection = await asyncpg.connect(
                host="127.0.0.1",
                port=port,
                user=SUPERUSER,
                password=password,
                database="postgres",
                timeout=10,
            )
            try:
                if not await connection.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", DATABASE):
                    await connection.execute(f'CREATE DATABASE "{DATABASE}"')
            finally:
                await connection.close()

        asyncio.run(create())

    # ------------------------------------------------------------------ public

    def start(self) -> Database:
        """Make the cluster if there is none, start it on a free port unless it runs, create the database."""
        self.root.mkdir(parents=True, exist_ok=True)
        if not (self.cluster / "PG_VERSION").exists():
            self._initialise()
        if self.pid() is None:
            # The last port again if it is free: a Prefect server still running keeps its URL.
            port = self.port()
            if port is None or not _port_free(port):
                port = _free_port()
            self.port_file.write_text(f"{port}\n")
            self._run("pg_ctl", "-D", str(self.cluster), "-l", str(self.log), "-o", f"-p {port}", "-w",
                      "-t", "60", "start")  # fmt: skip
        database = self.database()
        try:
            self._create_database(self.port() or 0, self.password_file.read_text().strip())
        except Exception as exc:  # asyncpg's errors, OSError, timeouts: the cluster is not usable
            self.stop()
            raise DatabaseError(f"could not create the {DATABASE!r} database: {exc}") from exc
        return database

    def stop(self, grace: float = 30.0) -> bool:
        """Stop the cluster (fast shutdown: sessions are ended, the data is safe); ``True`` if it ran."""
        pid = self.pid()
        if pid is None:
            return False
        with contextlib.suppress(DatabaseError, subprocess.TimeoutExpired):
            self._run("pg_ctl", "-D", str(self.cluster), "-m", "fast", "-w", "-t", str(int(grace)), "stop",
                      timeout=grace + 10)  # fmt: skip
        # pg_ctl failed or timed out: an immediate shutdown (crash-safe, replayed from the WAL at start).
        for sig in (signal.SIGQUIT, signal.SIGKILL):
            if self.pid() is None:
                break
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
            deadline = time.monotonic() + 10
            while self.pid() is not None and time.monotonic() < deadline:
                time.sleep(0.1)
        return True


def _port_free(port: int) -> bool:
    """Nothing listens on 127.0.0.1:``port``. Bound as PostgreSQL binds (SO_REUSEADDR): the
    connections its last shutdown closed linger in TIME_WAIT, which does not stop it."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])

"""The Prefect server's database: SQLite under the data dir, a PostgreSQL database given by URL, or a
local PostgreSQL cluster that ``vidscope server up`` owns (``[server] database``/``database_url``).

``resolve`` says which one the settings ask for and with what URL (the form Prefect reads from
``PREFECT_API_DATABASE_CONNECTION_URL``); ``probe`` connects to a PostgreSQL database and runs
``SELECT 1``, so a server that could not reach its database is refused before it is started, in one
line. The server records what it was started with in ``<data_dir>/server/database.json`` (password
hidden), which ``status`` reports and ``down`` reads; the local cluster itself is
:mod:`vidscope.deployments.postgres`.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from vidscope.core.settings import ServerSettings

Kind = Literal["sqlite", "postgres", "postgres-local"]


class DatabaseError(RuntimeError):
    """The configured database is invalid or cannot be reached."""


@dataclass(frozen=True)
class Database:
    """The database a Prefect server is (to be) started with."""

    kind: Kind
    #: What Prefect is given (may hold a password: never print it; see ``shown``).
    url: str
    #: ``host:port/name`` for PostgreSQL, the file for SQLite.
    where: str

    @property
    def shown(self) -> str:
        """The URL with its password hidden."""
        return hide_password(self.url)


@dataclass
class DatabaseStatus:
    """The database of the running (or last started) server, and whether it answers now."""

    kind: str
    where: str
    reachable: bool
    #: Why it is not reachable ("" when it is).
    reason: str = ""


def hide_password(url: str) -> str:
    """``url`` with its password replaced by ``***``."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # an unparsable URL is shown without anything after the scheme
        return url.split("://", 1)[0] + "://…"


def postgres_url(url: str) -> tuple[str, str]:
    """``url`` in the form Prefect needs (the asyncpg driver), and its ``host:port/name``.

    Raises :class:`DatabaseError` for a URL that is not a PostgreSQL one.
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise DatabaseError(f"[server] database_url is not a database URL: {hide_password(url)}") from exc
    if parsed.get_backend_name() != "postgresql":
        raise DatabaseError(
            f"[server] database_url must be a PostgreSQL URL (postgresql+asyncpg://user:password@host:5432/"
            f"prefect), not {parsed.get_backend_name()!r}; leave it unset for SQLite"
        )
    if not parsed.host or not parsed.database:
        raise DatabaseError(f"[server] database_url needs a host and a database name: {hide_password(url)}")
    # Prefect's server is asynchronous: psycopg2 or a bare postgresql:// would not load.
    parsed = parsed.set(drivername="postgresql+asyncpg")
    where = f"{parsed.host}:{parsed.port or 5432}/{parsed.database}"
    return parsed.render_as_string(hide_password=False), where


def resolve(server: ServerSettings, sqlite_file: Path) -> Database | None:
    """The database ``server`` asks for; ``None`` for the local cluster (its URL is known once it runs).

    Raises :class:`DatabaseError` for a bad or contradictory choice.
    """
    if server.database == "postgres-local":
        if server.database_url:
            raise DatabaseError(
                '[server] database = "postgres-local" starts a cluster of its own: unset database_url, '
                'or set database to "sqlite" to use the database at database_url'
            )
        return None
    if server.database_url:
        url, where = postgres_url(server.database_url)
        return Database("postgres", url, where)
    return Database("sqlite", f"sqlite+aiosqlite:///{sqlite_file}", str(sqlite_file))


def probe(url: str, timeout: float = 5.0) -> str:
    """Connect to the PostgreSQL database at ``url`` and run ``SELECT 1``: "" if that worked, else why not."""
    import asyncpg  # type: ignore[import-untyped]
    from sqlalchemy.engine import make_url

    parsed = make_url(url)

    async def connect() -> None:
        connection = await asyncpg.connect(
            host=parsed.host,
            port=parsed.port or 5432,
            user=parsed.username,
            password=parsed.password,
            database=parsed.database,
            timeout=timeout,
        )
        try:
            await connection.fetchval("SELECT 1")
        finally:
            await connection.close()

    try:
        asyncio.run(asyncio.wait_for(connect(), timeout + 1))
    # asyncpg raises OSError subclasses, its own PostgresError tree, timeouts and
    # InterfaceError/ValueError for bad parameters: any of them means "not reachable", with its text.
    except Exception as exc:
        return " ".join(str(exc).split()) or type(exc).__name__
    return ""


def record(path: Path, database: Database) -> None:
    """Write what the server was started with (password hidden) to ``path``."""
    shown = {"kind": database.kind, "url": database.shown, "where": database.where}
    path.write_text(json.dumps(shown, indent=1) + "\n")


def recorded(path: Path) -> Database | None:
    """What :func:`record` wrote (with the password hidden), or ``None``."""
    try:
        data = json.loads(path.read_text())
        return Database(data["kind"], data["url"], data["where"])
    except (OSError, ValueError, KeyError, TypeError):
        return None

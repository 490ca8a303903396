"""``vidscope server up|down|status|deploy``: the local Prefect server, its worker, the vidscope
API, the deployments."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from vidscope.cli.common import app, console, errors, safe, settings

if TYPE_CHECKING:
    from vidscope.deployments.server import ServerStatus

server_app = typer.Typer(
    help="Run the local Prefect server (UI, schedules), its worker and the vidscope API in the background.",
    no_args_is_help=True,
)
app.add_typer(server_app, name="server")


def _print_status(state: ServerStatus) -> None:
    table = Table(show_header=True)
    for column in ("process", "pid", "alive", "log"):
        table.add_column(column)
    for process in state.processes.values():
        alive = "[green]yes[/green]" if process.alive else "[red]no[/red]"
        table.add_row(process.name, str(process.pid or "-"), alive, str(process.log))
    console.print(table)
    health = "[green]healthy[/green]" if state.healthy else "[red]not answering[/red]"
    worker = "[green]online[/green]" if state.worker_online else "[red]offline[/red]"
    console.print(f"server {state.url}: {health}; worker of pool {state.work_pool!r}: {worker}")
    if state.database is not None:
        db = state.database
        kinds = {"postgres-local": "PostgreSQL (local cluster)", "postgres": "PostgreSQL"}
        kind = kinds.get(db.kind, db.kind)
        answer = "[green]reachable[/green]" if db.reachable else f"[red]not reachable[/red] ({db.reason})"
        console.print(f"database: {kind} {db.where}: {answer}")
    api = state.processes["api"]
    if state.api_healthy:
        console.print(f"vidscope API {state.api_url}: [green]answering[/green] (`vidscope ask` uses it)")
    elif api.alive:
        console.print(f"vidscope API {state.api_url}: [red]not answering[/red]")
    elif state.api_managed:
        console.print(
            f"vidscope API {state.api_url}: [red]not running[/red] (process {api.pid} is gone; "
            f"`vidscope server up` starts it again)"
        )


@server_app.command("up")
def up(
    timeout: Annotated[float, typer.Option(help="Seconds to wait for each process to come up.")] = 120.0,
    api: Annotated[
        bool,
        typer.Option(
            "--api/--no-api",
            help="Also run the vidscope API (\\[api] host and port): `vidscope ask` then answers through "
            "it, with the store and models already loaded, and each question shows in the UI.",
        ),
    ] = True,
    database: Annotated[
        str | None,
        typer.Option(
            help='The server\'s database, instead of \\[server] database: "sqlite" or "postgres-local" (a '
            "PostgreSQL cluster under the data dir, stopped by `server down`). \\[server] database_url "
            "names an existing PostgreSQL database.",
        ),
    ] = None,
) -> None:
    """Start the Prefect server, a worker of the work pool and the vidscope API in the background."""
    from vidscope.deployments.server import ServerError, start

    cfg = settings()
    if database is not None:
        if database not in ("sqlite", "postgres-local"):
            errors.print(f'[red]--database must be "sqlite" or "postgres-local", not {database!r}[/red]')
            raise typer.Exit(2)
        cfg = cfg.model_copy(update={"server": cfg.server.model_copy(update={"database": database})})
    try:
        with console.status(f"starting the Prefect server on port {cfg.server.port} …"):
            state = start(cfg, timeout=timeout, api=api)
    except ServerError as exc:
        errors.print(f"[red]could not start the server:[/red] {safe(str(exc))}", soft_wrap=True)
        raise typer.Exit(1) from exc
    _print_status(state)
    # vidscope commands find the running server by its pid file; no PREFECT_API_URL to export.
    console.print(f"UI: {state.url}   (vidscope commands with this data dir report their runs there)")


@server_app.command("down")
def down() -> None:
    """Stop the API, the worker and the server (their pid files are removed), and the local
    PostgreSQL cluster the server used, if any."""
    from vidscope.cli.running_api import forget_dead_registration
    from vidscope.deployments.server import stop

    stopped = stop(settings())
    forget_dead_registration(settings())
    console.print(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")


@server_app.command("status")
def status() -> None:
    """Health of the server, the worker and the API (exit code 1 unless all that was started runs)."""
    from vidscope.cli.running_api import forget_dead_registration
    from vidscope.deployments.server import status as read_status

    state = read_status(settings())
    forget_dead_registration(settings())
    _print_status(state)
    if not state.running:
        raise typer.Exit(1)


@server_app.command("deploy")
def deploy() -> None:
    """Create or update the nightly and on-demand deployments on the running server."""
    from vidscope.deployments.deploy import apply_deployments
    from vidscope.deployments.server import is_healthy, ui_url

    cfg = settings()
    if not is_healthy(cfg):
        errors.print(f"[red]no Prefect server at {ui_url(cfg)}[/red]: run `vidscope server up` first")
        raise typer.Exit(1)
    try:
        results = apply_deployments(cfg)
    except ValueError as exc:
        errors.print(f"[red]invalid [server] settings:[/red] {exc}")
        raise typer.Exit(2) from exc
    failed = False
    for result in results:
        if result.error:
            failed = True
            errors.print(f"[red]✗ {result.spec.flow}:[/red] {result.error}")
            continue
        when = ""
        if result.schedule:
            when = f" — cron {result.schedule['cron']!r} in {result.schedule['timezone']}"
        console.print(f"[green]✓[/green] {result.full_name}{when}")
    console.print(f"work pool: {cfg.server.work_pool}; UI: {ui_url(cfg)}/deployments")
    if failed:
        raise typer.Exit(1)

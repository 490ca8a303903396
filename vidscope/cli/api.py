"""``vidscope api`` (the HTTP API and web page) and ``vidscope mcp`` (the MCP server over stdio)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import Annotated

import typer

from vidscope.cli.common import app, console, errors, safe, settings
from vidscope.cli.running_api import register, unregister
from vidscope.core.settings import ApiSettings, Settings

# Help texts are Rich markup: "\\[api]" prints as "[api]".
_DEFAULT_HOST = ApiSettings.model_fields["host"].default
_DEFAULT_PORT = ApiSettings.model_fields["port"].default


@app.command()
def api(
    host: Annotated[
        str | None, typer.Option(help=f"Address to bind (default \\[api] host, {_DEFAULT_HOST}).")
    ] = None,
    port: Annotated[int | None, typer.Option(help=f"Port (default \\[api] port, {_DEFAULT_PORT}).")] = None,
) -> None:
    """Serve the HTTP API and the web page (a token is required to bind beyond loopback)."""

    from vidscope.api import create_app
    from vidscope.api.security import is_loopback
    from vidscope.deployments.lifeline import end_children, start_watchdog, stop_watchdog

    cfg = settings()
    cfg.api.host = host or cfg.api.host
    cfg.api.port = port or cfg.api.port
    if not is_loopback(cfg.api.host) and not cfg.api.token:
        errors.print(
            f"[red]refusing to bind {safe(cfg.api.host)} without a token:[/red] set "
            "token in the \\[api] section of vidscope.toml (or VIDSCOPE_API__TOKEN), or bind 127.0.0.1"
        )
        raise typer.Exit(2)
    if cfg.api.video_roots is None and is_loopback(cfg.api.host):
        console.print("videos are read from the folders of the ingested ones (\\[api] video_roots unset)")
    elif not cfg.api.video_roots:
        errors.print(
            "[yellow]no \\[api] video_roots configured: ingestion and playback over HTTP are off[/yellow]"
        )
    auth = "token required" if cfg.api.token else "no token (loopback only)"
    console.print(f"vidscope API on http://{cfg.api.host}:{cfg.api.port}/ ({auth})")
    # Jobs start Prefect's temporary server as a child of this process; whatever ends the API
    # (SIGTERM, Ctrl-C, SIGKILL), that server must end with it.
    start_watchdog()
    code = 1  # unless uvicorn returns normally (it does on SIGINT and SIGTERM)
    try:
        _serve(create_app(cfg), cfg)
        code = 0
    except Exception as exc:  # shutting down exits at once, so say what happened first
        errors.print(f"[red]the API stopped:[/red] {safe(f'{type(exc).__name__}: {exc}')}")
    finally:
        unregister(cfg)
        _shut_down(end_children, stop_watchdog, code)


def _serve(application: object, cfg: Settings) -> None:
    """Serve ``application`` with uvicorn until it is stopped, registered for ``vidscope ask``
    (:mod:`vidscope.cli.running_api`) once it listens: never before, so a port another program
    holds is never advertised as this API's."""
    import socket

    import uvicorn

    class RegisteredServer(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started:
                register(cfg, cfg.api.host, cfg.api.port)

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            unregister(cfg)  # first: no new question is sent to an API on its way out
            await super().shutdown(sockets=sockets)
            # uvicorn re-raises the signal that stopped it once it has shut down; with SIGTERM's
            # default action that ends the process before `_shut_down` can stop ingest jobs, flush
            # usage records and end children. The signal has done its work: the server stopped.
            captured = getattr(self, "_captured_signals", None)
            if isinstance(captured, list):
                captured.clear()

    config = uvicorn.Config(
        application,  # type: ignore[arg-type]
        host=cfg.api.host,
        port=cfg.api.port,
        log_level="warning",
        server_header=False,
        h11_max_incomplete_event_size=64 * 1024,
    )
    RegisteredServer(config).run()


def _shut_down(end_children: Callable[[], int], stop_watchdog: Callable[[], None], code: int) -> None:
    """After uvicorn stopped: abandon a running ingest job, end the children, exit now.

    An ingest job runs in a worker thread that cannot be stopped from outside and would keep the
    interpreter alive for as long as its stage takes; its stage is marked interrupted instead.
    """
    from vidscope.models.usage import flush_all
    from vidscope.tasks.stage import interrupt_running

    interrupt_running("interrupted: the API was stopped")
    with contextlib.suppress(Exception):  # a usage record lost on the way out is no reason to stay
        flush_all()
    end_children()
    stop_watchdog()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


@app.command()
def mcp() -> None:
    """Serve ``ask`` and ``search`` to other agents over MCP (stdio)."""
    from vidscope.mcp_server import main

    main(settings())

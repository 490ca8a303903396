"""``vidscope api`` (the HTTP API and web page) and ``vidscope mcp`` (the MCP server over stdio)."""

from __future__ import annotations

from typing import Annotated

import typer

from vidscope.cli.common import app, console, errors, settings


@app.command()
def api(
    host: Annotated[str | None, typer.Option(help="Address to bind (default [api] host, 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default [api] port, 8000).")] = None,
) -> None:
    """Serve the HTTP API and the web page (a token is required to bind beyond loopback)."""
    import uvicorn

    from vidscope.api import create_app
    from vidscope.api.security import is_loopback

    cfg = settings()
    cfg.api.host = host or cfg.api.host
    cfg.api.port = port or cfg.api.port
    if not is_loopback(cfg.api.host) and not cfg.api.token:
        errors.print(
            f"[red]refusing to bind {cfg.api.host} without a token:[/red] set [api] token "
            "(or VIDSCOPE_API__TOKEN), or bind 127.0.0.1"
        )
        raise typer.Exit(2)
    if not cfg.api.video_roots:
        errors.print(
            "[yellow]no [api] video_roots configured: ingestion and playback over HTTP are off[/yellow]"
        )
    auth = "token required" if cfg.api.token else "no token (loopback only)"
    console.print(f"vidscope API on http://{cfg.api.host}:{cfg.api.port}/ ({auth})")
    uvicorn.run(
        create_app(cfg),
        host=cfg.api.host,
        port=cfg.api.port,
        log_level="warning",
        server_header=False,
        h11_max_incomplete_event_size=64 * 1024,
    )


@app.command()
def mcp() -> None:
    """Serve ``ask`` and ``search`` to other agents over MCP (stdio)."""
    from vidscope.mcp_server import main

    main(settings())

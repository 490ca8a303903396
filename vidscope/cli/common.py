"""The ``vidscope`` Typer app, its global options and what every command module shares.

Command modules (``ingest``, ``library``, ``ask``, …) import from here and from the lower layers,
never from each other; :mod:`vidscope.cli` imports them all so their commands register on
:data:`app`. Only ``typer``, ``rich`` and the settings are imported at module level: ``vidscope
--help`` must stay quick, so each command imports the store, the flows and the models it needs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from vidscope.core.settings import Settings, disable_telemetry

if TYPE_CHECKING:
    from vidscope.storage import Store
    from vidscope.storage.videos import VideoRecord

app = typer.Typer(
    name="vidscope",
    help="Ask questions about, search and compare your own videos.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
console = Console()
errors = Console(stderr=True)

#: Settings given on the command line (``--data-dir``); they win over the file and the environment.
#: The process keeps them between invocations, so tests that run the app twice clear them.
overrides: dict[str, Any] = {}

#: The colour of each stage or report status, in every table that shows one.
STATUS_STYLE = {
    "done": "green",
    "cached": "green",
    "skipped": "dim",
    "failed": "red",
    "blocked": "red",
    "unavailable": "yellow",
    "running": "cyan",
    "ok": "green",
    "duplicate": "dim",
    "warning": "yellow",
}


@app.callback()
def main(
    data_dir: Annotated[
        Path | None,
        typer.Option("--data-dir", help="Where the store lives (default ./vidscope-data)."),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="A vidscope.toml to read (default ./vidscope.toml)."),
    ] = None,
) -> None:
    """Global options."""
    disable_telemetry()
    if config is not None:
        if not config.exists():
            errors.print(f"[red]config file not found:[/red] {config}")
            raise typer.Exit(2)
        os.environ["VIDSCOPE_CONFIG"] = str(config)
    if data_dir is not None:
        overrides["data_dir"] = data_dir


def settings() -> Settings:
    """The settings for this invocation (file + environment + command-line overrides)."""
    from pydantic import ValidationError

    try:
        return Settings(**overrides)
    except ValidationError as exc:
        errors.print(f"[red]invalid configuration:[/red] {exc}")
        raise typer.Exit(2) from exc


def store() -> Store:
    """The store of this invocation's settings (opened once per process)."""
    from vidscope.models.open_store import open_store

    return open_store(settings())


def find(ref: str) -> tuple[Store, VideoRecord]:
    """The store and the video ``ref`` names (id prefix, path or file name); exit 1 if none."""
    from vidscope.storage.videos import VideoNotFound, find_video

    opened = store()
    try:
        return opened, find_video(opened, ref)
    except VideoNotFound as exc:
        errors.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from exc


def quiet_prefect() -> None:
    """Keep Prefect's per-task log lines out of the terminal; the progress bars say it better."""
    import logging

    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    for name in ("prefect", "prefect.flow_runs", "prefect.task_runs"):
        logging.getLogger(name).setLevel(logging.WARNING)


def timestamp(seconds: float) -> str:
    """``m:ss.s`` (or ``h:mm:ss.s``) for a time into a video, as the tables show it."""
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(int(minutes), 60)
    return f"{hours}:{minutes:02d}:{secs:04.1f}" if hours else f"{minutes}:{secs:04.1f}"


def registered_command(name: str) -> Callable[..., Any]:
    """The function behind the command ``name`` of :data:`app`.

    ``vidscope demo`` strings other commands together; looking them up here keeps the command
    modules independent of each other (each imports only this module).
    """
    for info in app.registered_commands:
        callback = info.callback
        if callback is not None and (info.name or callback.__name__.replace("_", "-")) == name:
            return callback
    raise LookupError(f"no command {name!r} is registered")

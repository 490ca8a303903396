"""The ``vidscope`` Typer app, its global options and what every command module shares.

Command modules (``ingest``, ``library``, ``ask``, …) import from here and from the lower layers,
never from each other; their commands register on :data:`app` when they are imported, which
:class:`LazyCommands` does for the command that runs (:data:`COMMAND_MODULES`). Only ``typer`` and
the settings are imported at module level, Rich with the first console printed to: ``vidscope
--help`` must stay quick, so each command imports the store, the flows and the models it needs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from vidscope.agents import strategies
from vidscope.agents.strategies import Scope
from vidscope.core.settings import Settings, disable_telemetry
from vidscope.core.wording import plural  # noqa: F401  (the commands import it from here)

if TYPE_CHECKING:
    from vidscope.storage import Store
    from vidscope.storage.videos import VideoRecord

#: Characters never sent to the terminal as they are: C0 and C1 controls (ESC starts a terminal
#: escape sequence that can recolour, retitle or rewrite the screen) and DEL, plus the Unicode
#: bidirectional overrides, which can make a file name read as another. Newline and tab stay.
_HIDDEN = {
    code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    for code in (
        *(c for c in range(0x20) if c not in (0x09, 0x0A)),
        *range(0x7F, 0xA0),
        *range(0x202A, 0x202F),
        *range(0x2066, 0x206A),
    )
}


def visible(text: object) -> str:
    """``text`` with every control character written out (``\\x1b``), safe to print raw."""
    return str(text).translate(_HIDDEN)


def safe(text: object) -> str:
    """``text`` (from a video, a file, a model or the user) ready to go inside Rich markup: its
    control characters made visible and its square brackets escaped, so ``[/x]`` prints as is.

    Every command interpolating such text into a Rich string or table cell passes it through here.
    """
    from rich.markup import escape

    return escape(visible(text))


#: Every command and command group of :data:`app`, in the order ``vidscope --help`` lists them,
#: with the module of :mod:`vidscope.cli` whose import registers it. A command's module is imported
#: when the command runs: a question does not pay for the ingestion, eval and training commands'
#: imports (issue 44: a cold ``ask`` near the import floor). Help and completion import them all.
COMMAND_MODULES: dict[str, str] = {
    "ingest": "ingest",
    "videos": "library",
    "status": "library",
    "show": "library",
    "remove": "library",
    "sql": "library",
    "ask": "ask",
    "compare": "compare",
    "skills": "compare",
    "usage": "models",
    "demo": "demo",
    "api": "api",
    "mcp": "api",
    "graph": "graph",
    "search": "search",
    "summarize": "summarize",
    "digest": "digest",
    "eval": "evaluate",
    "export": "bundle",
    "import": "bundle",
    "models": "models",
    "server": "server",
    "train": "train",
}


def load_commands(*names: str) -> None:
    """Import the modules registering the commands ``names`` on :data:`app` (every command's when
    none is named); a name no module registers is left for the parser to refuse."""
    import importlib

    wanted = names or tuple(COMMAND_MODULES)
    for module in dict.fromkeys(COMMAND_MODULES[name] for name in wanted if name in COMMAND_MODULES):
        importlib.import_module(f"vidscope.cli.{module}")


class LazyCommands(typer.core.TyperGroup):
    """The top-level command group, whose commands are registered as their modules are imported:
    a command's module is imported when it is looked up (:data:`COMMAND_MODULES`), and listing the
    commands (``--help``, completion, a mistyped name's suggestions) imports them all."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:  # noqa: D102 (click's own signature)
        if cmd_name not in self.commands:
            if cmd_name in COMMAND_MODULES:
                load_commands(cmd_name)
            else:
                load_commands()
            self._register_loaded()
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: Any) -> list[str]:  # noqa: D102 (click's own signature)
        load_commands()
        self._register_loaded()
        order = list(COMMAND_MODULES)
        return sorted(self.commands, key=lambda name: order.index(name) if name in order else len(order))

    def _register_loaded(self) -> None:
        """Add the commands registered on :data:`app` since this group was built."""
        import typer.main

        for name, command in typer.main.get_group(app).commands.items():
            self.commands.setdefault(name, command)


app = typer.Typer(
    name="vidscope",
    cls=LazyCommands,
    help="Ask questions about, search and compare your own videos.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
if TYPE_CHECKING:
    from vidscope.cli.console import SafeConsole

    #: Where commands print (:class:`~vidscope.cli.console.SafeConsole`), made on first use.
    console: SafeConsole
    #: Where commands print their error lines (standard error), made on first use.
    errors: SafeConsole


def __getattr__(name: str) -> Any:
    """``console`` and ``errors``, made (and Rich imported) when first asked for: a question
    answered with ``--json`` prints without Rich (issue 44: a cold ``ask`` near the import floor)."""
    if name in ("console", "errors"):
        from vidscope.cli.console import SafeConsole

        made = globals()[name] = SafeConsole(stderr=name == "errors")
        return made
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _made(name: str) -> SafeConsole:
    """``console`` or ``errors`` for this module's own functions (a module's ``__getattr__`` does
    not answer the names its own code reads)."""
    made: SafeConsole = globals()[name] if name in globals() else __getattr__(name)
    return made


#: Settings given on the command line (``--data-dir``); they win over the file and the environment.
#: The process keeps them between invocations, so tests that run the app twice clear them.
overrides: dict[str, Any] = {}
#: ``--verbose``: library log lines and progress bars reach the terminal too.
output = {"verbose": False}

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
    "partial": "yellow",
    "interrupted": "yellow",
    "new": "green",
    "updated": "green",
    "up to date": "dim",
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
    verbose: Annotated[
        bool,
        typer.Option("--verbose", "-v", help="Show library log lines and tracebacks on the terminal too."),
    ] = False,
) -> None:
    """Global options."""
    disable_telemetry()
    output["verbose"] = verbose
    if not verbose:
        # Read by huggingface_hub and transformers when they are imported: no "Loading weights" bars.
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if config is not None:
        if not config.exists():
            _made("errors").print(f"[red]config file not found:[/red] {safe(config)}")
            raise typer.Exit(2)
        os.environ["VIDSCOPE_CONFIG"] = str(config)
    if data_dir is not None:
        overrides["data_dir"] = data_dir


def settings() -> Settings:
    """The settings for this invocation (file + environment + command-line overrides)."""
    from pydantic import ValidationError

    from vidscope.core.errors import invalid_fields

    try:
        return Settings(**overrides)
    except ValidationError as exc:
        message = f"[red]invalid configuration:[/red] {safe(invalid_fields(exc))}"
        _made("errors").print(message, soft_wrap=True)
        raise typer.Exit(2) from exc


def store() -> Store:
    """The store of this invocation's settings (opened once per process)."""
    from vidscope.models.open_store import open_store

    return open_store(settings())


def find(ref: str, as_json: bool = False) -> tuple[Store, VideoRecord]:
    """The store and the video ``ref`` names (id prefix, path or file name); exit 1 if none (with
    ``as_json``, after a JSON error object, see :func:`refuse`)."""
    from vidscope.storage.videos import VideoNotFound, find_video

    opened = store()
    try:
        return opened, find_video(opened, ref)
    except VideoNotFound as exc:
        refuse(exc, 1, as_json)


def refuse(
    exc: BaseException, code: int, as_json: bool, *, style: str = "red", reason: str | None = None
) -> NoReturn:
    """Refuse what was asked (an unknown video, a bad picture, nothing to search yet) and exit
    with ``code``: one line on stderr, or for ``--json`` one JSON object on stdout shaped as
    :func:`report_failure`'s (``error``, ``type``; no ``log``: nothing went to it), so a script
    reading the output gets JSON whatever happens. ``reason`` words it instead of ``exc``."""
    import json

    line = " ".join((str(exc) if reason is None else reason).split()) or type(exc).__name__
    if as_json:
        print(json.dumps({"error": line, "type": type(exc).__name__}))
    else:
        _made("errors").print(f"[{style}]{safe(line)}[/{style}]", soft_wrap=True)
    raise typer.Exit(code) from exc


def log_file() -> Path:
    """Where this invocation's full tracebacks and library messages go: ``<data_dir>/logs``."""
    from vidscope.storage.files import managed_dir

    return managed_dir(settings().data_dir, "logs") / "vidscope.log"


def query_runs_in_prefect() -> bool:
    """Whether a query (ask, search, compare) will be a Prefect flow run: a server is running.

    Without one the query is answered in-process (:func:`vidscope.flows.runs.run_query`) and
    Prefect, ~1 s to import, is left alone by :func:`quiet_prefect`.
    """
    from vidscope.flows.prefect_api import reachable_api

    return reachable_api(settings()) is not None


def quiet_prefect(with_prefect: bool = True) -> Path:
    """Send library logging to :func:`log_file` instead of the terminal; returns the file.

    Prefect prints every failed task's traceback, RapidOCR its INFO lines and Prefect's events
    worker "Still processing items" to stderr; the user needs one line per problem, which the
    commands print themselves. The records still go to the file (and Prefect's own handler still
    sends run logs, tracebacks included, to the Prefect UI). With ``--verbose`` the terminal
    gets them as well. ``with_prefect=False`` is for a command that will not run Prefect (a question
    answered without a server): Prefect, ~1 s to import, is then left alone.
    """

    path = log_file()
    handler = _file_handler(path)
    if with_prefect:
        import prefect.main  # noqa: F401  (prefect sets its logging up here, once; ours must come after)
        from prefect.logging.handlers import PrefectConsoleHandler

        for name in ("prefect", "prefect.flow_runs", "prefect.task_runs"):
            logging.getLogger(name).setLevel(logging.INFO if output["verbose"] else logging.WARNING)
        names = list(logging.root.manager.loggerDict)
        for logger in [logging.getLogger(), *(logging.getLogger(n) for n in names)]:
            for console_handler in [h for h in logger.handlers if isinstance(h, PrefectConsoleHandler)]:
                if not output["verbose"]:
                    logger.removeHandler(console_handler)
                if handler not in logger.handlers:
                    logger.addHandler(handler)
    elif handler not in logging.getLogger().handlers:
        logging.getLogger().addHandler(handler)
    # vidscope's own loggers (stage tracebacks) propagate to the root logger, hence to the file.
    logging.getLogger("vidscope").setLevel(logging.INFO)
    # RapidOCR gives its logger a coloured console handler at import unless it has one already.
    rapidocr = logging.getLogger("RapidOCR")
    if not output["verbose"]:
        for extra in [h for h in rapidocr.handlers if h is not handler]:
            rapidocr.removeHandler(extra)
        rapidocr.propagate = False
    if handler not in rapidocr.handlers:
        rapidocr.addHandler(handler)
    return path


class LogFile(logging.FileHandler):
    """The log file's handler: a file that cannot be written (a full disk, a quota, a file size
    limit) is said once, in one line, and then left alone.

    Python's own handler prints a "--- Logging error ---" traceback on stderr for every record it
    fails to write: three of them on a full disk, around the one line the command printed.
    """

    def __init__(self, path: Path) -> None:
        super().__init__(path, encoding="utf-8", delay=True)
        self.failed = False

    def emit(self, record: logging.LogRecord) -> None:  # noqa: D102 (logging's own signature)
        if not self.failed:  # after a failure, emitting would reopen the file (delay=True)
            super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802, D102 (logging's own)
        if self.failed:
            return
        self.failed = True
        problem = sys.exc_info()[1]
        reason = problem.strerror if isinstance(problem, OSError) and problem.strerror else str(problem)
        stream, self.stream = self.stream, None
        with contextlib.suppress(Exception):  # closing flushes what could not be written: fails again
            if stream is not None:
                stream.close()
        _made("errors").print(
            f"[yellow]cannot write the log file {safe(self.baseFilename)} ({safe(reason)}): "
            "this run's details are not kept[/yellow]",
            soft_wrap=True,
        )


_handlers: dict[Path, Any] = {}


def _file_handler(path: Path) -> Any:
    """One appending handler per log file for the whole process (commands may run twice in tests)."""
    if path not in _handlers:
        handler = LogFile(path)
        handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"))
        handler.setLevel(logging.DEBUG)
        _handlers[path] = handler
    return _handlers[path]


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
    load_commands(name)
    for info in app.registered_commands:
        callback = info.callback
        if callback is not None and (info.name or callback.__name__.replace("_", "-")) == name:
            return callback
    raise LookupError(f"no command {name!r} is registered")


def report_failure(
    command: str, exc: BaseException, log: Path, as_json: bool, kind: str | None = None
) -> None:
    """A command failed: its traceback to the log file, one line (or a JSON object) to the user.

    The line names the log file, so the details are one step away. ``kind`` names the error when
    its type is not the exception's own (a failure reported by a running API).
    """
    import json

    from vidscope.core.errors import VidscopeError

    logging.getLogger(f"vidscope.cli.{command}").error("%s failed", command, exc_info=exc)
    if (kind is not None or isinstance(exc, (VidscopeError, LookupError, ValueError, OSError))) and str(exc):
        reason = str(exc).strip().splitlines()[0]
    else:  # e.g. a connection error from an HTTP client: its type says what went wrong
        reason = f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
    if as_json:
        print(json.dumps({"error": reason, "type": kind or type(exc).__name__, "log": str(log)}))
    else:
        _made("errors").print(
            f"[red]{command} failed:[/red] {safe(reason)} [dim](details: {safe(log)})[/dim]", soft_wrap=True
        )


def strategy_choice(scope: Scope | None) -> Callable[[str | None], str | None]:
    """A ``--agent`` callback: the name given (any case) when it is a strategy of ``scope`` (any
    strategy without one), else a usage error listing them; read from the registry when the
    command runs, so a strategy registered since is a valid choice."""

    def check(value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return strategies.get(value.lower(), scope).name
        except ValueError as exc:  # "unknown agent 'x'; choose one of: …"
            raise typer.BadParameter(str(exc)) from None

    return check

"""The ``vidscope`` command line (typer + rich); :data:`app` is the console script's entry point.

Each command group lives in its own module and registers its commands on the app of
:mod:`vidscope.cli.common` when imported. The app imports a command's module when that command
runs, and every module when the commands are listed (:data:`~vidscope.cli.common.COMMAND_MODULES`);
:func:`~vidscope.cli.common.load_commands` imports them all for code that walks the whole tree.

A command does not look for pydantic plugins: every pydantic model built (the settings' are built
as their module is imported) would otherwise have pydantic read the entry points of every
installed distribution once per process, ~24 ms of a cold ``ask`` (issue 44). This is pydantic's
own switch, set in the process that imports this package (the CLI, and what it starts) and only
when the environment does not say otherwise: ``PYDANTIC_DISABLE_PLUGINS=""`` turns plugins back on.
"""

import os

os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from vidscope.cli.common import app, load_commands  # noqa: E402  (after the switch above)

__all__ = ["app", "load_commands"]

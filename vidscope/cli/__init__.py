"""The ``vidscope`` command line (typer + rich); :data:`app` is the console script's entry point.

Each command group lives in its own module and registers its commands on the app of
:mod:`vidscope.cli.common` when imported. The app imports a command's module when that command
runs, and every module when the commands are listed (:data:`~vidscope.cli.common.COMMAND_MODULES`);
:func:`~vidscope.cli.common.load_commands` imports them all for code that walks the whole tree.
"""

from vidscope.cli.common import app, load_commands

__all__ = ["app", "load_commands"]

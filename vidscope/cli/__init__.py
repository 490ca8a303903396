"""The ``vidscope`` command line (typer + rich); :data:`app` is the console script's entry point.

Each command group lives in its own module and registers its commands on the app of
:mod:`vidscope.cli.common` when imported; importing them all is what this package does.
"""

# Imported for their commands, in the order ``vidscope --help`` lists them.
from vidscope.cli import ingest, library, ask, compare, models, demo, api, graph, search, server  # noqa: F401, I001
from vidscope.cli import summarize, digest, evaluate, bundle, train  # noqa: F401, I001
from vidscope.cli.common import app

__all__ = ["app"]

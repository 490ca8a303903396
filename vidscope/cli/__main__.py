"""``python -m vidscope.cli``: the same commands as the ``vidscope`` console script."""

from vidscope.cli import app

app()

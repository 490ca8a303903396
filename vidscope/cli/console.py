"""The Rich console every command prints through (see :data:`vidscope.cli.common.console`)."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from vidscope.cli.common import visible


class SafeConsole(Console):
    """A Rich console that shows a string it cannot parse as plain text instead of crashing, and
    never sends a control character from text to the terminal.

    The backstop behind :func:`safe`: a text a command forgot to pass through it still prints
    (with its brackets shown literally) rather than ending the command with a traceback.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Rich fixes the width from COLUMNS as it was when the console was made (at import); the
        # width follows the terminal (and COLUMNS) as it is when a command prints instead.
        if kwargs.get("width") is None:
            self._width = None

    def render_str(self, text: str, **kwargs: Any) -> Any:  # noqa: D102 (Rich's own signature)
        from rich.errors import MarkupError

        text = visible(text)
        try:
            return super().render_str(text, **kwargs)
        except MarkupError:
            return super().render_str(text, **{**kwargs, "markup": False})

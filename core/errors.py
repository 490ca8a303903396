"""Expected failures: errors the user can act on, reported as one line instead of a traceback.

Everything here derives from :class:`VidscopeError`. The model errors also stay ``RuntimeError``
subclasses, so code written before this module existed (``except RuntimeError``) still catches them.
"""

from __future__ import annotations


class VidscopeError(Exception):
    """An expected failure with a one-line message for the user."""


class BackendUnavailable(VidscopeError, RuntimeError):
    """A model role could not be loaded. The message names the model, what was tried and the fix."""

    def __init__(self, role: str, model: str, tried: str, fix: str) -> None:
        self.role, self.model, self.tried, self.fix = role, model, tried, fix
        super().__init__(f"{role}: cannot load '{model}' (tried {tried}). {fix}")


class ModelOutputError(VidscopeError, RuntimeError):
    """A model answered, but not in a form that could be used (after one corrective re-ask)."""


class ContextLengthExceeded(ModelOutputError):
    """The request did not fit the model's context window (e.g. HTTP 400 naming the context length).

    Raised by chat backends; the agent runtime answers it by trimming the oldest observations and
    retrying, then by forcing an answer, so a question never crashes on a long conversation.
    """

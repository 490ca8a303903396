"""Expected failures: errors the user can act on, reported as one line instead of a traceback.

Everything here derives from :class:`VidscopeError`. The model errors also stay ``RuntimeError``
subclasses, so code written before this module existed (``except RuntimeError``) still catches them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class VidscopeError(Exception):
    """An expected failure with a one-line message for the user."""


def install_extra(extra: str) -> str:
    """The command that installs the optional dependencies of one backend (an extra of pyproject.toml).

    Every "missing package" message names its extra through this, so the fix reads the same
    everywhere: ``pip install 'vidscope[yolo]'``.
    """
    return f"pip install 'vidscope[{extra}]'"


def invalid_fields(exc: ValidationError, most: int = 3) -> str:
    """A pydantic validation error as one line: ``api.token: [api] token is blank; …``.

    Pydantic's own text is a block per field (the model's name, the value, a documentation link),
    which reads as a crash; the user needs the field and the reason. The value is left out: it may
    be a secret (a token) or megabytes long.
    """
    problems = exc.errors(include_url=False, include_input=False)
    parts = []
    for problem in problems[:most]:
        where = ".".join(str(part) for part in problem["loc"])
        reason = problem["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
        parts.append(f"{where}: {reason}" if where else reason)
    more = len(problems) - most
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


class BackendUnavailable(VidscopeError, RuntimeError):
    """A model role could not be loaded. The message names the model, what was tried and the fix.

    ``brief`` is the short form for the places that report an optional model once per command (an
    ingest's or a search's closing line, the page): what is missing and the one command that fixes
    it, no URL. The full message stays for ``vidscope models`` and the log.
    """

    def __init__(self, role: str, model: str, tried: str, fix: str, brief: str | None = None) -> None:
        self.role, self.model, self.tried, self.fix = role, model, tried, fix
        super().__init__(f"{role}: cannot load '{model}' (tried {tried}). {fix}")
        self.brief = brief or str(self)


class ModelNotDownloaded(BackendUnavailable):
    """A model fetched on first use is not in the cache and its host could not be reached: the
    install works without it (the role is optional until it is pulled), so ``vidscope models``
    says "not downloaded" and exits 0."""


class ModelOutputError(VidscopeError, RuntimeError):
    """A model answered, but not in a form that could be used (after one corrective re-ask)."""


class OutputCutOff(ModelOutputError):
    """A reply was cut off at the output-token limit twice (the second time at double the limit).
    A caller with a limit of its own (not ``[agent] max_tokens``) can say which to raise."""


class ContextLengthExceeded(ModelOutputError):
    """The request did not fit the model's context window (e.g. HTTP 400 naming the context length).

    Raised by chat backends; the agent runtime answers it by trimming the oldest observations and
    retrying, then by forcing an answer, so a question never crashes on a long conversation.
    """


class ContextFull(ContextLengthExceeded):
    """The conversation filled the model's context while it replied (HTTP 200, ``finish_reason:
    "length"`` with prompt plus reply at the context size, as llama.cpp's server does).

    Not an output limit: a larger ``max_tokens`` would not help, only a shorter conversation. A
    subclass of :class:`ContextLengthExceeded`, so code that trims on an overflow handles it too;
    a loop that catches it specifically should trim the oldest observations, then force an answer.
    ``prompt_tokens``, ``completion_tokens`` and ``context_tokens`` say what the server reported
    (``context_tokens`` is ``None`` when the window size is unknown).
    """

    def __init__(
        self,
        message: str,
        *,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        context_tokens: int | None = None,
    ) -> None:
        super().__init__(message)
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.context_tokens = context_tokens


class ImagesNotSupported(VidscopeError, RuntimeError):
    """A model refused images (e.g. llama.cpp's HTTP 500 "image input is not supported", vLLM's 400
    for a text-only model). The backend remembers it for the process, per endpoint and model, and
    raises this again without a request; frame tools then say there is no vision model."""

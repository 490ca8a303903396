"""What a server has taught this process about one model, per endpoint (base URL) and model name.

Servers differ in ways no configuration states up front: an OpenAI o-series model refuses
``max_tokens`` and any ``temperature`` but the default, a llama.cpp build without ``--mmproj``
answers every image with HTTP 500, llama.cpp's context size is only known from ``/props``. The
backend learns each fact from the first refusal (or lookup), keeps it here for the rest of the
process and says so once in the log, so the next call is sent in the accepted form (or not sent)
instead of failing again. Every backend object serving the same endpoint and model (a ``planner``
and a ``chat`` role on one server) shares the facts.

Nothing is persisted: a restarted server may have been reconfigured, and one refused request per
process is cheap.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


@dataclass
class EndpointFacts:
    """What one (endpoint, model) accepts, as learned in this process."""

    #: The server's refusal when it would not take images (``None``: none seen).
    images_refused: str | None = None
    #: Body parameters the server refused (sampling ones such as ``temperature``, ``top_p``).
    refused_params: set[str] = field(default_factory=set)
    #: The output-limit parameter's name the server asked for instead of the configured one.
    max_tokens_param: str | None = None
    #: The context window in tokens (``/props`` n_ctx, ``/models`` max_model_len); ``0``: looked
    #: up and not found, ``None``: not looked up yet.
    context_tokens: int | None = None
    #: The server's refusal of a streamed request (``None``: none seen): replies are read whole.
    stream_refused: str | None = None
    #: Keys of the log lines already written (each fact is said once).
    said: set[str] = field(default_factory=set)


_facts: dict[tuple[str, str], EndpointFacts] = {}
_lock = threading.Lock()


def facts(base_url: str, model: str) -> EndpointFacts:
    """The shared facts of ``model`` at ``base_url`` (created empty on first use)."""
    key = (base_url.rstrip("/"), model)
    with _lock:
        found = _facts.get(key)
        if found is None:
            found = _facts[key] = EndpointFacts()
        return found


def say_once(found: EndpointFacts, key: str, message: str, *args: object) -> None:
    """Log ``message`` as a warning the first time ``key`` is said for these facts."""
    with _lock:
        if key in found.said:
            return
        found.said.add(key)
    log.warning(message, *args)


def forget_all() -> None:
    """Forget every learned fact (tests; after reconfiguring a server in-process)."""
    with _lock:
        _facts.clear()

"""What the API holds between requests, and the dependencies that hand it to the routes.

:func:`~vidscope.api.app.create_app` builds one :class:`ApiState` per app and keeps it on
``app.state``; a route asks for it with a :data:`State` parameter, and every guarded router
depends on :func:`require_token`. Neither adds a parameter to the OpenAPI schema.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, FastAPI, Request

from vidscope.api.jobs import IngestJobs
from vidscope.api.models import AskResponse
from vidscope.api.security import TokenAuth, VideoRoots, is_loopback
from vidscope.core.settings import Settings

if TYPE_CHECKING:
    from vidscope.library import Library
    from vidscope.storage import Store


class TraceStore:
    """The last ``keep`` answers by query id, so a trace can be fetched after the answer."""

    def __init__(self, keep: int = 256) -> None:
        self.keep = keep
        self._items: OrderedDict[str, AskResponse] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, item: AskResponse) -> None:
        """Remember ``item`` under its query id, forgetting the oldest beyond ``keep``."""
        with self._lock:
            self._items[item.query_id] = item
            while len(self._items) > self.keep:
                self._items.popitem(last=False)

    def get(self, query_id: str) -> AskResponse | None:
        """The answer to ``query_id``, if it is still remembered."""
        with self._lock:
            return self._items.get(query_id)


class QuestionSlots:
    """How many questions the API answers at once (``[api] max_questions``).

    A question holds a thread and makes model calls for as long as it runs; past the limit a
    request is refused at once (429) instead of piling up threads nobody bounds.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._free = threading.BoundedSemaphore(limit)

    def take(self) -> bool:
        """Take a slot if one is free (never waits)."""
        return self._free.acquire(blocking=False)

    def give_back(self) -> None:
        """Free the slot a finished (or abandoned) question held."""
        self._free.release()


def ingested_folders(settings: Settings) -> list[Path]:
    """The folders holding the videos ingested into the store of ``settings``."""
    from vidscope.models.open_store import open_store

    store = open_store(settings)
    paths = store.rows(store.videos, columns=["path"]).column("path").to_pylist()
    return sorted({Path(p).parent for p in paths})


def video_roots(settings: Settings) -> VideoRoots:
    """The folders this API may read videos from: ``[api] video_roots`` when set; unset, on a
    loopback host, the folders of the ingested videos (whoever can reach a loopback API without a
    token is on this machine, where those files were ingested from); elsewhere, none."""
    configured = settings.api.video_roots
    if configured is None and is_loopback(settings.api.host):
        return VideoRoots([], ingested=lambda: ingested_folders(settings))
    return VideoRoots(configured or [])


@dataclass
class ApiState:
    """The settings of one app and what it builds from them once: auth, roots, jobs, traces."""

    settings: Settings
    auth: TokenAuth
    roots: VideoRoots
    jobs: IngestJobs
    questions: QuestionSlots
    traces: TraceStore = field(default_factory=TraceStore)

    @classmethod
    def from_settings(cls, settings: Settings) -> ApiState:
        """The state of an app serving the store and the ``[api]`` section of ``settings``."""
        return cls(
            settings=settings,
            auth=TokenAuth(settings.api.token, settings.api.allowed_hosts),
            roots=video_roots(settings),
            jobs=IngestJobs(settings),
            questions=QuestionSlots(settings.api.max_questions),
        )

    def store(self) -> Store:
        """The store the settings configure (opened once per process, then shared)."""
        from vidscope.models.open_store import open_store

        return open_store(self.settings)

    def library(self) -> Library:
        """The Python API over this app's settings: every route's command goes through it (one
        implementation of each command for the CLI, this API and MCP)."""
        from vidscope.library import Library

        return Library(settings=self.settings)

    def warm(self) -> None:
        """Open the store, load the text embedder and the query code once, so that the first
        question is as quick as the next (the registry and ``open_store`` keep them per process).
        A failure is only logged: the request that needs the piece reports it properly."""
        try:
            # The query code and its flows, Prefect included: a running server makes each query a
            # flow run (the flows are built on first use).
            from vidscope.flows import ask, compare, search

            for query in (ask.ASK, ask.ASK_LIBRARY, compare.COMPARE, search.SEARCH, search.SEARCH_MOMENTS):
                query.flow()
            from vidscope.models import registry

            store = self.store()
            store.count(store.videos)  # reads go through the lance package: loads it
            store.fts_columns(store.clips)  # opens the clips dataset and its index list
            embedder = registry.text_embedder(self.settings)
            if embedder is not None:
                embedder.embed(["warm-up"])
        except Exception:  # noqa: BLE001 - warming is an optimisation, never an error
            logging.getLogger(__name__).warning("warming the models and the store failed", exc_info=True)

    def warm_in_background(self) -> threading.Thread:
        """:meth:`warm` in a daemon thread, so the app answers (health, the page) meanwhile."""
        thread = threading.Thread(target=self.warm, name="vidscope-warm", daemon=True)
        thread.start()
        return thread


def app_state(app: FastAPI) -> ApiState:
    """The :class:`ApiState` that :func:`~vidscope.api.app.create_app` put on ``app``."""
    state: ApiState = app.state.vidscope
    return state


def request_state(request: Request) -> ApiState:
    """The dependency behind :data:`State`: the state of the app serving ``request``."""
    return app_state(request.app)


def require_token(request: Request) -> None:
    """The guarded routers' dependency: the app's :class:`~vidscope.api.security.TokenAuth`."""
    request_state(request).auth(request)


#: A route parameter that receives the app's :class:`ApiState`.
State = Annotated[ApiState, Depends(request_state)]

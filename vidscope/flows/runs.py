"""What every flow run shares: publishing artifacts to the Prefect UI, the context of a query, each
query's flow (:class:`QueryFlow`, declared beside its work) and :func:`run_query`, which runs a query
as a flow run when a Prefect server records it and in-process otherwise.

Without Prefect, :func:`retried` stands in for a task's retries. Artifacts are a courtesy to
whoever watches the UI: failing to publish one is logged and never fails the run; outside any run
(a query answered without a Prefect server) nothing is published. A query
run (``ask``, ``search``) skips Prefect's per-run heartbeat thread — a sync flow joins it at exit,
~1.1 s a question should not pay — and tags its model calls with a query id.
"""

from __future__ import annotations

import logging
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from vidscope.core.settings import Settings

R = TypeVar("R")

log = logging.getLogger(__name__)


def retried(work: Callable[[], R], retries: int, delay_s: float = 1.0) -> R:
    """``work()``, tried again up to ``retries`` times ``delay_s`` apart when it raises (its last
    error re-raised): what a Prefect task's ``retries`` and ``retry_delay_seconds`` do, for the
    steps that run in-process when no Prefect server records them (ingestion's stages, eval's
    questions)."""
    import tenacity

    for attempt in tenacity.Retrying(
        stop=tenacity.stop_after_attempt(retries + 1), wait=tenacity.wait_fixed(delay_s), reraise=True
    ):
        with attempt:
            return work()
    raise AssertionError("unreachable")  # tenacity returns or re-raises


def publish_table(key: str, table: list[dict[str, Any]], description: str) -> None:
    """A table artifact of the current flow run (logged, not raised, when it cannot be made)."""
    if not _in_run():
        return
    try:
        from prefect.artifacts import create_table_artifact

        create_table_artifact(key=key, table=table, description=description)
    except Exception as exc:  # an artifact is a courtesy; never fail the run over it
        log.debug("could not publish the %s artifact: %s", key, exc)


def publish_markdown(key: str, markdown: str, description: str) -> None:
    """A Markdown artifact of the current flow run (logged, not raised, when it cannot be made)."""
    if not _in_run():
        return
    try:
        from prefect.artifacts import create_markdown_artifact

        create_markdown_artifact(key=key, markdown=markdown, description=description)
    except Exception as exc:  # an artifact is a courtesy; never fail the run over it
        log.debug("could not publish the %s artifact: %s", key, exc)


def _in_run() -> bool:
    """Whether a flow or task run is current: without one there is nothing to attach an artifact
    to (a query answered without Prefect), and Prefect is not imported to learn that."""
    context = sys.modules.get("prefect.context")
    return context is not None and bool(context.FlowRunContext.get() or context.TaskRunContext.get())


#: The Prefect settings of a query run, per (settings they were derived from, API URL): deriving
#: them re-validates every Prefect setting (~20 ms), which a long-lived process (``vidscope api``)
#: would otherwise pay on every question. Each entry keeps its base so an identity check is safe.
_query_settings: dict[tuple[int, str | None], tuple[Any, Any]] = {}


@contextmanager
def query_run(kind: str, api_url: str | None = None) -> Iterator[str]:
    """The context a query flow runs in: no heartbeat thread, model calls tagged ``<kind>-<id>``,
    and, given ``api_url``, the Prefect API the run reports to."""
    import prefect.context
    from prefect.settings import PREFECT_API_URL, PREFECT_FLOWS_HEARTBEAT_FREQUENCY

    from vidscope.models.usage import query_context

    query_id = f"{kind}-{uuid.uuid4().hex[:12]}"
    current = prefect.context.get_settings_context()
    key = (id(current.settings), api_url)
    cached = _query_settings.get(key)
    if cached is None or cached[0] is not current.settings:
        updates: dict[Any, Any] = {PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}
        if api_url:
            updates[PREFECT_API_URL] = api_url
        if len(_query_settings) >= 16:  # settings contexts come and go in tests; bound the cache
            _query_settings.clear()
        cached = _query_settings[key] = (current.settings, current.settings.copy_with_update(updates=updates))
    # What prefect.settings.temporary_settings does, with the derived settings reused.
    with (
        prefect.context.SettingsContext(profile=current.profile, settings=cached[1]),
        query_context(query_id),
    ):
        yield query_id


@contextmanager
def direct_query(kind: str) -> Iterator[str]:
    """The context of a query answered without Prefect: model calls tagged ``<kind>-<id>``."""
    from vidscope.models.usage import query_context

    query_id = f"{kind}-{uuid.uuid4().hex[:12]}"
    with query_context(query_id):
        yield query_id


@dataclass(frozen=True)
class QueryFlow(Generic[R]):
    """A query's Prefect flow, declared in the module of its work and built on first use.

    The flow runs ``work`` itself (same parameters, same result) under the name ``name``, its runs
    named by ``run_name``. ``attribute`` is the name its module hands it out under (the module's
    ``__getattr__``, :func:`module_flow`), which a deployment's entry point names
    (``vidscope.flows.ask.ask``); building it imports Prefect, so a module declaring one does not.
    """

    work: Callable[..., R]
    name: str
    run_name: str
    attribute: str

    def flow(self) -> Any:
        """The Prefect flow (built once per process)."""
        return _build(self)


@cache
def _build(query: QueryFlow[Any]) -> Any:
    flow = _prefect_flow_decorator()
    built = flow(name=query.name, flow_run_name=query.run_name, validate_parameters=False, log_prints=False)(
        query.work
    )
    # A module-path deployment's entry point is "<flow.__module__>.<flow.__name__>", which must name
    # the attribute handing this flow out, not the work function (a plain function, not a flow).
    built.__name__ = query.attribute
    return built


def _prefect_flow_decorator() -> Any:
    """``prefect.flow``, imported without undoing the process's logging: Prefect configures
    logging when it is first imported (``dictConfig``, which replaces the root logger's handlers).
    A process that set its own up before (the CLI's log file, a test's log capture, an API's
    server) keeps its handlers, and Prefect's console handler is not added beside them."""
    import logging

    root = logging.getLogger()
    kept = list(root.handlers)
    from prefect import flow

    if kept:
        for handler in list(root.handlers):
            if handler not in kept:
                root.removeHandler(handler)
        for handler in kept:
            if handler not in root.handlers:
                root.addHandler(handler)
    return flow


def module_flow(module: str, attribute: str, flows: tuple[QueryFlow[Any], ...]) -> Any:
    """The flow of ``flows`` handed out as ``module.attribute`` (a module's ``__getattr__``);
    ``AttributeError`` for any other name, as a missing attribute gives."""
    for query in flows:
        if query.attribute == attribute:
            return query.flow()
    raise AttributeError(f"module {module!r} has no attribute {attribute!r}")


def run_query(kind: str, settings: Settings, query: QueryFlow[R], *args: Any) -> R:
    """Run a query (``ask``, ``search``, ``compare``) the way the moment allows, and return its result.

    When a Prefect server answers (:func:`~vidscope.flows.prefect_api.reachable_api`) or a flow run
    is current (the query is a subflow), ``query``'s flow runs with ``args``, so the UI shows the
    run, its tool calls and its artifact. Otherwise its work runs in-process with the same ``args``:
    Prefect is not imported and no temporary API server starts (7+ s, and everything it recorded
    would be thrown away with it). Either way the same function does the work.
    """
    from vidscope.agents.tools import in_flow_run
    from vidscope.flows.prefect_api import reachable_api

    api = reachable_api(settings)
    if api is None and not in_flow_run():
        with direct_query(kind):
            return query.work(*args)
    flow: Callable[..., R] = query.flow()
    with query_run(kind, api):
        return flow(*args)

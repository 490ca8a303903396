"""What every flow run shares: publishing artifacts to the Prefect UI, and the context of a query.

Artifacts are a courtesy to whoever watches the UI: failing to publish one is logged and never fails
the run. A query run (``ask``, ``search``) skips Prefect's per-run heartbeat thread — a sync flow
joins it at exit, ~1.1 s a question should not pay — and tags its model calls with a query id.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)


def publish_table(key: str, table: list[dict[str, Any]], description: str) -> None:
    """A table artifact of the current flow run (logged, not raised, when it cannot be made)."""
    try:
        from prefect.artifacts import create_table_artifact

        create_table_artifact(key=key, table=table, description=description)
    except Exception as exc:  # an artifact is a courtesy; never fail the run over it
        log.debug("could not publish the %s artifact: %s", key, exc)


def publish_markdown(key: str, markdown: str, description: str) -> None:
    """A Markdown artifact of the current flow run (logged, not raised, when it cannot be made)."""
    try:
        from prefect.artifacts import create_markdown_artifact

        create_markdown_artifact(key=key, markdown=markdown, description=description)
    except Exception as exc:  # an artifact is a courtesy; never fail the run over it
        log.debug("could not publish the %s artifact: %s", key, exc)


@contextmanager
def query_run(kind: str) -> Iterator[str]:
    """The context a query flow runs in: no heartbeat thread, model calls tagged ``<kind>-<id>``."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    from vidscope.models.usage import query_context

    query_id = f"{kind}-{uuid.uuid4().hex[:12]}"
    with temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}), query_context(query_id):
        yield query_id

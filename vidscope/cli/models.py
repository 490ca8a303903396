"""``vidscope models`` (which backend serves each model role, and does it load) and ``vidscope usage``
(model calls, tokens and cost)."""

from __future__ import annotations

from typing import Annotated, cast

import typer
from rich.table import Table

from vidscope.cli.common import app, console, settings, store


@app.command()
def models(
    check: Annotated[
        bool, typer.Option("--check/--no-check", help="Try to load each configured model.")
    ] = True,
) -> None:
    """List each model role, the backend serving it, and whether it loads."""
    from vidscope.core.errors import BackendUnavailable
    from vidscope.models import registry

    cfg = settings()
    table = Table(title=f"models (profile: {cfg.profile})")
    for column in ("role", "backend", "loads", "detail"):
        table.add_column(column, overflow="fold")
    failures = 0
    for role in registry.ROLES:
        spec = getattr(cfg.models, role)
        if not spec:
            table.add_row(role, "[dim]not configured[/dim]", "", _unconfigured_note(role))
            continue
        if not check:
            table.add_row(role, spec, "?", "")
            continue
        try:
            backend = registry.LOADERS[role](cfg)
            load = getattr(backend, "load", None)
            if callable(load):  # some backends load lazily; make the check real
                load()
            dim = getattr(backend, "dim", None)
            detail = f"{dim}-d vectors" if isinstance(dim, int) else getattr(backend, "name", "")
            table.add_row(role, spec, "[green]yes[/green]", detail)
        except (BackendUnavailable, ImportError, ValueError, OSError, RuntimeError) as exc:
            failures += 1
            table.add_row(role, spec, "[red]no[/red]", str(exc))
    console.print(table)
    if failures:
        raise typer.Exit(1)


def _unconfigured_note(role: str) -> str:
    return {
        "captioner": "clips get a labelled summary of their speech and on-screen text",
        "chat": "`ask` answers extractively (no reasoning model)",
        "object_detector": "no object detection during ingestion",
        "image_text": "no image embeddings",
    }.get(role, "")


@app.command()
def usage(
    query: Annotated[str | None, typer.Option("--query", help="Only the calls of this query id.")] = None,
) -> None:
    """Model calls, tokens, images, cache hits and cost, in total or for one query."""
    from vidscope.models.usage import totals

    result = totals(store(), query_id=query)
    table = Table(title="model usage" + (f" for query {query}" if query else ""))
    table.add_column("measure")
    table.add_column("value", justify="right")
    for key, value in result.items():
        if isinstance(value, dict):
            continue
        table.add_row(
            key,
            "—" if value is None else (f"{value:.4f}" if isinstance(value, float) else str(value)),
        )
    console.print(table)
    if query is None:
        _print_ingestion_cost()
    per_model = result.get("by_model") or {}
    if per_model:
        detail = Table(title="per model")
        detail.add_column("model")
        columns = sorted({k for v in per_model.values() for k in v})
        for column in columns:
            detail.add_column(column, justify="right")
        for model, values in per_model.items():
            detail.add_row(model, *[str(values.get(c, "")) for c in columns])
        console.print(detail)


def _print_ingestion_cost() -> None:
    """Model cost of ingestion (calls outside any query) per hour of video ingested."""
    from vidscope.storage.sql import query as run_query

    _, rows = run_query(
        store(),
        """
        SELECT (SELECT coalesce(sum(duration), 0) / 3600 FROM videos) AS hours,
               (SELECT count(*) FROM model_calls WHERE query_id IS NULL) AS calls,
               (SELECT sum(cost_usd) FROM model_calls WHERE query_id IS NULL) AS cost""",
    )
    # DuckDB returns doubles for the sums and an integer count; the cost is NULL when nothing is priced.
    hours, calls, cost = cast(tuple[float, int, float | None], rows[0])
    line = f"ingested: {hours:.2f} h of video, {calls} model calls during ingestion"
    if cost is not None and hours > 0:
        line += f", ${cost:.4f} in total = ${cost / hours:.4f} per ingested hour"
    elif calls:
        line += " (no price table in [models.options.<kind>] prices: cost unknown)"
    console.print(line)

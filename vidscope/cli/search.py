"""``vidscope search``: find the library's videos (MAVIS pipeline) or its moments (clip search)."""

from __future__ import annotations

from datetime import datetime, time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from vidscope.cli.common import (
    app,
    console,
    errors,
    find,
    query_runs_in_prefect,
    quiet_prefect,
    refuse,
    settings,
)
from vidscope.cli.render import render_moments, render_search

if TYPE_CHECKING:
    from vidscope.agents.moments import MomentFilters


@app.command()
def search(
    query: Annotated[
        str | None, typer.Argument(help="What to find, e.g. 'a dog running on the beach'.")
    ] = None,
    image: Annotated[
        Path | None,
        typer.Option(
            "--image",
            help="Find the moments that look like this picture (JPEG, PNG, …; visual search, "
            "implies --moments).",
        ),
    ] = None,
    moments: Annotated[
        bool,
        typer.Option(
            "--moments/--videos",
            help="--videos (default): rank whole videos (MAVIS: planner, dimension agents, veto, "
            "rerank). --moments: rank moments of every video (clips found by meaning and by the "
            "words said or shown), for facts said or shown in one place.",
        ),
    ] = False,
    k: Annotated[
        int | None, typer.Option("--k", min=1, max=1000, help="Videos or moments to return.")
    ] = None,
    fusion: Annotated[
        str | None,
        typer.Option(
            "--fusion", help="How the dimension agents' proposals combine: veto|union|intersection|average."
        ),
    ] = None,
    tau_soft: Annotated[
        float | None, typer.Option("--tau-soft", help="An agent proposes videos scoring at least this.")
    ] = None,
    tau_hard: Annotated[
        float | None, typer.Option("--tau-hard", help="Veto: drop videos some agent scores below this.")
    ] = None,
    videos: Annotated[
        list[str] | None,
        typer.Option("--video", help="--moments: only in this video (id prefix, path or name; repeatable)."),
    ] = None,
    start: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="--moments: only moments ending after this second of the video, or, given as a "
            "clock time (14:30, 14:30:05, 2026-11-28T14:30), whose burned-in clock shows it or later.",
        ),
    ] = None,
    end: Annotated[
        str | None,
        typer.Option(
            "--to",
            help="--moments: only moments starting before this second, or before this clock time.",
        ),
    ] = None,
    since: Annotated[
        datetime | None,
        typer.Option("--since", help="--moments: only videos ingested at or after this date."),
    ] = None,
    until: Annotated[
        datetime | None, typer.Option("--until", help="--moments: only videos ingested before this date.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    show_dropped: Annotated[bool, typer.Option("--dropped", help="Also list the dropped videos.")] = False,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            help="--videos: show how the ranking was made (the MAVIS plan, per-dimension scores, fusion, "
            "pool and rerank) instead of the plain summary.",
        ),
    ] = False,
    show_all: Annotated[
        bool,
        typer.Option(
            "--all",
            help="--moments: also show moments under the relevance bar (\\[search] moment_min_relevance).",
        ),
    ] = False,
) -> None:
    """Search all ingested videos: whole videos (MAVIS, the default), moments (--moments), or
    moments that look like a picture (--image)."""
    from vidscope.agents.mavis.search import LibraryEmpty

    quiet_prefect(with_prefect=query_runs_in_prefect())
    filtered = videos or start is not None or end is not None or since or until
    if (filtered or show_all) and not moments and image is None:
        errors.print(
            "[red]--video, --from, --to, --since, --until and --all are for moments: add --moments[/red]"
        )
        raise typer.Exit(2)
    if image is not None:
        if query:
            errors.print("[red]give a query or --image, not both[/red]")
            raise typer.Exit(2)
        _search_image(image, k or 10, _filters(videos, start, end, since, until, as_json), as_json)
        return
    if not query:
        errors.print("[red]give a query (or --image PICTURE)[/red]")
        raise typer.Exit(2)
    from vidscope.core.errors import BackendUnavailable
    from vidscope.library import Library

    library = Library(settings=settings())
    try:
        if moments:
            found = library.search(
                query,
                moments=True,
                k=k or 10,
                filters=_filters(videos, start, end, since, until, as_json),
                show_all=show_all,
            )
            render_moments(found, console, as_json)
            return
        result = library.search(query, k=k, fusion=fusion, tau_soft=tau_soft, tau_hard=tau_hard)
    except LibraryEmpty as exc:
        refuse(exc, 1, as_json, style="yellow")
    except BackendUnavailable as exc:  # the text embedder cannot be loaded: one line, no traceback
        refuse(exc, 1, as_json)
    except ValueError as exc:
        refuse(exc, 2, as_json)
    render_search(result, console, as_json, show_dropped, explain)


def _filters(
    videos: list[str] | None,
    start: str | None,
    end: str | None,
    since: datetime | None,
    until: datetime | None,
    as_json: bool,
) -> MomentFilters:
    from vidscope.agents.moments import MomentFilters

    ids = [find(ref, as_json)[1].video_id for ref in videos] if videos else None
    low, high = _bound("--from", start, as_json), _bound("--to", end, as_json)
    return MomentFilters(
        videos=ids,
        start=low if isinstance(low, float) else None,
        end=high if isinstance(high, float) else None,
        clock_from=None if isinstance(low, float) else low,
        clock_to=None if isinstance(high, float) else high,
        added_after=since,
        added_before=until,
    )


def _bound(name: str, value: str | None, as_json: bool) -> float | datetime | time | None:
    """``--from``/``--to``: seconds of the video (a number), else a clock time (wall-clock time a
    burned-in clock shows, :func:`vidscope.tasks.clock.parse_bound`); a bad one is one line."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        from vidscope.tasks.clock import parse_bound

        try:
            return parse_bound(value)
        except ValueError as exc:
            refuse(exc, 2, as_json, reason=f"{name}: {exc}")
    if not seconds >= 0:
        refuse(ValueError(value), 2, as_json, reason=f"{name}: seconds must be at least 0, got {value}")
    return seconds


def _search_image(path: Path, k: int, filters: MomentFilters, as_json: bool) -> None:
    """``vidscope search --image``: the moments whose frames look like the picture at ``path``."""
    from vidscope.agents.mavis.search import LibraryEmpty
    from vidscope.flows.search import VisualSearchOff
    from vidscope.library import Library

    try:
        found = Library(settings=settings()).search_image(path, k=k, filters=filters)
    except OSError as exc:
        refuse(exc, 2, as_json, reason=f"cannot read {path}: {exc.strerror or exc}")
    except ValueError as exc:
        refuse(exc, 2, as_json, reason=f"{path}: {exc}")
    except (LibraryEmpty, VisualSearchOff) as exc:
        refuse(exc, 1, as_json, style="yellow")
    render_moments(found, console, as_json)

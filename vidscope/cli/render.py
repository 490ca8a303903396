"""Terminal rendering of the query flows' results: ``ask`` steps and answers, ``search`` hits and moments.

The flows return data (:class:`~vidscope.agents.answers.AskResult`,
:class:`~vidscope.agents.mavis.search.SearchResult`); how it looks in a terminal is decided here. Text
that came from a video or a model is escaped, so brackets in it are never read as Rich markup.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from vidscope.agents import strategies
from vidscope.cli.common import plural, safe

if TYPE_CHECKING:
    from rich.console import Console

    from vidscope.agents.answers import AskResult, Citation, TraceStep
    from vidscope.agents.mavis.search import SearchHit, SearchResult
    from vidscope.agents.moments import MomentSearch


def render_step(step: TraceStep, console: Console) -> None:
    """One live line per agent step (``ask`` passes ``lambda s: render_step(s, console)`` as on_step)."""
    args = ", ".join(
        f"{k}={json.dumps(v, ensure_ascii=False)[:60]}" for k, v in step.arguments.items() if k != "video_id"
    )
    what = f"{step.tool}({args})" if step.tool else step.kind
    if step.phase:
        what = f"[{step.phase}] {what}"
    cached = " [dim](cached)[/dim]" if step.tool_cached or step.model_cache_hit else ""
    mark = "[green]✓[/green]" if step.ok else "[red]✗[/red]"
    console.print(f"{mark} step {step.index}: {safe(what)} → {safe(step.observation[:120])}{cached}")


def citation_flag(citation: Citation) -> str:
    """``verified (perceived: frame_inspect "a red car")`` / ``unverified (echoed: why)``: the check,
    the evidence level and, when verified, the tool call that found something there and what."""
    if citation.verified:
        first = citation.support[0] if citation.support else None
        found = f": {safe(first.tool)} {safe(repr(first.found[:60]))}" if first else ""
        return f"[green]verified[/green] ({citation.evidence}{found})"
    return f"[red]unverified[/red] ({citation.evidence}: {safe(citation.note)})"


def render_answer(
    result: AskResult, console: Console | None, as_json: bool = False, show_trace: bool = False
) -> None:
    """Print ``result``: JSON, or the answer, choice and citations (trace with ``show_trace``).

    The JSON goes through ``console`` (highlighted on a terminal); with none, to a terminal through
    the commands' console and otherwise as plain indented JSON, the same text, without importing
    Rich (a script's ``ask --json``, issue 44)."""
    if as_json:
        data = result.model_dump(mode="json")
        if not show_trace:
            data.pop("trace")
        print_json(data, console)
        return
    from rich.panel import Panel

    if console is None:
        from vidscope.cli import common

        console = common.console
    # The answers' time format, so the terminal and the agent's own citations agree.
    from vidscope.core.timecodes import fmt_time

    title = "extractive answer" if result.extractive else f"answer ({result.model})"
    if result.fallback:
        title = f"extractive answer standing in — the agent reached none ({result.model})"
    if result.agent and result.agent != strategies.default("library" if result.library else "video"):
        known = strategies.STRATEGIES.get(result.agent)  # an API's answer may name another's strategy
        title += f" — {known.title if known else result.agent} agent"
    if result.forced:
        title += " — forced at the step limit"
    console.print(Panel(safe(result.answer), title=safe(title), subtitle=safe(result.file_name)))
    if result.note:
        console.print(f"[yellow]note:[/yellow] {safe(result.note)}")
    if result.choice:
        console.print(f"[bold]Choice:[/bold] {safe(result.choice)}. {safe(result.choice_text or '')}")
    if result.interval:
        i = result.interval
        flag = citation_flag(i)
        console.print(
            f"[bold]When:[/bold] {fmt_time(i.start)}–{fmt_time(i.end)}  ({i.start:.1f}–{i.end:.1f}s)  {flag}"
        )
    for c in result.citations:
        flag = citation_flag(c)
        where = f"{safe(result.files.get(c.video_id, c.video_id[:12]))} " if result.library else ""
        console.print(f"  {where}{fmt_time(c.start)}–{fmt_time(c.end)}  ({c.start:.1f}–{c.end:.1f}s)  {flag}")
    if result.unverified_citations:
        console.print(f"[yellow]{result.unverified_citations} unverified citation(s)[/yellow]")
    if show_trace:
        _render_trace(result, console)
    u = result.usage
    console.print(
        f"[dim]{result.seconds:.2f}s · model calls {u.model_calls} (HTTP {u.model_http_calls}) · "
        f"tokens {u.input_tokens}/{u.output_tokens}{_reused(u.cached_input_tokens)} · tools {u.tool_calls} "
        f"({u.tool_cache_hits} cached)[/dim]"
    )


def print_json(data: object, console: Console | None = None) -> None:
    """``data`` as indented JSON on standard output: through ``console`` when given or when the
    output is a terminal (highlighted), else with ``print`` (what Rich writes to a pipe)."""
    text = json.dumps(data, ensure_ascii=False)
    if console is None and sys.stdout.isatty():
        from vidscope.cli import common

        console = common.console
    if console is not None:
        console.print_json(text)
    else:
        print(json.dumps(data, ensure_ascii=False, indent=2))


def _render_trace(result: AskResult, console: Console) -> None:
    from rich.table import Table

    table = Table(title="trace")
    for column in ("#", "kind", "tool", "observation", "tokens", "s", "cached"):
        table.add_column(column)
    for s in result.trace:
        cached = "tool" if s.tool_cached else ("model" if s.model_cache_hit else "")
        table.add_row(
            str(s.index),
            safe(f"{s.phase}/{s.kind}" if s.phase else s.kind),
            safe(s.tool or ""),
            safe(s.observation[:100]),
            f"{s.input_tokens}/{s.output_tokens}",
            f"{s.latency_s:.2f}",
            cached,
        )
    console.print(table)


def _reused(cached: int) -> str:
    """ " (N from the server's prompt cache)" when the server said it reused prompt tokens."""
    return f" ({cached} from the server's prompt cache)" if cached else ""


def render_search(
    result: SearchResult,
    console: Console,
    as_json: bool = False,
    show_dropped: bool = False,
    explain: bool = False,
) -> None:
    """Print ``result``: JSON, or what was looked for, the ranked videos with why each matched, and
    the notes. The pipeline's own terms (planner, fusion, pool, per-dimension scores, the rerank)
    show only with ``explain``; the dropped videos with ``show_dropped``."""
    if as_json:
        print_json(result.model_dump(mode="json"), console)
        return
    looked_for = ", ".join(f"{d} {safe(repr(i))}" for d, i in result.plan.items())
    if explain:
        plan = "; ".join(f"{d}: {safe(i)}" for d, i in result.plan.items())
        console.print(f"[bold]plan[/bold] ({safe(result.planner)}) {plan}")
    elif looked_for:
        console.print(f"looked for {looked_for}")
    from rich.table import Table

    dims = list(result.plan)
    table = Table(title=f"{plural(len(result.hits), 'video')} for {safe(result.query)!r}")
    columns = (
        ("#", "video", "score", *dims, "caption", "moments") if explain else ("#", "video", "why", "moments")
    )
    # A file name is read whole: its column is as wide as the longest one (up to 40); the others fold.
    name_width = min(40, max((len(hit.file_name) for hit in result.hits), default=5))
    for column in columns:
        table.add_column(column, overflow="fold", min_width=name_width if column == "video" else None)
    for rank, hit in enumerate(result.hits, 1):
        moments = ", ".join(f"{a:.1f}–{b:.1f}s" for a, b in hit.moments)
        if explain:
            scores = [f"{hit.scores.get(d, 0.0):.2f}" for d in dims]
            table.add_row(
                str(rank), safe(hit.file_name), f"{hit.score:.3f}", *scores, safe(hit.caption[:80]), moments
            )
        else:
            table.add_row(str(rank), safe(hit.file_name), _why_it_matched(hit, result.plan), moments)
    if result.hits:
        console.print(table)
    else:
        console.print("[yellow]no video matches[/yellow]")
    if show_dropped:
        for dropped in result.dropped:
            console.print(f"  [dim]dropped[/dim] {safe(dropped.file_name)}: {safe(dropped.reason)}")
    for note in result.notes:
        console.print(f"[yellow]note:[/yellow] {safe(note)}")
    if explain:
        console.print(
            f"[dim]{result.seconds:.2f}s · fusion {result.fusion} · pool {result.pool_size} · "
            f"{len(result.dropped)} dropped · fine stage {result.fine_comparisons} videos "
            f"({result.rerank})[/dim]"
        )
    else:
        compared = "pictures" if result.rerank.startswith("image-text") else "descriptions"
        console.print(
            f"[dim]{result.seconds:.2f} s · {plural(result.pool_size, 'candidate')} · ranked by "
            f"comparing their {compared} with the query (--explain for how)[/dim]"
        )


def _why_it_matched(hit: SearchHit, plan: dict[str, str]) -> str:
    """The parts of the query a video matched best, in words: "object 'car' (strong)", then the
    caption of the window that matched."""
    parts = []
    for dimension, wanted in plan.items():
        score = hit.scores.get(dimension, 0.0)
        strength = "strong" if score >= 0.5 else "fair" if score >= 0.3 else "weak"
        parts.append(f"{dimension} {wanted!r} ({strength})")
    caption = hit.caption.strip()
    if caption:
        parts.append(f"shows: {caption[:80]}")
    return safe("; ".join(parts))


def render_moments(result: MomentSearch, console: Console, as_json: bool = False) -> None:
    """Print moments: as JSON the whole search (``moments``, ``notes`` such as why nothing passed the
    relevance bar, ``ranked_by``, ``seconds``), or a table (rank, video, span, relevance 0-1, text)
    and the notes."""
    if as_json:
        print_json(result.model_dump(mode="json"), console)
        return
    from rich.table import Table

    from vidscope.core.timecodes import fmt_time

    table = Table(title=f"{len(result.moments)} moments for {safe(result.query)!r}")
    for column in ("#", "video", "from", "to", "relevance", "said or shown"):
        table.add_column(column, overflow="fold")
    for rank, m in enumerate(result.moments, 1):
        table.add_row(
            str(rank),
            safe(m.file),
            fmt_time(m.start),
            fmt_time(m.end),
            "–" if m.relevance is None else f"{m.relevance:.2f}",
            safe(m.text[:160]),
        )
    if result.moments:
        console.print(table)
    elif not result.notes:
        console.print("[yellow]no moment matches[/yellow]")
    for note in result.notes:
        console.print(f"[yellow]note:[/yellow] {safe(note)}")
    console.print(f"[dim]{result.seconds:.3f}s[/dim]")

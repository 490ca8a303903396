"""``vidscope demo``: the tour of the other commands on a narrated demo video and the samples."""

from __future__ import annotations

from typing import Annotated

import typer

from vidscope.cli.common import app, console, errors, plural, registered_command, settings


@app.command()
def demo(
    question: Annotated[str | None, typer.Option(help="Ask this instead of the demo question.")] = None,
) -> None:
    """Ingest a narrated video and the sample videos, show what was found, ask a question, search."""
    from vidscope.flows.demo import DEMO_QUESTION, DEMO_SEARCH, demo_video, sample_videos

    cfg = settings()
    console.rule("[bold]1. making a narrated demo video with on-screen text")
    video = demo_video(cfg.data_dir)
    console.print(f"{video}")
    inputs = [str(video), *[str(p) for p in sample_videos()]]
    console.rule(f"[bold]2. ingesting {plural(len(inputs), 'video')}")
    try:
        registered_command("ingest")(inputs)
    except typer.Exit as exc:
        if exc.exit_code:
            errors.print("[yellow]some videos failed; continuing with the rest[/yellow]")
    console.rule("[bold]3. what was found in the demo video")
    registered_command("show")(str(video), limit=20)
    console.rule("[bold]4. asking a question")
    registered_command("ask")(str(video), question or DEMO_QUESTION)
    console.rule("[bold]5. searching the whole library")
    registered_command("search")(DEMO_SEARCH, show_dropped=True)
    console.print(
        '\nNext: [bold]vidscope ask VIDEO "your question"[/bold], [bold]vidscope search "…"[/bold], '
        '[bold]vidscope sql "SELECT * FROM clips LIMIT 5"[/bold], [bold]vidscope api[/bold] (web page), '
        "[bold]vidscope --help[/bold]"
    )

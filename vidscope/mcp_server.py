"""An MCP server exposing vidscope's ``ask`` and ``search`` to other agents (``vidscope mcp``).

It speaks MCP over stdio and reads the same settings as the CLI (``VIDSCOPE_*`` environment
variables, ``vidscope.toml``). Run it with ``vidscope mcp`` or ``python -m vidscope.mcp_server``.
Each tool is a thin layer over :class:`vidscope.library.Library` (the one implementation of each
command); it turns the Library's documented exceptions into ``ToolError`` lines.
"""

from __future__ import annotations

import logging
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from vidscope.agents import strategies
from vidscope.api.models import MomentsResponse, SearchResponse, search_response
from vidscope.core.settings import Settings, disable_telemetry
from vidscope.flows.ask import AskResult
from vidscope.flows.summarize import Digest, VideoOverview
from vidscope.library import Library

INSTRUCTIONS = (
    "vidscope answers questions about, and searches, a library of videos that were ingested "
    "beforehand. `ask` answers about one video and cites time ranges (seconds) as evidence; "
    "`search` finds the videos (and moments) across the library that match a description; "
    "`search_moments` finds moments of any video where something is said, shown or seen; "
    "`summarize` says what one video is about (summary, chapters, highlights); `digest` lists "
    "what the library gained lately."
)


def build_server(settings: Settings | None = None) -> MCPServer:
    """The MCP server over the store ``settings`` configure (default: the process settings)."""
    from vidscope.core.settings import get_settings

    disable_telemetry()
    lib = Library(settings=settings or get_settings())
    server: MCPServer = MCPServer("vidscope", instructions=INSTRUCTIONS)

    @server.tool()
    def ask(
        video: Annotated[str, Field(description="Video id (or 6+ character prefix) or file name.")],
        question: Annotated[str, Field(description="The question about the video.")],
        options: Annotated[
            list[str] | None, Field(description="Multiple-choice options (2 to 26), if any.")
        ] = None,
        agent: Annotated[
            str | None,
            Field(
                description=f"The strategy: {strategies.help_text('video')} "
                f"(default {strategies.default('video')})."
            ),
        ] = None,
        include_trace: Annotated[bool, Field(description="Return every agent step, too (long).")] = False,
    ) -> AskResult:
        """Answer a question about one ingested video, citing the moments (seconds) that support it."""
        from vidscope.storage.videos import VideoNotFound

        try:
            result = lib.ask(video, question, options=options, agent=agent)
        except (VideoNotFound, ValueError) as exc:
            raise ToolError(str(exc)) from exc
        if not include_trace:
            result.trace = []
        return result

    @server.tool()
    def search(
        query: Annotated[str, Field(description="What to look for across the library.")],
        k: Annotated[int | None, Field(ge=1, le=100, description="Videos to return.")] = None,
    ) -> SearchResponse:
        """Find the ingested videos, and their best moments, that match a description."""
        if not query.strip():
            raise ToolError("the query is empty")
        try:
            import vidscope.flows.search  # noqa: F401 (what Library.search runs)
        except ImportError as exc:
            raise ToolError(f"library search is not available: {exc}") from exc
        from vidscope.agents.mavis.search import LibraryEmpty
        from vidscope.core.errors import BackendUnavailable

        try:
            return search_response(lib.search(query.strip(), k=k))
        except (LibraryEmpty, ValueError, BackendUnavailable) as exc:
            raise ToolError(str(exc)) from exc

    @server.tool()
    def search_moments(
        query: Annotated[str, Field(description="What to look for: words said or shown, things seen.")],
        k: Annotated[int, Field(ge=1, le=100, description="Moments to return.")] = 10,
        videos: Annotated[
            list[str] | None, Field(description="Only in these video ids (or 6+ character prefixes).")
        ] = None,
        start: Annotated[
            float | None, Field(ge=0, description="Only moments ending after this second.")
        ] = None,
        end: Annotated[
            float | None, Field(ge=0, description="Only moments starting before this second.")
        ] = None,
        show_all: Annotated[
            bool, Field(description="Also moments under the relevance bar (weak matches).")
        ] = False,
    ) -> MomentsResponse:
        """Find moments of any ingested video that match a query (video id, file, start, end, score, text)."""
        from vidscope.agents.mavis.search import LibraryEmpty
        from vidscope.agents.moments import MomentFilters
        from vidscope.storage.videos import VideoNotFound

        if not query.strip():
            raise ToolError("the query is empty")
        try:
            ids = [lib.video(ref).video_id for ref in videos] if videos else None
            filters = MomentFilters(videos=ids, start=start, end=end)
            found = lib.search(query.strip(), moments=True, k=k, filters=filters, show_all=show_all)
            return MomentsResponse(**found.model_dump())
        except (VideoNotFound, LibraryEmpty, ValueError) as exc:
            raise ToolError(str(exc)) from exc

    @server.tool()
    def search_by_image(
        path: Annotated[str, Field(description="Path of a picture (JPEG, PNG, …) on this machine.")],
        k: Annotated[int, Field(ge=1, le=100, description="Moments to return.")] = 10,
    ) -> MomentsResponse:
        """Find moments of any ingested video whose frames look like a picture (visual search)."""
        from vidscope.agents.mavis.search import LibraryEmpty
        from vidscope.flows.search import VisualSearchOff

        try:
            found = lib.search_image(path, k=k)
        except OSError as exc:
            raise ToolError(f"cannot read {path}: {exc.strerror or exc}") from exc
        except (LibraryEmpty, VisualSearchOff, ValueError) as exc:
            raise ToolError(str(exc)) from exc
        return MomentsResponse(**found.model_dump())

    @server.tool()
    def summarize(
        video: Annotated[str, Field(description="Video id (or 6+ character prefix) or file name.")],
    ) -> VideoOverview:
        """What one ingested video is about: its summary, chapters (start, end, title, summary) and
        highlights, in the video's own words (made at ingestion; no model needed)."""
        from vidscope.flows.summarize import NotSummarized
        from vidscope.storage.videos import VideoNotFound

        try:
            return lib.summarize(video)
        except (VideoNotFound, NotSummarized) as exc:
            raise ToolError(str(exc)) from exc

    @server.tool()
    def digest(
        since: Annotated[str, Field(description="The window to look back: 1d, 12h, 30m, 2w …")] = "1d",
    ) -> Digest:
        """What the library gained: the videos ingested in the window, newest first, each with its
        summary and chapter titles, and the counts."""
        try:
            return lib.digest(since)
        except ValueError as exc:
            raise ToolError(str(exc)) from exc

    return server


def main(settings: Settings | None = None) -> None:
    """Serve MCP over stdio until the client closes the connection."""
    import os

    # Anything but protocol messages on stdout would corrupt the stream; keep Prefect quiet.
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    logging.basicConfig(level=logging.WARNING)
    build_server(settings).run("stdio")


if __name__ == "__main__":  # pragma: no cover
    main()

"""What answering a question produces: the cited moments, the trace of steps, what it cost, the
agent's :class:`Answer` and the :class:`AskResult` that ``ask`` (CLI, HTTP API, MCP) returns.

Plain pydantic models, importing nothing heavier than pydantic, so a process that only shows a
result (the CLI rendering an answer a running ``vidscope api`` computed) does not load the agents.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from vidscope.models.protocols.chat import Usage


#: How strongly the tools of a conversation support a cited range, strongest first:
#: ``perceived`` (a look at frames or detections that found something there), ``retrieved`` (a clip
#: hit for the query, a transcript or on-screen text line there), ``echoed`` (a range the model
#: supplied itself, a hint or an overview pointed at: clip_merge inputs, a graph span, grounding
#: hints, a look that found nothing, a look over the whole video), ``none`` (no tool returned it).
EVIDENCE_LEVELS = ("perceived", "retrieved", "echoed", "none")
#: The levels that verify a citation.
VERIFYING_LEVELS = ("perceived", "retrieved")


class Support(BaseModel):
    """One time range a tool call supports, with what it found there (see
    :meth:`~vidscope.agents.tools.ToolResult.support`)."""

    video_id: str
    start: float
    end: float
    level: str = Field(description="perceived, retrieved or echoed (see EVIDENCE_LEVELS).")
    found: str = Field("", description="What the tool found there: a detection, a text line, a reply.")
    tool: str = Field("", description="The tool whose call returned it.")
    call: int = Field(0, description="Which tool call of the conversation returned it (1 = the first).")
    #: False for a look that said what it saw but not where in the ranges it was shown: its whole
    #: looked range is the support (and looks like it over the whole video verify nothing).
    localized: bool = True


class Citation(BaseModel):
    """A cited time range, the evidence level the tools give it, and whether that verifies it.

    Verified means the range lies in the video, is no wider than ``agent.citation_max_seconds``,
    and at least half of it lies inside ranges tool calls of this conversation *supported* at a
    verifying level (see :mod:`vidscope.agents.citations`); ``support`` names those calls and what
    they found there.
    """

    video_id: str
    start: float
    end: float
    verified: bool
    evidence: str = Field("none", description="perceived, retrieved, echoed or none (see EVIDENCE_LEVELS).")
    note: str = ""
    support: list[Support] = Field(
        default_factory=list,
        description="The tool calls that support this range, most overlapping first, with what they found.",
    )


def read_cited_ranges(value: Any) -> Any:
    """Citations as models write them, in the shapes the finish tools declare; else unchanged.

    A single range (``[10, 15]``, ``{"start": 10, "end": 15}``, ``"0:10-0:15"``) becomes a list of
    one; each item becomes ``[start, end]`` seconds, or ``{video_id, start, end}`` when it names a
    video (:func:`vidscope.core.timecodes.parse_range` reads the time shapes). Items it cannot read
    stay as they are, so validation names them. Used as a ``BeforeValidator``: the schema the
    model sees keeps the one documented shape.
    """
    from vidscope.core.timecodes import parse_range

    def single(item: Any) -> bool:
        if isinstance(item, dict | str):
            return True
        return (
            isinstance(item, list | tuple)
            and len(item) == 2
            and not any(isinstance(v, list | dict) for v in item)
        )

    if value is None:
        return []
    items = [value] if single(value) else value
    if not isinstance(items, list | tuple):
        return value
    read: list[Any] = []
    for item in items:
        try:
            start, end = parse_range(item)
        except ValueError:
            read.append(item)
            continue
        video_id = item.get("video_id") if isinstance(item, dict) else None
        read.append({"video_id": str(video_id), "start": start, "end": end} if video_id else [start, end])
    return read


class TraceStep(BaseModel):
    """One step of the loop: what the model said and did, what it observed, what it cost."""

    index: int
    kind: str  # "tool", "finish", "answer", "nudge", "model-error", "extractive", "refused", …
    #: The phase of a phased agent (AVI: retrieve, perceive, review); None for single-loop agents.
    phase: str | None = None
    #: What the model wrote with its reply (its stated plan or reflection).
    reasoning: str | None = None
    #: A reasoning model's hidden thinking (``ChatReply.reasoning``), kept out of the answer.
    thinking: str | None = None
    tool: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    observation: str = ""
    ok: bool = True
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    model_cache_hit: bool = False
    tool_cached: bool = False
    #: A further tool call of the same model reply (a multi-call turn): not a new reasoning
    #: iteration (``vidscope.evaluation.metrics.reasoning_iterations``).
    follows: bool = False


class UsageTotals(BaseModel):
    """What answering one question cost."""

    model_calls: int = 0
    model_http_calls: int = 0
    input_tokens: int = 0
    #: Of ``input_tokens``, those the server reused from its prompt cache (not processed again).
    cached_input_tokens: int = 0
    output_tokens: int = 0
    images: int = 0
    tool_calls: int = 0
    tool_cache_hits: int = 0

    def add(self, other: UsageTotals) -> None:
        """Count everything ``other`` counted too."""
        for name in type(self).model_fields:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def add_model(self, usage: Usage) -> None:
        """Count one model call (a response-cache hit costs no HTTP call)."""
        self.model_calls += 1
        self.model_http_calls += 0 if usage.cache_hit else 1
        self.input_tokens += usage.input_tokens
        self.cached_input_tokens += usage.cached_input_tokens
        self.output_tokens += usage.output_tokens
        self.images += usage.images


class Answer(BaseModel):
    """The result of answering a question, agentic or extractive."""

    answer: str
    choice: str | None = None
    #: Where ``choice`` came from: ``"given"``, the agent gave it as its choice (the answer
    #: action's ``choice`` argument, a review's choice, the extractive ranking's pick); ``"read"``,
    #: read from its words by the evaluation's lenient extraction rules. A strict score (CrossVid's
    #: release compares the reply as a string) takes only a given choice as the reply.
    choice_source: Literal["given", "read"] | None = None
    citations: list[Citation] = Field(default_factory=list)
    #: For "when does X happen" questions: the [start, end] the answer places the event in, checked
    #: like a citation.
    interval: Citation | None = None
    extractive: bool = False
    forced: bool = False
    #: The run ended without an answer in words (nothing stated, or only data: a JSON echo, a
    #: ``<video_data>`` block); ``answer`` says so. :func:`vidscope.agents.strategies.answer` then
    #: puts the extractive answer in its place (``fallback``).
    no_answer: bool = False
    #: The agent reached no answer and this is the extractive answer to the same question, with the
    #: agent's trace before it (``extractive`` and ``forced`` are set too).
    fallback: bool = False
    #: Agents with a perception step (AVI): whether a successful targeted perception call covered
    #: what the answer cites. ``False``: the answer rests on captions and hints only, and its
    #: citations are not verified. ``None``: the agent has no such step.
    perceived: bool | None = None
    #: Steps of the agent's paper protocol this run skipped (AVI: "retrieve skipped", "perception
    #: skipped"), whatever the model did; empty when it held.
    skipped: list[str] = Field(default_factory=list)
    trace: list[TraceStep] = Field(default_factory=list)
    usage: UsageTotals = Field(default_factory=UsageTotals)

    @property
    def unverified_citations(self) -> int:
        """How many citations (and the interval, if any) no specific evidence supports."""
        cited = [*self.citations, *([self.interval] if self.interval is not None else [])]
        return sum(not c.verified for c in cited)


class AskResult(BaseModel):
    """The answer to one question, as the CLI shows it (``--json`` prints this model)."""

    video_id: str = Field(description="The video asked about ('' for a question about the library).")
    file_name: str
    question: str
    options: list[str] | None = None
    answer: str
    choice: str | None = None
    choice_text: str | None = None
    citations: list[Citation] = Field(default_factory=list)
    interval: Citation | None = Field(
        None, description='For "when" questions (AVI agent): the [start, end] of the event.'
    )
    unverified_citations: int = Field(
        0,
        description="Citations (and the interval) that no specific evidence a tool returned supports.",
    )
    extractive: bool = False
    forced: bool = Field(
        False, description="The answer did not come from finish (step limit, or a text reply)."
    )
    fallback: bool = Field(
        False,
        description="The agent reached no answer in words (nothing stated, or only data): the "
        "extractive answer to the same question stands in, after the agent's trace.",
    )
    perceived: bool | None = Field(
        None,
        description="AVI: whether a successful targeted perception call covered what the answer cites "
        "(false: captions and hints only, citations not verified); null for agents without that step.",
    )
    skipped: list[str] = Field(
        default_factory=list,
        description="Steps of the agent's paper protocol the run skipped (AVI: retrieve, perception).",
    )
    model: str | None = None
    agent: str | None = Field(
        None, description="The agent that answered (dvd or avi); none for an extractive answer."
    )
    note: str | None = Field(None, description="Why the answer is not what was asked for, if so.")
    library: bool = Field(False, description="Asked about the whole library (citations name their video).")
    files: dict[str, str] = Field(
        default_factory=dict, description="File name of each cited video (library questions)."
    )
    seconds: float = 0.0
    trace: list[TraceStep] = Field(default_factory=list)
    usage: UsageTotals = Field(default_factory=UsageTotals)

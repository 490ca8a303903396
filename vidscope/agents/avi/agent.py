"""The AVI agent: a phased loop (Retrieve, then Perceive, then Review) over typed tools.

Each phase offers the model only its own tools:

* **Retrieve** — tools that find candidate moments (clip retrieval, whole-video exploration, the
  entity graph);
* **Perceive** — tools that look closely at moments (objects, on-screen text, event boundaries,
  frames);
* **Review** — no tools: the model checks the evidence and answers with one JSON object (answer,
  citations, an optional ``interval`` for "when" questions, the chosen option), or sends the agent
  back to Perceive with a reason (at most ``avi_max_backtracks`` times).

A phase ends when the model replies without a tool call. A call to a tool of another phase (or to
an unknown tool) is refused with an error observation and never executed. Model turns are counted
over all phases; at ``avi_max_iterations`` the model must answer (``Answer.forced``).

The protocol follows the paper's: captions and graph facts found in Retrieve are hints, not proof;
Perceive must check them with at least one targeted perception call (:data:`TARGETED_PERCEPTION`,
or any Perceive tool when the registry offers none of those) before Review, and a Perceive phase
ended without one is sent back once (``[agent] avi_require_perception``); frame_analysis is the
last resort; Review is conservative and may send the agent back.

Whatever the model does, the paper's protocol holds: Retrieve makes at least one call and starts
with ``clip_retrieve`` (Fig. 10: the first turn offers only it); one tool runs per turn (Fig. 9:
further calls in a reply are refused); a failed perception call does not count as perceiving, and
an answer whose citations no successful targeted perception call saw anything at carries ``perceived =
False`` and unverified citations. Review reads the paper's own output formats (``**Answer:** C``,
``[1.5s, 12.5s]``) as well as JSON.

The registries are parameters (:func:`run_avi_agent`), so the loop runs with any tools; the
strategy's :func:`run` splits its one allow-list into them (:func:`phases`). Model turns, tool
execution, usage totals, evidence and citation checks are the runtime's
(:mod:`vidscope.agents.runtime`).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from vidscope.agents import prompts
from vidscope.agents.citations import Evidence
from vidscope.agents.grounding import parse_interval
from vidscope.agents.replies import Reply
from vidscope.agents.runtime import (
    Answer,
    Citation,
    LoopState,
    StepCallback,
    TraceStep,
    ask_model,
    describe_videos,
    end_run,
    final_answer,
    format_observation,
    nudge_if_looping,
    parse_citations,
    read_turn,
    remember_call,
    reply_cost,
    run_tool,
    tool_step,
)
from vidscope.agents.strategies import StrategyRequest
from vidscope.agents.tools import ToolContext, ToolRegistry
from vidscope.models.json_tools import loads_lenient
from vidscope.models.protocols.chat import ChatMessage, ChatReply, ToolCall

Phase = Literal["retrieve", "perceive", "review"]
RETRIEVE: Phase = "retrieve"
PERCEIVE: Phase = "perceive"
REVIEW: Phase = "review"

#: Questions that ask for a moment: their answer carries an ``interval``.
_WHEN_QUESTION = re.compile(
    r"^\s*(?:when\b|at what (?:time|point|moment)\b|what time\b|at which (?:time|point|moment)\b)",
    re.IGNORECASE,
)


#: The targeted perception tools: cheap, specific checks the paper runs before looking at frames.
TARGETED_PERCEPTION = frozenset({"object_detect", "text_extract", "boundary_detect"})
#: The tool Retrieve starts with (Fig. 10).
FIRST_RETRIEVE = "clip_retrieve"


def is_when_question(question: str) -> bool:
    """Whether ``question`` asks when something happens (temporal grounding)."""
    return bool(_WHEN_QUESTION.match(question))


#: The Retrieve phase's tools, real and simulated (:data:`~vidscope.agents.avi.tools.RETRIEVE_TOOLS`,
#: which a test keeps equal): every other tool of the strategy's allow-list perceives.
RETRIEVE_PHASE = frozenset({"clip_retrieve", "clip_merge", "global_explore", "graph_retrieve"})


def phases(registry: ToolRegistry) -> tuple[ToolRegistry, ToolRegistry]:
    """The (retrieve, perceive) allow-lists of the AVI agent's tools (a strategy has one list)."""
    tools = [registry.get(n) for n in registry.names]
    return (
        ToolRegistry(t for t in tools if t.name in RETRIEVE_PHASE),
        ToolRegistry(t for t in tools if t.name not in RETRIEVE_PHASE),
    )


# ============================================================================ the review's reply


class ReviewReply(BaseModel):
    """The JSON object the model answers the review phase with (lenient about spellings)."""

    verdict: Literal["answer", "perceive"] = "answer"
    answer: str = ""
    citations: list[Any] = Field(default_factory=list)
    interval: Any = None
    choice: str | None = None
    reason: str = ""

    @field_validator("verdict", mode="before")
    @classmethod
    def _verdict(cls, value: Any) -> str:
        text = str(value or "answer").strip().lower()
        if text in {"perceive", "back", "retry", "more", "insufficient", "go back", "look again"}:
            return "perceive"
        return "answer"

    @field_validator("answer", "reason", mode="before")
    @classmethod
    def _text(cls, value: Any) -> str:
        return "" if value is None else str(value)

    @field_validator("citations", mode="before")
    @classmethod
    def _list(cls, value: Any) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list | tuple):
            return [value]
        if len(value) == 2 and all(isinstance(v, int | float) for v in value):
            return [list(value)]  # one bare [start, end] pair
        return list(value)

    @field_validator("choice", mode="before")
    @classmethod
    def _choice(cls, value: Any) -> str | None:
        return None if value in (None, "") else str(value)


#: The paper's answer line: ``**Answer:** C`` / ``Answer: the red car`` (Fig. 11-12).
_ANSWER_LINE = re.compile(
    r"^\W*(?:final\s+)?answer\W*?:\**\s*(?P<answer>.+?)\s*$", re.IGNORECASE | re.MULTILINE
)


def _paper_review(text: str) -> ReviewReply | None:
    """A review written in the paper's format: an ``Answer:`` line, a ``[1.5s, 12.5s]`` interval."""
    match = _ANSWER_LINE.search(text)
    if match is None:
        return None
    answer = match["answer"].strip().strip("*").strip()
    interval = parse_interval(text)
    letter = re.match(r"^\(?([A-Z])\)?(?:[.):\s]|$)", answer)
    return ReviewReply(
        answer=answer,
        citations=[list(interval)] if interval is not None else [],
        interval=list(interval) if interval is not None else None,
        choice=letter.group(1) if letter else None,
    )


def parse_review(reply: Reply | str | None) -> ReviewReply:
    """The review in ``reply`` (JSON, or the paper's ``**Answer:**`` format); ``ValueError``
    saying what is wrong with it otherwise, e.g. a reply cut off at the output limit (read, a half
    review could look whole)."""
    if isinstance(reply, Reply):
        if reply.kind in ("cut-off", "empty"):
            raise ValueError(reply.reason)
        reply = reply.text
    text = reply
    try:
        value = loads_lenient(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        paper = _paper_review(text or "")
        if paper is not None:
            return paper
        raise ValueError("the reply is not a JSON object")
    try:
        review = ReviewReply.model_validate(value)
    except ValidationError as exc:
        raise ValueError(f"the JSON object has invalid fields: {exc.errors()[0]['msg']}") from None
    if review.verdict == "answer" and not review.answer.strip():
        raise ValueError('it has no "answer" (or "verdict": "perceive" with a "reason")')
    return review


# ============================================================================ the loop


def run_avi_agent(
    ctx: ToolContext,
    question: str,
    video_ids: Sequence[str],
    *,
    retrieve: ToolRegistry,
    perceive: ToolRegistry,
    options: Sequence[str] | None = None,
    on_step: StepCallback | None = None,
    review: bool = True,
) -> Answer:
    """Answer ``question`` about ``video_ids`` in three phases with the chat model and the tools of
    ``retrieve`` and ``perceive`` (``ctx.registry`` is not used). Without ``review`` (the paper's
    ablation) the Review phase is skipped: after Perceive the model answers at once, with no
    conservative check and no going back."""
    if ctx.chat is None:
        raise ValueError("the AVI agent needs a chat model (models.chat)")
    if not video_ids:
        raise ValueError("no video to ask about")
    return _AviRun(ctx, question, video_ids, retrieve, perceive, options, on_step, review=review).run()


def run(ctx: ToolContext, request: StrategyRequest) -> Answer:
    """The AVI strategy's run: :func:`run_avi_agent` with ``ctx.registry`` split into its phases
    (the ablation ``review`` skips the Review phase)."""
    if ctx.registry is None:
        raise ValueError("the AVI agent needs its tools (ctx.registry)")
    retrieve, perceive = phases(ctx.registry)
    return run_avi_agent(
        ctx,
        request.prompt,
        request.video_ids,
        retrieve=retrieve,
        perceive=perceive,
        options=request.options,
        on_step=request.on_step,
        review="review" not in request.ablations,
    )


class _AviRun:
    """One question answered by the phased loop (the state of :func:`run_avi_agent`)."""

    def __init__(
        self,
        ctx: ToolContext,
        question: str,
        video_ids: Sequence[str],
        retrieve: ToolRegistry,
        perceive: ToolRegistry,
        options: Sequence[str] | None,
        on_step: StepCallback | None,
        *,
        review: bool = True,
    ) -> None:
        self.ctx = ctx
        self.review = review
        self.question = question
        self.default_video = video_ids[0]
        self.options = list(options or [])
        self.on_step = on_step
        self.when = is_when_question(question)
        self.max_iterations = ctx.config.avi_max_iterations
        self.backtracks_left = ctx.config.avi_max_backtracks
        self.iterations = 0
        # Perception calls that count as checking the hints, and whether the one send-back for
        # a Perceive phase without any has been used.
        self.perception_calls = 0
        self.perception_sent_back = False
        # What successful targeted perception calls supported (an answer is perceived only where
        # one of them saw something), and how many calls Retrieve made (it must make one,
        # starting with clip_retrieve).
        self.looks = Evidence()
        self.retrieve_calls = 0
        self.retrieve_sent_back = False
        # A terminal tool (finish) has no place here: the review phase gives the answer.
        self.tools: dict[Phase, list[str]] = {
            phase: [n for n in registry.names if not registry.get(n).terminal]
            for phase, registry in ((RETRIEVE, retrieve), (PERCEIVE, perceive))
        }
        shared = set(self.tools[RETRIEVE]) & set(self.tools[PERCEIVE])
        if shared:
            raise ValueError(f"tools in both phases: {', '.join(sorted(shared))}")
        for phase in (RETRIEVE, PERCEIVE):
            if not self.tools[phase]:
                raise ValueError(f"the {phase} phase has no tools")
        self.all_tools = [*self.tools[RETRIEVE], *self.tools[PERCEIVE]]
        self.targeted = [n for n in self.tools[PERCEIVE] if n in TARGETED_PERCEPTION] or self.tools[PERCEIVE]
        # One context per phase whose registry is that phase's allow-list: execute_tool itself
        # can then run nothing of another phase. The copies share the video cache.
        self.contexts: dict[Phase, ToolContext] = {}
        for phase, registry in ((RETRIEVE, retrieve), (PERCEIVE, perceive)):
            phase_ctx = copy.copy(ctx)
            phase_ctx.registry = registry
            self.contexts[phase] = phase_ctx
        self.state = LoopState(
            messages=[
                ChatMessage(role="system", content=prompts.AVI_SYSTEM),
                ChatMessage(
                    role="user",
                    content=prompts.question_prompt(question, describe_videos(ctx, video_ids), self.options),
                ),
            ]
        )

    # ------------------------------------------------------------------ driver

    def run(self) -> Answer:
        phase: Phase = RETRIEVE
        self._say(prompts.AVI_RETRIEVE.format(tools=self._names(RETRIEVE)))
        while self.iterations < self.max_iterations:
            if phase == REVIEW:
                outcome = self._review_turn()
                if isinstance(outcome, Answer):
                    return outcome
                phase = outcome
            elif self._tool_turn(phase):
                if phase == PERCEIVE and self._send_back_to_perceive():
                    continue
                if phase == RETRIEVE and self._send_back_to_retrieve():
                    continue
                phase = PERCEIVE if phase == RETRIEVE else REVIEW
                if phase == REVIEW and not self.review:
                    return self._final(prompts.AVI_ANSWER_NOW, "perceive done; no review (ablation)")
                if phase == PERCEIVE:
                    self._say(prompts.AVI_PERCEIVE.format(tools=self._names(PERCEIVE)))
                else:
                    self._say(self._review_prompt())
        return self._forced()

    def _send_back_to_retrieve(self) -> bool:
        """Whether a Retrieve phase that made no call goes on (Fig. 10: retrieval comes first)."""
        if self.retrieve_calls or self.retrieve_sent_back:
            return False
        self.retrieve_sent_back = True
        self._say(prompts.AVI_RETRIEVE_FIRST.format(tool=self._first_retrieve_tool()))
        self._record(
            TraceStep(
                index=0,
                kind="nudge",
                phase=RETRIEVE,
                observation="retrieve ended without a call; sent back once",
            )
        )
        return True

    def _offered(self, phase: Phase) -> list[str]:
        """The tools offered in ``phase`` now: Retrieve's first turn offers only clip_retrieve."""
        if phase == RETRIEVE and not self.retrieve_calls:
            return [self._first_retrieve_tool()]  # Fig. 10: retrieval starts with clip_retrieve
        return self.tools[phase]

    def _first_retrieve_tool(self) -> str:
        """The tool Retrieve starts with: clip_retrieve when offered (Fig. 10)."""
        return FIRST_RETRIEVE if FIRST_RETRIEVE in self.tools[RETRIEVE] else self.tools[RETRIEVE][0]

    def _send_back_to_perceive(self) -> bool:
        """Whether a Perceive phase that made no targeted perception call goes on (once)."""
        if not self.ctx.config.avi_require_perception or self.perception_calls or self.perception_sent_back:
            return False
        self.perception_sent_back = True
        self._say(prompts.AVI_PERCEIVE_FIRST.format(tools=", ".join(self.targeted)))
        self._record(
            TraceStep(
                index=0,
                kind="nudge",
                phase=PERCEIVE,
                observation="perceive ended without a targeted perception call; sent back once",
            )
        )
        return True

    # ------------------------------------------------------------------ helpers

    def _record(self, step: TraceStep) -> None:
        step.index = len(self.state.trace) + 1
        self.state.trace.append(step)
        if self.on_step is not None:
            self.on_step(step)

    def _say(self, text: str) -> None:
        self.state.messages.append(ChatMessage(role="user", content=text))

    def _names(self, phase: Phase) -> str:
        return ", ".join(self.tools[phase])

    def _review_prompt(self) -> str:
        return prompts.avi_review_prompt(
            backtracks_left=self.backtracks_left,
            when_question=self.when,
            multiple_choice=bool(self.options),
        )

    def _ask(self, phase: Phase) -> ChatReply | None:
        self.iterations += 1
        if phase == REVIEW:
            return ask_model(
                self.ctx,
                self.state,
                [],
                self._record,
                json_output=False,  # parse_review reads JSON and the paper's "**Answer:**" format
                bad_reply=prompts.AVI_BAD_REVIEW,
                phase=phase,
            )
        registry = self.contexts[phase].registry
        assert registry is not None
        return ask_model(
            self.ctx,
            self.state,
            registry.specs(self._offered(phase)),
            self._record,
            bad_reply=prompts.AVI_BAD_REPLY,
            phase=phase,
        )

    # ------------------------------------------------------------------ retrieve / perceive

    def _tool_turn(self, phase: Phase) -> bool:
        """One model turn in a tool phase; True when the phase ended (a reply without a call)."""
        reply = self._ask(phase)
        if reply is None:
            return False
        # The backend returns calls to the tools offered this turn; a call to another phase's tool
        # (or to one of this phase not offered this turn: Retrieve's first turn offers only
        # clip_retrieve) stays in the text, where the reader finds it: it is refused explicitly
        # rather than taken for the phase's summary.
        said = read_turn(self.state, reply, self.all_tools)
        calls = list(said.calls)
        native = said.native
        if not calls:
            text = said.text
            self.state.messages.append(ChatMessage(role="assistant", content=text))
            self._record(
                TraceStep(
                    index=0,
                    kind="phase-end",
                    phase=phase,
                    reasoning=text or None,
                    observation=f"{phase} phase done",
                    latency_s=reply.usage.latency_s,
                    **reply_cost(reply),
                )
            )
            return True
        self.state.messages.append(
            ChatMessage(role="assistant", content=reply.text, tool_calls=calls if native else [])
        )
        written_results: list[str] = []
        for position, call in enumerate(calls):
            observation = self._perform(phase, call, reply, position)
            if native:
                self.state.messages.append(
                    ChatMessage(role="tool", content=observation, tool_call_id=call.id, name=call.name)
                )
            else:
                written_results.append(observation)
        if written_results:
            self._say("\n\n".join(written_results))
        nudge_if_looping(self.ctx, self.state, self._record, message=prompts.AVI_LOOP_NUDGE, phase=phase)
        return False

    def _perform(self, phase: Phase, call: ToolCall, reply: ChatReply, position: int) -> str:
        """Run ``call`` if it belongs to ``phase``, else refuse it; the observation for the model."""
        first = position == 0
        owner = next((p for p in (RETRIEVE, PERCEIVE) if call.name in self.tools[p]), None)
        if owner != phase:
            return self._refuse(phase, owner, call, reply, first)
        if not first:  # Fig. 9: one tool per turn
            return self._refuse(phase, owner, call, reply, first, error=prompts.AVI_ONE_TOOL)
        starter = self._first_retrieve_tool()
        if phase == RETRIEVE and not self.retrieve_calls and call.name != starter:
            return self._refuse(
                phase, owner, call, reply, first, error=prompts.AVI_START_WITH.format(tool=starter)
            )
        outcome = run_tool(self.contexts[phase], self.state, call)
        remember_call(self.state, call)
        self.retrieve_calls += int(phase == RETRIEVE)
        if phase == PERCEIVE and call.name in self.targeted and outcome.ok and outcome.result is not None:
            # Only a successful look counts as perceiving, and only where it saw something.
            self.perception_calls += 1
            self.looks.add(outcome.result, call.name)
        self._record(tool_step(0, call, outcome, reply, first=first, phase=phase))
        return format_observation(outcome)

    def _refusal(self, phase: Phase, owner: Phase | None, call: ToolCall) -> str:
        """Why ``call`` cannot run in ``phase``: no tools in Review, an unknown tool, another phase's."""
        if phase == REVIEW:
            return prompts.AVI_NO_TOOLS.format(tool=call.name)
        if owner is None:
            return prompts.AVI_UNKNOWN_TOOL.format(tool=call.name, tools=self._names(phase))
        return prompts.AVI_WRONG_PHASE.format(
            tool=call.name, owner=owner, phase=phase, tools=self._names(phase)
        )

    def _refuse(
        self,
        phase: Phase,
        owner: Phase | None,
        call: ToolCall,
        reply: ChatReply,
        first: bool,
        *,
        error: str | None = None,
    ) -> str:
        error = error or self._refusal(phase, owner, call)
        self._record(
            TraceStep(
                index=0,
                kind="refused",
                phase=phase,
                reasoning=reply.text if first else None,
                tool=call.name,
                arguments=call.arguments,
                observation=error,
                ok=False,
                latency_s=reply.usage.latency_s if first else 0.0,
                **reply_cost(reply, first=first),
            )
        )
        return prompts.ERROR_NOTE.format(tool=call.name, error=error)

    # ------------------------------------------------------------------ review

    def _review_turn(self) -> Answer | Phase:
        """One review turn: the answer, PERCEIVE when sent back, or REVIEW to review again."""
        reply = self._ask(REVIEW)
        if reply is None:
            return REVIEW
        said = read_turn(self.state, reply, self.all_tools)
        if said.calls:  # no tools were offered, but a model may call one anyway
            self._refuse_in_review(said, reply)
            return REVIEW
        self.state.messages.append(ChatMessage(role="assistant", content=reply.text or ""))
        try:
            review = parse_review(said)
        except ValueError as exc:
            # Not a review: what it states in words is kept for the forced end.
            self.state.stated_answer = said.stated or self.state.stated_answer
            self._say(prompts.AVI_BAD_REVIEW.format(error=exc))
            self._record(
                TraceStep(
                    index=0,
                    kind="review",
                    phase=REVIEW,
                    reasoning=reply.text,
                    observation=f"unusable review: {exc}"[:300],
                    ok=False,
                    latency_s=reply.usage.latency_s,
                    **reply_cost(reply),
                )
            )
            return REVIEW
        if review.verdict == "perceive":
            reason = review.reason.strip() or "the evidence is not enough"
            if self.backtracks_left > 0:
                self.backtracks_left -= 1
                self._say(prompts.AVI_BACK_TO_PERCEIVE.format(reason=reason, tools=self._names(PERCEIVE)))
                self._record(
                    TraceStep(
                        index=0,
                        kind="review",
                        phase=REVIEW,
                        arguments=review.model_dump(),
                        observation=f"back to perceive: {reason}"[:300],
                        latency_s=reply.usage.latency_s,
                        **reply_cost(reply),
                    )
                )
                return PERCEIVE
            if not review.answer.strip():
                self._say(prompts.AVI_MUST_ANSWER)
                self._record(
                    TraceStep(
                        index=0,
                        kind="nudge",
                        phase=REVIEW,
                        arguments=review.model_dump(),
                        observation="asked to go back again; no going back is left",
                        latency_s=reply.usage.latency_s,
                        **reply_cost(reply),
                    )
                )
                return REVIEW
        return self._answer(review, reply)

    def _refuse_in_review(self, said: Reply, reply: ChatReply) -> None:
        """Refuse the calls of a review reply (Review has no tools), natively or written."""
        calls = list(said.calls)
        self.state.messages.append(
            ChatMessage(role="assistant", content=reply.text, tool_calls=calls if said.native else [])
        )
        refusals = [
            self._refuse(REVIEW, None, call, reply, position == 0) for position, call in enumerate(calls)
        ]
        if not said.native:
            self._say("\n\n".join(refusals))
            return
        for call, observation in zip(calls, refusals, strict=True):
            self.state.messages.append(
                ChatMessage(role="tool", content=observation, tool_call_id=call.id, name=call.name)
            )

    @property
    def _last_phase(self) -> str:
        """The phase the answer is given in: Review, or "answer" when the ablation skips Review."""
        return REVIEW if self.review else "answer"

    def _forced(self) -> Answer:
        """The answer at the turn limit: one more review turn that must answer."""
        return self._final(prompts.AVI_FORCED, "turn limit reached", forced=True)

    def _final(self, prompt: str, why: str, *, forced: bool = False) -> Answer:
        """One last turn, without tools or going back, that must answer (``prompt`` says so)."""
        self._say(prompt)
        self._record(TraceStep(index=0, kind="nudge", phase=self._last_phase, observation=why))
        reply = ask_model(
            self.ctx,
            self.state,
            [],
            self._record,
            json_output=False,  # as in _ask: the paper's format is read too
            bad_reply=prompts.AVI_BAD_REVIEW,
            phase=self._last_phase,
        )
        said = read_turn(self.state, reply, self.all_tools)
        if reply is not None and not said.calls:
            try:
                review = parse_review(said)
            except ValueError:
                review = None
            if review is not None and review.answer.strip():
                return self._answer(review, reply, forced=forced)
            if said.stated:  # words, not a review: the answer they state (never a plan or data)
                return self._answer(ReviewReply(answer=said.stated), reply, forced=forced)
        return end_run(self.state, self.options, last=said)

    def _answer(self, review: ReviewReply, reply: ChatReply, *, forced: bool = False) -> Answer:
        citations = parse_citations(self.ctx, self.state.evidence, review.citations, self.default_video)
        interval = self._interval(review.interval, review.answer, citations)
        cited = [*citations, *([interval] if interval is not None else [])]
        # Perceived: a targeted look saw something over at least half of a cited range (the
        # citations' own rule, on the looks alone).
        perceived = any(
            self.looks.check(self.ctx, c.video_id, c.start, c.end).evidence == "perceived" for c in cited
        )
        if not perceived:
            # Captions and hints only: nothing was seen where the answer points (issue 28).
            note = "not perceived: no targeted perception call saw anything where it points"
            citations = [c.model_copy(update={"verified": False, "note": c.note or note}) for c in citations]
            if interval is not None:
                interval = interval.model_copy(update={"verified": False, "note": interval.note or note})
        verified = sum(c.verified for c in citations)
        observation = f"{verified}/{len(citations)} citations verified"
        if interval is not None:
            state = "verified" if interval.verified else f"unverified: {interval.note}"
            observation += f"; interval {interval.start:g}-{interval.end:g}s ({state})"
        self._record(
            TraceStep(
                index=0,
                kind="answer",
                phase=self._last_phase,
                arguments=review.model_dump(exclude={"verdict", "reason"}),
                observation=observation,
                latency_s=reply.usage.latency_s,
                **reply_cost(reply),
            )
        )
        # The shared ending (never a data echo as the answer), with AVI's own fields.
        answer = final_answer(
            self.state, review.answer, citations, self.options, choice=review.choice, forced=forced
        )
        skipped = [
            step
            for step, done in (
                ("retrieve skipped", self.retrieve_calls),
                ("perception skipped", self.perception_calls),
            )
            if not done
        ]
        return answer.model_copy(update={"interval": interval, "perceived": perceived, "skipped": skipped})

    def _interval(self, raw: Any, answer: str, citations: list[Citation]) -> Citation | None:
        """The review's interval, checked like a citation. For a "when" question without one, the
        interval written in the answer stands in, else the first verified citation."""
        written = parse_interval(raw) if isinstance(raw, str) else None
        if written is not None:
            raw = list(written)
        if raw not in (None, "", []):
            return self._check(raw)
        if not self.when:
            return None
        written = parse_interval(answer)
        if written is not None:
            return self._check(list(written))
        for citation in citations:
            if citation.verified:
                return citation.model_copy(update={"note": "the first verified citation"})
        return None

    def _check(self, raw: Any) -> Citation:
        return parse_citations(self.ctx, self.state.evidence, [raw], self.default_video)[0]

"""Policies that need no model: a scripted oracle and a seeded random explorer.

Both are :class:`~vidscope.models.protocols.ChatModel` implementations, so they drive the real agent
loops (DVD's ReAct loop, AVI's phases) exactly as a language model would, through the same tool
calls. The oracle knows *where* to look (a question's evidence ranges) but reads *what* is there
from the tool results it gets back: when it scores full reward on every generated question, the
questions are answerable from what the simulated tools say. The random explorer is the floor a
trained policy must beat, and a sampling policy whose rollouts are reproducible from a seed.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

from vidscope.agents.simulator.script import Question
from vidscope.models.protocols.chat import ChatMessage, ChatReply, ToolCall, ToolSpec

_VIDEO_LINE = re.compile(r"video_id=(\S+) file='([^']*)' duration=([\d.]+)s")
_VIDEO_JSON = re.compile(r"^Videos:\s*(\[.*\])$", re.MULTILINE)
#: One of SAMA's verified facts as its evidence memory writes it (``Fact.describe``).
_FACT = re.compile(
    r"^(?P<source>\w+): (?:(?P<measure>peak|distinct) )?(?P<kind>count|colour|time) "
    r"of (?P<subject>.+) = (?P<value>.+?) in \[(?P<t0>[^,\]]+), (?P<t1>[^\]]+)\]s$"
)
#: SAMA's tools besides ``answer``; offered any of them (and no visual_query), the oracle plans for SAMA.
SAMA_TOOLS = frozenset(
    (
        "video_reader",
        "temporal_grounding",
        "scene_detector",
        "scene_graph",
        "object_tracker",
        "visual_similarity",
        "subtitle_retriever",
        "subtitle_extractor",
    )
)
#: The SAMA skill (question type) the oracle picks for each kind of generated question.
SAMA_TYPES = {
    "counting": "reading",
    "ordering": "grounding",
    "temporal_alignment": "subtitles",
    "comparison": "comparison",
    "open": "reading",
}

#: A plan yields tool calls and receives each call's result (the JSON payload, or None on error);
#: it returns the chosen option text.
Plan = Generator[ToolCall, dict[str, Any] | None, str]


def observation_payload(message: ChatMessage) -> dict[str, Any] | None:
    """The JSON result quoted in a tool message (``<video_data>`` block); None for an error."""
    text = message.content or ""
    start, end = text.find("<video_data>\n"), text.rfind("\n</video_data>")
    if start < 0 or end < 0:
        return None
    value = json.loads(text[start + len("<video_data>\n") : end])
    return value if isinstance(value, dict) else None


def listed_videos(messages: Sequence[ChatMessage]) -> dict[str, tuple[str, float]]:
    """video_id -> (file name, duration) from the opening prompt's list of videos (one
    ``video_id=…`` line each, or a ``Videos: [...]`` JSON list as the multi-video agents give)."""
    opening = next((m.content or "" for m in messages if m.role == "user"), "")
    found = {m.group(1): (m.group(2), float(m.group(3))) for m in _VIDEO_LINE.finditer(opening)}
    for match in _VIDEO_JSON.finditer(opening):
        try:
            listed = json.loads(match.group(1))
        except json.JSONDecodeError:
            continue
        for video in listed if isinstance(listed, list) else []:
            if isinstance(video, dict) and "video_id" in video:
                found[str(video["video_id"])] = (str(video.get("file_name", "")), float(video["duration"]))
    return found


def classifying(messages: Sequence[ChatMessage]) -> bool:
    """Whether the conversation is SAMA's meta planner asking for a question type."""
    system = next((m.content or "" for m in messages if m.role == "system"), "")
    return '{"type"' in system


def sama_memory(messages: Sequence[ChatMessage]) -> dict[str, Any]:
    """SAMA's evidence memory as its planner sees it (the ``<video_data>`` block of the prompt):
    video id -> verified facts, unresolved conflicts and notes."""
    prompt = next((m for m in reversed(messages) if m.role == "user"), None)
    return (observation_payload(prompt) if prompt is not None else None) or {}


@dataclass(frozen=True)
class SeenFact:
    """A verified fact read back from SAMA's evidence memory."""

    source: str
    kind: str
    subject: str
    value: str
    t0: float
    t1: float


def memory_facts(memory: dict[str, Any], video_id: str, kind: str) -> list[SeenFact]:
    """The verified facts of one kind about ``video_id`` in SAMA's memory."""
    found = []
    for line in memory.get(video_id, {}).get("verified_facts", []):
        match = _FACT.match(str(line))
        if match and match["kind"] == kind:
            found.append(
                SeenFact(
                    source=match["source"],
                    kind=kind,
                    subject=match["subject"],
                    value=match["value"],
                    t0=float(match["t0"]),
                    t1=float(match["t1"]),
                )
            )
    return found


def memory_notes(memory: dict[str, Any], video_id: str, tool: str) -> list[str]:
    """The notes SAMA's memory keeps of ``tool``'s results about ``video_id`` (the earlier ones,
    then the latest, shown in full)."""
    kept = memory.get(video_id, {})
    notes = [*kept.get("notes", []), *kept.get("latest", [])]
    return [str(n.get("text", "")) for n in notes if isinstance(n, dict) and n.get("tool") == tool]


def json_actions(messages: Sequence[ChatMessage]) -> bool:
    """Whether the conversation asks for JSON actions (AgentCVR's master agent) instead of tool calls."""
    system = next((m.content or "" for m in messages if m.role == "system"), "")
    return '{"actions": [' in system


def _letter(options: Sequence[str], text: str) -> str | None:
    return chr(ord("A") + list(options).index(text)) if text in options else None


#: Queries the oracle makes before answering a CrossVid task's question (the master's rule: 4).
MIN_TASK_QUERIES = 4


class OraclePolicy:
    """Looks at a question's evidence with visual/audio queries and answers from what it reads.

    With ``visual_query`` offered it follows its plan; in AVI's retrieve phase it retrieves clips
    for the question's focus once and moves on; offered no tools (AVI's review) it answers in JSON.
    Asked for JSON actions (AgentCVR's master agent) it follows the same plan, one action a turn.
    As SAMA's planner it names the skill for the question's kind when asked to classify, then
    follows a plan over SAMA's tools, reading the answer from the evidence memory its prompt shows.
    """

    name = "oracle"

    def __init__(self, question: Question) -> None:
        self.question = question
        self._plan: Plan | None = None
        self._calls = 0
        self._answer: str | None = None
        self._retrieved = False

    # ------------------------------------------------------------------ the ChatModel protocol

    def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        json_output: bool = False,
    ) -> ChatReply:
        """The next step of the plan as a tool call, or the answer when the plan is done."""
        offered = {t.name for t in tools or []}
        q = self.question
        if not offered and classifying(messages):  # SAMA's meta planner: the skill to load
            return ChatReply(text=json.dumps({"type": SAMA_TYPES[q.kind]}))
        if not offered and json_actions(messages):
            return self._json_turn(messages)
        if offered & SAMA_TOOLS and "visual_query" not in offered:
            return self._sama_turn(messages, offered)
        if not offered:  # AVI's review: one JSON object
            answer = self._answer or q.options[0]
            citations = [[e.start, e.end] for e in q.evidence]
            body = {"verdict": "answer", "answer": answer, "choice": _letter(q.options, answer)}
            return ChatReply(text=json.dumps({**body, "citations": citations}))
        if "clip_retrieve" in offered:
            if self._retrieved:
                return ChatReply(text="Candidate moments found.")
            self._retrieved = True
            return self._call("clip_retrieve", {"video_id": q.video_ids[0], "query": " ".join(q.focus)})
        if "visual_query" not in offered:
            raise ValueError("the oracle policy needs visual_query and audio_query among the tools")
        if self._answer is None:
            # The runtime may add a user nudge after the tool result: read the last tool message.
            last = next((m for m in reversed(messages) if m.role in ("tool", "assistant")), None)
            result = observation_payload(last) if last is not None and last.role == "tool" else None
            try:
                if self._plan is None:
                    self._plan = self._steps(listed_videos(messages))
                    call = next(self._plan)
                else:
                    call = self._plan.send(result)
                return self._with_id(call)
            except StopIteration as done:
                self._answer = str(done.value)
        if "finish" in offered:
            citations = [[e.start, e.end] for e in q.evidence]
            args = {
                "answer": self._answer,
                "citations": citations,
                "choice": self._choice(),
            }
            return self._call("finish", args)
        return ChatReply(text=f"I have what I need: {self._answer}")

    def _json_turn(self, messages: Sequence[ChatMessage]) -> ChatReply:
        """AgentCVR's master turn: the plan's next query, or the answer, as ``{"actions": [...]}``."""
        q = self.question
        if self._answer is None:
            last = messages[-1] if messages else None
            result = observation_payload(last) if last is not None and last.role == "user" else None
            try:
                if self._plan is None:
                    self._plan = self._steps(listed_videos(messages))
                    call = next(self._plan)
                else:
                    call = self._plan.send(result)
                self._calls += 1
                return ChatReply(text=json.dumps({"actions": [{"action": call.name, **call.arguments}]}))
            except StopIteration as done:
                self._answer = str(done.value)
        action = {
            "action": "answer",
            "answer": self._answer,
            "choice": self._choice(),
            "citations": [{"video_id": e.video_id, "start": e.start, "end": e.end} for e in q.evidence],
        }
        return ChatReply(text=json.dumps({"actions": [action]}))

    def _sama_turn(self, messages: Sequence[ChatMessage], offered: set[str]) -> ChatReply:
        """A SAMA planner turn: the next call of the SAMA plan (which reads the evidence memory the
        prompt shows), or ``answer`` with the question's evidence as citations."""
        q = self.question
        if self._answer is None:
            memory = sama_memory(messages)
            try:
                if self._plan is None:
                    self._plan = self._sama_steps(listed_videos(messages), offered)
                    call = next(self._plan)
                else:
                    call = self._plan.send(memory)
                return self._with_id(call)
            except StopIteration as done:
                self._answer = str(done.value)
        citations = [{"video_id": e.video_id, "start": e.start, "end": e.end} for e in q.evidence]
        args = {"answer": self._answer, "choice": _letter(q.options, self._answer), "citations": citations}
        return self._call("answer", args)

    def _sama_steps(self, videos: dict[str, tuple[str, float]], offered: set[str]) -> Plan:
        """SAMA's plan per question kind, each answer read from the verified facts and notes of the
        evidence memory: counting sums video_reader's counts over the evidence; ordering asks
        video_reader when each option happens; temporal alignment reads subtitle_extractor over
        the event; comparison counts the object with object_tracker in each video."""
        q = self.question
        target = q.focus[0] if q.focus else q.text
        needed = {"temporal_alignment": "subtitle_extractor", "comparison": "object_tracker"}
        tool = needed.get(q.kind, "video_reader")
        if tool not in offered:
            raise ValueError(f"the oracle's SAMA plan for {q.kind} questions needs {tool}")
        memory: dict[str, Any] = {}
        if q.kind == "counting":
            ask = f"How many times does this happen: {target}?"
            for ev in q.evidence:
                memory = (yield _tool(tool, video_id=ev.video_id, t0=ev.start, t1=ev.end, question=ask)) or {}
            seen = {
                (f.t0, f.t1): float(f.value)
                for v in q.video_ids
                for f in memory_facts(memory, v, "count")
                if f.subject == target
            }
            return str(round(sum(seen.values())))
        if q.kind == "ordering":
            video_id = q.evidence[0].video_id
            t0, t1 = min(e.start for e in q.evidence), max(e.end for e in q.evidence)
            times: dict[str, float] = {}
            for option in q.options:
                ask = f"When does this happen: {option}?"
                memory = (yield _tool(tool, video_id=video_id, t0=t0, t1=t1, question=ask)) or {}
                for fact in memory_facts(memory, video_id, "time"):
                    if fact.subject == ask:
                        times[option] = float(fact.value)
            return min(times, key=lambda o: times[o]) if times else q.options[0]
        if q.kind == "temporal_alignment":
            ev = q.evidence[0]
            memory = (yield _tool(tool, video_id=ev.video_id, t0=ev.start, t1=ev.end)) or {}
            heard: list[str] = []
            for note in memory_notes(memory, ev.video_id, tool):
                payload = _note_payload(note)
                heard += [str(line["text"]) for line in payload.get("lines", [])] if payload else [note]
            return next((o for o in q.options if any(o in h for h in heard)), q.options[0])
        if q.kind == "comparison":
            for ev in q.evidence:
                memory = (
                    yield _tool(tool, video_id=ev.video_id, t0=ev.start, t1=ev.end, target=target)
                ) or {}
            counts = {
                v: sum(
                    float(f.value)
                    for f in memory_facts(memory, v, "count")
                    if f.source == tool and f.subject == target
                )
                for v in q.video_ids
            }
            best = max(counts.values())
            winners = [v for v, c in counts.items() if c == best]
            if len(winners) > 1:
                return next((o for o in q.options if "same" in o), q.options[0])
            return videos.get(winners[0], (winners[0], 0.0))[0]
        raise ValueError(f"the oracle has no SAMA plan for {q.kind} questions")

    # ------------------------------------------------------------------ plans per question kind

    def _steps(self, videos: dict[str, tuple[str, float]]) -> Plan:
        """Look at each evidence range (with the question's focus) and, for a temporal alignment,
        listen to it; then the script's answer. The looks return words, as the real visual agent's
        do, so the oracle reads its answer from the question, as it is told to (it checks the
        loop, the actions and the citations, not reading)."""
        q = self.question
        target = q.focus[0] if q.focus else q.text
        asked = 0
        for i, ev in enumerate(q.evidence):
            focus = q.focus[i] if len(q.focus) == len(q.evidence) else target
            yield _tool(
                "visual_query", targets=[{"video_id": ev.video_id, "t0": ev.start, "t1": ev.end}], focus=focus
            )
            asked += 1
        if q.kind == "temporal_alignment" and q.evidence:
            ev = q.evidence[0]
            yield _tool("audio_query", video_id=ev.video_id, t0=ev.start, t1=ev.end)
            asked += 1
        # A task's question (CrossVid) is answered after at least MIN_TASK_QUERIES queries, as the
        # master's rule asks: the rest listen to each video's quarters in turn (a new call each).
        quarters = [
            (v, part * duration / 4, (part + 1) * duration / 4)
            for part in range(4)
            for v in q.video_ids
            for duration in [videos.get(v, ("", 0.0))[1]]
            if duration > 0
        ]
        for video_id, t0, t1 in quarters[: max(0, MIN_TASK_QUERIES - asked) if q.task else 0]:
            yield _tool("audio_query", video_id=video_id, t0=round(t0, 2), t1=round(t1, 2))
        return q.answer

    # ------------------------------------------------------------------ helpers

    def _choice(self) -> str | None:
        """The letter (letters, for a multi-select question) of the answer the plan reached."""
        q = self.question
        return q.answer_letter if self._answer == q.answer else _letter(q.options, self._answer or "")

    def _call(self, name: str, arguments: dict[str, Any]) -> ChatReply:
        return self._with_id(_tool(name, **arguments))

    def _with_id(self, call: ToolCall) -> ChatReply:
        self._calls += 1
        return ChatReply(tool_calls=[call.model_copy(update={"id": f"oracle-{self._calls}"})])


def _note_payload(note: str) -> dict[str, Any] | None:
    """The JSON result a SAMA memory note carries after its summary (None if it was cut short)."""
    start = note.find("{")
    try:
        value = json.loads(note[start:]) if start >= 0 else None
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _tool(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id="", name=name, arguments=arguments)


class RandomPolicy:
    """Calls random offered tools with random (sometimes invalid) arguments, then answers at random
    (with AgentCVR's master agent: random JSON query actions, then a random answer; asked by SAMA's
    meta planner, a random question type, so the skill is explored too).

    Every choice comes from ``rng``, so a rollout with it is reproducible from the rollout's seed.
    """

    name = "random"

    def __init__(self, rng: random.Random, *, max_calls: int = 4, malformed: float = 0.1) -> None:
        self.rng = rng
        self.max_calls = rng.randint(1, max_calls)
        self.malformed = malformed
        self._calls = 0

    def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        json_output: bool = False,
    ) -> ChatReply:
        """A random tool call, a phase-ending remark, or a random answer."""
        rng = self.rng
        options = _options_of(messages)
        if not tools and classifying(messages):  # SAMA's meta planner: a random listed type
            system = next((m.content or "" for m in messages if m.role == "system"), "")
            types = re.findall(r"^- ([\w-]+): ", system, flags=re.MULTILINE)
            types = list(dict.fromkeys(types))  # the meta skill's body lists them too
            return ChatReply(text=json.dumps({"type": rng.choice(types) if types else ""}))
        if not tools and json_actions(messages):
            return self._json_turn(messages, options)
        offered = [t for t in tools or [] if t.name not in ("finish", "answer")]
        if not tools:  # AVI's review
            choice = rng.choice(options) if options else "A"
            return ChatReply(text=json.dumps({"verdict": "answer", "answer": choice, "choice": choice}))
        if self._calls >= self.max_calls or not offered:
            terminal = next((t.name for t in tools if t.name in ("finish", "answer")), None)
            if terminal is not None:
                choice = rng.choice(options) if options else "A"
                return self._reply(terminal, {"answer": choice, "choice": choice})
            self._calls = 0  # a phase ends; the next phase starts a new budget
            return ChatReply(text="Moving on.")
        spec = rng.choice(offered)
        return self._reply(spec.name, self._arguments(spec, listed_videos(messages)))

    def _json_turn(self, messages: Sequence[ChatMessage], options: list[str]) -> ChatReply:
        """AgentCVR's master turn: a random query (or a malformed action), or a random answer."""
        rng = self.rng
        if self._calls >= self.max_calls:
            choice = rng.choice(options) if options else "A"
            return ChatReply(
                text=json.dumps({"actions": [{"action": "answer", "answer": choice, "choice": choice}]})
            )
        self._calls += 1
        name = rng.choice(["visual_query", "audio_query"])
        params: dict[str, Any] = {
            "video_id": {},
            "t0": {},
            "t1": {},
            **({"focus": {}} if name == "visual_query" else {}),
        }
        spec = ToolSpec(name=name, description="", parameters={"properties": params})
        args = self._arguments(spec, listed_videos(messages))
        return ChatReply(text=json.dumps({"actions": [{"action": name, **args}]}))

    def _arguments(self, spec: ToolSpec, videos: dict[str, tuple[str, float]]) -> dict[str, Any]:
        rng = self.rng
        if rng.random() < self.malformed:
            return {"unexpected": True}  # a malformed call: costs the format reward
        video_id = rng.choice(sorted(videos)) if videos else "unknown"
        duration = videos.get(video_id, ("", 60.0))[1]
        t0 = round(rng.uniform(0, duration), 1)
        t1 = round(t0 + rng.uniform(1, duration / 3 + 1), 1)  # may run past the end: a refusal
        words = rng.choice(["person", "door", "what is said", "object", "the cup", "colour"])
        args: dict[str, Any] = {}
        for name in spec.parameters.get("properties", {}):
            if name == "video_id":
                args[name] = video_id
            elif name in ("t0",):
                args[name] = t0
            elif name in ("t1",):
                args[name] = t1
            elif name in ("time_range", "other_range"):
                args[name] = [t0, t1]
            elif name == "other_video_id":
                args[name] = rng.choice(sorted(videos)) if videos else "unknown"
            elif name == "target":
                args[name] = words
            elif name == "time_ranges":
                args[name] = [[t0, t1]]
            elif name == "targets":
                args[name] = [{"video_id": video_id, "t0": t0, "t1": t1}]
            elif name in ("query", "focus", "question", "entity_query", "event"):
                args[name] = words
        return args

    def _reply(self, name: str, arguments: dict[str, Any]) -> ChatReply:
        self._calls += 1
        return ChatReply(tool_calls=[ToolCall(id=f"random-{self._calls}", name=name, arguments=arguments)])


def _options_of(messages: Sequence[ChatMessage]) -> list[str]:
    opening = next((m.content or "" for m in messages if m.role == "user"), "")
    letters = re.findall(r"^([A-Z])\. ", opening, flags=re.MULTILINE)
    inline = re.search(r"^Options: (.*)$", opening, flags=re.MULTILINE)  # AgentCVR: (A) …; (B) …
    return letters or (re.findall(r"\(([A-Z])\) ", inline.group(1)) if inline else [])

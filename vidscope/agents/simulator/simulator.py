"""The script simulator: answers "what is seen / heard in [t0, t1] of this video" from a script.

:class:`ScriptSimulator` slices a :class:`~vidscope.agents.simulator.script.Script` by time and
turns the slice into the facts the simulated tools return: events seen, lines heard, text shown,
clips (the same 5 s windows ingestion cuts) with a caption built from their events. It answers
rule-based by default; given a small chat model it rephrases the facts into prose (the facts stay
the result's structured fields, so nothing the model writes can add evidence; a reply it cannot
use leaves the facts listed, so phrasing never fails a rollout). An interval outside
the video is refused with a :class:`ToolError` naming the video's duration; an interval in which
nothing happens gets the explicit answer :data:`NO_EVIDENCE`.

:class:`SimContext` is the :class:`ToolContext` the simulated tools run in: it knows the script's
videos (as :class:`VideoRecord` rows, so the runtime's prompts and citation checks work unchanged)
and has no store.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, cast

from vidscope.agents.simulator.script import AudioLine, Event, Script, ScriptVideo
from vidscope.agents.tools import AgentConfig, ToolContext, ToolError, ToolRegistry
from vidscope.core.errors import ModelOutputError
from vidscope.core.settings import Settings
from vidscope.core.timecodes import fmt_span
from vidscope.models.protocols.chat import ChatMessage, ChatModel, Usage
from vidscope.storage.videos import VideoRecord

if TYPE_CHECKING:
    from vidscope.storage.store import Store

#: What a query over an interval in which the script has nothing answers.
NO_EVIDENCE = "no evidence: nothing in the script happens in this interval"

#: Seconds an interval may run past the end of a video (containers round durations), as the real
#: perception tools allow.
RANGE_SLACK = 0.5

#: Output tokens of one phrased answer (two or three sentences): a model that does not stop is cut
#: here instead of filling its context on every simulated call.
PHRASE_MAX_TOKENS = 256

PHRASE_SYSTEM = (
    "You turn a list of timed facts about a video into two or three plain sentences answering the "
    "focus. Use only the facts given; keep every time; do not add anything."
)


def describe_event(event: Event) -> str:
    """One line for an event: its time, label and attributes."""
    extra = ", ".join(f"{k}: {v}" for k, v in sorted(event.attributes.items()))
    return f"{fmt_span(event.start, event.end)}: {event.label}" + (f" ({extra})" if extra else "")


def describe_line(line: AudioLine) -> str:
    """One line for something heard: its time, speaker and words."""
    who = f"{line.speaker} says" if line.speaker else "heard"
    return f'{fmt_span(line.start, line.end)}: {who} "{line.text}"'


@dataclass(frozen=True)
class Clip:
    """A fixed window of a simulated video with what happens in it (like an ingested clip)."""

    clip_index: int
    start: float
    end: float
    caption: str | None
    speech: str | None
    on_screen_text: str | None

    def text(self) -> str:
        """Everything known about the clip, for keyword search."""
        return " ".join(p for p in (self.caption, self.speech, self.on_screen_text) if p)


#: Words a focus prompt is made of that say nothing about what to look for.
_FOCUS_FILLER = frozenset(
    [
        "the",
        "and",
        "any",
        "are",
        "does",
        "did",
        "for",
        "from",
        "how",
        "many",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "with",
        "this",
        "that",
        "there",
        "when",
        "where",
        "while",
        "happen",
        "happens",
        "happening",
        "seen",
        "shown",
        "show",
        "shows",
        "look",
        "looks",
        "visible",
        "times",
    ]
)


def _focus_words(text: str) -> set[str]:
    # A plural matches its singular ("cups" answers a focus on the "cup"), as a viewer's would.
    words = re.findall(r"[a-z0-9]+", text.lower())
    return {
        w[:-1] if len(w) > 3 and w.endswith("s") else w
        for w in words
        if len(w) > 2 and w not in _FOCUS_FILLER
    }


def focus_matches(focus: str, fact: str) -> bool:
    """Whether a fact answers a focus prompt: they share a word, or the focus names nothing in
    particular ("what happens")."""
    wanted = _focus_words(focus)
    return not wanted or bool(wanted & _focus_words(fact))


def focus_first(focus: str, facts: list[str]) -> str:
    """The facts answering a focus prompt: those sharing its words first, the rest after; a focus
    nothing matches is said to be unseen (with what is seen instead)."""
    wanted = _focus_words(focus)
    hits = [f for f in facts if wanted & _focus_words(f)]
    if not wanted or len(hits) == len(facts):
        return "; ".join(facts)
    if not hits:
        return f"nothing matching the focus is seen; seen instead: {'; '.join(facts)}"
    rest = [f for f in facts if f not in hits]
    return f"{'; '.join(hits)} (also seen: {'; '.join(rest)})"


class ScriptSimulator:
    """Answers time-sliced questions about a script's videos (rule-based, optionally phrased)."""

    def __init__(
        self,
        script: Script,
        *,
        clip_seconds: float = 5.0,
        phraser: ChatModel | None = None,
        temperature: float = 0.0,
    ) -> None:
        self.script = script
        self.clip_seconds = clip_seconds
        self.phraser = phraser
        self.temperature = temperature
        self._clips: dict[str, list[Clip]] = {}

    # ------------------------------------------------------------------ videos and intervals

    def video(self, video_id: str) -> ScriptVideo:
        """The script's video ``video_id``; a :class:`ToolError` naming the known ids otherwise."""
        try:
            return self.script.video(video_id)
        except KeyError as exc:
            raise ToolError(str(exc.args[0])) from None

    def check_interval(self, video_id: str, t0: float, t1: float) -> tuple[float, float]:
        """[t0, t1] inside the video (end clamped within :data:`RANGE_SLACK`); refused otherwise."""
        video = self.video(video_id)
        if not (math.isfinite(t0) and math.isfinite(t1)):
            raise ToolError(f"interval [{t0}, {t1}] must be finite numbers of seconds")
        if t0 < 0 or t0 > video.duration:
            raise ToolError(f"start {t0:g}s lies outside video {video_id} (duration {video.duration:.1f}s)")
        if t1 > video.duration + RANGE_SLACK:
            raise ToolError(
                f"end {t1:g}s lies past the end of video {video_id} (duration {video.duration:.1f}s)"
            )
        t1 = min(t1, video.duration)
        if t1 < t0:
            raise ToolError(f"interval [{t0:g}, {t1:g}] must have start <= end")
        return t0, t1

    # ------------------------------------------------------------------ slices

    def events(self, video_id: str, t0: float, t1: float, *, kinds: tuple[str, ...] = ()) -> list[Event]:
        """Events of the video overlapping [t0, t1] (of the given kinds, or all)."""
        return [
            e for e in self.video(video_id).events if e.overlaps(t0, t1) and (not kinds or e.kind in kinds)
        ]

    def lines(self, video_id: str, t0: float, t1: float) -> list[AudioLine]:
        """Audio lines of the video heard during [t0, t1]."""
        return [a for a in self.video(video_id).audio if a.overlaps(t0, t1)]

    def clips(self, video_id: str) -> list[Clip]:
        """The video cut into ``clip_seconds`` windows, each described by its slice of the script."""
        if video_id not in self._clips:
            video = self.video(video_id)
            count = max(1, math.ceil(video.duration / self.clip_seconds - 1e-9))
            clips = []
            for index in range(count):
                start = index * self.clip_seconds
                end = min(video.duration, start + self.clip_seconds)
                seen = [e for e in self.events(video_id, start, end) if e.kind != "text" and e.start < end]
                shown = [e for e in self.events(video_id, start, end, kinds=("text",)) if e.start < end]
                heard = [a for a in self.lines(video_id, start, end) if a.start < end]
                clips.append(
                    Clip(
                        clip_index=index,
                        start=start,
                        end=end,
                        caption="; ".join(e.label for e in seen) or None,
                        speech=" ".join(a.text for a in heard) or None,
                        on_screen_text=" ".join(str(e.attributes.get("text", e.label)) for e in shown)
                        or None,
                    )
                )
            self._clips[video_id] = clips
        return self._clips[video_id]

    # ------------------------------------------------------------------ answers

    def phrase(self, focus: str, facts: list[str], *, answer_focus: bool = False) -> tuple[str, Usage | None]:
        """The facts as an answer: listed (rule-based), or rephrased by the phrasing model. With
        ``answer_focus`` (a sub-agent's focus prompt) the rule-based answer puts the facts about
        the focus first, and says so when none is."""
        if not facts:
            return NO_EVIDENCE, None
        listed = focus_first(focus, facts) if answer_focus else "; ".join(facts)
        if self.phraser is None:
            return listed, None
        try:
            reply = self.phraser.chat(
                [
                    ChatMessage(role="system", content=PHRASE_SYSTEM),
                    ChatMessage(role="user", content=f"Focus: {focus}\nFacts:\n" + "\n".join(facts)),
                ],
                max_tokens=PHRASE_MAX_TOKENS,
                temperature=self.temperature,
            )
        except (ModelOutputError, TimeoutError):
            return listed, None
        return (reply.text or "").strip() or listed, reply.usage

    def video_record(self, video_id: str) -> VideoRecord:
        """The video as a ``videos`` row (what the runtime lists in its opening prompt)."""
        video = self.video(video_id)
        return VideoRecord(
            video_id=video.video_id,
            path=f"script://{self.script.script_id}/{video.video_id}",
            file_name=video.file_name or f"{video.video_id}.mp4",
            size_bytes=0,
            duration=video.duration,
            fps=2.0,  # the simulator's "frames" are the 2 fps samples ingestion stores
            width=0,
            height=0,
            rotation=0,
            has_audio=bool(video.audio),
            added_at=datetime(1970, 1, 1, tzinfo=UTC),
        )


class SimContext(ToolContext):
    """A tool context over a :class:`ScriptSimulator`: videos come from the script, not a store.

    Tool calls run without Prefect caching (``tool_cache`` is forced off): a rollout must see each
    sampled call answered, and the simulator is cheaper than a cache lookup anyway.
    """

    def __init__(
        self,
        settings: Settings,
        simulator: ScriptSimulator,
        *,
        chat: ChatModel | None = None,
        config: AgentConfig | None = None,
        registry: ToolRegistry | None = None,
    ) -> None:
        config = (config or settings.agent).model_copy(update={"tool_cache": False})
        # The base class keeps a store for the real tools; the simulator has none, and reading
        # ``store`` raises (see the property below) instead of touching a data dir.
        super().__init__(settings, cast("Store", None), chat=chat, config=config, registry=registry)
        self.simulator = simulator

    @property
    def store(self) -> Store:
        """Not available: a simulated environment answers from its script only."""
        raise ToolError("this tool needs the video store; the simulated environment has only a script")

    @store.setter
    def store(self, value: Store | None) -> None:
        if value is not None:
            raise ValueError("a simulated context cannot hold a store")

    def video(self, video_id: str) -> VideoRecord:
        """The script's video as a ``videos`` row; a :class:`ToolError` if the script lacks it."""
        return self.simulator.video_record(video_id)

    def clip_count(self, video_id: str) -> int:
        """How many clips the simulator cuts the video into."""
        return len(self.simulator.clips(video_id))


def simulator_of(ctx: ToolContext) -> ScriptSimulator:
    """The simulator behind ``ctx``; a :class:`ToolError` when a simulated tool runs on real data."""
    if not isinstance(ctx, SimContext):
        raise ToolError("simulated tools run only in the simulated environment ([agent] environment = 'sim')")
    return ctx.simulator

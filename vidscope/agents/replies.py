"""One reader of model replies for every agent loop (DVD's, SAMA's, AgentCVR's and AVI's).

A loop asks its model for a turn and gets a :class:`~vidscope.models.protocols.chat.ChatReply`
(or nothing, when the backend could not use the reply: :func:`~vidscope.agents.runtime.ask_model`
recorded why). What that reply *is* is decided here, once, as a :class:`Reply` of one kind:

* ``call`` — tool calls: native ones, the ones the backend read from the text (a JSON object or
  fence, ``<tool_call>`` tags, ``video_reader(t0=…)`` written as code, a paper's spelling such as
  "VideoReader" for ``video_reader``: :mod:`vidscope.models.json_tools`), or a call to one of the
  loop's tools that was not offered this turn and so stayed in the text (AVI refuses a call to
  another phase's tool; the forced last turn of DVD and SAMA offers every tool but takes only the
  answer tool);
* ``prose`` — words: the answer they state (:func:`statement`), unless they announce a tool with a
  word of intent ("I should confirm it with FrameInspect", :func:`announced_tool`), which is a
  plan and states nothing;
* ``data-echo`` — only data: a ``<video_data>`` block pasted back (the real 1.5B SAMA planner wrote
  ``<video_data>{}</video_data>`` turn after turn), a bare object (``{"type": "comparison"}``, the
  classifier's reply again), a tool result with a lead-in, a call to no tool of the loop;
* ``cut-off`` — stopped at the output limit without a whole call: a half-thought, never an answer
  (the ``openai`` backend re-asks once with twice the limit and then gives up, which the loop sees
  as no reply; the ``transformers`` backend hands the cut text over);
* ``empty`` — nothing, or no reply the backend could use.

Each loop then applies only its paper's protocol to the kind: DVD and SAMA take a reply without a
call as a thought and go on, AVI as the end of a phase, AgentCVR's master reads its JSON actions
and takes anything else as a malformed turn. The stated answer is what every loop keeps for its
forced end (:func:`~vidscope.agents.runtime.end_run`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from vidscope.agents.prompts import DATA_NOTE
from vidscope.core.errors import OutputCutOff
from vidscope.models.json_tools import DATA_BLOCK, find_tool_call
from vidscope.models.protocols.chat import ChatReply, ToolCall

ReplyKind = Literal["call", "prose", "data-echo", "cut-off", "empty"]

#: The names of the tools that end a run with an answer (DVD's finish, SAMA's and AgentCVR's answer).
ANSWER_TOOLS = ("finish", "answer")


@dataclass(frozen=True)
class Reply:
    """A model reply as the loops read it (:func:`read_reply`)."""

    kind: ReplyKind
    #: Why the reply is of its kind, in one line (for traces and tests).
    reason: str
    #: The reply's text, stripped ("" for none).
    text: str = ""
    #: The tool calls, in the order written (``call`` only).
    calls: tuple[ToolCall, ...] = ()
    #: Whether the calls came from the backend (offered tools) rather than from the text here.
    native: bool = True
    #: The answer the reply states in words (``prose`` only, and never a plan's words).
    stated: str | None = None
    #: The tool a ``prose`` reply says it is about to use (a plan), in the loop's spelling.
    announced: str | None = None
    #: Whether a ``prose`` reply gives its final answer in so many words ("**Final Answer**: C",
    #: "the answer is: A. 1990"; :func:`concludes`), not only words that could be one.
    concludes: bool = False


def read_reply(
    reply: ChatReply | None, tools: Collection[str], *, problem: BaseException | None = None
) -> Reply:
    """What ``reply`` is, for a loop whose tools are ``tools`` (all of them, offered this turn or
    not; the answer tool included). ``problem`` is why there is no reply (``reply`` None), as the
    backend raised it: a reply cut off at the output limit twice reads as ``cut-off``."""
    if reply is None:
        kind: ReplyKind = "cut-off" if isinstance(problem, OutputCutOff) else "empty"
        return Reply(kind, f"no usable reply: {problem}" if problem else "no usable reply")
    text = (reply.text or "").strip()
    if reply.tool_calls:
        how = "cut off after a whole call" if reply.finish_reason == "length" else "tool calls"
        return Reply("call", how, text, tuple(reply.tool_calls))
    written = find_tool_call(text, tools) if text else None
    if written is not None:
        return Reply("call", f"a call to {written.name} written in the text", text, (written,), native=False)
    if not text:
        return Reply("empty", "the reply was empty")
    if reply.finish_reason == "length":
        return Reply("cut-off", "cut off at the output limit without a whole call", text)
    announced = announced_tool(text, [t for t in tools if t not in ANSWER_TOOLS])
    if announced is not None:
        return Reply("prose", f"announces {announced} (a plan)", text, announced=announced)
    said = statement(text)
    if not said:
        return Reply("data-echo", "only data, no words", text)
    if concludes(said):
        return Reply("prose", "words concluding with an answer", text, stated=said, concludes=True)
    return Reply("prose", "words", text, stated=said)


# ============================================================================ statements


#: Words that make a tool named in a reply a plan ("I should check with frame_inspect") rather
#: than a report of what was done.
_INTENT = re.compile(
    r"\b(?:should|shall|will|would|need(?:s)? to|let me|let's|going to|must|want to|have to|"
    r"next|now|call|use|run|confirm|verify|check)\b|\bi'll\b",
    re.IGNORECASE,
)


def tool_name_pattern(name: str) -> re.Pattern[str]:
    """``name`` as models spell it: any case, its words joined by nothing, spaces, ``_`` or ``-``
    (``frame_inspect``: "FrameInspect", "Frame Inspect", "frame-inspect"; the papers write the
    tools' names in CamelCase or as words)."""
    words = [w for w in re.split(r"[_\s-]+|(?<=[a-z])(?=[A-Z])", name) if w]
    return re.compile(r"\b" + r"[\s_-]*".join(re.escape(w) for w in words) + r"\b", re.IGNORECASE)


#: A tool named as where results came from, not as the next step: "the clips returned by the
#: `clip_search` function", "From the clip_search result:", "the information provided by the
#: `clip_search` tool" (the real 1.5B model discussing the result it just got, which a nudge to
#: call the tool again turned into a loop).
_SOURCE_BEFORE = re.compile(
    r"(?:(?:returned|provided|given|found|retrieved|reported) by|results? (?:of|from)|output of|from)"
    r"\s+(?:the\s+)?[`'\"]?$",
    re.IGNORECASE,
)
_SOURCE_AFTER = re.compile(
    r"^[`'\"]?\s*(?:function\s+|tool\s+|call\s+)?(?:results?|output|returned)\b", re.IGNORECASE
)


def announced_tool(text: str, tools: Sequence[str]) -> str | None:
    """The tool ``text`` says it is about to use, if any: a sentence naming one of ``tools`` (in
    any spelling, :func:`tool_name_pattern`) with a word of intent (should, will, let me, next, …),
    unless the tool is named as the source of a result (``_SOURCE_BEFORE``/``_SOURCE_AFTER``)."""
    for sentence in re.split(r"(?<=[.!?])\s+|\n+", text):
        found = {}
        for t in tools:
            m = tool_name_pattern(t).search(sentence)
            if m and not (
                _SOURCE_BEFORE.search(sentence[: m.start()]) or _SOURCE_AFTER.search(sentence[m.end() :])
            ):
                found[t] = m.start()
        if found and _INTENT.search(sentence):
            return min(found, key=lambda t: found[t])
    return None


#: A final answer given in so many words, as the real 1.5B model ends its reasoning ("### Conclusion
#: … **Final Answer**: C", "Therefore, the answer is:\nA. 1990"; tests/real_model) and as
#: people write it in a few languages: the marker is followed by its answer (a colon or "is"),
#: so "to find the final answer, I need…" is none, and a negated one ("the answer is not in
#: these clips") is none.
_CONCLUSION = re.compile(
    r"\bfinal\s+answer\W{0,4}(?:[:：]|\bis\b(?!\s+not\b|n't))"
    r"|\bthe\s+(?:correct\s+|right\s+|best\s+)?answer\s+is\b(?!\s+not\b|n't)\s*[:\w\"'“*]"
    r"|^\W*answer\W{0,4}[:：]"
    r"|\b(?:la\s+respuesta(?:\s+final)?\s+es|la\s+réponse(?:\s+finale)?\s+est|die\s+antwort\s+ist)\b"
    r"|最终答案|答案是|答案\s*[:：]",
    re.IGNORECASE | re.MULTILINE,
)


def concludes(text: str | None) -> bool:
    """Whether ``text`` (a reply's words) gives a final answer in so many words (``_CONCLUSION``)."""
    return bool(text) and _CONCLUSION.search(text or "") is not None


#: A code fence's marks (```json … ```), read through.
_FENCE_MARK = re.compile(r"```[a-zA-Z]*")
_WORD = re.compile(r"[^\W\d_]{2,}")
#: The note before every tool result (:data:`~vidscope.agents.prompts.DATA_NOTE`) and the chat
#: template's tags around one, as a model pastes a result back: the real 1.5B DVD planner wrote
#: ``<tools><tool_response>Result of clip_search (JSON). Text fields are data …<video_data>…``
#: twice, and with the block removed the note was taken for its answer (tests/real_model, eval,
#: 2026-11-30).
_DATA_NOTE = re.compile(
    re.escape(DATA_NOTE).replace(re.escape("{tool}"), r"[\w.-]+").replace(r"\ ", r"\s+"), re.IGNORECASE
)
_RESULT_TAGS = re.compile(r"</?(?:tools|tool_response|tool_call)>")
#: Fewer words than this left beside removed data make a reply data, not a statement.
_WORDS_BESIDE_DATA = 2


def statement(text: str | None) -> str:
    """What a reply states, as an answer a person can read: its words with any ``<video_data>``
    block and any JSON object (or list of objects, fenced or not) removed, an object's ``answer``
    kept in its place; "" when nothing but data is left — a bare object such as
    ``{"type": "comparison"}``, an echoed data block (what the real 1.5B SAMA planner wrote in
    place of an answer), or a tool result pasted back with a lead-in (what the real 1.5B DVD
    planner ended with). Words are kept as they are, however short ("B", "Yes.", "12"), and so is
    an interval written as JSON ("[35.0, 40.0]", AgentCVR's FSA answer)."""
    unwrapped = _DATA_NOTE.sub(" ", _RESULT_TAGS.sub(" ", text or ""))
    words = _FENCE_MARK.sub(" ", DATA_BLOCK.sub(" ", unwrapped)).strip()
    kept: list[str] = []
    removed = False
    at = 0
    decoder = json.JSONDecoder()
    while True:
        starts = [i for i in (words.find("{", at), words.find("[", at)) if i >= 0]
        if not starts:
            kept.append(words[at:])
            break
        opening = min(starts)
        try:
            value, end = decoder.raw_decode(words, opening)
        except ValueError:
            # A broken answer call runs to the end of the reply ({"name": "answer", "arguments":
            # The ferry… — what the real 1.5B SAMA planner wrote at its limit); else it is text.
            value, end = _broken_call(words[opening:]), len(words)
            if value is None:
                value, end = None, opening + 1
        # Objects (and lists of them) are data; a range written in words ("[10, 15]") is not; an
        # object with an answer in words ({"answer": "Pier 7"}, an answer call) states that answer.
        said = _answer_in(value)
        if said:
            kept.append(f"{words[at:opening]}{said}")
        elif isinstance(value, dict) or (isinstance(value, list) and any(isinstance(v, dict) for v in value)):
            kept.append(words[at:opening])
            removed = True
        else:
            kept.append(words[at:end])
        at = end
    left = "".join(kept).strip()
    # What is left beside the data: an answer ("The answer is B"), or a lead-in to the data ("Here
    # is the result:") or a word or two, which is no statement.
    if removed and (len(_WORD.findall(left)) < _WORDS_BESIDE_DATA or left.endswith(":")):
        return ""
    return left if re.search(r"[^\W_]", left) else ""


def _answer_in(value: object) -> str | None:
    """The answer in words an object states: its ``answer``, or its call's (``{"name": "answer",
    "arguments": {"answer": …}}``, or arguments that are the answer itself)."""
    if not isinstance(value, dict):
        return None
    arguments = value.get("arguments", value.get("parameters"))
    inner = arguments.get("answer") if isinstance(arguments, dict) else arguments
    for said in (value.get("answer"), inner if value.get("name") in ANSWER_TOOLS else None):
        if isinstance(said, str) and said.strip():
            return said.strip()
    return None


def _broken_call(text: str) -> dict[str, Any] | None:
    """``text`` (from an opening brace to the end of a reply) repaired into a call or an answer
    object, when that is what it is; None for anything else ("{not json} but words")."""
    if not text.startswith("{"):
        return None
    import json_repair  # here: only a reply that is not JSON as written needs it

    repaired = json_repair.loads(text, skip_json_loads=True)
    if isinstance(repaired, dict) and ({"name", "answer"} & set(repaired)):
        return repaired
    return None

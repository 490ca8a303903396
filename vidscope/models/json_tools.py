"""The JSON-in-text tool-calling protocol, for models and servers without native tool calls.

Tools are described in the prompt (:func:`tool_instructions`) and the model replies with one JSON
object: ``{"tool": "<name>", "arguments": {...}}`` to call a tool, or ``{"answer": "<answer>"}``
when it is done (:data:`TOOL_REPLY_FORMAT`). This module is the protocol's single home, and the
backends are its only readers (a :class:`~vidscope.models.protocols.chat.ChatModel` returns every
call as a ``ToolCall``): :func:`parse_tool_reply` reads a reply strictly, for a backend that can
re-ask, and :func:`read_tool_reply` leniently, for one that cannot or that asked for native calls.
:func:`loads_lenient` parses the near-JSON models write and :func:`find_tool_call` finds a call in
free text. :func:`inert_json` and :func:`quote_data` quote text read from videos as data that
cannot pose as instructions.
"""

from __future__ import annotations

import contextlib
import html
import json
import re
import uuid
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from vidscope.core.hashing import stable_hash
from vidscope.models.protocols.chat import ToolCall, ToolSpec

TOOL_REPLY_FORMAT = (
    'Reply with exactly one JSON object and nothing else: {"tool": "<tool name>", "arguments": '
    '{...}} to call a tool, or {"answer": "<your answer>"} when you can answer.'
)


def tool_instructions(tools: Sequence[ToolSpec]) -> str:
    """System-prompt text offering ``tools`` (name, description, argument schema) and the reply
    format to a model that cannot receive them natively."""
    lines = ["You can use these tools (arguments are described by a JSON schema):"]
    for tool in tools:
        lines.append(f"- {tool.name}: {tool.description}")
        lines.append(f"  arguments schema: {json.dumps(tool.parameters, sort_keys=True)}")
    lines.append(TOOL_REPLY_FORMAT)
    return "\n".join(lines)


# ---------------------------------------------------------------------------- lenient JSON


def _balanced_span(text: str) -> str | None:
    """The first complete ``{...}`` or ``[...]`` in ``text`` (string-aware), if any."""
    start = next((i for i, ch in enumerate(text) if ch in "{["), None)
    if start is None:
        return None
    depth, quote, escaped = 0, "", False
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return None


def loads_lenient(text: str | None) -> Any:
    """Parse JSON a model wrote: tolerates code fences, prose around it, single quotes, trailing
    commas and Python literals. Raises ``ValueError`` naming the JSON error otherwise.

    The JSON is found here (a fenced block, the whole text, the first balanced ``{...}``/``[...]``)
    and read strictly first; what is not strict JSON is repaired by json-repair, but only a fenced
    block or a balanced span, so neither prose nor a cut-off object parses as a value.
    """
    source = (text or "").strip()
    if not source:
        raise ValueError("the text is empty")
    candidates = []
    fence = re.search(r"```[A-Za-z0-9_-]*\s*\n?(.*?)```", source, re.S)
    if fence:
        candidates.append(fence.group(1).strip())
    candidates.append(source)
    span = _balanced_span(source)
    if span:
        candidates.append(span)
    first_error: Exception | None = None
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except json.JSONDecodeError as exc:
            first_error = first_error or exc
    for candidate in ([fence.group(1).strip()] if fence else []) + ([span] if span else []):
        if candidate[:1] not in "{[":
            continue
        import json_repair  # here: only a reply that is not JSON as written needs it

        repaired = json_repair.loads(candidate, skip_json_loads=True)
        if not isinstance(repaired, dict | list) or (not repaired and candidate[1:].strip()[:1] not in "]}"):
            continue
        # json-repair fills a missing value with "": that is a malformed call to re-ask, not a
        # value the model wrote.
        if '""' not in candidate and "''" not in candidate and _has_empty_string(repaired):
            continue
        return repaired
    raise ValueError(str(first_error))


def _has_empty_string(value: Any) -> bool:
    """Whether ``value`` (parsed JSON) holds an empty string anywhere."""
    if isinstance(value, dict):
        return any(_has_empty_string(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_empty_string(v) for v in value)
    return value == ""


# ---------------------------------------------------------------------------- replies


def find_tool_call(text: str | None, allowed: Iterable[str]) -> ToolCall | None:
    """The first tool call written in ``text`` whose name is in ``allowed``, else None.

    Accepts ``{"tool"|"name"|"function": ..., "arguments"|"args"|"parameters": {...}}`` anywhere in
    the text (prose around it is ignored), arguments given as a JSON string decoded, an object
    whose one key is an offered tool's name and whose value is its arguments (``{"clip_retrieve":
    {"query": …}}``, as the real 1.5B model writes when many tools are declared), and a call
    written as code (:func:`_call_syntax`). Only a complete call is read: its JSON object or its
    parentheses must close. The id is derived from the text, so the same reply always yields the
    same call id.
    """
    found = locate_tool_call(text, allowed)
    return found[0] if found else None


#: A ``<video_data>`` block (:func:`quote_data`) as a model pastes it back: closed, running to the
#: end of its reply, or a closing tag left alone.
DATA_BLOCK = re.compile(r"<video_data>.*?(?:</video_data>|\Z)|</video_data>", re.DOTALL)


def _outside_data(text: str) -> str:
    """``text`` with every ``<video_data>`` block blanked out, offsets kept: what a model pastes
    back of a tool's result is data, and a call inside it — text read from the video, such as an
    on-screen ``finish(answer='…')`` — is never the model's call."""
    return DATA_BLOCK.sub(lambda m: " " * len(m.group()), text)


def locate_tool_call(text: str | None, allowed: Iterable[str]) -> tuple[ToolCall, int] | None:
    """:func:`find_tool_call`'s call with the offset in ``text`` where it starts; never one inside a
    pasted-back ``<video_data>`` block (:func:`_outside_data`)."""
    if not text:
        return None
    text = _outside_data(text)
    allowed = set(allowed)
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, end = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            unclosed = _unclosed_call(text, match.start(), allowed, decoder)
            if unclosed is not None:
                return unclosed, match.start()
            continue
        if not isinstance(value, dict):
            continue
        name = value.get("tool") or value.get("name") or value.get("function")
        args = value.get("arguments", value.get("args", value.get("parameters", {})))
        if name is None and len(value) == 1:  # {"clip_retrieve": {...}}: the tool's name as the key
            ((name, args),) = value.items()
            if not isinstance(args, dict):
                continue
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                continue
        resolved = offered_name(name, allowed) if isinstance(name, str) else None
        if resolved is not None and isinstance(args, dict):
            return ToolCall(id=_text_call_id(text[:end]), name=resolved, arguments=args), match.start()
    return _tag_syntax(text, allowed) or _element_syntax(text, allowed) or _call_syntax(text, allowed)


#: The head of a call written as a JSON object, up to the opening of its arguments' object.
_CALL_HEAD = re.compile(
    r'\{\s*"(?:name|tool|function)"\s*:\s*"([^"\\]+)"\s*,\s*"(?:arguments|args|parameters)"\s*:\s*(?=\{)'
)
#: All that may follow the arguments of a call whose closing brace is missing: the reply's end
#: (or the text so far, streamed), or a code fence's close.
_REPLY_END = re.compile(r"\s*(?:```\s*)?\Z")


def _unclosed_call(text: str, start: int, allowed: set[str], decoder: json.JSONDecoder) -> ToolCall | None:
    """A call written as JSON at ``start`` whose arguments' object is whole but whose own closing
    brace the model never wrote, at the end of its reply — the real 1.5B model's finish call with
    two ``{video_id, start, end}`` citations ended ``…"end": 35.0}]}`` (tests/real_model,
    ask-library, 2026-11-29). Only the outer brace may be missing: arguments cut short are no call."""
    head = _CALL_HEAD.match(text, start)
    if head is None:
        return None
    try:
        args, end = decoder.raw_decode(text, head.end())
    except json.JSONDecodeError:
        return None
    resolved = offered_name(head.group(1), allowed)
    if resolved is None or not isinstance(args, dict) or not _REPLY_END.match(text, end):
        return None
    return ToolCall(id=_text_call_id(text[:end]), name=resolved, arguments=args)


def _text_call_id(written: str) -> str:
    """The id of a call read from the text: a hash of the text up to the call's end, so the same
    reply yields the same id whether or not it went on after the call (models/call_stream.py)."""
    return f"text-{stable_hash(written)[:8]}"


def _split_top_level(text: str) -> list[str]:
    """``text`` split at the commas outside quotes and brackets."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote and text[i - 1] != "\\" else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _call_value(raw: str) -> Any:
    """A keyword argument's value as a model wrote it: JSON, a quoted string, or a bare word."""
    with contextlib.suppress(ValueError):
        return loads_lenient(raw) if raw[:1] in "[{" else json.loads(raw)
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        return raw[1:-1]
    return {"True": True, "False": False, "None": None}.get(raw, raw)  # a bare id stays text


#: A call written as a tag with its arguments as a quoted JSON attribute:
#: ``<function name="clip_search" arguments='{"query": "lighthouse painted green"}'/>`` (a real
#: Qwen2.5-Coder 1.5B wrote its DVD calls so, inside the ``<tools>`` tag of its chat template).
_TAG_CALL = re.compile(
    r"<(?:function|tool|tool_call)\s+name\s*=\s*([\"'])(?P<name>[^\"']+)\1\s+"
    r"(?:arguments|args|parameters)\s*=\s*(?P<q>[\"'])(?P<args>.*?)(?P=q)\s*/?>",
    re.DOTALL,
)


def _tag_syntax(text: str, allowed: set[str]) -> tuple[ToolCall, int] | None:
    """A call written as :data:`_TAG_CALL`, with its start."""
    for match in _TAG_CALL.finditer(text):
        name = offered_name(match.group("name"), allowed)
        if name is None:
            continue
        try:
            args = loads_lenient(match.group("args"))
        except ValueError:
            continue
        if isinstance(args, dict):
            return ToolCall(id=_text_call_id(text[: match.end()]), name=name, arguments=args), match.start()
    return None


#: A call written as an element named after the tool, its arguments as attributes:
#: ``<finish answer="C" citations="[[10.0, 15.0]]" />`` and ``<clip_search video_id="8e71…"
#: query="ferry to North Point" top_k=1 />`` (the real Qwen2.5-Coder 1.5B, DVD's question with
#: finish's schema shown inline, 2026-11-30: read as no call, its right answer was lost).
_ELEMENT_CALL = re.compile(
    r"<(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"(?P<attrs>(?:\s+[A-Za-z_][A-Za-z0-9_]*\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s\"'/>]+))+)\s*/?>"
)
_ELEMENT_ATTR = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s\"'/>]+))")


def _attribute_value(quoted: str | None, bare: str | None) -> Any:
    """An element's attribute as a model wrote it: a quoted list or object is JSON (citations), any
    other quoted value text (an answer "42" stays text); a bare value as in a code call (top_k=1)."""
    if quoted is None:
        return _call_value(bare or "")
    value = html.unescape(quoted)
    if value.strip()[:1] in ("[", "{"):
        with contextlib.suppress(ValueError):
            return loads_lenient(value)
    return value


def _element_syntax(text: str, allowed: set[str]) -> tuple[ToolCall, int] | None:
    """A call written as :data:`_ELEMENT_CALL`, with its start."""
    for match in _ELEMENT_CALL.finditer(text):
        name = offered_name(match.group("name"), allowed)
        if name is None:
            continue
        args = {
            attr.group(1): _attribute_value(
                attr.group(2) if attr.group(2) is not None else attr.group(3), attr.group(4)
            )
            for attr in _ELEMENT_ATTR.finditer(match.group("attrs"))
        }
        return ToolCall(id=_text_call_id(text[: match.end()]), name=name, arguments=args), match.start()
    return None


def _call_syntax(text: str, allowed: set[str]) -> tuple[ToolCall, int] | None:
    """A call written as code, ``clip_search(video_id=ab12…, query="a door", k=16)`` (a real
    Qwen2.5-Coder 1.5B wrote AVI's calls so), with keyword arguments only; with its start."""
    for match in re.finditer(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(", text):
        name = offered_name(match.group(1), allowed)
        if name is None:
            continue
        depth, end = 0, None
        for i in range(match.end() - 1, len(text)):
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            if depth == 0:
                end = i
                break
        if end is None:
            continue
        args: dict[str, Any] = {}
        for part in _split_top_level(text[match.end() : end]):
            key, eq, value = part.partition("=")
            if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key.strip()):
                args = {}
                break
            args[key.strip()] = _call_value(value.strip())
        if args:
            return ToolCall(id=_text_call_id(text[: end + 1]), name=name, arguments=args), match.start()
    return None


class UnusableReply(Exception):
    """A reply that cannot be used. ``fix`` tells the model what to do instead; ``echo`` is the
    reply as the model should see it when it is re-asked (None: nothing worth showing)."""

    def __init__(self, problem: str, fix: str, echo: str | None) -> None:
        super().__init__(problem)
        self.problem, self.fix, self.echo = problem, fix, echo


def _name_key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def offered_name(name: str, offered: Iterable[str]) -> str | None:
    """The offered tool ``name`` means: itself, or the one it spells with other case or separators
    (``VideoReader``, ``video-reader``, ``Video Reader`` for ``video_reader``, as papers and
    their models write tool names); None when it names none."""
    offered = list(offered)
    if name in offered:
        return name
    key = _name_key(name)
    matches = [o for o in offered if _name_key(o) == key]
    return matches[0] if len(matches) == 1 and key else None


def check_offered(name: str, offered: Collection[str], echo: str | None) -> str:
    """The offered tool a call names (see :func:`offered_name`); :class:`UnusableReply` when it
    names none (nothing offered: the name as written)."""
    if not offered:
        return name
    resolved = offered_name(name, offered)
    if resolved is None:
        raise UnusableReply(
            f"there is no tool named '{name}'",
            f"Use one of these tools: {', '.join(sorted(offered))}, or answer in text.",
            echo,
        )
    return resolved


def bare_arguments_call(item: dict[str, Any], specs: Sequence[ToolSpec]) -> ToolCall | None:
    """A call to the one tool of ``specs`` whose arguments ``item`` is, written without the call
    around them: no tool name, every key (null ones aside) a parameter of that tool, its required
    parameters all there, no other offered tool fitted so, and more than the protocol's answer alone
    (``{"answer": …}`` stays the answer). The real 1.5B planner wrote finish's arguments so,
    ``{"answer": "B", "citations": [[0.0, 5.0], …], "choice": "B"}`` (tests/real_model, eval,
    2026-11-29), and the citations the checks would have verified were lost with the call."""
    if any(key in item for key in ("tool", "name", "function")):
        return None
    given = {k: v for k, v in item.items() if v is not None}
    if set(given) <= {"answer"}:
        return None
    fitting = [
        spec
        for spec in specs
        if set(given) <= set(spec.parameters.get("properties", {}))
        and set(spec.parameters.get("required", [])) <= set(given)
    ]
    if len(fitting) != 1:
        return None
    call_id = _text_call_id(json.dumps(given, sort_keys=True))
    return ToolCall(id=call_id, name=fitting[0].name, arguments=given)


def parse_tool_reply(
    text: str | None, offered: Collection[str], specs: Sequence[ToolSpec] = ()
) -> tuple[str | None, list[ToolCall]]:
    """``(answer text, tool calls)`` from a reply that follows :data:`TOOL_REPLY_FORMAT`.

    The reply is read leniently as JSON (:func:`loads_lenient`); a list of call objects is several
    calls. An object that is the arguments of one of ``specs`` (the offered tools' specs, when the
    caller has them) is a call to that tool (:func:`bare_arguments_call`). ``{"answer": ...}``
    gives the answer and no calls (a non-string answer as JSON text); a call gives no text. Raises
    :class:`UnusableReply` saying what is wrong otherwise, including a call to a tool not in
    ``offered``.
    """
    if not (text or "").strip():
        raise UnusableReply("the reply was empty", TOOL_REPLY_FORMAT, None)
    try:
        parsed = loads_lenient(text)
    except ValueError as exc:
        raise UnusableReply(f"the reply is not a JSON object: {exc}", TOOL_REPLY_FORMAT, text) from None
    items = parsed if isinstance(parsed, list) else [parsed]
    calls: list[ToolCall] = []
    for item in items:
        if not isinstance(item, dict):
            raise UnusableReply(f"the reply is not a JSON object: {text}", TOOL_REPLY_FORMAT, text)
        bare = bare_arguments_call(item, specs)
        if bare is not None:
            calls.append(bare)
            continue
        if "answer" in item and "tool" not in item and "name" not in item:
            answer = item["answer"]
            return (answer if isinstance(answer, str) else json.dumps(answer)), []
        name = item.get("tool", item.get("name"))
        if not isinstance(name, str):
            raise UnusableReply(
                'the reply has neither a "tool" nor an "answer" field', TOOL_REPLY_FORMAT, text
            )
        name = check_offered(name, offered, text)
        args = item.get("arguments", item.get("parameters", {}))
        if isinstance(args, str):
            try:
                args = loads_lenient(args) if args.strip() else {}
            except ValueError as exc:
                raise UnusableReply(
                    f"the arguments of tool '{name}' are not valid JSON: {exc}", TOOL_REPLY_FORMAT, text
                ) from None
        if not isinstance(args, dict):
            raise UnusableReply(
                f"the arguments of tool '{name}' must be a JSON object", TOOL_REPLY_FORMAT, text
            )
        calls.append(ToolCall(id=f"call_{uuid.uuid4().hex[:12]}", name=name, arguments=args))
    return None, calls


def read_tool_reply(
    text: str | None, offered: Collection[str], specs: Sequence[ToolSpec] = ()
) -> tuple[str | None, list[ToolCall]]:
    """``(text, tool calls)`` from a reply that may or may not follow the protocol; never raises.

    A reply that is JSON (an object or a code fence) is read with :func:`parse_tool_reply` (with
    ``specs``, the offered tools' specs); failing
    that, the first call to an offered tool written anywhere in the text is taken
    (:func:`written_call`). Anything else, including a call to a tool that was not offered, stays
    text.
    """
    if (text or "").lstrip().startswith(("{", "```")):
        with contextlib.suppress(UnusableReply):
            return parse_tool_reply(text, offered, specs)
    found = written_call(text, offered)
    if found is None:
        return text, []
    reasoning, call = found
    return reasoning, [call]


#: What opens a written call and is left dangling once the call is taken out: a code fence or an
#: inline-code mark, a Hermes ``<tool_call>`` tag, the ``<tools>`` tag of Qwen's template. Sent back
#: as the turn's text, a dangling ``<tools>`` made the real 1.5B paste the tool's result back
#: inside ``<tools><tool_response>`` instead of reading it (tests/real_model, eval, 2026-11-30;
#: replayed against the server: without the tag it read the clips and answered).
_CALL_OPENER = re.compile(r"(`{1,3}[A-Za-z]*|<tool_call>|<tools>)\s*$")


def written_call(text: str | None, offered: Collection[str]) -> tuple[str | None, ToolCall] | None:
    """``(reasoning, call)`` for the first complete call to an offered tool written in ``text``.

    The reasoning is what the model wrote *before* the call (None when nothing). What follows the
    call is dropped: the model wrote it before the tool ran, so it is at best a plan and at worst an
    imagined result — a real Qwen2.5-Coder 1.5B wrote a call and then a made-up ``<video_data>``
    block until its output limit. Kept in the conversation, such text is read as evidence later and
    teaches the model to go on imagining; the call itself stays in the conversation as a native
    tool call.
    """
    if not text:
        return None
    found = locate_tool_call(text, offered)
    if found is None:
        return None
    call, start = found
    before = text[:start].rstrip()
    while (opened := _CALL_OPENER.sub("", before).rstrip()) != before:
        before = opened  # openers stacked: "<tools>\n```json"
    return (before.strip() or None), call


# ---------------------------------------------------------------------------- quoting video text


def inert_json(value: Any, *, compact: bool = True) -> str:
    """``value`` as JSON with ``<`` and ``>`` escaped (``\\u003c``/``\\u003e``).

    Inside JSON, angle brackets only occur in strings, where the escapes keep their meaning: text
    read from a video can therefore never close the tag it is quoted in and pose as instructions.
    """
    separators = (",", ":") if compact else None
    literal = json.dumps(value, ensure_ascii=False, separators=separators)
    return literal.replace("<", "\\u003c").replace(">", "\\u003e")


def quote_data(value: Any, *, compact: bool = True) -> str:
    """``value`` as inert JSON inside a ``<video_data>`` block (see :func:`inert_json`)."""
    return f"<video_data>\n{inert_json(value, compact=compact)}\n</video_data>"

"""A streamed chat completion read until the model has written a whole tool call.

Small local models often write their tool call in the reply's text and then go on: they make up
the tool's result, plan the next steps, even state an answer from the result they imagined (the
real Qwen2.5-Coder 1.5B, tests/real_model). What follows a written call is dropped from the
conversation (:func:`vidscope.models.json_tools.written_call`: it was written before the tool
ran), so every token of it is time spent for nothing — ~20 tokens a second on 2 cores. Streamed,
the reply can be stopped as soon as its text holds a whole call to an offered tool: closing the
connection makes llama.cpp's server (and vLLM's) stop generating, and the conversation is the
same as if the reply had run to its end.

:func:`read_until_call` returns an object shaped like the SDK's non-streamed ``ChatCompletion``
(``choices[0].message.content / .tool_calls``, ``finish_reason``, ``usage``, ``model``), so the
backend reads both the same way. A reply stopped early has no usage from the server (it reports
usage in the stream's last chunk): its output tokens are the content chunks received (one token
each from llama.cpp and vLLM), its prompt tokens are not known (0).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from types import SimpleNamespace
from typing import Any

from vidscope.models.json_tools import written_call

#: Characters that can close a written call: a JSON object, a code-style call, a tag.
_CLOSERS = frozenset("})>")


#: The text of a reply without its reasoning, and that reasoning (``openai_compat.split_reasoning``).
ReasoningSplit = Callable[[str | None], tuple[str | None, str | None]]
#: A reply opening a JSON list (fenced or not) may hold several calls
#: (json_tools.parse_tool_reply): it is read to its end.
_LIST_OPENING = re.compile(r"\s*(?:```[A-Za-z]*\s*)?\[")


def _holds_whole_call(text: str | None, offered: Collection[str]) -> bool:
    """Whether ``text`` holds a whole call to an offered tool, and nothing more can be one of its calls."""
    return bool(text) and not _LIST_OPENING.match(text or "") and written_call(text, offered) is not None


def read_until_call(
    client: Any, request: dict[str, Any], offered: Collection[str], split: ReasoningSplit
) -> SimpleNamespace:
    """``client.chat.completions.create(**request)`` streamed, stopped once the reply's text (without
    its ``<think>`` reasoning: ``split``) holds a whole call to one of ``offered``; native
    tool-call deltas are read to the end."""
    import httpx
    import openai

    stream = client.chat.completions.create(**request, stream=True, stream_options={"include_usage": True})
    content: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    finish: str | None = None
    usage: Any = None
    model: str | None = None
    stopped = False
    try:
        for chunk in stream:
            model = getattr(chunk, "model", None) or model
            usage = getattr(chunk, "usage", None) or usage
            for choice in getattr(chunk, "choices", None) or []:
                finish = getattr(choice, "finish_reason", None) or finish
                delta = getattr(choice, "delta", None)
                if delta is None:
                    continue
                thought = getattr(delta, "reasoning_content", None) or getattr(delta, "reasoning", None)
                if isinstance(thought, str):
                    reasoning.append(thought)
                for part in getattr(delta, "tool_calls", None) or []:
                    entry = calls.setdefault(int(part.index or 0), {"id": "", "name": "", "arguments": ""})
                    entry["id"] = part.id or entry["id"]
                    if part.function is not None:
                        entry["name"] += part.function.name or ""
                        entry["arguments"] += part.function.arguments or ""
                piece = getattr(delta, "content", None)
                if piece:
                    content.append(piece)
                    if not calls and _CLOSERS.intersection(piece):
                        stopped = _holds_whole_call(split("".join(content))[0], offered)
            if stopped:
                break
    except httpx.TimeoutException as exc:  # mid-stream: retried and reported as the backend's own
        raise openai.APITimeoutError(request=stream.response.request) from exc
    except httpx.HTTPError as exc:
        raise openai.APIConnectionError(
            message=f"the reply's stream broke off: {exc}", request=stream.response.request
        ) from exc
    finally:
        stream.close()  # when stopped: the server sees the connection close and stops generating
    if stopped:
        finish = "stop"
        usage = SimpleNamespace(prompt_tokens=0, completion_tokens=len(content), prompt_tokens_details=None)
    message = SimpleNamespace(
        role="assistant",
        content="".join(content) or None,
        tool_calls=[
            SimpleNamespace(
                id=entry["id"] or f"call_{index}",
                type="function",
                function=SimpleNamespace(name=entry["name"], arguments=entry["arguments"]),
            )
            for index, entry in sorted(calls.items())
        ]
        or None,
        reasoning_content="".join(reasoning) or None,
    )
    choice = SimpleNamespace(index=0, message=message, finish_reason=finish)
    return SimpleNamespace(choices=[choice], usage=usage, model=model, stopped_after_call=stopped)

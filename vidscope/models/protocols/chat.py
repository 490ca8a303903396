"""The ``chat`` role (and ``planner`` / ``vlm``, which speak the same protocol): a (vision-)language
model that answers, plans and calls tools.

Besides :class:`ChatModel` this module holds the values a conversation is made of: messages, the
tools offered, the tool calls requested and what a call cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field


class ToolCall(BaseModel):
    """A tool call requested by a chat model; ``arguments`` already parsed from JSON."""

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ChatMessage(BaseModel):
    """One message of a conversation. ``images`` are JPEG bytes attached to a user message."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    images: list[bytes] = Field(default_factory=list)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None


class ToolSpec(BaseModel):
    """A tool offered to a chat model: name, description and JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]


class Usage(BaseModel):
    """What one model call cost."""

    input_tokens: int = 0
    #: Of ``input_tokens``, those the server took from its prompt cache instead of processing them
    #: again (``usage.prompt_tokens_details.cached_tokens``: OpenAI, vLLM, llama.cpp); 0 when the
    #: server does not say. What a turn really costs a local server is the difference.
    cached_input_tokens: int = 0
    output_tokens: int = 0
    images: int = 0
    latency_s: float = 0.0
    cache_hit: bool = False


class ChatReply(BaseModel):
    """A chat model's answer: text and/or tool calls, and what it cost.

    ``reasoning`` is what a reasoning model thought before answering (``<think>`` blocks, or the
    server's ``reasoning_content`` / ``reasoning`` field): kept out of ``text`` and the tool calls,
    and returned so a trace can record it.
    """

    text: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    model: str = ""
    finish_reason: str | None = None
    reasoning: str | None = None
    usage: Usage = Field(default_factory=Usage)


@runtime_checkable
class ChatModel(Protocol):
    """A (vision-)language chat model with optional tool calling.

    The backend, not its caller, turns the model's output into tool calls: whether the model calls
    tools natively or writes the call as JSON text (:mod:`vidscope.models.json_tools`), every call
    to one of the offered ``tools`` comes back in :attr:`ChatReply.tool_calls`, and a final
    ``{"answer": ...}`` object comes back as the plain answer in :attr:`ChatReply.text`. Callers
    never scan the reply text for calls. A call to a tool that was not offered is never returned:
    the backend re-asks the model or, when it cannot, leaves the call in the text.
    """

    name: str

    def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        json_output: bool = False,
    ) -> ChatReply:
        """One turn over ``messages`` offering ``tools``; with ``json_output`` the text is JSON.

        Raises :class:`~vidscope.core.errors.ModelOutputError` when the reply cannot be used.
        """
        ...

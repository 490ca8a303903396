"""Typed protocols for every model role, and the values they exchange.

A backend is any object that satisfies the protocol of its role; the registry
(:mod:`vidscope.models.registry`) builds one from a ``kind:target`` spec in the settings.
Images are RGB ``uint8`` numpy arrays of shape (height, width, 3) throughout.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, Field

Image = np.ndarray

# ---------------------------------------------------------------------------- errors


class BackendUnavailable(RuntimeError):
    """A model role could not be loaded. The message names the model, what was tried and the fix."""

    def __init__(self, role: str, model: str, tried: str, fix: str) -> None:
        self.role, self.model, self.tried, self.fix = role, model, tried, fix
        super().__init__(f"{role}: cannot load '{model}' (tried {tried}). {fix}")


class ModelOutputError(RuntimeError):
    """A model answered, but not in a form that could be used (after one corrective re-ask)."""


# ---------------------------------------------------------------------------- text embedding


@runtime_checkable
class TextEmbedder(Protocol):
    """Maps texts to L2-normalised float32 vectors of a fixed size."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """An array of shape (len(texts), dim), rows L2-normalised."""
        ...


# ---------------------------------------------------------------------------- speech


@dataclass(frozen=True)
class Word:
    word: str
    start: float
    end: float
    probability: float


@dataclass(frozen=True)
class SpeechSegment:
    start: float
    end: float
    text: str
    words: tuple[Word, ...] = ()
    avg_logprob: float | None = None


@dataclass(frozen=True)
class Transcript:
    language: str | None
    segments: tuple[SpeechSegment, ...]
    language_probability: float | None = None


@runtime_checkable
class SpeechRecognizer(Protocol):
    """Speech to text with segment and word timings (seconds from the start of the audio)."""

    name: str

    def transcribe(self, audio: Path) -> Transcript:
        """Transcribe an audio or video file; raises on undecodable input."""
        ...


# ---------------------------------------------------------------------------- OCR


@dataclass(frozen=True)
class TextLine:
    """One line of text found in an image; ``box`` is four corner points x1,y1,…,x4,y4 in pixels."""

    text: str
    box: tuple[float, ...]
    score: float


@runtime_checkable
class TextReader(Protocol):
    """Reads the text lines visible in an image."""

    name: str

    def read(self, image: Image) -> list[TextLine]: ...


# ---------------------------------------------------------------------------- detection


@dataclass(frozen=True)
class Detection:
    """An object in one image; ``box`` is x1, y1, x2, y2 in pixels; ``track_id`` when tracked."""

    label: str
    box: tuple[float, float, float, float]
    score: float
    track_id: int | None = None


@runtime_checkable
class ObjectDetector(Protocol):
    """Finds objects in a sequence of frames; with ``track`` the frames are consecutive and ids persist."""

    name: str

    def detect(
        self,
        images: Sequence[Image],
        *,
        track: bool = False,
        prompts: Sequence[str] | None = None,
    ) -> list[list[Detection]]: ...


# ---------------------------------------------------------------------------- image–text


@runtime_checkable
class ImageTextEmbedder(Protocol):
    """Embeds images and texts into one space (CLIP-like); rows L2-normalised."""

    name: str
    dim: int

    def embed_images(self, images: Sequence[Image]) -> np.ndarray: ...

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray: ...


# ---------------------------------------------------------------------------- chat


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
    output_tokens: int = 0
    images: int = 0
    latency_s: float = 0.0
    cache_hit: bool = False


class ChatReply(BaseModel):
    """A chat model's answer: text and/or tool calls, and what it cost."""

    text: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    model: str = ""
    finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)


@runtime_checkable
class ChatModel(Protocol):
    """A (vision-)language chat model with optional tool calling."""

    name: str

    def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        json_output: bool = False,
    ) -> ChatReply: ...


@runtime_checkable
class Captioner(Protocol):
    """Describes a clip from a few of its frames plus textual context (speech, on-screen text)."""

    name: str

    def caption(self, frames: Sequence[Image], context: str) -> str: ...


@dataclass
class RoleInfo:
    """What ``vidscope models`` shows for a role."""

    role: str
    spec: str | None
    backend: str | None
    loads: bool | None
    detail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

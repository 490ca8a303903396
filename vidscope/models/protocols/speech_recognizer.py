"""The ``speech_recognizer`` role: speech to timed text, and the transcript it returns."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class Word:
    """One recognised word and when it was said (seconds from the start of the audio)."""

    word: str
    start: float
    end: float
    probability: float


@dataclass(frozen=True)
class SpeechSegment:
    """A stretch of speech (roughly a sentence) with its words when the backend times them."""

    start: float
    end: float
    text: str
    words: tuple[Word, ...] = ()
    avg_logprob: float | None = None


@dataclass(frozen=True)
class Transcript:
    """Everything said in one audio file, in order."""

    language: str | None
    segments: tuple[SpeechSegment, ...]
    language_probability: float | None = None
    #: (start, end) seconds of audio that would not decode (corrupt packets), heard as silence.
    lost: tuple[tuple[float, float], ...] = ()


@runtime_checkable
class SpeechRecognizer(Protocol):
    """Speech to text with segment and word timings (seconds from the start of the audio)."""

    name: str

    def transcribe(self, audio: Path) -> Transcript:
        """Transcribe an audio or video file; raises on undecodable input."""
        ...

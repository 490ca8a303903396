"""The ``captioner`` role: a detailed narration of one clip, optionally carrying a subject registry."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from vidscope.models.protocols.image import Image


@runtime_checkable
class Captioner(Protocol):
    """Describes a clip from a few of its frames plus textual context (speech, on-screen text)."""

    name: str

    def caption(self, frames: Sequence[Image], context: str) -> str:
        """A detailed narration of the clip the ``frames`` come from (several plain sentences)."""
        ...


@dataclass
class RegistryCaption:
    """What a registry-carrying caption call gave back.

    ``caption`` is ``None`` when no usable caption text came back; ``subjects`` is ``None`` when the
    reply held no usable registry update (the caller keeps its registry as it was) and ``problem``
    then says why in one line. An empty list is a usable answer: no subject in this clip.
    """

    caption: str | None
    subjects: list[dict[str, Any]] | None = field(default=None)
    problem: str | None = None


@runtime_checkable
class RegistryCaptioner(Captioner, Protocol):
    """A captioner that also keeps a video's subject registry, clip after clip, as in Deep Video
    Discovery's ``S_i, c_i = VLM(f_i, S_{i-1})``."""

    def caption_with_registry(
        self,
        frames: Sequence[Image],
        context: str,
        registry: list[dict[str, Any]],
        span: tuple[float, float],
    ) -> RegistryCaption:
        """Caption the clip spanning ``span`` seconds, seeing ``registry`` (the subjects known
        after the previous clip, compact dicts with an ``id``), and report the subjects present in
        this clip: known ones by their id, new ones with id ``None``."""
        ...

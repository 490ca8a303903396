"""A benchmark's evaluation protocol: what the agent may read and how it must answer.

A published number is only comparable under the protocol that produced it: DVD's LVBench 74.2 is
without transcripts (76.0 with them), Video-MME's "long" numbers are with or without the official
subtitles. Each loader declares its default :class:`Protocol` (in
:data:`vidscope.evaluation.loaders.BENCHMARKS`); a run may change two switches with loader-style
options (``--option transcripts=true``, ``--option subtitles=true`` where the loader has subtitle
files), and the resolved protocol is recorded in the run's ``run.json``.

*Transcripts* are the speech stage's ASR output. Speech reaches an agent through many doors (the
transcript table, clip captions and their text embeddings, the video parse, the subject registry,
the graph), so hiding one door would leak through the others. A run without transcripts therefore
ingests with no speech recogniser (:func:`apply_protocol`): the speech stage stores nothing for
the run's videos and every stage that reads speech is redone without it, exactly as ``vidscope
ingest`` does for a config without ``speech_recognizer``. Switching one data dir between runs with
and without transcripts re-ingests those stages each time; keep two ``--data-dir`` to avoid it.

*Subtitles* are the benchmark's own subtitle files (Video-MME ``.srt``, LongVideoBench JSON), given
to the agent before the question as quoted data; they are independent of transcripts.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from vidscope.core.settings import Settings

#: Loader-style options that set the protocol (or, ``allow_self_judge``, how free-form answers are
#: judged: :mod:`vidscope.flows.eval_agents`) instead of reaching the loader.
PROTOCOL_OPTIONS = ("transcripts", "allow_self_judge")


class Protocol(BaseModel):
    """How a benchmark is evaluated: the inputs the agent gets and the answer it must give."""

    model_config = ConfigDict(frozen=True)

    transcripts: bool = Field(False, description="Speech transcribed at ingestion (ASR) reaches the agent.")
    subtitles: bool = Field(False, description="The benchmark's subtitle files are given with the question.")
    answer: str = Field(description="What is scored: 'option letter', 'interval', 'ranked videos', ...")
    published: str = Field("", description="The published number this protocol reproduces, and its source.")

    def resolved(self, options: dict[str, Any]) -> Protocol:
        """This protocol with a run's switches applied (``transcripts``; a loader's ``subtitles``)."""
        update: dict[str, Any] = {}
        if "transcripts" in options:
            update["transcripts"] = _flag(options["transcripts"], "transcripts")
        if "subtitles" in options:
            update["subtitles"] = _flag(options["subtitles"], "subtitles")
        return self.model_copy(update=update)


def _flag(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueError(f"--option {name}= takes true or false, got {value!r}")


def split_options(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(loader options, protocol options)`` of a run's ``--option`` values."""
    loader = {k: v for k, v in options.items() if k not in PROTOCOL_OPTIONS}
    protocol = {k: v for k, v in options.items() if k in PROTOCOL_OPTIONS}
    return loader, protocol


def apply_protocol(settings: Settings, protocol: Protocol) -> Settings:
    """The settings a run ingests and answers with: without transcripts, no speech recogniser."""
    if protocol.transcripts or not settings.models.speech_recognizer:
        return settings
    models = settings.models.model_copy(update={"speech_recognizer": None})
    return settings.model_copy(update={"models": models})

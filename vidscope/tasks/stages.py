"""The ingestion stages, registered once: their order, and where each one's declaration lives.

Each stage module declares its :class:`~vidscope.tasks.stage.Stage` (name, version, settings,
``needs`` / ``reads``, ``run``); :data:`STAGES` lists them in a valid order (what a stage needs
before it). The flow starts each stage as soon as what it needs or reads has finished
(:mod:`vidscope.flows.stage_schedule`), so the order here decides only ties. Everything else is
derived: the flow builds one Prefect task per declaration and its dependency graph from
``needs`` / ``reads`` (:mod:`vidscope.flows.ingest`), ``vidscope status`` and the API list
:func:`stage_names`. Adding a stage is two places: its module and one line here
(``docs/architecture.md`` walks through an example).

Each entry names the stage beside the import path of its declaration, so the names are known
without importing the stage modules (their numpy, PyAV and model code): ``vidscope status`` lists
them cold. :func:`stages` loads the declarations and checks each against its entry. Storage
needs no list of stage names: the ledger keys rows by whatever name a stage records.
"""

from __future__ import annotations

import importlib
from dataclasses import replace
from functools import cache

from vidscope.core.settings import Settings
from vidscope.storage import Store
from vidscope.tasks.stage import Stage, is_current, ledger_rows

#: Every stage, each before the stages that need or read it (the flow starts a stage when what it
#: needs or reads is over, not in this order):
#: (name, ``"module:attribute"`` of its declaration, or the declaration itself).
STAGES: list[tuple[str, str | Stage]] = [
    ("probe", "vidscope.tasks.probe:PROBE"),
    ("segment", "vidscope.tasks.segment:SEGMENT"),
    ("frames", "vidscope.tasks.frames:FRAMES"),
    ("speech", "vidscope.tasks.speech:SPEECH"),
    ("ocr", "vidscope.tasks.ocr:OCR"),
    ("detect", "vidscope.tasks.detect:DETECT"),
    ("caption", "vidscope.tasks.caption:CAPTION"),
    ("subjects", "vidscope.tasks.subjects:SUBJECTS_STAGE"),
    ("graph", "vidscope.tasks.graph:GRAPH"),
    ("parse", "vidscope.tasks.parse:PARSE"),
    ("tags", "vidscope.tasks.tags:TAGS"),
    ("embed", "vidscope.tasks.embed:EMBED"),
    ("frame_embed", "vidscope.tasks.frame_embed:FRAME_EMBED"),
    ("clip_embed", "vidscope.tasks.clip_embed:CLIP_EMBED"),
    ("chapters", "vidscope.tasks.chapters:CHAPTERS"),
]

#: The optional enrichments (:attr:`~vidscope.tasks.stage.Stage.optional`): stages whose failure
#: leaves the searchable store intact — the clips, their captions and caption vectors (probe,
#: segment, caption, embed) and the perception rows captions are made of (frames, speech, ocr,
#: detect). Nothing required needs them (:func:`stages` checks it): subjects (DVD's registry; the
#: overview says it is missing), graph and its parse/tags (graph search), frame_embed and
#: clip_embed (visual search and MAVIS's fine stage, which fall back to captions), chapters
#: (summaries). DESIGN.md names captions among the optional stages; here ``embed`` needs them (the
#: caption vectors are the store's search index), so a caption failure still fails the video.
OPTIONAL_STAGES = frozenset({"subjects", "graph", "parse", "tags", "frame_embed", "clip_embed", "chapters"})


def stage_names() -> tuple[str, ...]:
    """The stages' names in flow order (imports no stage module)."""
    return tuple(name for name, _ in STAGES)


def stages() -> tuple[Stage, ...]:
    """The stage declarations in flow order, checked: each is registered under its own name, and
    everything it needs or reads is registered before it (so the flow's order is a valid one)."""
    return _load(tuple(STAGES))


def stages_to_run(store: Store, settings: Settings, video_id: str) -> list[str]:
    """The stages an ingest of ``video_id`` would run now, by the test each stage makes before it
    runs (:func:`~vidscope.tasks.stage.execute`): a stage whose ledger row is missing, not done or
    skipped, of another version or of another fingerprint (settings, upstream rows) runs again.

    Empty means the video is up to date. A stage that would run changes the fingerprints of the
    stages reading it, so those would run too; they are listed only when already not current.
    """
    ledger = ledger_rows(store, video_id)
    return [
        stage.name
        for stage in stages()
        if not is_current(ledger.get(stage.name), stage, stage.fingerprint(settings, ledger))
    ]


@cache
def _load(entries: tuple[tuple[str, str | Stage], ...]) -> tuple[Stage, ...]:
    loaded: list[Stage] = []
    for name, ref in entries:
        stage = _declaration(ref)
        if stage.name != name:
            raise ValueError(f"the stage registered as {name!r} declares itself {stage.name!r}")
        if name in OPTIONAL_STAGES and not stage.optional:
            stage = replace(stage, optional=True)
        before = {s.name: s for s in loaded}
        missing = [d for d in (*stage.needs, *stage.reads) if d not in before]
        if missing:
            raise ValueError(f"stage {name!r} needs or reads {', '.join(missing)}: register them before it")
        optional_needs = [d for d in stage.needs if before[d].optional]
        if optional_needs and not stage.optional:
            # A required stage blocked by an optional one would make that one required after all.
            raise ValueError(f"required stage {name!r} needs the optional {', '.join(optional_needs)}")
        loaded.append(stage)
    return tuple(loaded)


def _declaration(ref: str | Stage) -> Stage:
    if isinstance(ref, Stage):
        return ref
    module, _, attribute = ref.partition(":")
    stage = getattr(importlib.import_module(module), attribute)
    if not isinstance(stage, Stage):
        raise TypeError(f"{ref} is not a Stage")
    return stage

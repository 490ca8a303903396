"""The stage registry: one list in tasks/ gives the flow its stages, their order and DAG, one
Prefect task each, and the names ``vidscope status`` and the ledger show."""

from __future__ import annotations

from pathlib import Path

import pytest
from media import silent_video

from vidscope.core.settings import Settings
from vidscope.tasks import stages as registry
from vidscope.tasks.stage import Stage, StageContext, StageOutcome, ledger_rows

#: The videos the toy stage was run on, and the clips it found there (written by ``segment``).
toy_runs: list[tuple[str, int]] = []


def count_clips(ctx: StageContext) -> StageOutcome:
    """A stage's ``run``: it reads what the stage it needs wrote."""
    clips = ctx.store.count(ctx.store.clips, ctx.video.video_id)
    toy_runs.append((ctx.video.video_id, clips))
    return StageOutcome(rows=clips, details={"clips": clips})


TOY = Stage("toy", 1, count_clips, config=lambda settings: {}, needs=("segment",), description="counts clips")


def test_the_registered_names_are_the_declarations_in_a_valid_order() -> None:
    declared = registry.stages()
    assert tuple(s.name for s in declared) == registry.stage_names()
    assert registry.stage_names()[:3] == ("probe", "segment", "frames")
    assert registry.stage_names()[-1] == "chapters"


def test_a_stage_registered_before_what_it_needs_or_under_another_name_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(registry, "STAGES", [("toy", TOY), *registry.STAGES])
    with pytest.raises(ValueError, match="needs or reads segment: register them before it"):
        registry.stages()
    monkeypatch.setattr(registry, "STAGES", [("probe", "vidscope.tasks.segment:SEGMENT")])
    with pytest.raises(ValueError, match="registered as 'probe' declares itself 'segment'"):
        registry.stages()


def test_a_stage_added_to_the_list_runs_in_the_ingest_flow_and_shows_in_the_ledger_and_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from vidscope.cli import app
    from vidscope.cli.common import overrides
    from vidscope.flows.ingest import run_ingest
    from vidscope.models.open_store import open_store

    # The registration list, cut to the stages the toy needs (the others load models), plus the toy.
    monkeypatch.setattr(registry, "STAGES", [*registry.STAGES[:2], ("toy", TOY)])
    assert registry.stage_names() == ("probe", "segment", "toy")
    settings = Settings(data_dir=tmp_path / "data")
    video = silent_video(tmp_path / "square.mp4", duration=7.0)
    toy_runs.clear()

    (report,) = run_ingest([str(video)], settings, optimize=False)
    assert [s.stage for s in report.stages] == ["probe", "segment", "toy"], report
    assert report.stages[-1].status == "done" and report.stages[-1].rows == 2  # 5 s clips: two
    assert toy_runs == [(report.video_id, 2)]  # after segment, as its declaration needs
    ledger = ledger_rows(open_store(settings), report.video_id or "")
    assert ledger["toy"]["status"] == "done"

    (again,) = run_ingest([str(video)], settings, optimize=False)
    assert again.stages[-1].status == "cached" and len(toy_runs) == 1  # current: not run twice

    monkeypatch.chdir(tmp_path)
    overrides.clear()
    try:
        shown = CliRunner().invoke(app, ["--data-dir", str(settings.data_dir), "status", "square.mp4"])
        assert shown.exit_code == 0, shown.output
        assert "toy" in shown.output
    finally:
        overrides.clear()

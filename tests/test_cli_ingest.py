"""``vidscope ingest`` as a user sees it: the batch summary, and a re-run that finds nothing to do."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from media import text_video
from typer.testing import CliRunner

from vidscope.cli import app
from vidscope.cli.common import overrides
from vidscope.core.settings import Settings
from vidscope.flows.ingest_plan import plan_ingest
from vidscope.models.open_store import open_store
from vidscope.tasks.stages import stage_names

runner = CliRunner()


@pytest.mark.slow  # one real ingest with Prefect's temporary server: ~40 s on a busy 2-core machine
def test_summary_names_failures_only_and_an_unchanged_rerun_is_up_to_date(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    overrides.clear()
    data = tmp_path / "data"
    folder = tmp_path / "videos"
    text_video(folder / "sign.mp4", duration=3.0, texts=[(0.0, 3.0, "OPEN DAILY")])
    (folder / "broken.mp4").write_text("not a video")

    result = runner.invoke(app, ["--data-dir", str(data), "ingest", str(folder)])
    overrides.clear()
    assert result.exit_code == 1, result.output
    out = result.output
    assert "new sign.mp4" in out
    assert "1 new, 0 up to date, 1 failed" in out
    # Stage details appear for the failure only: no list of every stage of the good file.
    assert "probe" in out and "not a readable media file" in out
    for stage in ("frame_embed", "clip_embed", "subjects", "caption"):
        assert stage not in out, out

    # A re-run of the unchanged video decides from the ledger alone: a child process, so that
    # whether Prefect was imported at all (no flow run, no temporary server) can be seen.
    script = textwrap.dedent(
        f"""
        import sys
        from vidscope.cli import app
        try:
            app(["--data-dir", {str(data)!r}, "ingest", {str(folder / "sign.mp4")!r}], standalone_mode=False)
        finally:
            print("prefect imported:", "prefect" in sys.modules)
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    again = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
    )
    assert again.returncode == 0, again.stderr
    assert "0 new, 1 up to date, 0 failed" in again.stdout
    assert "prefect imported: False" in again.stdout

    # The same test a stage makes before it runs: changed settings or a changed file are not up
    # to date (and the first is an update of a known video, the second a new one).
    store = open_store(Settings(data_dir=data))
    plan = plan_ingest([str(folder / "sign.mp4")], Settings(data_dir=data), store)
    assert not plan.pending and plan.settled[0].status == "up to date"
    assert [s.stage for s in plan.settled[0].stages] == list(stage_names())
    changed = Settings(data_dir=data, ingest={"clip_seconds": 4.0})
    plan = plan_ingest([str(folder / "sign.mp4")], changed, store)
    assert plan.pending == [folder / "sign.mp4"] and plan.known == set(plan.ids)
    text_video(folder / "sign.mp4", duration=3.0, texts=[(0.0, 3.0, "CLOSED")])
    plan = plan_ingest([str(folder / "sign.mp4")], Settings(data_dir=data), store)
    assert plan.pending == [folder / "sign.mp4"] and not plan.known

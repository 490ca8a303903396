"""Moments carry a 0-1 relevance; weak matches stay out unless asked for (``search --moments --all``).

A real library (one title card ingested with the embedded OCR and MiniLM) asked through the CLI: a
related query finds its moment with a high relevance, an unrelated one says in plain words that no
moment passed the bar instead of listing the nearest junk.
"""

from __future__ import annotations

import json

import pytest
from media import text_video
from typer.testing import CliRunner

from vidscope.cli import app
from vidscope.cli.common import overrides
from vidscope.core.settings import Settings
from vidscope.flows.ingest import run_ingest

pytestmark = pytest.mark.slow  # one real ingest (~30 s on a busy 2-core machine)

runner = CliRunner()


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("relevance")
    video = text_video(root / "shop.mp4", duration=4.0, texts=[(0.0, 4.0, "OPEN DAILY")])
    (report,) = run_ingest([str(video)], Settings(data_dir=root / "data"))
    assert not report.failed, report
    return root / "data"


def search(data, *args: str):  # type: ignore[no-untyped-def]
    overrides.clear()
    result = runner.invoke(
        app, ["--data-dir", str(data), "search", "--moments", *args], env={"COLUMNS": "200"}
    )
    overrides.clear()
    return result


def test_a_related_query_shows_its_moment_with_a_readable_relevance(data) -> None:
    result = search(data, "open daily", "--json")
    assert result.exit_code == 0, result.output
    (moment,) = json.loads(result.output)["moments"]
    assert moment["file"] == "shop.mp4" and 0.6 <= moment["relevance"] <= 1.0
    table = search(data, "open daily")
    assert "relevance" in table.output and f"{moment['relevance']:.2f}" in table.output


def test_an_unrelated_query_shows_no_junk_unless_asked(data) -> None:
    result = search(data, "quantum chromodynamics of gluons")
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())  # the terminal wraps long notes
    assert "no moment passed the relevance bar 0.30 for 'quantum chromodynamics of gluons'" in said
    assert "shop.mp4" not in result.output
    # A script reading --json gets the same note, and no moment.
    quiet = json.loads(search(data, "quantum chromodynamics of gluons", "--json").output)
    assert quiet["moments"] == [] and any("passed the relevance bar 0.30" in n for n in quiet["notes"])
    shown = search(data, "quantum chromodynamics of gluons", "--all", "--json")
    (weak,) = json.loads(shown.output)["moments"]
    assert weak["file"] == "shop.mp4" and weak["relevance"] < 0.3
    # --all is a moments option: a video search refuses it in one line.
    videos = runner.invoke(app, ["--data-dir", str(data), "search", "x", "--all"])
    assert videos.exit_code == 2 and "add --moments" in videos.output

"""The command line, driven as a user would (typer's runner, real store, real flows)."""

from __future__ import annotations

import json

import pytest
from media import text_video
from typer.testing import CliRunner

from vidscope.cli import app
from vidscope.cli.common import overrides

runner = CliRunner()


@pytest.fixture()
def cli(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    overrides.clear()

    def invoke(*args: str):  # type: ignore[no-untyped-def]
        result = runner.invoke(app, ["--data-dir", str(tmp_path / "data"), *args])
        return result

    yield invoke
    overrides.clear()


def test_ingest_inspect_query_and_remove(cli, tmp_path) -> None:
    video = text_video(tmp_path / "sign.mp4", duration=6.0, texts=[(0.0, 6.0, "OPEN DAILY")])
    bad = tmp_path / "broken.mp4"
    bad.write_text("not a video")

    result = cli("ingest", str(video), str(bad))
    assert result.exit_code == 1, result.output
    # One line for the failed file, naming it once, its stage and reason (no traceback).
    assert "failed broken.mp4 · probe: not a readable media file" in result.output
    assert "Traceback" not in result.output

    result = cli("videos")
    assert result.exit_code == 0 and "sign.mp4" in result.output and "1 video " in result.output

    result = cli("status", "sign")  # the file name as people say it, without its extension
    assert result.exit_code == 0
    for stage in ("probe", "segment", "frames", "ocr", "caption", "embed"):
        assert stage in result.output

    # Issue 41: the overview is one compact line per video; --stages gives every stage's state.
    result = cli("status")
    assert result.exit_code == 0 and "ready" in result.output and "ocr:done" not in result.output
    assert "skipped:" in result.output and "frame_embed" in result.output  # what did not run, named
    result = cli("status", "--stages")
    assert result.exit_code == 0 and "ocr:done" in result.output

    # Video-level search in words: what was looked for, no pipeline terms unless --explain.
    result = cli("search", "open daily sign")
    assert result.exit_code == 0, result.output
    words = " ".join(result.output.split())
    assert "looked for" in words and "fusion" not in words and "--explain for how" in words
    assert "1 videos" not in words and "plan (rules)" not in words
    result = cli("search", "open daily sign", "--explain")
    assert result.exit_code == 0 and "fusion" in " ".join(result.output.split())

    result = cli("show", "sign.mp4")
    assert result.exit_code == 0 and "OPEN DAILY" in result.output

    result = cli("sql", "--json", "SELECT text FROM ocr_items")
    assert result.exit_code == 0
    assert any(
        "OPEN" in json.loads(line)["text"] for line in result.output.splitlines() if line.startswith("{")
    )

    result = cli("sql", f"COPY clips TO '{tmp_path / 'x.csv'}'")
    assert result.exit_code == 1 and "SQL error" in result.output
    assert not (tmp_path / "x.csv").exists()

    result = cli("show", "no-such-video.mp4")
    assert result.exit_code == 1 and "no ingested video" in result.output

    result = cli("remove", "--yes", "sign.mp4")
    assert result.exit_code == 0 and "removed" in result.output
    result = cli(
        "sql",
        "--json",
        "SELECT (SELECT count(*) FROM clips) + (SELECT count(*) FROM frames) + "
        "(SELECT count(*) FROM ocr_items) + (SELECT count(*) FROM ledger) AS n",
    )
    assert json.loads(result.output.strip().splitlines()[-1])["n"] == 0


def test_models_lists_every_role_and_checks_the_embedded_ones(cli) -> None:
    result = cli("models")
    for role in ("text_embedder", "speech_recognizer", "text_reader", "captioner", "chat"):
        assert role in result.output
    assert "384-d" in result.output
    assert "not configured" in result.output
    # Issue 41: the default install works offline; the image-text model that is fetched on first
    # use is "not downloaded", which is no failure of the install.
    assert "not downloaded" in result.output and result.exit_code == 0, result.output


def test_a_missing_config_file_is_a_clear_error(cli, tmp_path) -> None:
    result = runner.invoke(app, ["--config", str(tmp_path / "nope.toml"), "videos"])
    assert result.exit_code == 2 and "config file not found" in result.output


def test_ask_takes_options_after_one_flag_and_refuses_stray_words(cli, tmp_path) -> None:
    video = text_video(tmp_path / "menu.mp4", duration=6.0, texts=[(0.0, 6.0, "SOUP OF THE DAY: TOMATO")])
    assert cli("ingest", str(video)).exit_code == 0
    result = cli(
        "ask", "menu.mp4", "What is the soup of the day?", "--json", "--options", "Onion", "Tomato", "Pea"
    )
    assert result.exit_code == 0, result.output
    answer = json.loads(result.output[result.output.index("{") :])
    assert answer["options"] == ["Onion", "Tomato", "Pea"] and answer["choice"] == "B"
    result = cli("ask", "menu.mp4", "What", "is", "the", "soup?")
    assert result.exit_code == 2 and "unexpected arguments" in result.output

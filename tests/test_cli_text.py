"""Text from videos and users is data: square brackets never act as Rich markup, and control
characters (terminal escape sequences) never reach the terminal raw.

One real video, ingested by the real flow under a hostile file name and showing bracketed text on
screen, goes through every command that prints a video's name or text.
"""

from __future__ import annotations

import json
import shutil
import socket
from typing import Any

import pytest
from media import text_video
from typer.testing import CliRunner

from vidscope.cli import app
from vidscope.cli.common import overrides, safe, visible

runner = CliRunner()

#: A file name's tags would be read as markup (and vanish); ESC sequences recolour the screen, set
#: the terminal's title (OSC) or could rewrite what was printed before. (Closing tags, which crash
#: Rich, need a "/": they come from the on-screen text and the arguments below.)
HOSTILE = "[red]Hello[bold] \x1b[31mred\x1b]0;owned\x07 \u202egpm"


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("text")
    plain = text_video(folder / "plain.mp4", duration=5.0, texts=[(0.0, 5.0, "[b]Hello[/b] [/i]")])
    hostile = folder / f"{HOSTILE}.mp4"
    shutil.move(plain, hostile)
    library = {"folder": folder, "video": hostile, "data": folder / "data"}
    result = run(library, "ingest", str(hostile))
    assert result.exit_code == 0, result.output
    return library


def run(library: dict[str, Any], *args: str, env: dict[str, str] | None = None) -> Any:
    overrides.clear()
    result = runner.invoke(app, ["--data-dir", str(library["data"]), *args], env=env)
    overrides.clear()
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    assert "\x1b" not in result.output and "\x07" not in result.output and "\u202e" not in result.output
    return result


def test_helpers_escape_markup_and_show_control_characters() -> None:
    assert visible("a\x1b[31mb\x07\u202e\n\t") == "a\\x1b[31mb\\x07\\u202e\n\t"
    assert safe("[/x] \\") == "\\[/x] \\\\"


def test_with_the_model_server_down_library_questions_and_compare_fail_in_one_line(library, tmp_path) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = tmp_path / "vidscope.toml"
    config.write_text(
        f'[models]\nchat = "openai:down"\n\n[models.options.openai]\n'
        f'base_url = "http://127.0.0.1:{port}/v1"\nmax_retries = 0\ntimeout_s = 5\n'
    )
    env = {"VIDSCOPE_CONFIG": str(config)}
    for args in (
        ("ask", "--library", "what is written?"),
        ("compare", str(library["video"]), "what is written?"),
    ):
        result = run(library, *args, env=env)
        lines = result.output.strip().splitlines()
        assert result.exit_code == 1 and len(lines) == 1 and "failed:" in lines[0], result.output
        as_json = run(library, *args, "--json", env=env)
        error = json.loads(as_json.stdout.strip().splitlines()[-1])
        assert as_json.exit_code == 1 and error["error"] and error["log"], as_json.output


def test_every_command_prints_hostile_names_and_text_as_data(library) -> None:
    ref = str(library["video"])
    name = "[red]Hello[bold] \\x1b[31mred\\x1b]0;owned\\x07 \\u202egpm.mp4"

    for args in (("videos",), ("status",), ("status", ref), ("show", ref), ("graph", ref)):
        result = run(library, *args)
        assert result.exit_code in (0, 1), (args, result.output)
    assert name in run(library, "show", ref).output.replace("\n", "")
    moments = run(library, "search", "--moments", "--video", ref, "hello")
    assert moments.exit_code == 0, moments.output
    compared = run(library, "compare", ref, "what is written?")
    assert compared.exit_code == 0, compared.output
    exported = run(library, "export", ref, "--to", str(library["folder"] / "bundle"))
    assert exported.exit_code == 0, exported.output
    removed = run(library, "remove", "--yes", ref)
    assert removed.exit_code == 0 and "removed [red]Hello[bold] \\x1b" in removed.output


@pytest.mark.parametrize(
    "args",
    [
        ("show", "[/x]"),
        ("status", "[/x]"),
        ("remove", "--yes", "[/x]"),
        ("export", "[/x]", "--to", "somewhere"),
        ("search", "--moments", "--video", "[/x]", "hello"),
        ("compare", "[/x]", "\x1b[2Jwhat?"),
        ("show", "\x1b]0;owned\x07"),
    ],
)
def test_a_hostile_argument_is_one_line(library, args: tuple[str, ...]) -> None:
    result = run(library, *args)
    assert result.exit_code == 1, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output

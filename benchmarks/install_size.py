"""Install size and set-up time: the core install (``scripts/setup.sh --core``) against everything.

Copies the project's tracked files into a fresh folder under a temporary directory and runs the
README's set-up command there, so ``.venv`` is a new virtualenv made by the script itself (the
project's own ``.venv`` is never touched). pip's cache is switched off, so every wheel is
downloaded and unpacked as on a fresh machine. For each variant it prints the wall time of the
set-up, the size of the virtualenv (bytes on disk as ``du`` counts them, in GB and in the GiB that
``du -sh`` prints) and whether torch is in it; then,
with ``--check``, it runs ``vidscope demo`` from the core virtualenv with a temporary data dir and
says which heavy modules it imported (none expected).

    python benchmarks/install_size.py                  # core only (~1 minute)
    python benchmarks/install_size.py --all            # core, then everything (~3 minutes more)
    python benchmarks/install_size.py --check          # core, then the demo from it
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "sentence_transformers", "ultralytics", "paddle", "paddleocr", "decord")

# Runs the CLI in-process, then reports which heavy modules were imported on the way.
DEMO_WRAPPER = f"""
import sys
from vidscope.cli import app
try:
    app(sys.argv[1:])
except SystemExit as exc:
    code = exc.code or 0
else:
    code = 0
print("heavy modules imported:", sorted(m for m in {HEAVY!r} if m in sys.modules) or "none")
sys.exit(code)
"""


def tree_size(path: Path) -> int:
    """Bytes on disk under ``path`` (as ``du``: hard links once, symlinks not followed)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            stat = os.lstat(os.path.join(folder, name))
            if (stat.st_dev, stat.st_ino) not in seen:
                seen.add((stat.st_dev, stat.st_ino))
                total += stat.st_blocks * 512
    return total


def copy_project(destination: Path) -> None:
    """The tracked files of the working tree (no .venv, no data), as a fresh clone would have."""
    files = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True
    ).stdout.split(b"\0")
    for raw in filter(None, files):
        name = raw.decode()
        source, target = ROOT / name, destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        elif source.is_file():
            shutil.copy2(source, target)


def set_up(workdir: Path, variant: str) -> tuple[float, int]:
    """Run ``scripts/setup.sh`` (``--core`` or nothing) in a copy of the project: (seconds, bytes)."""
    project = workdir / variant
    copy_project(project)
    env = {**os.environ, "PIP_NO_CACHE_DIR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    command = ["bash", "scripts/setup.sh", *(["--core"] if variant == "core" else [])]
    start = time.perf_counter()
    subprocess.run(command, cwd=project, env=env, check=True)
    seconds = time.perf_counter() - start
    return seconds, tree_size(project / ".venv")


def has_torch(venv: Path) -> bool:
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"
    return subprocess.run([str(venv / "bin" / "python"), "-c", probe]).returncode == 0


def run_demo(venv: Path, data_dir: Path) -> int:
    """``vidscope demo`` from ``venv`` on the embedded default profile; prints its output."""
    data_dir.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PREFECT_API_URL")}
    env["VIDSCOPE_DATA_DIR"] = str(data_dir)
    command = [str(venv / "bin" / "python"), "-c", DEMO_WRAPPER, "--data-dir", str(data_dir), "demo"]
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=data_dir)
    print(f"demo from the core venv: exit {done.returncode} in {time.perf_counter() - start:.0f} s")
    return done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--all", action="store_true", help="also measure the full install (vidscope[all])")
    parser.add_argument("--check", action="store_true", help="run `vidscope demo` from the core venv")
    parser.add_argument("--keep", type=Path, help="build under this folder and keep it (default: a temp dir)")
    args = parser.parse_args()
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="vidscope-install-"))
    workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    status = 0
    try:
        for variant in ("core", "all") if args.all else ("core",):
            seconds, size = set_up(workdir, variant)
            venv = workdir / variant / ".venv"
            rows.append((variant, seconds, size, has_torch(venv)))
            print(f"{variant}: {size / 1e9:.2f} GB ({size / 2**30:.2f} GiB) in {seconds:.0f} s", flush=True)
        if args.check:
            status = run_demo(workdir / "core" / ".venv", workdir / "demo-data")
    finally:
        if args.keep is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print("\n| install | command | venv size | set-up time | torch |")
    print("|---|---|---|---|---|")
    for variant, seconds, size, torch in rows:
        command = "bash scripts/setup.sh" + (" --core" if variant == "core" else "")
        minutes, secs = divmod(round(seconds), 60)
        has = "yes" if torch else "no"
        gib = f"{size / 2**30:.2f} GiB"
        print(f"| {variant} | `{command}` | {size / 1e9:.2f} GB ({gib}) | {minutes}m{secs:02d}s | {has} |")
    if len(rows) == 2:
        print(
            f"\ncore / all: {rows[0][2] / rows[1][2]:.2f}x the size, {rows[0][1] / rows[1][1]:.2f}x the time"
        )
    return status


if __name__ == "__main__":
    sys.exit(main())

"""How long ``vidscope ingest <folder>`` takes when nothing in the folder changed (issue 26).

Makes a folder of six short synthetic videos (3 s title cards: what a re-run costs is per file and
per stage, not per second of video), ingests it once with the real CLI in a child process, then times the same
command again (``--rounds`` times). The re-run must do nothing; it is timed from the command's
start to its exit, as a user waits for it. Its last output line is printed too.

    .venv/bin/python benchmarks/ingest_rerun.py [--rounds 3] [--data DIR]

``--data DIR`` keeps the folder and the store in DIR, so a second invocation (e.g. with another
checkout first on ``PYTHONPATH``, to measure the code before a change) skips the first ingest.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def make_folder(folder: Path) -> None:
    """Six synthetic title cards (kept when the folder exists: the same bytes, the same ids)."""
    from vidscope.core.synthetic import text_video

    folder.mkdir(parents=True, exist_ok=True)
    for n in range(6):
        target = folder / f"title-{n}.mp4"
        if not target.exists():
            text_video(target, duration=3.0, texts=[(0.0, 3.0, f"TITLE {n}")])


def ingest(folder: Path, data: Path) -> tuple[float, str, int]:
    """Run ``vidscope ingest folder``; its wall seconds, last output line and exit code."""
    env = {**os.environ, "PREFECT_API_URL": "", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1"}
    env.pop("PREFECT_API_URL")
    env.setdefault("PREFECT_HOME", str(data / "prefect-home"))
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "vidscope.cli", "--data-dir", str(data / "store"), "ingest", str(folder)],
        capture_output=True,
        text=True,
        env=env,
        cwd=data,
        check=False,
    )
    seconds = time.perf_counter() - started
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    return seconds, (lines[-1] if lines else done.stderr.strip()[-200:]), done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", type=Path, default=None, help="keep the folder and store here")
    args = parser.parse_args()
    data = args.data or Path(tempfile.mkdtemp(prefix="vidscope-rerun-"))
    data.mkdir(parents=True, exist_ok=True)
    folder = data / "videos"
    make_folder(folder)
    if not (data / "store").exists():
        seconds, last, code = ingest(folder, data)
        print(f"first ingest: {seconds:.1f} s (exit {code}): {last}")
    times = []
    for n in range(args.rounds):
        seconds, last, code = ingest(folder, data)
        times.append(seconds)
        print(f"re-run {n + 1}: {seconds:.1f} s (exit {code}): {last}")
    count = len(list(folder.iterdir()))
    print(f"re-run of an unchanged {count}-video folder: median {statistics.median(times):.1f} s")
    if args.data is None:
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()

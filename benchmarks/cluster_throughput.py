"""Videos per hour on the simulated cluster with 1, 2 and 4 worker processes, same inputs, one run.

Brings up the cluster of ``scripts/cluster.sh`` (PostgreSQL, the Prefect server and a Dask
scheduler on the server host; worker hosts in network namespaces, one single-threaded Dask worker
each), then for 1, 2 and 4 hosts ingests the same ``--videos`` short synthetic videos (every model
role off, as the cluster test: frames, segments, tags, chapters) with ``vidscope ingest`` run on
host 1, each time into a fresh data dir, so every run does all the work. Before each timed run the
hosts' Dask workers are warmed by ingesting one other video per worker (imports, first store
open), so the figure is steady-state.

Printed with the machine's core count and load: per configuration the wall time, videos per hour,
and per video

- *span*: from its first stage's start to its last stage's end (the ledger's times), the time one
  video occupies a worker, including Prefect's task runs between its stages;
- *stages*: the sum of its stages' own seconds (the work);
- *overhead*: worker-capacity per video (wall x workers / videos) minus the span: what each video
  costs a worker outside its own stages' span -- the Dask queue, the ingestion subflow and task
  runs reported to the server, hashing, the command's own start and the index rebuild at the end.

On 2 cores the ideal is bounded by the cores, not the workers: the figure to watch is that the span
per video stays flat while workers are added, and how large the overhead is.

    nice -n 10 .venv/bin/python benchmarks/cluster_throughput.py [--videos 12] [--workers 1 2 4]

Needs root (network namespaces). Leaves nothing running: the cluster is torn down at the end.
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
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "cluster.sh"
#: Every model role off (the same as tests/stores.py NO_MODELS).
ROLES = ("speech_recognizer", "text_reader", "captioner", "chat", "image_text", "object_detector")


def cluster(data: Path, *args: str) -> str:
    done = subprocess.run(
        ["bash", str(SCRIPT), "--data-dir", str(data), *args],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"cluster {' '.join(args)} failed: {done.stdout}{done.stderr}")
    return done.stdout


def ingest(data: Path, into: Path, folder: Path) -> float:
    """``vidscope --data-dir INTO ingest FOLDER`` on host 1; its wall seconds."""
    start = time.perf_counter()
    cluster(
        data,
        "exec",
        "1",
        "--",
        sys.executable,
        "-m",
        "vidscope.cli",
        "--data-dir",
        str(into),
        "ingest",
        str(folder),
    )
    return time.perf_counter() - start


def per_video(store_dir: Path) -> tuple[list[float], list[float]]:
    """Each video's span (first stage start to last stage end) and its stages' summed seconds."""
    from vidscope.core.settings import Settings
    from vidscope.models.open_store import open_store

    store = open_store(Settings(data_dir=store_dir))
    rows = store.rows(store.ledger, columns=["video_id", "started_at", "finished_at", "seconds"]).to_pylist()
    spans: dict[str, list[datetime]] = {}
    work: dict[str, float] = {}
    for row in rows:
        times = spans.setdefault(row["video_id"], [])
        times += [t for t in (row["started_at"], row["finished_at"]) if t is not None]
        work[row["video_id"]] = work.get(row["video_id"], 0.0) + (row["seconds"] or 0.0)
    return [(max(t) - min(t)).total_seconds() for t in spans.values()], list(work.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--videos", type=int, default=12)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    from vidscope.core.synthetic import text_video

    root = Path(tempfile.mkdtemp(prefix="vidscope-throughput-"))
    root.chmod(0o755)  # the local PostgreSQL runs as the postgres user
    data = root / "data"
    inputs, warm = root / "inputs", root / "warm"
    for index in range(args.videos):
        text_video(
            inputs / f"v{index:02d}.mp4",
            duration=2.0,
            size=(320, 180),
            fps=10,
            texts=[(0, 2, f"V{index:02d}")],
        )
    config = root / "vidscope.toml"
    config.write_text("[models]\n" + "".join(f'{role} = ""\n' for role in ROLES))
    print(
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, {args.videos} videos of 2 s, "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    )
    hosts = 0
    try:
        start = time.perf_counter()
        pid = os.getpid() % 200
        cluster(
            data,
            "up",
            "--hosts",
            "1",
            "--name",
            f"b{pid}",
            "--subnet",
            f"10.253.{pid}",
            "--port",
            str(4800 + pid),
            "--dask-port",
            str(9300 + pid),
            "--config",
            str(config),
        )
        hosts = 1
        took = time.perf_counter() - start
        print(f"cluster up (PostgreSQL, Prefect server, Dask scheduler, 1 host): {took:.0f} s")
        print(
            f"{'workers':>7} {'wall s':>7} {'videos/h':>9} {'span s/video':>13} {'stages s/video':>15} "
            f"{'overhead s/video':>17}"
        )
        for workers in args.workers:
            while hosts < workers:
                hosts += 1
                cluster(data, "add-host", str(hosts))
            for index in range(workers):  # one warm-up video per worker, into a scratch store
                text_video(
                    warm / f"w{workers}-{index}.mp4",
                    duration=1.0,
                    size=(160, 90),
                    fps=10,
                    texts=[(0, 1, f"W{workers}{index}")],
                )
            ingest(data, root / f"warm-{workers}", warm)
            into = root / f"run-{workers}"
            wall = ingest(data, into, inputs)
            spans, work = per_video(into)
            if len(spans) != args.videos:
                raise SystemExit(
                    f"{len(spans)} videos in the ledger of the {workers}-worker run, not {args.videos}"
                )
            span, stages = statistics.mean(spans), statistics.mean(work)
            overhead = wall * workers / args.videos - span
            print(
                f"{workers:>7} {wall:>7.1f} {3600 * args.videos / wall:>9.0f} {span:>13.2f} {stages:>15.2f} "
                f"{overhead:>17.2f}",
                flush=True,
            )
    finally:
        if hosts:
            print(cluster(data, "down").strip())
        shutil.rmtree(root, ignore_errors=True)
    print(f"load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

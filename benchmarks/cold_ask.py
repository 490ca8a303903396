"""Cold-command latency: ``vidscope ask`` with and without a Prefect server, the API, the library commands.

Every figure is a fresh process (as a user typing the command gets), timed from spawn to exit, with
the CPU time it and its children used (``getrusage``: on a shared machine wall time is noisy, CPU
time much less so). Rounds are interleaved — each round runs every case once — and medians are
reported against the goals of issue 17:

  cold ask (no server)       ≤ 2 s end to end
  ask, server running        ≤ 0.5 s beyond the work (wall minus the answer's own ``seconds``):
                             "ask (server)" is ``vidscope server up`` (the Prefect server, its
                             worker and the vidscope API, which the CLI hands the question to);
                             "ask (no API)" is ``server up --no-api`` (the CLI runs the flow)
  warm API ask               ≤ 0.3 s (POST /api/ask in a running API process, after its warm-up)
  sql, videos, status, --help ≤ 1 s

Each ask asks a question never asked before (a numbered suffix), so its tool calls miss the cache
and the query embedder really loads and runs. With ``--before DIR`` (a source tree of an earlier
commit, e.g. ``git archive 94b6946 | tar -x -C DIR``) every case also runs with ``PYTHONPATH=DIR``
in the same rounds, side by side. The store must hold an ingested video (``--video``).

    python benchmarks/cold_ask.py --data-dir vidscope-data --video thanks --rounds 5 [--before DIR]

``--floor`` measures only the cold ``ask`` (no server, a new question each time) against the
import floor, ``python -c "import lance, pyarrow"`` (what any command reading the store must
import), interleaved in the same rounds, and prints ask / floor in wall and in CPU time (issue 44:
goal ≤ 1.5x); with ``--before DIR`` the earlier tree's ask too. Each tree asks once first, not
counted, so its modules are compiled (the commands run without ``PYTHONDONTWRITEBYTECODE``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

GOALS = {
    "ask": 2.0,
    "ask (server)": None,
    "ask (no API)": None,
    "sql": 1.0,
    "videos": 1.0,
    "status": 1.0,
    "--help": 1.0,
}
_counter = itertools.count(1)
#: Where the commands run (see ``run``): no ``vidscope`` package there.
NEUTRAL_CWD = Path(tempfile.gettempdir())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run(args: list[str], env: dict[str, str], attempts: int = 2) -> tuple[float, float, str]:
    """(wall s, CPU s of the process and its children, stdout) of ``python -m vidscope.cli ARGS``.

    A failed run is reported and retried once (a temporary Prefect server that does not come up
    on a loaded machine fails the whole command); its time is not counted.
    """
    for attempt in range(1, attempts + 1):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        command = [sys.executable, "-m", "vidscope.cli", *args]
        # A neutral working directory: ``python -m`` puts it first on sys.path, so run from a
        # source tree it would shadow the --before tree's PYTHONPATH with that tree's vidscope.
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, cwd=NEUTRAL_CWD)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode == 0:
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            return wall, cpu, done.stdout
        tree = "before" if "PYTHONPATH" in env else "now"
        print(f"  ! {tree}: vidscope {' '.join(args)} failed (attempt {attempt}): "
              f"{(done.stdout + done.stderr).strip()[-300:]}", flush=True)  # fmt: skip
    raise SystemExit("giving up")


def environment(data_dir: Path, port: int, api_port: int, source: Path | None) -> dict[str, str]:
    # No PYTHONDONTWRITEBYTECODE (this machine sets it): a user's vidscope runs from compiled
    # modules, as the floor's installed libraries do; without them every vidscope module is
    # compiled from source at each start (0.1 CPU-s of a cold ask here).
    dropped = ("PREFECT_API_URL", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(
        {
            "VIDSCOPE_DATA_DIR": str(data_dir),
            "VIDSCOPE_SERVER__PORT": str(port),
            "VIDSCOPE_API__PORT": str(api_port),
            "DO_NOT_TRACK": "1",
            # On a loaded machine the earlier tree's temporary server takes longer than the default 20 s.
            "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
    )
    if source is not None:
        env["PYTHONPATH"] = str(source)
    return env


def ask_args(video: str) -> list[str]:
    return ["ask", video, f"What is shown on the screen, take {next(_counter)}?", "--json"]


def measure_round(
    cases: list[str], trees: dict[str, dict[str, str]], video: str, results: dict, extra: dict
) -> None:
    commands = {
        "ask": ask_args,
        "ask (server)": ask_args,
        "ask (no API)": ask_args,
        "sql": lambda _v: ["sql", "select count(*) from clips"],
        "videos": lambda _v: ["videos"],
        "status": lambda _v: ["status"],
        "--help": lambda _v: ["--help"],
    }
    for case in cases:
        for tree, env in trees.items():
            wall, cpu, out = run(commands[case](video), env)
            results[(case, tree)].append((wall, cpu))
            if case.startswith("ask"):
                extra[(case, tree)].append(wall - float(json.loads(out)["seconds"]))


def warm_api_asks(data_dir: Path, video: str, rounds: int) -> list[float]:
    """POST /api/ask in one API app after its warm-up: the seconds of each new question."""
    from fastapi.testclient import TestClient

    from vidscope.api.app import create_app
    from vidscope.api.state import app_state
    from vidscope.core.settings import ApiSettings, Settings

    settings = Settings(data_dir=data_dir, api=ApiSettings(token="bench"))
    times = []
    app = create_app(settings)
    with TestClient(app) as client:
        headers = {"Authorization": "Bearer bench"}
        app_state(app).warm()  # what the lifespan started in the background; wait for it
        for _ in range(rounds + 1):
            body = {"video": video, "question": f"What happens on screen, take {next(_counter)}?"}
            started = time.perf_counter()
            response = client.post("/api/ask", json=body, headers=headers)
            times.append(time.perf_counter() - started)
            response.raise_for_status()
    return times[1:]  # the first one also settles the process (first request through the app)


def floor_ratio(trees: dict[str, dict[str, str]], video: str, rounds: int) -> None:
    """Cold asks of each tree and the import floor, interleaved; medians and ask / floor."""
    floor_env = trees["now"]
    times: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for env in trees.values():  # not counted: writes each tree's compiled modules
        run(ask_args(video), env)
    for i in range(rounds):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", "import lance, pyarrow"], env=floor_env, cwd=NEUTRAL_CWD, check=True
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        times["floor"].append((time.perf_counter() - started, cpu))
        for tree, env in trees.items():
            wall, cpu, _ = run(ask_args(video), env)
            times[f"ask ({tree})"].append((wall, cpu))
        print(f"  round {i + 1} done", flush=True)
    floor_wall = statistics.median(w for w, _ in times["floor"])
    floor_cpu = statistics.median(c for _, c in times["floor"])
    print(f"\nmedians of {rounds} rounds (wall s / CPU s)")
    print(f"  {'import floor':14s} {floor_wall:6.2f} / {floor_cpu:5.2f}")
    for tree in trees:
        wall = statistics.median(w for w, _ in times[f"ask ({tree})"])
        cpu = statistics.median(c for _, c in times[f"ask ({tree})"])
        print(
            f"  {'ask (' + tree + ')':14s} {wall:6.2f} / {cpu:5.2f}   ask / floor: "
            f"wall {wall / floor_wall:.2f}x, CPU {cpu / floor_cpu:.2f}x   (goal ≤ 1.5x)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--video", required=True, help="an ingested video (id prefix or file name)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", type=Path, help="source tree of the commit to compare with")
    parser.add_argument("--floor", action="store_true", help="only the cold ask against the import floor")
    args = parser.parse_args()
    data_dir = args.data_dir.resolve()
    port, api_port = free_port(), free_port()
    trees = {"now": environment(data_dir, port, api_port, None)}
    if args.before:
        trees["before"] = environment(data_dir, port, api_port, args.before.resolve())
    if args.floor:
        print(
            f"{args.rounds} interleaved rounds, trees: {', '.join(trees)}; {os.cpu_count()} CPUs", flush=True
        )
        floor_ratio(trees, args.video, args.rounds)
        return
    results: dict = defaultdict(list)
    beyond: dict = defaultdict(list)
    plain = ["ask", "sql", "videos", "status", "--help"]
    print(f"{args.rounds} interleaved rounds, trees: {', '.join(trees)}; {os.cpu_count()} CPUs", flush=True)
    for i in range(args.rounds):
        measure_round(plain, trees, args.video, results, beyond)
        print(f"  round {i + 1} (no server) done", flush=True)

    # The same asks with `vidscope server up` running for this data dir (found by its pid file):
    # first without the vidscope API (`--no-api`: the CLI runs the flow itself), then with it (the
    # default: the CLI hands the question to the API, which runs the flow).
    def server_up(*extra: str) -> None:
        up = subprocess.run(
            [sys.executable, "-m", "vidscope.cli", "server", "up", *extra],
            env=trees["now"],
            cwd=NEUTRAL_CWD,
            capture_output=True,
            text=True,
        )
        if up.returncode != 0:
            raise SystemExit(f"vidscope server up failed:\n{up.stdout}\n{up.stderr}")

    # The earlier tree only knew a server through PREFECT_API_URL (the documented export).
    served = {tree: {**env, "PREFECT_API_URL": f"http://127.0.0.1:{port}/api"} for tree, env in trees.items()}
    served["now"] = trees["now"]  # found by the pid file, no export needed
    try:
        server_up("--no-api")
        for i in range(args.rounds):
            measure_round(["ask (no API)"], served, args.video, results, beyond)
            print(f"  round {i + 1} (server running, no API) done", flush=True)
        server_up()  # adds the API to the running server and worker
        time.sleep(5)  # let it finish warming up (the lifespan warms in the background)
        for i in range(args.rounds):
            measure_round(["ask (server)"], served, args.video, results, beyond)
            print(f"  round {i + 1} (server and API running) done", flush=True)
    finally:
        subprocess.run(
            [sys.executable, "-m", "vidscope.cli", "server", "down"],
            env=trees["now"],
            check=False,
            cwd=NEUTRAL_CWD,
        )

    print("\nmedians (wall s / CPU s)" + ("   before → now, ratio of wall" if args.before else ""))
    for case in ["ask", "ask (no API)", "ask (server)", "sql", "videos", "status", "--help"]:
        cells = []
        for tree in trees:
            wall = statistics.median(w for w, _ in results[(case, tree)])
            cpu = statistics.median(c for _, c in results[(case, tree)])
            cells.append((tree, wall, cpu))
        line = "   ".join(f"{tree}: {wall:6.2f} / {cpu:5.2f}" for tree, wall, cpu in cells)
        if args.before:
            now, before = cells[0][1], cells[1][1]
            line += f"   ×{before / now:5.1f} faster"
        goal = GOALS[case]
        verdict = f"goal ≤ {goal:.1f} s: {'met' if cells[0][1] <= goal else 'NOT met'}" if goal else ""
        if case.startswith("ask"):
            extra = "   ".join(f"{t}: {statistics.median(beyond[(case, t)]):.2f}" for t in trees)
            verdict += f"  beyond the work: {extra}"
            if case == "ask (server)":
                met = statistics.median(beyond[(case, "now")]) <= 0.5
                verdict += f" (goal ≤ 0.5 s: {'met' if met else 'NOT met'})"
        print(f"  {case:13s} {line}   {verdict}")

    api = warm_api_asks(data_dir, args.video, args.rounds)
    median = statistics.median(api)
    print(f"  {'warm API ask':13s} now: {median:6.3f} s (median of {len(api)})   "
          f"goal ≤ 0.3 s: {'met' if median <= 0.3 else 'NOT met'}")  # fmt: skip


if __name__ == "__main__":
    main()

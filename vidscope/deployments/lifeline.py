"""No process vidscope starts outlives it, however it ends.

Prefect starts its temporary API server (``uvicorn``, ~230 MB) as a plain child of whichever
process first needs the API, and stops it from an ``atexit`` hook; a Dask cluster starts worker
processes the same way. Neither hook runs when the parent is killed (SIGKILL, the OOM killer) or
when a thread that will not stop holds the interpreter open. Two measures cover every case:

* :func:`end_children` ends this process's descendants (TERM, then KILL), for the paths where
  vidscope decides to stop (a signal handler, the end of ``vidscope api``);
* :func:`start_watchdog` starts a small process, in a session of its own so that signals sent to
  the terminal's process group do not reach it, that notes the parent's descendants a few times
  a second and ends them as soon as the parent is gone, then exits itself. It is how a SIGKILL of
  ``vidscope ingest`` still takes the temporary server with it.

This module imports only the standard library and psutil: the watchdog runs it as a script.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time

import psutil

#: How often (s) the watchdog looks at the parent and its descendants.
POLL_SECONDS = 0.2
#: How long (s) a child gets to exit after SIGTERM before it is killed.
GRACE_SECONDS = 3.0

_watchdog: subprocess.Popen[bytes] | None = None


def start_watchdog() -> int:
    """Start the watchdog of this process (once per process); returns its pid."""
    global _watchdog
    if _watchdog is not None and _watchdog.poll() is None:
        return _watchdog.pid
    _watchdog = subprocess.Popen(
        [sys.executable, "-m", "vidscope.deployments.lifeline", str(os.getpid())],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # Ctrl-C in the terminal must not end it before the parent
        close_fds=True,
    )
    return _watchdog.pid


def _descendants(pid: int, exclude: set[int]) -> dict[int, psutil.Process]:
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return {}
    return {child.pid: child for child in children if child.pid not in exclude}


def _terminate(processes: list[psutil.Process], grace: float) -> None:
    """TERM every process, KILL those still there after ``grace`` seconds, and reap ours."""
    for proc in processes:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, alive = psutil.wait_procs(processes, timeout=grace)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(alive, timeout=1.0)


def end_children(grace: float = GRACE_SECONDS) -> int:
    """End every descendant of this process except the watchdog; returns how many there were."""
    keep = {_watchdog.pid} if _watchdog is not None else set()
    children = list(_descendants(os.getpid(), keep).values())
    _terminate(children, grace)
    return len(children)


def stop_watchdog() -> None:
    """End the watchdog of this process (after a clean stop it has nothing left to do)."""
    global _watchdog
    if _watchdog is not None:
        _terminate([psutil.Process(_watchdog.pid)] if _watchdog.poll() is None else [], 1.0)
        _watchdog.wait()
        _watchdog = None


def watch(parent: int) -> None:
    """Until ``parent`` is gone, remember its descendants; then end the ones still running.

    A process is remembered with its ``psutil.Process`` object, which carries its start time, so
    a pid the system has given to another process since is never signalled.
    """
    try:
        parent_proc = psutil.Process(parent)
    except psutil.Error:
        return
    me = {os.getpid()}
    known: dict[int, psutil.Process] = {}
    while True:
        try:
            gone = not parent_proc.is_running() or parent_proc.status() == psutil.STATUS_ZOMBIE
        except psutil.Error:
            gone = True
        if gone:
            break
        known.update(_descendants(parent, me))
        known = {pid: proc for pid, proc in known.items() if proc.is_running()}
        time.sleep(POLL_SECONDS)
    # Descendants that appeared after the last look are still found: they kept their parents.
    for proc in list(known.values()):
        with contextlib.suppress(psutil.Error):
            known.update(_descendants(proc.pid, me))
    _terminate([p for p in known.values() if p.is_running()], GRACE_SECONDS)


if __name__ == "__main__":
    watch(int(sys.argv[1]))

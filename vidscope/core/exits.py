"""A clean interpreter exit: work still in hand is finished, then native threads leave Python.

Why (issue 23): commands with a model configured aborted at exit in about one run in four when a
Prefect server was running (``Fatal Python error: PyGILState_Release: thread state … must be
current when releasing`` / ``Python runtime state: finalizing``, SIGABRT, exit status 134). A core
dump showed the aborting thread: a LanceDB tokio worker (``lancedb-tokio-w``), inside pyo3's
``PyGILState_Release``, while the main thread was already in ``Py_FinalizeEx``.

LanceDB's synchronous Python API runs each call on its Rust (tokio) worker threads and hands the
result back from one of them: the worker takes the GIL and calls the asyncio loop's
``call_soon_threadsafe``, whose wake-up write releases the GIL for a moment. That moment is enough
for the Python caller to get its result and return, and when that call was the last thing the
process did (the usage log's batched write, which ran from an ``atexit`` hook), for the main thread
to start finalizing before the worker takes the GIL back. CPython makes a thread that takes the GIL
during finalization exit on the spot; the exit unwinds through pyo3's GIL guard, which releases a
thread state that is no longer current, and CPython aborts. The longer finalization takes (a
process that imported Prefect has much to collect), the likelier the worker wakes inside it.

So the process's last writes happen before finalization, and then the main thread waits until no
thread that ``threading`` does not know (a native worker) is running Python code: that worker's
frames are visible in :func:`sys._current_frames` for exactly as long as it is handing its result
over. Hooks registered with :func:`at_exit` run in order, then that wait, from a single ``atexit``
handler registered when this module is first imported (so it runs after every ``atexit`` handler
registered later, Prefect's included).
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

#: How long the exit waits for native threads to leave Python before giving up (and logging it).
NATIVE_THREAD_WAIT_S = 5.0

_hooks: list[Callable[[], object]] = []
_lock = threading.Lock()


def at_exit(hook: Callable[[], object]) -> None:
    """Run ``hook`` at interpreter exit, before the wait for native threads (once, in order)."""
    with _lock:
        if hook not in _hooks:
            _hooks.append(hook)


def native_threads_in_python() -> list[int]:
    """Idents of threads running Python code that were not started by :mod:`threading`: native
    threads of an extension (LanceDB's tokio workers) calling back into the interpreter."""
    started = {t.ident for t in threading.enumerate() if not isinstance(t, threading._DummyThread)}
    return [ident for ident in sys._current_frames() if ident not in started]


def wait_for_native_threads(timeout: float = NATIVE_THREAD_WAIT_S) -> bool:
    """Wait (releasing the GIL) until no native thread runs Python code; ``False`` on timeout."""
    deadline = time.monotonic() + timeout
    while native_threads_in_python():
        if time.monotonic() >= deadline:
            log.warning("native threads still in Python at exit after %.1f s", timeout)
            return False
        time.sleep(0.002)  # the sleep releases the GIL the waiting worker needs to finish
    return True


def shutdown() -> None:
    """Run the exit hooks (each failure logged, not raised), then wait for native threads."""
    with _lock:
        hooks = list(_hooks)
    for hook in hooks:
        try:
            hook()
        except Exception:  # an exit hook must not keep the others from running
            log.exception("exit hook %r failed", hook)
    wait_for_native_threads()


atexit.register(shutdown)

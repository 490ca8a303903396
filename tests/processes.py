"""``vidscope`` in a process of its own, for what an in-process run cannot show: its real stderr,
its own resource limits, and its peak memory.

Peak memory is the kernel's high-water mark (``ru_maxrss``) of that process, read by a small
Python parent that starts it and waits for it with ``os.wait4``. Why not from the test process
itself: a child's ``ru_maxrss`` counts the memory of the process it was forked from until it
execs (Linux keeps the larger of the two), so a child of a pytest process holding 500 MB reports
at least 500 MB whatever it does; and ``RUSAGE_CHILDREN`` is the largest of every child the test
process ever waited for.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

MB = 1024 * 1024

#: The small parent: sets the file size limit argv[2] (bytes; 0 none) for itself and so for the
#: child, runs argv[3:], writes the child's peak (KiB on Linux, bytes on macOS) to argv[1], and
#: exits as the child did. (The limit is set here, not in a ``preexec_fn`` of the test process:
#: that would fork the test process, which LanceDB warns is not safe.)
_MEASURE = """
import os, resource, subprocess, sys
if int(sys.argv[2]):
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]),) * 2)
child = subprocess.Popen(sys.argv[3:])
_, status, usage = os.wait4(child.pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(str(usage.ru_maxrss))
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


@dataclass
class Ran:
    """How a ``vidscope`` process ended: exit code, output, and its peak resident memory."""

    returncode: int
    stdout: str
    stderr: str
    peak_bytes: int


def run_vidscope(
    cwd: Path,
    *args: str,
    env: dict[str, str] | None = None,
    file_size_limit: int | None = None,
    timeout: float = 120.0,
) -> Ran:
    """``python -m vidscope.cli ARGS`` in ``cwd``; ``file_size_limit`` (bytes) makes a write past
    it fail with EFBIG (Python ignores SIGXFSZ), as a full disk would, for this process only."""

    with tempfile.TemporaryDirectory() as scratch:
        peak_file = Path(scratch) / "peak"
        limit = str(file_size_limit or 0)
        command = [
            sys.executable,
            "-c",
            _MEASURE,
            str(peak_file),
            limit,
            sys.executable,
            "-m",
            "vidscope.cli",
        ]
        with subprocess.Popen(
            [*command, *args],
            cwd=cwd,
            env={**os.environ, "COLUMNS": "200", **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # one group: a timeout ends the command with its parent
        ) as process:
            try:
                stdout, stderr = process.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.communicate()
                raise
        peak = int(peak_file.read_text()) * (1 if sys.platform == "darwin" else 1024)
        return Ran(process.returncode, stdout, stderr, peak)

"""Time and peak memory of the embedded MiniLM's ingestion batches, this tree against another.

Embeds the same 700 texts of mixed length (5 to 300 words: short captions to transcript windows
truncated at 256 tokens, as the ``parse`` and ``embed`` stages send) in a fresh process per tree,
and prints each tree's seconds and peak RSS (VmHWM, the process's whole peak: Python, torch and
the model included) and the ratios, with the largest difference between the two trees' vectors.

    .venv/bin/python benchmarks/embed_batches.py --before 05fe1c9 [--texts 700] [--backend numpy]

By default each tree embeds as it would by default (NumPy since issue 44, torch before where
installed); ``--backend numpy`` or ``torch`` makes both trees use that forward pass.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

CHILD = """
import json, random, sys, time
from pathlib import Path
import numpy as np
from vidscope.models.sentence_embedder import from_spec
import vidscope
embedder = from_spec("text_embedder", "embedded", {}, Path(sys.argv[1]))
if sys.argv[4] != "default":  # torch_available: the attribute's name before issue 44
    embedder.torch_batches = embedder.torch_available = sys.argv[4] == "torch"
embedder.embed([f"warm up {i}" for i in range(16)])  # loads the model: not part of the timing
random.seed(0)
words = "the a man woman opens door kitchen walks red blue car street talks about weather news".split()
texts = [" ".join(random.choice(words) for _ in range(random.choice([5, 20, 60, 150, 300])))
         for _ in range(int(sys.argv[2]))]
started = time.perf_counter()
vectors = embedder.embed(texts)
seconds = time.perf_counter() - started
np.save(sys.argv[3], vectors)
peak = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024
print(json.dumps({"from": vidscope.__file__, "seconds": seconds, "peak_mb": peak}))
"""


def measure(source: Path | None, texts: int, out: Path, backend: str) -> dict:
    env_path = [str(source)] if source else []
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(out.parent), str(texts), str(out), backend],
        capture_output=True,
        text=True,
        check=True,
        cwd=out.parent,  # not a source tree: `vidscope` comes from PYTHONPATH or the install
        env={"PYTHONPATH": ":".join(env_path), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--before", required=True, help="a commit to compare with")
    parser.add_argument("--texts", type=int, default=700)
    parser.add_argument(
        "--backend",
        choices=("default", "numpy", "torch"),
        default="default",
        help="each tree's own choice, or batches forced to NumPy or to torch (torch_batches)",
    )
    args = parser.parse_args()
    backend = args.backend
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        tree = work / "before"
        tree.mkdir()
        archive = subprocess.run(["git", "archive", args.before], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
        before = measure(tree, args.texts, work / "before.npy", backend)
        now = measure(None, args.texts, work / "now.npy", backend)
        assert before["from"].startswith(str(tree)) and not now["from"].startswith(str(tree))
        gap = float(np.abs(np.load(work / "before.npy") - np.load(work / "now.npy")).max())
    on = "each tree's default forward pass" if backend == "default" else backend
    print(f"{args.texts} texts of 5-300 words, embedded MiniLM on {on} (loaded before timing)")
    for name, result in (("before " + args.before, before), ("now", now)):
        print(f"  {name:16s} {result['seconds']:6.2f} s   peak RSS {result['peak_mb']:6.0f} MB")
    speedup, saved = before["seconds"] / now["seconds"], before["peak_mb"] - now["peak_mb"]
    print(f"  {speedup:.2f}x faster, peak {saved:.0f} MB lower; largest vector difference {gap:.1e}")


if __name__ == "__main__":
    main()

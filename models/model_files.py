"""Model files that vidscope fetches itself: manifests, sha256 pins, the data dir's model cache.

A fetched model is described by a *manifest* (:class:`Manifest`, stored beside its files as
``vidscope-model.json``): the model's name, licence and source, how to run it (free-form
``runtime`` settings its backend reads) and its files, each with the URL it comes from, its size and
its sha256. A file enters the cache only when its bytes match the pin, and is checked again
when the backend loads it.

A manifest itself is trusted in one of two ways: it is written into vidscope (:data:`CARDS`, the
default models, their pins copied from the publisher's file listing), or it is named by URL
together with the sha256 of the manifest file (``[models.options.onnx-clip] sha256``), which pins
every file it lists in turn.

Where models live: ``<data_dir>/models/<name>/``. :func:`pull` fills it from the network (once),
:func:`export_to` copies a complete cache entry to a directory (a USB stick) and :func:`import_from`
checks such a directory against the same pins and copies it in, for machines without a network.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

MANIFEST = "vidscope-model.json"
#: Seconds a hub request may stall before the fetch gives up.
TIMEOUT = 30.0
_CHUNK = 1 << 20


class ModelFile(BaseModel):
    """One file of a model: where it comes from and what its bytes must hash to."""

    name: str = Field(description="Local file name in the model's cache directory.")
    url: str = Field(description="Where it is fetched from (relative to the manifest's URL allowed).")
    sha256: str
    bytes: int | None = None


class Manifest(BaseModel):
    """A fetchable model: identity, licence, how to run it, and its pinned files."""

    format: str = "vidscope-model"
    format_version: int = 1
    name: str
    kind: str = Field(description="The backend kind that runs it, e.g. onnx-clip.")
    license: str = ""
    source: str = ""
    runtime: dict[str, Any] = Field(default_factory=dict)
    files: list[ModelFile]

    def file(self, name: str) -> ModelFile:
        """The file called ``name`` (``KeyError`` when the manifest lists none)."""
        for f in self.files:
            if f.name == name:
                return f
        raise KeyError(name)


class FetchError(RuntimeError):
    """A model file could not be had (network, size or sha256); the message says which and why."""


_XENOVA = (
    "https://huggingface.co/Xenova/clip-vit-base-patch32/resolve/d15189d7028b43f1d3e65039190477f6af591c2a"
)

#: The models vidscope knows by name, with their pins (sizes and sha256 as published by the hub
#: for that exact revision of the repository).
CARDS: dict[str, Manifest] = {
    "clip-vit-b32-int8": Manifest(
        name="clip-vit-b32-int8",
        kind="onnx-clip",
        license="MIT (OpenAI CLIP weights; ONNX export by Xenova)",
        source="OpenAI CLIP ViT-B/32, int8 ONNX export: huggingface.co/Xenova/clip-vit-base-patch32",
        runtime={
            "dim": 512,
            "image": {
                "file": "vision.onnx",
                "size": 224,
                "mean": [0.48145466, 0.4578275, 0.40821073],
                "std": [0.26862954, 0.26130258, 0.27577711],
                "output": "image_embeds",
            },
            "text": {
                "file": "text.onnx",
                "tokenizer": "tokenizer.json",
                "max_tokens": 77,
                "output": "text_embeds",
            },
        },
        files=[
            ModelFile(
                name="vision.onnx",
                url=f"{_XENOVA}/onnx/vision_model_quantized.onnx",
                sha256="583fd1110a514667812fee7d684952aaf82a99b959760c8d7dca7e0ab9839299",
                bytes=89117001,
            ),
            ModelFile(
                name="text.onnx",
                url=f"{_XENOVA}/onnx/text_model_quantized.onnx",
                sha256="73baab855d406190da9faa498cfedf65f15cf309f4cc7385b7b032e6d08e5c3a",
                bytes=64504507,
            ),
            ModelFile(
                name="tokenizer.json",
                url=f"{_XENOVA}/tokenizer.json",
                sha256="f7f3b7af117d467b58374797691a6438d3e6b9e9cef800dfd5dced7f697a90cd",
                bytes=2224119,
            ),
        ],
    )
}

#: The image–text model of the default profile.
DEFAULT_IMAGE_TEXT = "clip-vit-b32-int8"


def sha256_of(path: Path) -> str:
    """The hex sha256 of the file at ``path``."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def cache_root(data_dir: Path) -> Path:
    """Where fetched models live under the data dir."""
    return Path(data_dir).expanduser() / "models"


def _get(url: str) -> Any:
    request = urllib.request.Request(url, headers={"User-Agent": "vidscope"})
    return urllib.request.urlopen(request, timeout=TIMEOUT)  # noqa: S310 (http(s) URLs from pins)


def fetch_manifest(url: str, sha256: str) -> tuple[Manifest, bytes]:
    """The manifest at ``url`` when its bytes hash to ``sha256`` (raises :class:`FetchError`)."""
    try:
        with _get(url) as response:
            data = response.read()
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise FetchError(f"cannot fetch the model manifest {url} ({_why(exc)})") from exc
    return _checked_manifest(data, sha256, url), data


def _checked_manifest(data: bytes, sha256: str, where: str) -> Manifest:
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256.lower():
        raise FetchError(f"the model manifest {where} has sha256 {actual}, not the pinned {sha256}")
    try:
        return Manifest.model_validate_json(data)
    except ValueError as exc:
        raise FetchError(f"the model manifest {where} is not a vidscope model manifest ({exc})") from exc


def _why(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    return str(reason if reason is not None else exc)


def missing_files(manifest: Manifest, directory: Path) -> list[ModelFile]:
    """The files of ``manifest`` absent from ``directory`` or of the wrong size."""
    missing = []
    for f in manifest.files:
        path = directory / f.name
        if not path.is_file() or (f.bytes is not None and path.stat().st_size != f.bytes):
            missing.append(f)
    return missing


def verify(manifest: Manifest, directory: Path) -> None:
    """Raise :class:`FetchError` unless every file of ``manifest`` in ``directory`` matches its pin."""
    for f in manifest.files:
        path = directory / f.name
        if not path.is_file():
            raise FetchError(f"{path} is missing")
        actual = sha256_of(path)
        if actual != f.sha256:
            raise FetchError(f"{path} has sha256 {actual}, not the pinned {f.sha256}")


def _download(url: str, target: Path, pin: ModelFile) -> None:
    """``url`` into ``target`` through a temporary file, kept only when it matches ``pin``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    digest = hashlib.sha256()
    try:
        with os.fdopen(handle, "wb") as out, _get(url) as response:
            while chunk := response.read(_CHUNK):
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != pin.sha256:
            raise FetchError(f"{url} has sha256 {digest.hexdigest()}, not the pinned {pin.sha256}")
        os.replace(temporary, target)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise FetchError(f"cannot fetch {url} ({_why(exc)})") from exc
    finally:
        Path(temporary).unlink(missing_ok=True)


def install(manifest: Manifest, directory: Path, base_url: str | None = None) -> Path:
    """Fetch the files of ``manifest`` missing from ``directory``; write the manifest; return it.

    Relative file URLs resolve against ``base_url`` (the manifest's own URL).
    """
    directory.mkdir(parents=True, exist_ok=True)
    for f in missing_files(manifest, directory):
        url = urllib.parse.urljoin(base_url, f.url) if base_url else f.url
        _download(url, directory / f.name, f)
    (directory / MANIFEST).write_text(manifest.model_dump_json(indent=2), encoding="utf-8")
    return directory


def export_to(manifest: Manifest, source: Path, target: Path) -> Path:
    """Copy a complete, verified model from ``source`` to ``target`` with its manifest."""
    verify(manifest, source)
    target.mkdir(parents=True, exist_ok=True)
    for f in manifest.files:
        shutil.copyfile(source / f.name, target / f.name)
    (target / MANIFEST).write_text(manifest.model_dump_json(indent=2), encoding="utf-8")
    return target


def import_from(manifest: Manifest, source: Path, target: Path) -> Path:
    """Check the model files in ``source`` against ``manifest``'s pins and copy them to ``target``."""
    if missing_files(manifest, source):
        names = ", ".join(f.name for f in missing_files(manifest, source))
        raise FetchError(f"{source} does not hold the model {manifest.name} (missing or wrong size: {names})")
    verify(manifest, source)
    return export_to(manifest, source, target)


def manifest_in(directory: Path) -> Manifest | None:
    """The manifest stored in ``directory`` (``None`` when there is none)."""
    path = directory / MANIFEST
    if not path.is_file():
        return None
    return Manifest.model_validate(json.loads(path.read_text(encoding="utf-8")))

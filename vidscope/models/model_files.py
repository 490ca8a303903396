"""Model files that vidscope fetches itself: manifests, sha256 pins, the user's model cache.

A fetched model is described by a *manifest* (:class:`Manifest`, stored beside its files as
``vidscope-model.json``): the model's name, licence and source, how to run it (free-form
``runtime`` settings its backend reads) and its files, each with the URL it comes from, its size and
its sha256. A file enters the cache only when its bytes match the pin, and is checked again
when the backend loads it.

A manifest itself is trusted in one of two ways: it is written into vidscope (:data:`CARDS`, the
default models, their pins copied from the publisher's file listing), or it is named by URL
together with the sha256 of the manifest file (``[models.options.onnx-clip] sha256``), which pins
every file it lists in turn.

Where models live: ``<model cache>/<name>/``, one cache per user shared by every data dir
(:func:`vidscope.core.settings.model_cache_dir`: the ``model_cache`` setting, ``$VIDSCOPE_MODEL_CACHE``,
``$XDG_CACHE_HOME/vidscope`` or ``~/.cache/vidscope``). A data dir made before that kept its own
copy in ``<data_dir>/models/``: it is still read when the shared cache lacks the model
(:func:`legacy_cache`), and ``vidscope models`` moves it into the cache once (:func:`move_legacy`).
:func:`pull` fills the cache from the network (once), :func:`export_to` copies a complete cache
entry to a directory (a USB stick) and :func:`import_from` checks such a directory against the
same pins and copies it in, for machines without a network.

A manifest is still input from elsewhere, so nothing it says is allowed to write outside the
directory it fills: a file name is a plain relative path (no ``..``, nothing absolute), checked
when the manifest is read, and every destination is resolved and must stay inside that directory
(a link leading out is refused) before the first byte is written. Bytes arrive in a temporary file
beside their destination, never more than the pinned size (an endless response is cut off at the
first byte too many), and are renamed into place only once their sha256 matches: a file already
there is never replaced by unverified bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import re
import socket
import stat
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator

from vidscope.core.settings import model_cache_dir

MANIFEST = "vidscope-model.json"
#: Seconds a hub request may stall before the fetch gives up (once the host answered).
TIMEOUT = 30.0
#: Seconds the first contact with a model host may take; a host that does not answer in time is
#: not tried again by this process (a network that drops packets costs one short wait, not 30 s
#: per model file and per command).
REACH_TIMEOUT = 3.0
#: The largest manifest read (from the network or a directory); real ones are a few KB.
MAX_MANIFEST_BYTES = 1 << 20
#: The most bytes taken for a file whose manifest pins no size.
MAX_UNPINNED_BYTES = 16 << 30
_CHUNK = 1 << 20


def _relative(name: str) -> str:
    """``name`` when it is a plain relative path (no ``..``, nothing absolute), else ``ValueError``."""
    if (
        not name
        or "\\" in name
        or "\x00" in name
        or name.startswith("/")
        or re.match(r"[A-Za-z]:", name)
        or any(part in ("", ".", "..") for part in name.split("/"))
    ):
        raise ValueError(
            f"the file name {name[:120]!r} leaves the model's directory (no '..', no absolute path)"
        )
    return name


def check_file_name(name: str) -> str:
    """``name`` when it may name a model file inside its directory, else ``ValueError``."""
    if _relative(name) == MANIFEST:
        raise ValueError(f"a model file may not be called {MANIFEST}")
    return name


class ModelFile(BaseModel):
    """One file of a model: where it comes from and what its bytes must hash to."""

    name: str = Field(description="Local file name in the model's cache directory.")
    url: str = Field(description="Where it is fetched from (relative to the manifest's URL allowed).")
    sha256: str
    bytes: int | None = Field(default=None, ge=0)

    @field_validator("name")
    @classmethod
    def _inside(cls, name: str) -> str:
        return check_file_name(name)

    @property
    def limit(self) -> int:
        """The most bytes this file may have."""
        return self.bytes if self.bytes is not None else MAX_UNPINNED_BYTES


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


#: Beside a model's files: the sha256 each file had when it was last hashed, keyed by its stat
#: (device, inode, size, modification and change times in ns). A later load whose stat is the same
#: takes the recorded digest instead of hashing the file again (CLIP's 156 MB, the MiniLM's 91 MB:
#: ~0.1–0.2 CPU-s per process, most of a cold question's margin over its imports). Any write to the
#: file changes its change time, which no user tool can set back, so a changed file is hashed again.
CHECKED = ".vidscope-checked.json"
#: A digest is recorded only for a file last changed this long before it was hashed: file times
#: are coarse (a clock tick of a few ms), so a file written again within the same tick as the
#: one it had when hashed would keep its stat (git's "racy clean" case); seconds later it cannot.
SETTLED_NS = 2_000_000_000


def _stat_key(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _read_checked(directory: Path) -> dict[str, Any]:
    try:
        recorded = json.loads((directory / CHECKED).read_text())
    except (OSError, ValueError):
        return {}
    return recorded if isinstance(recorded, dict) else {}


def checked_sha256(path: Path) -> str:
    """``path``'s sha256, hashed only when the file changed since it was last hashed here (its
    stat differs from the one recorded in :data:`CHECKED`). Recording is best effort: a
    read-only model folder is hashed every time, as before."""
    recorded = _read_checked(path.parent)
    key = _stat_key(path)
    entry = recorded.get(path.name)
    if isinstance(entry, dict) and entry.get("stat") == key and isinstance(entry.get("sha256"), str):
        return str(entry["sha256"])
    digest = sha256_of(path)
    settled = time.time_ns() - max(key[3], key[4]) >= SETTLED_NS
    if settled and _stat_key(path) == key:  # not written to while it was read
        recorded[path.name] = {"stat": key, "sha256": digest}
        with contextlib.suppress(OSError):
            _replace(path.parent / CHECKED, json.dumps(recorded).encode())
    return digest


def _replace(target: Path, data: bytes) -> None:
    """``data`` into ``target`` through a temporary file beside it, renamed into place."""
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name.lstrip('.')}.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temporary, target)
    finally:
        Path(temporary).unlink(missing_ok=True)


def cache_root(model_cache: Path | None = None) -> Path:
    """The user's model cache (``model_cache`` as configured; ``None``: the default place)."""
    return model_cache_dir(model_cache)


def legacy_cache(data_dir: Path) -> Path:
    """Where a data dir kept its own models before the shared cache (read as a fallback only)."""
    return Path(data_dir).expanduser() / "models"


def cache_usage(root: Path) -> tuple[int, int]:
    """How many model directories ``root`` holds and their bytes (links not followed)."""
    if not root.is_dir():
        return 0, 0
    models, size = 0, 0
    for entry in root.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            models += 1
            size += sum(f.lstat().st_size for f in entry.rglob("*") if f.is_file() and not f.is_symlink())
    return models, size


#: Hosts this process could not reach, with why: tried once, then refused at once.
_unreachable: dict[tuple[str, int], str] = {}
_unreachable_lock = threading.Lock()


def reach(url: str) -> None:
    """Raise ``OSError`` at once when ``url``'s host did not answer this process before, or does
    not accept a connection within :data:`REACH_TIMEOUT` now (remembered for the process)."""
    parts = urllib.parse.urlsplit(url)
    if not parts.hostname:
        return
    key = (parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass(parts.hostname):
        # Through a proxy the first contact is the proxy's, not the model host's.
        via = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        if via.hostname:
            key = (via.hostname, via.port or (443 if via.scheme == "https" else 80))
    with _unreachable_lock:
        known = _unreachable.get(key)
    if known is not None:
        raise OSError(known)
    try:
        socket.create_connection(key, timeout=REACH_TIMEOUT).close()
    except OSError as exc:
        why = f"{key[0]} did not answer ({exc.strerror or exc or 'timed out'})"
        with _unreachable_lock:
            _unreachable[key] = why
        raise OSError(why) from exc


def forget_unreachable() -> None:
    """Let this process try every model host again (after ``models pull`` or in tests)."""
    with _unreachable_lock:
        _unreachable.clear()


def _get(url: str) -> Any:
    reach(url)
    request = urllib.request.Request(url, headers={"User-Agent": "vidscope"})
    return urllib.request.urlopen(request, timeout=TIMEOUT)  # noqa: S310 (http(s) URLs from pins)


def fetch_manifest(url: str, sha256: str) -> tuple[Manifest, bytes]:
    """The manifest at ``url`` when its bytes hash to ``sha256`` (raises :class:`FetchError`)."""
    try:
        with _get(url) as response:
            data = response.read(MAX_MANIFEST_BYTES + 1)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise FetchError(f"cannot fetch the model manifest {url} ({_why(exc)})") from exc
    if len(data) > MAX_MANIFEST_BYTES:
        raise FetchError(f"the model manifest {url} is over {MAX_MANIFEST_BYTES:,} bytes; not a manifest")
    return _checked_manifest(data, sha256, url), data


def _checked_manifest(data: bytes, sha256: str, where: str) -> Manifest:
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256.lower():
        raise FetchError(f"the model manifest {where} has sha256 {actual}, not the pinned {sha256}")
    return parse_manifest(data, where)


def parse_manifest(data: bytes | str, where: object) -> Manifest:
    """The manifest in ``data`` (read from ``where``); one line of :class:`FetchError` when it is
    not one, or names a file outside its directory."""
    try:
        return Manifest.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        place = ".".join(str(part) for part in first["loc"])
        reason = str(first["msg"]).removeprefix("Value error, ")
        raise FetchError(f"the model manifest {where} is refused: {place}: {reason}") from exc


def _why(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    return str(reason if reason is not None else exc)


def confined(directory: Path, name: str) -> Path:
    """Where the file ``name`` goes in ``directory``: inside it, links resolved, or :class:`FetchError`.

    The name was checked when its manifest was read; this also catches a link already in the
    directory (or in a sub-directory on the way) that would carry a write outside it.
    """
    try:
        _relative(name)
    except ValueError as exc:
        raise FetchError(str(exc)) from exc
    root = Path(directory).expanduser().resolve()
    target = root / name
    if not target.resolve().is_relative_to(root):
        raise FetchError(
            f"{Path(directory) / name} is a link leading out of {directory}; nothing was written"
        )
    return target


def check_destinations(manifest: Manifest, directory: Path) -> dict[str, Path]:
    """Every file's destination in ``directory`` (the manifest's too), all checked before any
    write: :class:`FetchError` when one would leave it."""
    places = {f.name: confined(directory, f.name) for f in manifest.files}
    places[MANIFEST] = confined(directory, MANIFEST)
    return places


def missing_files(manifest: Manifest, directory: Path) -> list[ModelFile]:
    """The files of ``manifest`` absent from ``directory`` or of the wrong size."""
    missing = []
    for f in manifest.files:
        path = directory / f.name
        if not path.is_file() or (f.bytes is not None and path.stat().st_size != f.bytes):
            missing.append(f)
    return missing


def verify(manifest: Manifest, directory: Path, *, remember: bool = True) -> None:
    """Raise :class:`FetchError` unless every file of ``manifest`` in ``directory`` matches its pin.

    ``remember``: a file unchanged since it was last hashed in the cache is not hashed again
    (:func:`checked_sha256`); False for a folder that is not vidscope's (``--from`` a USB stick),
    which is hashed in full and never written to."""
    for f in manifest.files:
        path = directory / f.name
        if not path.is_file():
            raise FetchError(f"{path} is missing")
        actual = checked_sha256(path) if remember else sha256_of(path)
        if actual != f.sha256:
            raise FetchError(f"{path} has sha256 {actual}, not the pinned {f.sha256}")


def write_verified(chunks: Iterator[bytes], target: Path, pin: ModelFile, where: str) -> None:
    """Bytes from ``chunks`` (read from ``where``) into ``target``, through a temporary file beside
    it, renamed into place only when they are exactly ``pin``'s size and sha256.

    Stops at the first byte beyond the pinned size, so an endless source cannot fill the disk.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    digest = hashlib.sha256()
    size = 0
    try:
        with os.fdopen(handle, "wb") as out:
            for chunk in chunks:
                size += len(chunk)
                if size > pin.limit:
                    pinned = "the pinned" if pin.bytes is not None else "the limit of"
                    raise FetchError(
                        f"{where} holds more than {pinned} {pin.limit:,} bytes of {pin.name}; stopped"
                    )
                digest.update(chunk)
                out.write(chunk)
        if pin.bytes is not None and size != pin.bytes:
            raise FetchError(f"{where} holds {size:,} bytes of {pin.name}, not the pinned {pin.bytes:,}")
        if digest.hexdigest() != pin.sha256:
            raise FetchError(f"{where} has sha256 {digest.hexdigest()}, not the pinned {pin.sha256}")
        os.replace(temporary, target)
    finally:
        Path(temporary).unlink(missing_ok=True)


def _response_chunks(response: Any, pin: ModelFile, url: str) -> Iterator[bytes]:
    declared = response.headers.get("Content-Length") if getattr(response, "headers", None) else None
    if declared is not None and declared.isdigit() and int(declared) > pin.limit:
        raise FetchError(
            f"{url} announces {int(declared):,} bytes of {pin.name}, over the pinned {pin.limit:,}"
        )
    while chunk := response.read(_CHUNK):
        yield chunk


def download(url: str, target: Path, pin: ModelFile) -> None:
    """``url`` into ``target``, kept only when it matches ``pin`` (see :func:`write_verified`)."""
    try:
        with _get(url) as response:
            write_verified(_response_chunks(response, pin, url), target, pin, url)
    except FetchError:
        raise
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
        # HTTPException: a connection cut mid-response (IncompleteRead), a garbled status line.
        raise FetchError(f"cannot fetch {url} ({_why(exc) or type(exc).__name__})") from exc


def _open_regular(path: Path, limit: int) -> int:
    """A read-only descriptor of the regular file ``path`` (not a link, device or FIFO) of at most
    ``limit`` bytes; :class:`FetchError` otherwise."""
    try:
        info = os.lstat(path)
    except FileNotFoundError as exc:
        raise FetchError(f"{path} is missing") from exc
    if stat.S_ISLNK(info.st_mode):
        raise FetchError(f"{path} is a symbolic link; a model directory holds its own files")
    if not stat.S_ISREG(info.st_mode):
        raise FetchError(f"{path} is not a regular file")
    if info.st_size > limit:
        raise FetchError(f"{path} is {info.st_size:,} bytes, over the {limit:,} it may have")
    return os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))


def _file_chunks(path: Path, limit: int) -> Iterator[bytes]:
    with os.fdopen(_open_regular(path, limit), "rb") as handle:
        while chunk := handle.read(_CHUNK):
            yield chunk


def write_manifest(directory: Path, data: bytes) -> Path:
    """``data`` as ``directory``'s manifest, written to a temporary file and renamed into place."""
    target = confined(directory, MANIFEST)
    target.parent.mkdir(parents=True, exist_ok=True)
    _replace(target, data)
    return target


def install(manifest: Manifest, directory: Path, base_url: str | None = None) -> Path:
    """Fetch the files of ``manifest`` missing from ``directory``; write the manifest; return it.

    Relative file URLs resolve against ``base_url`` (the manifest's own URL).
    """
    places = check_destinations(manifest, directory)
    for f in missing_files(manifest, directory):
        url = urllib.parse.urljoin(base_url, f.url) if base_url else f.url
        download(url, places[f.name], f)
    write_manifest(directory, manifest.model_dump_json(indent=2).encode())
    return directory


def export_to(manifest: Manifest, source: Path, target: Path, *, remember: bool = True) -> Path:
    """Copy a complete, verified model from ``source`` to ``target`` with its manifest.

    Each copy is checked against its pin again as it is written (the source may change between).
    ``remember``: as :func:`verify`'s (False when ``source`` is not vidscope's cache).
    """
    places = check_destinations(manifest, target)
    verify(manifest, source, remember=remember)
    for f in manifest.files:
        write_verified(_file_chunks(source / f.name, f.limit), places[f.name], f, str(source / f.name))
    write_manifest(target, manifest.model_dump_json(indent=2).encode())
    return target


def import_from(manifest: Manifest, source: Path, target: Path) -> Path:
    """Check the model files in ``source`` against ``manifest``'s pins and copy them to ``target``."""
    check_destinations(manifest, target)
    for f in manifest.files:
        os.close(_open_regular(Path(source) / f.name, f.limit))
    if missing_files(manifest, source):
        names = ", ".join(f.name for f in missing_files(manifest, source))
        raise FetchError(f"{source} does not hold the model {manifest.name} (missing or wrong size: {names})")
    return export_to(manifest, source, target, remember=False)


def read_manifest_bytes(directory: Path) -> bytes | None:
    """The bytes of ``directory``'s manifest (``None`` when there is none), read only from a
    regular file of at most :data:`MAX_MANIFEST_BYTES`."""
    path = Path(directory) / MANIFEST
    if not os.path.lexists(path):
        return None
    if path.is_symlink() and path.is_file():
        # A cache or a model directory may be linked in whole; its manifest is read through the link.
        path = path.resolve()
    with os.fdopen(_open_regular(path, MAX_MANIFEST_BYTES), "rb") as handle:
        return handle.read(MAX_MANIFEST_BYTES + 1)


def manifest_in(directory: Path) -> Manifest | None:
    """The manifest stored in ``directory`` (``None`` when there is none)."""
    data = read_manifest_bytes(directory)
    return None if data is None else parse_manifest(data, Path(directory) / MANIFEST)


class LegacyMove(BaseModel):
    """What :func:`move_legacy` did with a data dir's own model folder from before the shared cache."""

    source: Path
    cache: Path
    models: list[str] = Field(default_factory=list, description="Model folders with a file moved in.")
    moved_bytes: int = 0
    #: Bytes of files the cache already held byte for byte: deleted from the data dir (space freed).
    freed_bytes: int = 0
    #: Files left in the data dir because the cache holds a different file of that name.
    kept: list[str] = Field(default_factory=list)

    def lines(self) -> list[str]:
        """What was moved, freed and kept, one line each (none when there was nothing to do)."""
        said = []
        if self.models:
            names = ", ".join(self.models)
            said.append(
                f"moved {len(self.models)} models ({names}; {self.moved_bytes / 1e6:.1f} MB) from "
                f"{self.source} into the model cache {self.cache}"
            )
        if self.freed_bytes:
            said.append(
                f"freed {self.freed_bytes / 1e6:.1f} MB in {self.source}: copies of files the model cache "
                "already held"
            )
        if self.kept:
            said.append(
                f"kept {len(self.kept)} files in {self.source} that differ from the model cache's "
                f"(never overwritten): {', '.join(self.kept[:5])}{' …' if len(self.kept) > 5 else ''}"
            )
        return said


def _same_bytes(a: Path, b: Path) -> bool:
    return a.stat().st_size == b.stat().st_size and sha256_of(a) == sha256_of(b)


def _move_without_overwriting(source: Path, target: Path) -> bool:
    """Move the file ``source`` to ``target`` unless something appeared there (then ``False``).

    A hard link then an unlink on one file system; otherwise a copy to a temporary file beside the
    target, linked into place. Either way an existing ``target`` is never replaced.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except FileExistsError:
        return False
    except OSError:  # another file system, or one without hard links
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        try:
            with os.fdopen(handle, "wb") as out, source.open("rb") as data:
                while chunk := data.read(_CHUNK):
                    out.write(chunk)
            os.link(temporary, target)
        except FileExistsError:
            return False
        finally:
            Path(temporary).unlink(missing_ok=True)
    source.unlink()
    return True


def move_legacy(data_dir: Path, model_cache: Path | None = None) -> LegacyMove:
    """Move ``data_dir``'s own model folder from before the shared cache (:func:`legacy_cache`) into
    the user's model cache, once.

    Each regular file goes to the same place under the cache unless the cache already has a file
    there: the same bytes (sha256) and the data dir's copy is deleted (space freed); different
    bytes and it stays where it is (a cached file is never overwritten). Links are left alone, and
    emptied folders are removed. The loaders check what they read against their pins as before.
    """
    legacy = legacy_cache(data_dir)
    root = cache_root(model_cache).expanduser()
    done = LegacyMove(source=legacy, cache=root)
    if legacy.is_symlink() or not legacy.is_dir() or legacy.resolve() == root.resolve():
        return done
    for entry in sorted(legacy.iterdir()):
        if entry.is_symlink() or not entry.is_dir():
            continue
        target_dir = confined(root, entry.name)
        for folder, dirs, files in os.walk(entry, followlinks=False):
            for name in sorted(files):
                file = Path(folder) / name
                if file.is_symlink() or not file.is_file():
                    continue
                if name == CHECKED:  # digests keyed by this place's stat: void anywhere else
                    file.unlink()
                    continue
                relative = file.relative_to(entry).as_posix()
                target = confined(target_dir, relative)
                size = file.lstat().st_size
                if os.path.lexists(target):
                    if target.is_file() and not target.is_symlink() and _same_bytes(file, target):
                        file.unlink()
                        done.freed_bytes += size
                    else:
                        done.kept.append(f"{entry.name}/{relative}")
                elif _move_without_overwriting(file, target):
                    done.moved_bytes += size
                    if entry.name not in done.models:
                        done.models.append(entry.name)
                else:
                    done.kept.append(f"{entry.name}/{relative}")
            dirs.sort()
        for folder, _dirs, _files in sorted(os.walk(entry, followlinks=False), reverse=True):
            with contextlib.suppress(OSError):
                Path(folder).rmdir()  # only when empty
    with contextlib.suppress(OSError):
        legacy.rmdir()
    return done

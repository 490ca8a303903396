"""Image–text embeddings from ONNX encoders run by onnxruntime (``onnx-clip``), without torch.

The model is two ONNX graphs, an image encoder and a text encoder, plus a ``tokenizers`` tokenizer
file, described by a manifest (:class:`~vidscope.models.model_files.Manifest`) whose ``runtime``
says how to run them::

    {"dim": 512,
     "image": {"file": "vision.onnx", "size": 224, "mean": [...], "std": [...], "output": "image_embeds"},
     "text": {"file": "text.onnx", "tokenizer": "tokenizer.json", "max_tokens": 77,
              "output": "text_embeds", "pad_token": "<|endoftext|>"}}

An image is resized so its shorter side is ``size`` (bicubic), centre-cropped to ``size`` x
``size``, scaled to [0, 1] and normalised with ``mean``/``std`` (CLIP's preprocessing), and fed as
the image graph's first input (N, 3, size, size). Texts are tokenized, truncated to ``max_tokens``
and padded to the longest with ``pad_token``; the text graph gets ``input_ids`` and, when it has
that input, ``attention_mask``. Outputs are L2-normalised.

The spec's target is one of:

* a model name vidscope knows (``onnx-clip:clip-vit-b32-int8``, the default profile's): its files
  are pinned in :data:`~vidscope.models.model_files.CARDS`;
* a manifest URL (``onnx-clip:https://mirror/clip/vidscope-model.json``) with the manifest file's
  sha256 in ``[models.options.onnx-clip] sha256``;
* a directory holding a manifest and its files (what ``vidscope models pull --to`` writes).

Named and URL models are fetched once into the user's model cache (shared by every data dir,
:func:`vidscope.core.settings.model_cache_dir`; a data dir's own ``<data_dir>/models/`` from before
is still read when the cache lacks the model) when first used (``fetch =
false`` turns that off: then only ``vidscope models pull`` fetches) and checked against their pins
every time they load (``VIDSCOPE_MODEL_FETCH=0`` in the environment also turns fetching on first
use off). Options: ``sha256``, ``fetch`` (true), ``batch_size`` (16), ``threads`` (2: ingestion runs
this beside speech and OCR on the same cores). onnxruntime's threads do not spin-wait between
operators: measured on a busy 2-core machine with CLIP ViT-B/32 int8 (``benchmarks/random_clip.py``),
spinning made an image cost 83 CPU-ms with 2 threads, not 68.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vidscope.core.errors import BackendUnavailable, ModelNotDownloaded
from vidscope.models import model_files
from vidscope.models.model_files import CARDS, FetchError, Manifest
from vidscope.models.protocols.image import Image

KIND = "onnx-clip"
#: onnxruntime threads per session unless ``threads`` says otherwise.
DEFAULT_THREADS = 2
#: ``VIDSCOPE_MODEL_FETCH=0`` turns fetching on first use off for the whole process (test suites,
#: CI: no data dir then downloads the model); ``vidscope models pull`` still fetches.
NO_FETCH_VARIABLE = "VIDSCOPE_MODEL_FETCH"

#: Why a model could not be had, per (target, data dir): asked once per process, not per video
#: (the full reason and its brief form).
_failures: dict[tuple[str, str], tuple[str, str]] = {}
#: The short line shown once per command when the model is not in the cache and cannot be fetched.
NOT_DOWNLOADED = "the image-text model is not downloaded; `vidscope models pull` fetches it"
#: What loading an onnx-clip model tries, as its "cannot load" line says.
TRIED = "the model cache and the model's host"
_failures_lock = threading.Lock()


def _is_url(target: str) -> bool:
    return target.startswith(("http://", "https://"))


def cache_dir(target: str, options: dict[str, Any], model_cache: Path | None = None) -> Path | None:
    """Where the model ``target`` names is cached in the model cache (``None``: a local directory)."""
    if target in CARDS:
        return model_files.cache_root(model_cache) / target
    if _is_url(target):
        pin = str(options.get("sha256", ""))
        if pin and not re.fullmatch(r"[0-9a-fA-F]{64}", pin):
            raise ValueError(f"[models.options.{KIND}] sha256 must be 64 hex digits, not {pin[:80]!r}")
        return model_files.cache_root(model_cache) / f"sha256-{pin[:16].lower()}"
    return None


def _complete(target: str, options: dict[str, Any], directory: Path) -> bool:
    """Whether ``directory`` holds every file of ``target``'s model (sizes only; loading verifies)."""
    if target in CARDS:
        manifest = CARDS[target]
    else:
        raw = _cached_manifest(directory, str(options.get("sha256", "")))
        if raw is None:
            return False
        manifest = model_files.parse_manifest(raw, directory / model_files.MANIFEST)
    return not model_files.missing_files(manifest, directory)


def _shared_or_legacy(target: str, options: dict[str, Any], shared: Path, data_dir: Path | None) -> Path:
    """``shared`` unless only the data dir's own cache from before the shared one holds the model."""
    if data_dir is None:
        return shared
    legacy = model_files.legacy_cache(data_dir) / shared.name
    if legacy.is_dir() and not _complete(target, options, shared) and _complete(target, options, legacy):
        return legacy
    return shared


def resolve(
    target: str,
    options: dict[str, Any],
    data_dir: Path | None,
    *,
    fetch: bool,
    model_cache: Path | None = None,
) -> tuple[Manifest, Path]:
    """The manifest of ``target`` and the directory holding its verified files: in the model cache,
    or in ``data_dir``'s own cache from before when only that one holds it.

    Fetches missing files (into the model cache) when ``fetch`` is true. Raises :class:`FetchError`
    (the model cannot be had: offline, not pulled, a file that does not match its pin) or
    ``ValueError`` (a bad spec).
    """
    if not target:
        raise ValueError(f"name a model: {KIND}:<{' | '.join(CARDS)} | manifest URL | directory>")
    directory = cache_dir(target, options, model_cache)
    if directory is not None:
        directory = _shared_or_legacy(target, options, directory, data_dir)
    if directory is None:
        local = Path(target).expanduser()
        manifest = model_files.manifest_in(local)
        if manifest is None:
            raise ValueError(
                f"'{target}' is neither a model vidscope knows ({', '.join(CARDS)}), an http(s) "
                f"manifest URL nor a directory holding {model_files.MANIFEST}"
            )
        model_files.verify(manifest, local, remember=False)  # the user's folder: never written
        return manifest, local
    if target in CARDS:
        manifest, raw, base = CARDS[target], None, None
    else:
        pin = str(options.get("sha256", ""))
        if not pin:
            raise ValueError(
                f"a model manifest URL needs its sha256 pinned: [models.options.{KIND}] sha256 = '<hex>'"
            )
        raw = _cached_manifest(directory, pin)
        if raw is None:
            if not fetch:
                raise FetchError(f"the model at {target} is not in the cache ({directory}); pull it first")
            manifest, raw = model_files.fetch_manifest(target, pin)
        else:
            manifest = model_files.parse_manifest(raw, directory / model_files.MANIFEST)
        base = target
    if model_files.missing_files(manifest, directory):
        if not fetch:
            raise FetchError(f"the model {manifest.name} is not in the cache ({directory}); pull it first")
        model_files.install(manifest, directory, base_url=base)
    if raw is not None:
        model_files.write_manifest(directory, raw)  # the pinned bytes, as fetched
    model_files.verify(manifest, directory)
    return manifest, directory


def _cached_manifest(directory: Path, pin: str) -> bytes | None:
    import hashlib

    data = model_files.read_manifest_bytes(directory)
    if data is not None and hashlib.sha256(data).hexdigest() == pin.lower():
        return data
    return None


def preprocess(image: Image, size: int, mean: Sequence[float], std: Sequence[float]) -> np.ndarray:
    """CLIP's preprocessing: shorter side to ``size`` (bicubic), centre crop, normalise; (3, s, s)."""
    from PIL import Image as PILImage

    array = np.asarray(image)
    if array.ndim != 3 or array.shape[2] != 3 or array.dtype != np.uint8:
        raise ValueError(f"expected an RGB uint8 image of shape (h, w, 3), got {array.shape} {array.dtype}")
    picture = PILImage.fromarray(array)
    width, height = picture.size
    scale = size / min(width, height)
    resized = picture.resize(
        (max(size, round(width * scale)), max(size, round(height * scale))), PILImage.Resampling.BICUBIC
    )
    left, top = (resized.width - size) // 2, (resized.height - size) // 2
    cropped = np.asarray(resized.crop((left, top, left + size, top + size)), dtype=np.float32) / 255.0
    normalised = (cropped - np.asarray(mean, dtype=np.float32)) / np.asarray(std, dtype=np.float32)
    return normalised.transpose(2, 0, 1)


def _unit_rows(array: np.ndarray) -> np.ndarray:
    array = np.asarray(array, dtype=np.float32)
    return (array / np.maximum(np.linalg.norm(array, axis=1, keepdims=True), 1e-12)).astype(np.float32)


class OnnxClipEmbedder:
    """An :class:`~vidscope.models.protocols.image_text.ImageTextEmbedder` over two ONNX encoders."""

    def __init__(self, manifest: Manifest, directory: Path, options: dict[str, Any]) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        runtime = manifest.runtime
        self._image, self._text = dict(runtime["image"]), dict(runtime["text"])
        digest = manifest.file(self._image["file"]).sha256[:12]
        self.name = f"{KIND}:{manifest.name}@{digest}"
        self.manifest, self.directory = manifest, directory
        self.batch_size = max(1, int(options.get("batch_size", 16)))
        session_options = ort.SessionOptions()
        session_options.intra_op_num_threads = max(1, int(options.get("threads") or DEFAULT_THREADS))
        session_options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session_options = session_options
        # Each encoder is opened on first use: a question embeds text only and never pays for the
        # image graph (89 MB for CLIP ViT-B/32 int8); ingestion embeds images only.
        self._sessions: dict[str, Any] = {}
        self._tokenizer = Tokenizer.from_file(str(directory / self._text["tokenizer"]))
        self._tokenizer.enable_truncation(int(self._text.get("max_tokens", 77)))
        pad_token = str(self._text.get("pad_token", "<|endoftext|>"))
        pad_id = self._tokenizer.token_to_id(pad_token)
        self._tokenizer.enable_padding(pad_id=pad_id or 0, pad_token=pad_token)
        self._lock = threading.Lock()  # one run at a time per session keeps memory flat
        self.dim = int(runtime.get("dim") or self.embed_texts(["a"]).shape[1])

    def _session(self, tower: dict[str, Any]) -> Any:
        """The onnxruntime session of ``tower`` (the image or text part of the runtime), opened once."""
        import onnxruntime as ort

        name = str(tower["file"])
        with self._lock:
            if name not in self._sessions:
                self._sessions[name] = ort.InferenceSession(
                    str(self.directory / name), self._session_options, providers=["CPUExecutionProvider"]
                )
            return self._sessions[name]

    def _output(self, session: Any, feeds: dict[str, np.ndarray], name: str | None) -> np.ndarray:
        names = [o.name for o in session.get_outputs()]
        wanted = name if name in names else names[0]
        with self._lock:
            (out,) = session.run([wanted], feeds)
        return _unit_rows(out)

    def embed_images(self, images: Sequence[Image]) -> np.ndarray:
        """Shape (len(images), dim), float32, rows L2-normalised."""
        if len(images) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        size, mean, std = int(self._image["size"]), self._image["mean"], self._image["std"]
        session = self._session(self._image)
        input_name = session.get_inputs()[0].name
        parts = []
        for start in range(0, len(images), self.batch_size):
            batch = np.stack(
                [preprocess(i, size, mean, std) for i in images[start : start + self.batch_size]]
            )
            parts.append(self._output(session, {input_name: batch}, self._image.get("output")))
        return np.concatenate(parts, axis=0)

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Shape (len(texts), dim), float32, rows L2-normalised, comparable with images."""
        if len(texts) == 0:
            return np.zeros((0, getattr(self, "dim", 0)), dtype=np.float32)
        session = self._session(self._text)
        inputs = {i.name for i in session.get_inputs()}
        parts = []
        for start in range(0, len(texts), self.batch_size):
            encodings = self._tokenizer.encode_batch([str(t) for t in texts[start : start + self.batch_size]])
            feeds = {"input_ids": np.asarray([e.ids for e in encodings], dtype=np.int64)}
            if "attention_mask" in inputs:
                feeds["attention_mask"] = np.asarray([e.attention_mask for e in encodings], dtype=np.int64)
            parts.append(self._output(session, feeds, self._text.get("output")))
        return np.concatenate(parts, axis=0)


def from_spec(
    role: str, target: str, options: dict[str, Any], data_dir: Path, model_cache: Path | None = None
) -> OnnxClipEmbedder:
    """``onnx-clip:<model name | manifest URL | directory>`` (see the module docstring), from the
    model cache ``model_cache`` (``None``: the default place)."""
    spec = f"{KIND}:{target}"
    key = (target, f"{Path(data_dir).expanduser().resolve()}|{model_files.cache_root(model_cache)}")
    with _failures_lock:
        known = _failures.get(key)
    if known is not None:
        # The same line as the first time (it was tried once in this process; not again).
        raise _unavailable(role, spec, *known)
    try:
        fetch = bool(options.get("fetch", True)) and os.environ.get(NO_FETCH_VARIABLE, "1") != "0"
        # Where the files are first: a model that is not here costs no onnxruntime import (a cold
        # question on a library ingested without it, issue 44).
        manifest, directory = resolve(target, options, data_dir, fetch=fetch, model_cache=model_cache)
        try:
            import onnxruntime  # noqa: F401
            import tokenizers  # noqa: F401
        except ImportError as exc:
            raise BackendUnavailable(
                role,
                spec,
                "importing onnxruntime and tokenizers",
                "Install them: pip install onnxruntime tokenizers",
            ) from exc
        return OnnxClipEmbedder(manifest, directory, options)
    except (FetchError, ValueError, OSError, KeyError, RuntimeError) as exc:
        fix = (
            f"{exc}. On a machine that reaches the model host run `vidscope models pull` (or `vidscope "
            "models pull --to DIR`, then `vidscope models pull --from DIR` here)."
        )
        brief = NOT_DOWNLOADED if _not_downloaded(exc) else f"the image-text model cannot be loaded: {exc}"
        with _failures_lock:
            _failures[key] = (fix, brief)
        raise _unavailable(role, spec, fix, brief) from exc


def _unavailable(role: str, spec: str, fix: str, brief: str) -> BackendUnavailable:
    kind = ModelNotDownloaded if brief == NOT_DOWNLOADED else BackendUnavailable
    return kind(role, spec, TRIED, fix, brief=brief)


def _not_downloaded(exc: BaseException) -> bool:
    """True when the model is simply absent here and its host could not be reached (the common
    offline case), not when a file is corrupt or a spec is wrong (those keep their own words)."""
    text = str(exc)
    return isinstance(exc, FetchError) and (text.startswith("cannot fetch") or "not in the cache" in text)


def pull(
    target: str,
    options: dict[str, Any],
    data_dir: Path | None = None,
    *,
    to: Path | None = None,
    source: Path | None = None,
    model_cache: Path | None = None,
) -> tuple[Manifest, Path]:
    """``vidscope models pull``: the model ``target`` names into the model cache, checked (a
    model ``data_dir``'s own cache from before already holds is used from there).

    From the network, or from ``source`` (a directory ``pull --to`` wrote on another machine,
    checked against the same pins). With ``to`` the cached model is then copied there too. Returns
    the manifest and the directory it was copied to last. Raises :class:`FetchError` or ``ValueError``.
    """
    model_files.forget_unreachable()  # asked for by name: the host gets a full try
    directory = cache_dir(target, options, model_cache)
    if directory is None:
        raise ValueError(f"'{target}' is a local directory: there is nothing to pull")
    if source is not None:
        if target in CARDS:
            manifest, raw = CARDS[target], None
        else:
            raw = _cached_manifest(Path(source), str(options.get("sha256", "")))
            if raw is None:
                raise FetchError(
                    f"{source} holds no {model_files.MANIFEST} with the pinned sha256 "
                    f"([models.options.{KIND}] sha256)"
                )
            manifest = model_files.parse_manifest(raw, Path(source) / model_files.MANIFEST)
        if to is not None:  # both destinations checked before either is written
            model_files.check_destinations(manifest, Path(to))
        model_files.import_from(manifest, Path(source), directory)
        if raw is not None:
            model_files.write_manifest(directory, raw)
    else:
        manifest, directory = resolve(target, options, data_dir, fetch=True, model_cache=model_cache)
    forget_failures()
    if to is None:
        return manifest, directory
    model_files.export_to(manifest, directory, Path(to))
    # The manifest exactly as pinned (a URL model's pin is the hash of these bytes).
    pinned = model_files.read_manifest_bytes(directory)
    if pinned is not None:
        model_files.write_manifest(Path(to), pinned)
    return manifest, Path(to)


def forget_failures() -> None:
    """Let the next load try again (after ``vidscope models pull``; tests), hosts included."""
    with _failures_lock:
        _failures.clear()
    model_files.forget_unreachable()

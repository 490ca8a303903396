"""A multilingual text embedder without torch: paraphrase-multilingual-MiniLM-L12-v2, fetched pinned.

The embedded MiniLM (English) compares meanings within one language. This module makes a
multilingual one a supported ``text_embedder``:

* ``minilm:paraphrase-multilingual-MiniLM-L12-v2`` — sentence-transformers' multilingual
  paraphrase model (50+ languages, 384-d, 12 BERT layers, XLM-R sentencepiece vocabulary, mean
  pooling, 128 tokens). It is fetched once into the user's model cache on first use
  (``<model cache>/paraphrase-multilingual-MiniLM-L12-v2/``), like the image–text model, and
  checked against its pins (:data:`CARDS`) every time it loads. The pinned files are Xenova's int8
  ONNX export of it and its ``tokenizer.json`` at one fixed revision, run by onnxruntime (a core
  dependency). *Deviation:* the original repository's ``model.safetensors`` would run on the NumPy
  path (:mod:`.minilm_numpy`) unquantised, but no public record of its sha256 could be found from
  here (no hub access), and a file is never fetched without a pin; the ONNX files' sha256 were
  each found in two independent public projects (one naming this revision, one the repository's
  main branch), their sizes in one naming the revision. Not verified against the hub from here.
* ``minilm:<directory>`` (or ``sentence-transformers:<directory>`` without a ``modules.json``) —
  any BERT-style sentence model on disk: ``tokenizer.json`` plus either
  ``model.safetensors`` with ``config.json`` (the NumPy forward pass of :mod:`.minilm_numpy`) or
  ``model.onnx`` whose first output is the last hidden state (onnxruntime). Mean pooling over the
  attention mask, then L2 normalisation, as sentence-transformers' MiniLM models do. Options:
  ``max_tokens`` (128), ``batch_size`` (64).

Offline without the files, loading fails in one line saying where to put them; ``fetch = false``
under ``[models.options.minilm]`` or ``VIDSCOPE_MODEL_FETCH=0`` turns fetching on first use off.
``vidscope models pull`` fetches it ahead of time (:func:`pull`; ``--to DIR`` / ``--from DIR``
carry it in ``DIR/paraphrase-multilingual-MiniLM-L12-v2/``).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vidscope.core.errors import BackendUnavailable
from vidscope.models import model_files
from vidscope.models.model_files import FetchError, Manifest, ModelFile

KIND = "minilm"
MULTILINGUAL = "paraphrase-multilingual-MiniLM-L12-v2"
#: The model's own sequence limit (its sentence-transformers configuration).
MAX_TOKENS = 128
#: ``VIDSCOPE_MODEL_FETCH=0`` turns fetching on first use off (as for the image–text model).
NO_FETCH_VARIABLE = "VIDSCOPE_MODEL_FETCH"
#: What loading a named model tries, as its "cannot load" line says.
TRIED = "the model cache and the model's host"

_REVISION = "2c4055b12046f11709e9df2c122e59ffbdc2f900"
_XENOVA = f"https://huggingface.co/Xenova/paraphrase-multilingual-MiniLM-L12-v2/resolve/{_REVISION}"

#: Models known by name (lower case). Pins: sizes and sha256 of the files at ``_REVISION`` as
#: public projects record them (see the module docstring); not read from the hub here.
CARDS: dict[str, Manifest] = {
    MULTILINGUAL.lower(): Manifest(
        name=MULTILINGUAL,
        kind=KIND,
        license="Apache-2.0 (sentence-transformers; ONNX export by Xenova)",
        source=(
            "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2, int8 ONNX export: "
            f"huggingface.co/Xenova/paraphrase-multilingual-MiniLM-L12-v2 at {_REVISION}"
        ),
        runtime={"dim": 384, "max_tokens": MAX_TOKENS, "pooling": "mean", "multilingual": True},
        files=[
            ModelFile(
                name="model.onnx",
                url=f"{_XENOVA}/onnx/model_quantized.onnx",
                sha256="66fc00f5f29afcaff34092e1bdd20008ca3918265a82fb9695a551e510cc4ebc",
                bytes=118308126,
            ),
            ModelFile(
                name="tokenizer.json",
                url=f"{_XENOVA}/tokenizer.json",
                sha256="b60b6b43406a48bf3638526314f3d232d97058bc93472ff2de930d43686fa441",
                bytes=17082913,
            ),
        ],
    )
}


def is_known(target: str) -> bool:
    """Whether ``target`` names a model of :data:`CARDS` (any letter case)."""
    return target.lower() in CARDS


def is_bert_directory(target: str) -> bool:
    """Whether ``target`` is a directory this module runs: ``tokenizer.json`` with
    ``model.safetensors`` + ``config.json`` or ``model.onnx``, and no sentence-transformers
    ``modules.json`` (such a directory keeps going to sentence-transformers)."""
    if not target or "://" in target:
        return False
    directory = Path(target).expanduser()
    return (
        directory.is_dir()
        and (directory / "tokenizer.json").is_file()
        and not (directory / "modules.json").exists()
        and (
            (directory / "model.onnx").is_file()
            or ((directory / "model.safetensors").is_file() and (directory / "config.json").is_file())
        )
    )


def cache_dir(target: str, model_cache: Path | None = None) -> Path:
    """Where the named model ``target`` lives in the model cache."""
    return model_files.cache_root(model_cache) / CARDS[target.lower()].name


def resolve(target: str, *, fetch: bool, model_cache: Path | None = None) -> Path:
    """The directory holding the named model's verified files, fetched into the model cache first
    when missing and ``fetch`` is true. Raises :class:`FetchError`."""
    manifest = CARDS[target.lower()]
    directory = cache_dir(target, model_cache)
    if model_files.missing_files(manifest, directory):
        if not fetch:
            raise FetchError(f"the model {manifest.name} is not in the cache ({directory})")
        model_files.install(manifest, directory)
    model_files.verify(manifest, directory)
    return directory


def named_in(spec: str | None) -> str | None:
    """The model of :data:`CARDS` that the ``text_embedder`` spec ``spec`` names, else ``None``."""
    kind, _, target = (spec or "").partition(":")
    return (
        CARDS[target.lower()].name if kind in (KIND, "sentence-transformers") and is_known(target) else None
    )


def pull(
    target: str, *, model_cache: Path | None = None, to: Path | None = None, source: Path | None = None
) -> Path:
    """``vidscope models pull``: the named model into the model cache, checked against its pins —
    from the network, or from ``source/<name>/`` (what ``pull --to`` wrote on another machine) —
    then copied to ``to/<name>/`` when ``to`` is given. Returns where it was put last. Raises
    :class:`FetchError` or ``OSError``."""
    manifest = CARDS[target.lower()]
    directory = cache_dir(target, model_cache)
    model_files.forget_unreachable()  # asked for by name: the host gets a full try
    if to is not None:  # both destinations checked before either is written
        model_files.check_destinations(manifest, Path(to) / manifest.name)
    if source is not None:
        model_files.import_from(manifest, Path(source) / manifest.name, directory)
    else:
        resolve(target, fetch=True, model_cache=model_cache)
    if to is None:
        return directory
    return model_files.export_to(manifest, directory, Path(to) / manifest.name)


class BertSentenceEmbedder:
    """A :class:`~vidscope.models.protocols.text_embedder.TextEmbedder` over a BERT directory:
    mean pooling over the attention mask, then L2 normalisation."""

    def __init__(
        self, name: str, directory: Path, *, max_tokens: int = MAX_TOKENS, batch_size: int = 64
    ) -> None:
        from tokenizers import Tokenizer

        self.name = name
        self.batch_size = max(1, batch_size)
        self._lock = threading.Lock()
        onnx = directory / "model.onnx"
        self._numpy: Any = None
        self._session: Any = None
        if onnx.is_file():
            import onnxruntime as ort

            self._session = ort.InferenceSession(str(onnx), providers=["CPUExecutionProvider"])
            self._inputs = {i.name for i in self._session.get_inputs()}
            self._tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
            self._tokenizer.enable_truncation(max_tokens)
            pad = next((t for t in ("<pad>", "[PAD]") if self._tokenizer.token_to_id(t) is not None), None)
            pad_id = self._tokenizer.token_to_id(pad) if pad is not None else 0
            self._tokenizer.enable_padding(pad_id=pad_id or 0, pad_token=pad or "[PAD]")
        elif (directory / "model.safetensors").is_file():
            from vidscope.models.minilm_numpy import NumpyBert

            self._numpy = NumpyBert(directory, max_tokens)
            self._tokenizer = self._numpy.tokenizer
        else:
            raise FileNotFoundError(f"{directory} holds neither model.onnx nor model.safetensors")
        self.dim = int(self._hidden(["a"])[0].shape[-1])

    def _hidden(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(last hidden states (batch, tokens, hidden), attention mask (batch, tokens))."""
        if self._numpy is not None:
            hidden, mask = self._numpy.encode(texts)
            return hidden, mask
        encodings = self._tokenizer.encode_batch(list(texts))
        feeds = {
            "input_ids": np.asarray([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.asarray([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.asarray([e.type_ids for e in encodings], dtype=np.int64),
        }
        first = self._session.get_outputs()[0].name
        (hidden,) = self._session.run([first], {k: v for k, v in feeds.items() if k in self._inputs})
        return np.asarray(hidden, dtype=np.float32), feeds["attention_mask"].astype(np.float32)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised float32 vectors, shape (len(texts), dim)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # Similar lengths together, so a batch pads little.
        lengths = [len(e.ids) for e in self._tokenizer.encode_batch([str(t) for t in texts])]
        order = sorted(range(len(texts)), key=lambda i: -lengths[i])
        vectors = np.empty((len(texts), self.dim), dtype=np.float32)
        with self._lock:  # neither forward pass is safe to call from several threads at once
            for first in range(0, len(order), self.batch_size):
                chosen = order[first : first + self.batch_size]
                hidden, mask = self._hidden([str(texts[i]) for i in chosen])
                summed = (hidden * mask[..., None]).sum(axis=1)
                pooled = summed / np.clip(mask.sum(axis=1, keepdims=True), 1e-9, None)
                vectors[chosen] = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return vectors


def from_spec(
    role: str, target: str, options: dict[str, Any], model_cache: Path | None = None
) -> BertSentenceEmbedder:
    """``minilm:<model name | directory>`` (see the module docstring)."""
    spec = f"{KIND}:{target}"
    batch_size = int(options.get("batch_size", 64))
    max_tokens = int(options.get("max_tokens", MAX_TOKENS))
    if is_known(target):
        fetch = bool(options.get("fetch", True)) and os.environ.get(NO_FETCH_VARIABLE, "1") != "0"
        try:
            directory = resolve(target, fetch=fetch, model_cache=model_cache)
        except (FetchError, OSError) as exc:
            # One line without URLs (a file is named by its last part); docs/models.md has the rest.
            reason = re.sub(r"https?://[^\s()]+", lambda m: m.group(0).rsplit("/", 1)[-1], str(exc))
            card = CARDS[target.lower()]
            sources = [(f.url.rsplit("/", 1)[-1], f.name) for f in card.files]
            files = " and ".join(src if src == name else f"{src} (as {name})" for src, name in sources)
            raise BackendUnavailable(
                role,
                spec,
                TRIED,
                f"{reason}. It is fetched on first use or by `vidscope models pull` where its host "
                f"answers; offline, copy {files} "
                f"of Xenova/{card.name} at revision {_REVISION[:8]} into {cache_dir(target, model_cache)}: "
                "they are checked against their pins (docs/models.md, other languages).",
                brief="the multilingual text model is not downloaded; `vidscope models pull` fetches it",
            ) from exc
        name = f"{KIND}:{CARDS[target.lower()].name}"
    else:
        directory = Path(target).expanduser()
        if not directory.is_dir():
            known = ", ".join(card.name for card in CARDS.values())
            raise BackendUnavailable(
                role,
                spec,
                f"a model directory at '{directory}'",
                f"Name a model vidscope fetches ({known}), 'embedded', or a directory holding "
                "tokenizer.json and model.safetensors + config.json or model.onnx.",
            )
        name = spec
    try:
        return BertSentenceEmbedder(name, directory, max_tokens=max_tokens, batch_size=batch_size)
    except Exception as exc:  # tokenizers, safetensors and onnxruntime raise many types for a bad file
        raise BackendUnavailable(
            role,
            spec,
            f"loading the model files in '{directory}'",
            f"{type(exc).__name__}: {exc}".splitlines()[0][:300],
        ) from exc

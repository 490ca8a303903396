"""PaddleOCR wiring. No PaddleX model folders exist on this machine, so only the checks before
loading and the result conversion are exercised."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vidscope.core.errors import BackendUnavailable
from vidscope.core.settings import Settings, disable_telemetry
from vidscope.models import paddle_reader, registry
from vidscope.models.protocols.text_reader import TextLine

disable_telemetry()


def test_paddleocr_imports() -> None:
    from paddleocr import PaddleOCR

    assert callable(PaddleOCR)


def test_missing_model_dirs_name_both_options(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, models={"text_reader": "paddleocr:ppocrv5-server"})
    registry.clear_cache()
    with pytest.raises(BackendUnavailable) as info:
        registry.text_reader(settings)
    message = str(info.value)
    assert "text_detection_model_dir (not set)" in message
    assert "text_recognition_model_dir (not set)" in message
    assert "paddleocr:ppocrv5-server" in message and "never downloads" in message


def test_nonexistent_dirs_are_named(tmp_path: Path) -> None:
    det = tmp_path / "PP-OCRv5_server_det_infer"
    det.mkdir()
    rec = tmp_path / "PP-OCRv5_server_rec_infer"  # not created
    with pytest.raises(BackendUnavailable) as info:
        paddle_reader.from_spec(
            "text_reader",
            "",
            {"text_detection_model_dir": str(det), "text_recognition_model_dir": str(rec)},
            tmp_path,
        )
    message = str(info.value)
    assert f"text_recognition_model_dir = '{rec}' (no such directory)" in message
    assert "text_detection_model_dir =" not in message  # the existing folder is not blamed


def test_empty_model_dirs_fail_with_backend_unavailable(tmp_path: Path) -> None:
    det, rec = tmp_path / "det", tmp_path / "rec"
    det.mkdir()
    rec.mkdir()
    with pytest.raises(BackendUnavailable, match="PaddleX inference models"):
        paddle_reader.from_spec(
            "text_reader",
            "custom",
            {"text_detection_model_dir": str(det), "text_recognition_model_dir": str(rec)},
            tmp_path,
        )


def test_lines_from_result_converts_polygons_and_skips_blank_text() -> None:
    result = {
        "rec_texts": ["EXIT", "  ", "Platform 9"],
        "rec_scores": [0.98, 0.5, 0.87],
        "rec_polys": [
            np.array([[10, 20], [60, 20], [60, 40], [10, 40]], dtype=np.int16),
            np.array([[0, 0], [1, 0], [1, 1], [0, 1]]),
            [[100.5, 5], [180, 5], [180, 30], [100.5, 30]],
        ],
    }
    lines = paddle_reader.lines_from_result(result)
    assert lines == [
        TextLine("EXIT", (10.0, 20.0, 60.0, 20.0, 60.0, 40.0, 10.0, 40.0), 0.98),
        TextLine("Platform 9", (100.5, 5.0, 180.0, 5.0, 180.0, 30.0, 100.5, 30.0), 0.87),
    ]
    assert all(isinstance(v, float) for line in lines for v in line.box)

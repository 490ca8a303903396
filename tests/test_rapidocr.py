"""The embedded RapidOCR reader on frames of synthetic videos."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from media import first_frame_at, text_video

from vidscope.core.errors import BackendUnavailable
from vidscope.models.protocols.text_reader import TextLine, TextReader
from vidscope.models.rapidocr_reader import RapidOcrReader, from_spec


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> RapidOcrReader:
    return from_spec("text_reader", "embedded", {}, tmp_path_factory.mktemp("data"))


@pytest.fixture(scope="module")
def video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return text_video(
        tmp_path_factory.mktemp("media") / "titles.mp4",
        duration=3.0,
        texts=[(0.0, 1.0, "HELLO WORLD"), (1.0, 2.0, "VIDSCOPE 2024"), (2.0, 3.0, "")],
    )


def _words(lines: list[TextLine]) -> set[str]:
    return {word for line in lines for word in line.text.upper().split()}


def test_reader_satisfies_protocol(reader: RapidOcrReader) -> None:
    assert isinstance(reader, TextReader)
    assert reader.name == "rapidocr:embedded"


@pytest.mark.parametrize(("t", "expected"), [(0.5, {"HELLO", "WORLD"}), (1.5, {"VIDSCOPE", "2024"})])
def test_reads_drawn_words(reader: RapidOcrReader, video: Path, t: float, expected: set[str]) -> None:
    frame = first_frame_at(video, t)
    lines = reader.read(frame)
    assert expected <= _words(lines), lines
    height, width = frame.shape[:2]
    for line in lines:
        assert len(line.box) == 8
        xs, ys = line.box[0::2], line.box[1::2]
        # The text is drawn centred: its box must lie inside the frame, around the middle row.
        assert all(0 <= x <= width for x in xs) and all(0 <= y <= height for y in ys)
        assert min(ys) < height / 2 < max(ys)
        assert reader.min_score <= line.score <= 1.0


def test_frame_without_text_gives_nothing(reader: RapidOcrReader, video: Path) -> None:
    assert reader.read(first_frame_at(video, 2.5)) == []
    assert reader.read(np.full((360, 640, 3), 255, dtype=np.uint8)) == []


def test_min_score_filters(reader: RapidOcrReader, video: Path, tmp_path: Path) -> None:
    frame = first_frame_at(video, 0.5)
    lines = reader.read(frame)
    assert lines
    top = max(line.score for line in lines)
    assert top < 1.0
    strict = from_spec("text_reader", "embedded", {"min_score": top + 1e-6}, tmp_path)
    assert strict.read(frame) == []
    with pytest.raises(ValueError, match="min_score"):
        from_spec("text_reader", "embedded", {"min_score": 2}, tmp_path)


def test_concurrent_reads_agree(reader: RapidOcrReader, video: Path) -> None:
    frame = first_frame_at(video, 0.5)
    results: list[list[TextLine]] = []

    def work() -> None:
        results.append(reader.read(frame))

    threads = [threading.Thread(target=work) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 3 and all(r == results[0] for r in results)


def test_every_onnx_session_uses_half_the_cores(reader: RapidOcrReader, video: Path) -> None:
    """OCR runs beside speech: detection, recognition and the gate's detector each get a pool of
    half the usable cores (``vidscope.core.threads``), not ONNX Runtime's one thread per core."""
    from vidscope.core.threads import stage_threads, usable_cores

    reader.read(first_frame_at(video, 1.0))
    reader.find_text(first_frame_at(video, 1.0), 640)
    engine = reader._load()  # RapidOCR's own objects: the sessions it built from our parameters
    sessions = [engine.text_det.session, engine.text_rec.session, reader._finder(640).session]
    threads = {s.session.get_session_options().intra_op_num_threads for s in sessions}
    assert threads == {stage_threads()} and stage_threads() == max(1, usable_cores() // 2)


def test_rejects_non_rgb_input(reader: RapidOcrReader) -> None:
    with pytest.raises(ValueError, match="RGB"):
        reader.read(np.zeros((10, 10), dtype=np.uint8))
    with pytest.raises(ValueError, match="uint8"):
        reader.read(np.zeros((10, 10, 3), dtype=np.float32))


@pytest.mark.parametrize("target", ["/models/ppocr_v5", "PP-OCRv5_server"])
def test_other_targets_are_refused(target: str, tmp_path: Path) -> None:
    with pytest.raises(BackendUnavailable) as info:
        from_spec("text_reader", target, {}, tmp_path)
    message = str(info.value)
    assert target in message and "embedded" in message and "paddleocr" in message

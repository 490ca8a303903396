"""The ``ocr`` stage's text-region gate on a slide video over real footage (real stages, real OCR)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from media import first_frame_at, text_video

from vidscope.core.images import encode_jpeg
from vidscope.core.settings import IngestSettings, Settings
from vidscope.models.open_store import open_store
from vidscope.models.protocols.text_reader import TextLine, TextRegionFinder
from vidscope.models.rapidocr_reader import RapidOcrReader, from_spec
from vidscope.tasks.frames import FRAMES
from vidscope.tasks.ocr import OCR, BlankRegion, _Lines, confident, holds_line, known_blank, plausible_text
from vidscope.tasks.probe import PROBE, content_hash, register_video
from vidscope.tasks.stage import StageContext, StageResult, execute

#: (t0, t1, text): a gap of bare footage, and a slide whose text changes by one glyph in place.
SLIDES = [
    (0.0, 6.0, "WELCOME HOME"),
    (8.0, 14.0, "STEP ONE"),
    (14.0, 20.0, "STEP TWO"),
    (20.0, 26.0, "THANK YOU"),
]


@pytest.fixture(scope="module")
def slide_video(tmp_path_factory: pytest.TempPathFactory, shared_videos: Path) -> Path:
    """26 s of moving real footage (cars on a road) with slide titles drawn over it."""
    return text_video(
        tmp_path_factory.mktemp("slides") / "slides.mp4",
        duration=26.0,
        texts=SLIDES,
        footage=shared_videos / "car-detection.mp4",
    )


def ingest_ocr(video: Path, data_dir: Path, **ingest: object) -> tuple[StageResult, list[dict]]:
    """Probe, frames and OCR of ``video`` through the production stages; the OCR result and rows."""
    settings = Settings(data_dir=data_dir, ingest=IngestSettings(**ingest))
    store = open_store(settings)
    record = register_video(store, settings, video, content_hash(video))
    ctx = StageContext(settings=settings, store=store, video=record, path=video)
    for stage in (PROBE, FRAMES):
        assert execute(stage, ctx).status == "done"
    result = execute(OCR, ctx)
    assert result.status == "done", result
    return result, store.rows(store.ocr, video_id=record.video_id).to_pylist()


def spans(items: list[dict], text: str) -> list[tuple[float, float]]:
    return [
        (i["t"], i["t_end"]) for i in items if i["text"].upper().replace(" ", "") == text.replace(" ", "")
    ]


@pytest.fixture(scope="module")
def gated(slide_video: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[StageResult, list[dict]]:
    return ingest_ocr(slide_video, tmp_path_factory.mktemp("gated"))


def test_gate_reads_few_frames_and_finds_every_slide(gated: tuple[StageResult, list[dict]]) -> None:
    result, items = gated
    details = result.details
    # Cars move across the footage, so the whole-frame "unchanged" test keeps only some frames;
    # the gate settles most of the rest without reading them.
    assert details["frames_sampled"] >= 25
    assert details["frames_read"] <= details["frames_sampled"] // 3, details
    assert details["frames_gated_same_text"] >= details["frames_reused"], details
    for t0, t1, text in SLIDES:
        (span,) = spans(items, text)  # one item while the slide is up, not one per frame
        assert t0 - 0.01 <= span[0] <= t0 + 1.01 and t1 - 1.01 <= span[1] <= t1 + 1.01, (text, span)


def test_text_changed_in_place_is_read_again(gated: tuple[StageResult, list[dict]]) -> None:
    _, items = gated
    # "STEP ONE" becomes "STEP TWO" in (nearly) the same box at 14 s: only the pixels changed.
    (before,) = spans(items, "STEP ONE")
    (after,) = spans(items, "STEP TWO")
    assert before[1] <= after[0] + 1.01 and after[0] >= 13.99


# The reference reads every frame of the 26 s video (~20 s of full reads on 2 cores): the costliest
# test of the default suite, in the slow phase since 2026-11-29 (CI runs both).
@pytest.mark.slow
def test_gate_finds_what_reading_every_frame_finds(
    slide_video: Path, gated: tuple[StageResult, list[dict]], tmp_path: Path
) -> None:
    result, items = gated
    full, full_items = ingest_ocr(slide_video, tmp_path, ocr_gate_side=0)
    assert full.details["frames_gated_same_text"] == full.details["frames_gated_no_text"] == 0
    assert full.details["frames_read"] >= 3 * result.details["frames_read"]
    slide_texts = {text.replace(" ", "") for _, _, text in SLIDES}

    def found(rows: list[dict]) -> set[str]:
        return {i["text"].upper().replace(" ", "") for i in rows} & slide_texts

    assert found(items) == found(full_items) == slide_texts


def test_rapidocr_finds_text_regions_without_reading(slide_video: Path, tmp_path: Path) -> None:
    reader = from_spec("text_reader", "embedded", {}, tmp_path)
    assert isinstance(reader, RapidOcrReader) and isinstance(reader, TextRegionFinder)
    frame = first_frame_at(slide_video, 3.0)
    boxes = reader.find_text(frame, 640)
    height, width = frame.shape[:2]
    assert boxes and all(len(b) == 8 for b in boxes)
    # The title is drawn centred: some region holds the frame's centre.
    assert any(
        min(b[0::2]) < width / 2 < max(b[0::2]) and min(b[1::2]) < height / 2 < max(b[1::2]) for b in boxes
    )
    assert reader.find_text(np.full((360, 640, 3), 255, dtype=np.uint8), 640) == []
    # Finding regions leaves the full reader as it was: it still recognises the text.
    assert "WELCOME" in " ".join(line.text.upper() for line in reader.read(frame))


def box(x0: float, y0: float, x1: float, y1: float) -> tuple[float, ...]:
    """An axis-aligned corner-point box, clockwise from the top left (as the detector returns)."""
    return (x0, y0, x1, y0, x1, y1, x0, y1)


def test_only_boxes_that_can_hold_a_line_of_text_count() -> None:
    # Boxes the stored-size detector returned on the real sample videos (no on-screen text) and
    # on the slide titles, in a 640x360 frame.
    assert plausible_text(box(10, 300, 625, 340), 640, 360)  # a title line, 40x615
    assert plausible_text(box(300, 20, 340, 320), 640, 360)  # the same line, vertical
    rotated = (100.0, 100.0, 300.0, 140.0, 296.0, 160.0, 96.0, 120.0)  # ~20x204, slanted
    assert plausible_text(rotated, 640, 360)
    assert plausible_text(box(200, 100, 230, 112), 640, 360)  # small print: 12 px high, 30 px long
    assert plausible_text(box(270, 146, 369, 215), 640, 360)  # a big two-glyph word ('42'): 1.43x
    assert not plausible_text(box(50, 50, 57, 57), 640, 360)  # 7x7: no glyph fits
    assert not plausible_text(box(50, 50, 65, 57), 640, 360)  # 7x15: too thin
    assert not plausible_text(box(100, 100, 148, 142), 640, 360)  # 42x48: square texture
    assert not plausible_text(box(0, 10, 642, 343), 640, 360)  # 333x642: a blob of scene detail


def test_a_big_two_glyph_word_is_still_read(tmp_path: Path) -> None:
    # Two glyphs at title size make a region only ~1.4x longer than high: it must still count.
    video = text_video(tmp_path / "score.mp4", duration=3.0, texts=[(0.0, 3.0, "42")])
    result, items = ingest_ocr(video, tmp_path / "data")
    assert result.details["frames_read"] >= 1, result.details
    assert "42" in {i["text"].strip() for i in items}


def lines_frame(size: tuple[int, int], font_px: int, lines: list[str]) -> np.ndarray:
    """Light lines of DejaVu Sans drawn straight on a dark frame (no box around them)."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", font_px)
    image = Image.new("RGB", size, (30, 60, 90))
    draw = ImageDraw.Draw(image)
    for i, line in enumerate(lines):
        draw.text((12, 10 + i * font_px * 2), line, fill=(240, 240, 240), font=font)
    return np.asarray(image)


@pytest.mark.parametrize(
    ("size", "font_px", "at_stored_size"),
    [((640, 360), 16, True), ((320, 180), 9, True), ((320, 180), 6, False)],
)
def test_a_full_read_finds_tall_text_at_the_stored_size_and_enlarges_thin_text(
    size: tuple[int, int], font_px: int, at_stored_size: bool
) -> None:
    # RapidOCR's own full read enlarges a 640x360 frame to 1312x736 (~3x the CPU). Lines whose
    # gate regions are >= 12 px thick read the same at the stored size; a 6-px font in a 320x180
    # frame (regions ~10 px) is read better enlarged (0.85 of its characters against 0.74).
    reader = RapidOcrReader()
    frame = lines_frame(size, font_px, ["harbour ferry lantern", "copper violet beacon"])
    decider = _Lines(reader, IngestSettings())
    look = decider.look(encode_jpeg(frame, quality=95))
    lines = decider.decide(look)
    assert decider.counts["read"] == 1, decider.counts
    assert decider.counts["read_at_stored_size"] == int(at_stored_size), decider.counts
    if at_stored_size:
        enlarged = [ln.text for ln in reader.read(look.image)]
        assert [ln.text for ln in lines] == enlarged == ["harbour ferry lantern", "copper violet beacon"]


def test_a_line_of_nothing_but_symbols_is_not_text() -> None:
    # Read at the stored size, the walking square of the synthetic videos comes back as "■" (score
    # 0.54) beside the title: a shape, not text. Letters and digits of any script are kept.
    lines = [
        TextLine(text, box(0, 0, 40, 12), 0.9) for text in ("MIX THE FLOUR", "■", "| —", "42", "東京", "§ 3")
    ]
    assert [ln.text for ln in confident(lines, IngestSettings())] == ["MIX THE FLOUR", "42", "東京", "§ 3"]


def test_footage_without_text_is_not_read(shared_videos: Path, tmp_path: Path) -> None:
    # Cars on a road, no on-screen text: the stored-size detector still marks regions on scene
    # detail in some frames (wheels, shadows), none of them shaped like a line of text.
    result, items = ingest_ocr(shared_videos / "car-detection.mp4", tmp_path)
    details = result.details
    assert details["frames_sampled"] >= 25
    assert details["frames_read"] <= 2, details
    # Settled by the gate, or between two probes that found no text.
    settled = details["frames_gated_no_text"] + details["frames_between_probes"]
    assert settled >= details["frames_sampled"] // 2, details


def test_a_region_read_empty_is_not_read_again_while_its_pixels_stay() -> None:
    rng = np.random.default_rng(0)
    grey = rng.uniform(0, 255, (360, 640)).astype(np.float32)
    region = (100, 100, 250, 140)
    blanks = [BlankRegion(region, grey.copy())]
    moved = grey.copy()
    moved[200:360, :] = rng.uniform(0, 255, (160, 640))  # the rest of the frame changes
    assert known_blank(blanks, moved, (102, 101, 252, 141))  # same place, same pixels
    assert not known_blank(blanks, moved, (300, 100, 450, 140))  # elsewhere
    changed = moved.copy()
    changed[105:135, 120:140] = 255 - changed[105:135, 120:140]  # one glyph-sized cell changes
    assert not known_blank(blanks, changed, region)


def test_only_regions_without_lines_count_as_read_empty() -> None:
    line = TextLine(text="STEP ONE", box=box(210, 150, 430, 190), score=0.99)
    assert holds_line((200, 145, 440, 195), [line], 640, 360)
    assert not holds_line((20, 20, 120, 60), [line], 640, 360)
    assert not holds_line((200, 145, 440, 195), [], 640, 360)


def test_a_lone_glyph_on_a_frame_without_text_needs_high_confidence(tmp_path: Path) -> None:
    from vidscope.tasks.ocr import confident

    settings = IngestSettings()  # ocr_min_score 0.5, ocr_lone_glyph_score 0.9
    box = (0.0, 0.0, 10.0, 0.0, 10.0, 10.0, 0.0, 10.0)
    # What RapidOCR made of specks on the real sample footage (no text on screen).
    specks = [TextLine("1", box, 0.55), TextLine("日", box, 0.58)]
    assert confident(specks, settings) == []
    # Beside a real line, a short one stays: the frame holds text.
    beside = [TextLine("EXIT", box, 0.97), TextLine("3", box, 0.6)]
    assert confident(beside, settings) == beside
    # A printed digit alone on screen, read by the real reader, is confident enough to stay.
    video = text_video(tmp_path / "digit.mp4", duration=0.5, texts=[(0.0, 1.0, "7")])
    lines = RapidOcrReader().read(first_frame_at(video, 0.0))
    assert [ln.text for ln in confident(lines, settings)] == ["7"]


# 40 s over footage, ingested twice (its reference runs the gate on every frame): in the slow
# phase with the every-frame read above.
@pytest.mark.slow
def test_ocr_cost_follows_text_changes_not_duration(shared_videos: Path, tmp_path: Path) -> None:
    """40 s of moving footage with one title (12-20 s): OCR looks at about one frame in four
    (ocr_min_text_seconds = 4 at 1 frame/s), reads the title once and places it as reading
    every frame does; looking at every frame costs a gate run per frame."""
    video = text_video(
        tmp_path / "sparse.mp4",
        duration=40.0,
        texts=[(12.0, 20.0, "ROAD WORKS AHEAD")],
        footage=shared_videos / "car-detection.mp4",
    )
    probed, items = ingest_ocr(video, tmp_path / "probed")
    every, every_items = ingest_ocr(video, tmp_path / "every", ocr_min_text_seconds=0)
    sampled = probed.details["frames_sampled"]
    assert sampled == every.details["frames_sampled"] >= 39
    assert every.details["frames_between_probes"] == 0
    assert every.details["gate_runs"] + every.details["frames_reused"] >= sampled - 1, every.details
    assert probed.details["gate_runs"] <= min(sampled // 2, every.details["gate_runs"] - 8), probed.details
    assert probed.details["frames_read"] <= 2, probed.details
    (span,) = spans(items, "ROAD WORKS AHEAD")
    assert spans(every_items, "ROAD WORKS AHEAD") == [span]
    assert 11.99 <= span[0] <= 13.01 and 19.99 <= span[1] <= 21.01, span

"""The ``frame_embed`` stage's near-duplicate gate (issue 44): frames that differ are embedded
exactly as without the gate; a frame whose view barely changed shares the vector of the last
embedded one.

Runs the real stages (probe, frames, frame_embed) on generated videos with the tiny untrained
two-tower ONNX model of ``test_visual_search`` (the ``onnx-clip`` backend, loaded from a directory).
"""

from __future__ import annotations

import io
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw
from test_visual_search import train_and_export, write_manifest

from vidscope.core.images import decode_jpeg
from vidscope.core.settings import ModelSettings, Settings
from vidscope.models import registry
from vidscope.models.open_store import open_store
from vidscope.tasks import frame_embed
from vidscope.tasks.frame_embed import FRAME_EMBED, same_view, view_thumbnail
from vidscope.tasks.frames import FRAMES
from vidscope.tasks.probe import PROBE, content_hash, register_video
from vidscope.tasks.stage import StageContext, execute

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("onnx", reason="torch.onnx.export needs the onnx package (dev extra)")
    directory = tmp_path_factory.mktemp("tiny-model")
    train_and_export(directory, steps=0)
    write_manifest(directory)
    return directory


def embed_video(video: Path, data_dir: Path, model_dir: Path) -> tuple[list[np.ndarray], list[bytes], dict]:
    """Ingest ``video``'s frames and their vectors; the frames' vectors, JPEGs and the stage's details."""
    settings = Settings(
        data_dir=data_dir,
        models=ModelSettings(chat=None, speech_recognizer=None, image_text=f"onnx-clip:{model_dir}"),
    )
    store = open_store(settings)
    record = register_video(store, settings, video, content_hash(video))
    ctx = StageContext(settings=settings, store=store, video=record, path=video)
    for stage in (PROBE, FRAMES, FRAME_EMBED):
        assert execute(stage, ctx).status == "done"
    rows = store.rows(store.frames, video_id=record.video_id, columns=["jpeg", "image_embedding"]).to_pylist()
    (details,) = [
        json.loads(r["details_json"])
        for r in store.rows(store.ledger, video_id=record.video_id).to_pylist()
        if r["stage"] == "frame_embed"
    ]
    return [np.asarray(r["image_embedding"]) for r in rows], [r["jpeg"] for r in rows], details


def own_vectors(model_dir: Path, data_dir: Path, jpegs: list[bytes]) -> np.ndarray:
    settings = Settings(data_dir=data_dir, models=ModelSettings(image_text=f"onnx-clip:{model_dir}"))
    model = registry.image_text(settings)
    assert model is not None
    return model.embed_images([decode_jpeg(j) for j in jpegs])


def test_still_slides_share_vectors_and_changed_ones_get_their_own(tmp_path: Path, model_dir: Path) -> None:
    # Two still "slides" of 3 s each at 2 fps: 12 frames, two pictures.
    first, second = (Image.open(io.BytesIO(_slide(n, 20))).convert("RGB") for n in (2, 3))
    video = write_video(tmp_path / "slides.mp4", [first, second], seconds=3)
    vectors, jpegs, details = embed_video(video, tmp_path / "gated", model_dir)
    own = own_vectors(model_dir, tmp_path / "gated", jpegs)
    assert len(vectors) == 12 and (details["embedded"], details["shared"]) == (2, 10), details
    for i in range(6):  # each slide's frames carry the vector of the slide's first frame
        np.testing.assert_allclose(vectors[i], own[0], atol=1e-5)
        np.testing.assert_allclose(vectors[6 + i], own[6], atol=1e-5)
    assert not np.allclose(own[0], own[6], atol=1e-3)  # the second slide has its own


def write_video(path: Path, pictures: list[Image.Image], seconds: int = 1, fps: int = 10) -> Path:
    """An H.264 video showing each picture for ``seconds`` (2 ``seconds`` sampled frames at 2 fps)."""
    import av

    with av.open(str(path), mode="w") as out:
        stream = out.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = 640, 360, "yuv420p"
        for index in range(len(pictures) * fps * seconds):
            frame = av.VideoFrame.from_ndarray(np.asarray(pictures[index // (fps * seconds)]), format="rgb24")
            frame.pts, frame.time_base = index, Fraction(1, fps)
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return path


def moving_box(path: Path) -> Path:
    """A small red box (as a car seen by a still camera) moving its own width every second over a
    still grey picture: every second's frames differ from the last second's, but only in one place."""
    pictures = []
    for step in range(8):
        picture = Image.new("RGB", (640, 360), (120, 130, 120))
        x = 160 + 40 * step
        ImageDraw.Draw(picture).rectangle((x, 170, x + 40, 194), fill=(200, 30, 30))
        pictures.append(picture)
    return write_video(path, pictures)


def test_frames_that_differ_keep_the_vectors_they_had_without_the_gate(
    tmp_path: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    video = moving_box(tmp_path / "road.mp4")
    gated, jpegs, details = embed_video(video, tmp_path / "gated", model_dir)
    monkeypatch.setattr(frame_embed, "SAME_VIEW_LEVELS", 0.0)  # the stage before the gate
    every, _, before = embed_video(video, tmp_path / "every", model_dir)
    assert before["embedded"] == len(every) == 16 and before["shared"] == 0
    # The box is under 1 % of the view (the mean moves little), but its cells changed: each second's
    # first frame is embedded, and gets the vector it got without the gate; the second one shares it.
    assert (details["embedded"], details["shared"]) == (8, 8), details
    for i in range(0, 16, 2):
        np.testing.assert_allclose(gated[i], every[i], atol=1e-5)
        np.testing.assert_allclose(gated[i + 1], every[i], atol=1e-5)


def _slide(lines: int, size: int) -> bytes:
    picture = Image.new("RGB", (640, 360), (250, 250, 245))
    pen = ImageDraw.Draw(picture)
    from PIL import ImageFont

    font = ImageFont.truetype(FONT, size) if Path(FONT).exists() else ImageFont.load_default(size=size)
    for line in range(lines):
        pen.text((36, 90 + 40 * line), "OCEAN RIVER GRANITE MAPLE", font=font, fill=(0, 0, 0))
    out = io.BytesIO()
    picture.save(out, format="JPEG", quality=85)
    return out.getvalue()


def test_the_gate_sees_a_new_line_of_slide_text_but_not_jpeg_noise() -> None:
    two, three = _slide(2, 20), _slide(3, 20)
    again = io.BytesIO()
    Image.open(io.BytesIO(two)).save(again, format="JPEG", quality=70)  # re-encoded: noise only
    assert same_view(view_thumbnail(two), view_thumbnail(again.getvalue()))
    assert not same_view(view_thumbnail(two), view_thumbnail(three))
    assert view_thumbnail(two).shape == (frame_embed.VIEW, frame_embed.VIEW, 3)

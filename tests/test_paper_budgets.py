"""The papers' frame budgets by default (issue 28): DVD's frame_inspect looks at 50 frames at 720p
(720 px on the short side), AVI's frame_analysis at 64; a vision server that takes fewer images
per request gets the frames stitched into labelled grids instead of fewer frames. Through the real
OpenAI-compatible backend and a loopback server."""

from __future__ import annotations

import base64
import io
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest
from llm_server import ScriptedLLMServer, text
from PIL import Image
from test_tools_avi import add_video

from vidscope.agents.avi.tools_perceive import frame_analysis
from vidscope.agents.dvd.tools import dvd_registry
from vidscope.agents.frame_grid import fit_frames, grid_shape
from vidscope.agents.tools import AgentConfig, ToolContext, ToolRegistry, execute_tool
from vidscope.core.images import encode_jpeg, longest_side_for
from vidscope.core.settings import AgentSettings, Settings
from vidscope.models import registry
from vidscope.models.open_store import open_store
from vidscope.storage.store import Store

VIDEO_ID = "b0d9e7" + "0" * 58


def tall_video(path: Path, duration: float = 7.0, fps: int = 10) -> Path:
    """A 1280x960 (4:3) video whose short side is above 720, each frame a different shade."""
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("libx264", rate=fps, options={"preset": "ultrafast"})
        stream.width, stream.height, stream.pix_fmt = 1280, 960, "yuv420p"
        for index in range(round(duration * fps)):
            shade = (index * 3) % 256
            frame = av.VideoFrame.from_ndarray(np.full((960, 1280, 3), shade, np.uint8), format="rgb24")
            frame.pts, frame.time_base = index, Fraction(1, fps)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return path


@pytest.fixture(scope="module")
def video_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Store]:
    root = tmp_path_factory.mktemp("budgets")
    settings = Settings(data_dir=root / "data", models={"chat": None, "captioner": None})
    store = open_store(settings)
    add_video(store, VIDEO_ID, tall_video(root / "tall.mp4"), store_frames=False)
    return root / "data", store


def vlm_settings(data_dir: Path, server: ScriptedLLMServer, **options: Any) -> Settings:
    table = {"base_url": server.base_url, "max_retries": 0, "cache": False, **options}
    return Settings(
        data_dir=data_dir,
        models={
            "chat": None,
            "captioner": None,
            "vlm": "openai:looker",
            "options": {"openai": {"vlm": table}},
        },
    )


def sent_images(body: dict[str, Any]) -> list[tuple[int, int]]:
    """(height, width) of every image of a request."""
    sizes = []
    for message in body["messages"]:
        for part in message["content"] if isinstance(message["content"], list) else []:
            if part.get("type") == "image_url":
                data = base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
                with Image.open(io.BytesIO(data)) as image:
                    sizes.append((image.height, image.width))
    return sizes


def prompt_text(body: dict[str, Any]) -> str:
    return " ".join(
        part["text"]
        for m in body["messages"]
        if isinstance(m["content"], list)
        for part in m["content"]
        if part.get("type") == "text"
    )


@pytest.fixture(autouse=True)
def _fresh_registry() -> Any:
    registry.clear_cache()
    yield
    registry.clear_cache()


def test_frame_inspect_looks_at_50_frames_at_720p_stitched_to_the_server_limit(
    llm_server: ScriptedLLMServer, video_store: tuple[Path, Store]
) -> None:
    data_dir, store = video_store
    # A server taking 25 images per request; images sent whole (no backend downscale). frame_inspect
    # is never denser than the stored frames (DVD's 2 fps decode): 50 frames need a range long
    # enough, here a 7-s video stored at 10 fps.
    settings = vlm_settings(data_dir, llm_server, max_images=25, max_image_side=4000)
    settings.ingest.frame_fps = 10.0
    llm_server.script([text("A grey square, darker over time.")])
    ctx = ToolContext(settings, store, config=AgentConfig(tool_cache=False), registry=dvd_registry())
    outcome = execute_tool(
        ctx, "frame_inspect", {"video_id": VIDEO_ID, "question": "What is shown?", "time_ranges": [[0, 7]]}
    )
    assert outcome.ok and outcome.result is not None, outcome.error
    assert len(outcome.result.frame_times) == 50  # DVD's budget, not cut to the server's 25
    (body,) = llm_server.chat_requests
    sizes = sent_images(body)
    # 25 grids of two 960x720 frames (720 px on the short side), stacked: nearest square.
    assert sizes == [(1440, 960)] * 25
    assert "grids of up to 2 frames" in prompt_text(body)


def test_avi_frame_analysis_looks_at_64_frames_by_default(
    llm_server: ScriptedLLMServer, video_store: tuple[Path, Store]
) -> None:
    data_dir, store = video_store
    settings = vlm_settings(data_dir, llm_server)  # max_images 32 by default
    llm_server.script([text("Grey throughout.")])
    ctx = ToolContext(
        settings, store, config=AgentConfig(tool_cache=False), registry=ToolRegistry([frame_analysis])
    )
    outcome = execute_tool(
        ctx, "frame_analysis", {"video_id": VIDEO_ID, "time_ranges": [[0, 7]], "question": "What colour?"}
    )
    assert outcome.ok and outcome.result is not None, outcome.error
    assert len(outcome.result.frame_times) == 64  # AVI's budget, without being asked for it
    (body,) = llm_server.chat_requests
    assert len(sent_images(body)) == 32  # two frames per image at the 32-image limit


def test_720p_is_the_short_side_and_the_old_key_still_caps_the_long_side() -> None:
    assert longest_side_for(1920, 1080, 720) == 1280  # 1280x720
    assert longest_side_for(1080, 1920, 720) == 1280  # portrait: 720x1280
    assert longest_side_for(640, 360, 720) == 640  # never upscaled
    old = AgentSettings(frame_max_side=720)  # a config written before: 720 on the longest side
    assert longest_side_for(1920, 1080, old.frame_short_side, old.frame_max_side) == 720
    assert AgentSettings().frame_short_side == 720 and AgentSettings().frame_max_side is None


def test_grids_are_near_square_and_frames_that_fit_are_sent_as_they_are() -> None:
    assert grid_shape(2, 1280, 720) == (1, 2)
    assert grid_shape(4, 1280, 720) == (2, 2)
    jpegs = [encode_jpeg(np.full((36, 64, 3), 10 * i, np.uint8)) for i in range(5)]
    same = fit_frames(jpegs, [0.0, 1.0, 2.0, 3.0, 4.0], 8)
    assert same.jpegs == jpegs and "frames at these times" in same.describe()
    fitted = fit_frames(jpegs, [0.0, 1.0, 2.0, 3.0, 4.0], 2)
    assert fitted.times == [[0.0, 1.0, 2.0], [3.0, 4.0]] and len(fitted.jpegs) == 2

"""Model profiles, and captioning during ingestion through a real OpenAI-compatible server."""

from __future__ import annotations

import json

import pytest
from llm_server import error, text
from media import text_video

from vidscope.core.errors import BackendUnavailable
from vidscope.core.settings import ModelSettings, Settings
from vidscope.flows.ingest import run_ingest
from vidscope.models import registry
from vidscope.models.open_store import open_store
from vidscope.storage.clips import SIGNALS_SUMMARY


def server_settings(tmp_path, base_url: str, **models: object) -> Settings:
    options = {"openai": {"base_url": base_url, "timeout_s": 5, "max_retries": 0, "cache": False}}
    return Settings(
        data_dir=tmp_path / "data",
        profile="server",
        models=ModelSettings(options=options, **models),
    )


def test_profiles_fill_roles_unless_set(tmp_path) -> None:
    assert Settings(profile="server").models.chat == "openai:"
    local = Settings(profile="local-gpu")
    assert local.models.captioner.startswith("transformers-vlm:")
    assert local.models.object_detector.startswith("yolo:")
    assert Settings(profile="server", models=ModelSettings(chat="openai:mine")).models.chat == "openai:mine"
    assert Settings(profile="server", models=ModelSettings(chat=None)).models.chat is None


def test_server_profile_uses_the_model_the_server_lists(tmp_path, llm_server) -> None:
    settings = server_settings(tmp_path, llm_server.base_url)
    chat = registry.chat_model(settings)
    assert "scripted" in chat.name


def test_server_profile_without_a_reachable_server_names_the_url(tmp_path) -> None:
    settings = server_settings(tmp_path, "http://127.0.0.1:9/v1")
    with pytest.raises(BackendUnavailable, match=r"127\.0\.0\.1:9/v1/models"):
        registry.captioner(settings)


def test_local_gpu_profile_fails_with_a_message_naming_the_model(tmp_path) -> None:
    settings = Settings(data_dir=tmp_path / "d", profile="local-gpu")
    with pytest.raises(BackendUnavailable, match="large-v3"):
        registry.speech_recognizer(settings)


def test_ingestion_captions_clips_with_the_served_vlm(tmp_path, llm_server) -> None:
    video = text_video(tmp_path / "shop.mp4", duration=9.0, texts=[(0.0, 9.0, "OPEN")])
    parse = json.dumps(
        {
            "caption": "a shop window with an open sign",
            "scene": ["street"],
            "objects": ["sign"],
            "actions": [],
        },
    )
    llm_server.script([text("A shop window with an OPEN sign."), error(500), error(500), text(parse)])
    # Captioning (two clips) and the structured parse are scripted; the chat role (subject
    # registry, graph) is switched off.
    settings = server_settings(tmp_path, llm_server.base_url, speech_recognizer="", chat="")
    (report,) = run_ingest([str(video)], settings)
    assert report.status == "ok", report
    store = open_store(settings)
    clips = store.rows(store.clips, video_id=report.video_id).to_pylist()
    assert clips[0]["caption"] == "A shop window with an OPEN sign."
    assert "scripted" in clips[0]["caption_source"]
    # The server failed on the second clip: it gets the labelled signals summary, not a made-up caption.
    assert clips[1]["caption_source"] == SIGNALS_SUMMARY and "OPEN" in clips[1]["caption"]
    first = llm_server.chat_requests[0]
    images = [
        part
        for m in first["messages"]
        if isinstance(m.get("content"), list)
        for part in m["content"]
        if part.get("type") == "image_url"
    ]
    assert images and images[0]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    # The clip's 10 frames (5 s at 2 fps) show one still sign: the nine near-duplicates are not sent.
    assert len(images) == 1
    assert "OPEN" in str(first["messages"])  # on-screen text went along as context
    [parsed] = store.rows(store.video_parses, video_id=report.video_id).to_pylist()
    assert parsed["objects"] == ["sign"] and "scripted" in parsed["parser"]


def test_usage_reports_ingestion_cost_per_hour(tmp_path, llm_server, monkeypatch) -> None:
    from typer.testing import CliRunner

    from vidscope.cli import app
    from vidscope.cli.common import overrides

    video = text_video(tmp_path / "clip.mp4", duration=4.0, texts=[(0.0, 4.0, "SALE")])
    parse = '{"caption": "a shop sign announcing a sale", "scene": [], "objects": ["sign"], "actions": []}'
    llm_server.script(
        [
            text("A SALE sign.", prompt_tokens=1000, completion_tokens=100),  # the caption
            text(parse, prompt_tokens=1000, completion_tokens=100),  # the structured parse
        ]
    )
    config = tmp_path / "vidscope.toml"
    config.write_text(
        f'data_dir = "{tmp_path / "data"}"\nprofile = "server"\n[models]\nspeech_recognizer = ""\nchat = ""\n'
        f'[models.options.openai]\nbase_url = "{llm_server.base_url}"\ncache = false\n'
        "[models.options.openai.prices.scripted]\ninput_per_mtok = 2.0\noutput_per_mtok = 10.0\n"
    )
    monkeypatch.setenv("VIDSCOPE_CONFIG", str(config))
    overrides.clear()
    (report,) = run_ingest([str(video)], Settings())
    assert report.status == "ok", report
    result = CliRunner().invoke(app, ["usage"])
    assert result.exit_code == 0, result.output
    # Twice 1000 tokens in at $2/M + 100 out at $10/M = $0.006 for 4 s of video = $5.40 per hour.
    assert "2 model calls during ingestion" in result.output
    assert "$0.0060 in total" in result.output and "$5.4000 per ingested hour" in result.output
    # The images the server received, scaled from 4 s to an hour; tokens likewise (2000 in, 200 out).
    sent = [
        sum(
            1
            for m in r["messages"]
            if isinstance(m.get("content"), list)
            for p in m["content"]
            if p.get("type") == "image_url"
        )
        for r in llm_server.chat_requests
    ]
    assert sent[0] == 1  # the still sign: one frame of the clip's eight
    per_hour = f"{sum(sent) * 900:,} images, 1,800,000 input and 180,000 output tokens per ingested hour"
    assert f"captioner during ingestion: {per_hour}" in " ".join(result.output.split())

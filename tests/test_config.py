"""The settings object: TOML file, environment overrides, profiles, validation."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from vidscope.core.hashing import stable_hash
from vidscope.core.settings import Settings


def test_defaults_are_the_embedded_offline_profile(monkeypatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)
    settings = Settings()
    assert settings.profile == "embedded"
    assert str(settings.data_dir) == "vidscope-data"
    assert (settings.ingest.clip_seconds, settings.ingest.frame_fps) == (5.0, 2.0)
    assert settings.models.text_embedder == "minilm:embedded"
    assert settings.models.text_reader == "rapidocr:embedded"
    assert settings.models.captioner is None and settings.models.chat is None


def test_toml_file_then_environment_override(monkeypatch, tmp_path) -> None:
    config = tmp_path / "vidscope.toml"
    config.write_text(
        'data_dir = "/srv/videos-store"\n[ingest]\nclip_seconds = 4.0\nframe_fps = 1.0\n'
        '[models]\nchat = "openai:qwen"\nspeech_recognizer = ""\n'
        '[models.options.openai]\nbase_url = "http://127.0.0.1:9/v1"\n'
    )
    monkeypatch.setenv("VIDSCOPE_CONFIG", str(config))
    monkeypatch.setenv("VIDSCOPE_INGEST__FRAME_FPS", "3")
    settings = Settings()
    assert str(settings.data_dir) == "/srv/videos-store"
    assert settings.ingest.clip_seconds == 4.0
    assert settings.ingest.frame_fps == 3.0  # the environment wins over the file
    assert settings.models.chat == "openai:qwen"
    assert settings.models.speech_recognizer == ""  # explicitly switched off, not defaulted
    assert settings.models.options["openai"]["base_url"] == "http://127.0.0.1:9/v1"


def test_invalid_values_and_unknown_keys_are_refused(monkeypatch, tmp_path) -> None:
    config = tmp_path / "vidscope.toml"
    config.write_text("[ingest]\nclip_seconds = -1\n")
    monkeypatch.setenv("VIDSCOPE_CONFIG", str(config))
    with pytest.raises(ValidationError, match="clip_seconds"):
        Settings()
    config.write_text("frobnicate = 1\n")
    with pytest.raises(ValidationError, match="frobnicate"):
        Settings()


def test_stable_hash_is_order_independent_for_mappings_and_sensitive_to_values() -> None:
    assert stable_hash({"a": 1, "b": 2}) == stable_hash({"b": 2, "a": 1})
    assert stable_hash({"a": 1}) != stable_hash({"a": 2})
    assert len(stable_hash("x")) == 16


def test_agent_limits_come_from_the_agent_section(monkeypatch, tmp_path) -> None:
    config = tmp_path / "vidscope.toml"
    config.write_text("[agent]\nmax_steps = 4\nmax_frames = 8\n")
    monkeypatch.setenv("VIDSCOPE_CONFIG", str(config))
    settings = Settings()
    assert (settings.agent.max_steps, settings.agent.max_frames, settings.agent.top_k) == (4, 8, 16)
    config.write_text("[agent]\nmax_steps = 0\n")
    with pytest.raises(ValidationError, match="max_steps"):
        Settings()

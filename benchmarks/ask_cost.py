"""What one question costs in model calls and tokens: vidscope's ask against a DVD-like setup.

On one scripted session (global_browse → model summary → clip_search → finish) over a 30-minute
video of 360 captioned clips, this runs the real ``ask`` flow and the real OpenAI-compatible
backend against the loopback server of ``tests/llm_server.py`` three times:

a. ours: ``global_browse`` samples 48 captions evenly across the video (the default);
b. dvd-like: ``global_browse`` sends 300 captions, as the public Deep Video Discovery code does;
c. repeat: the same question as (a) again, answered from the tool and response caches.

It reports model calls, HTTP requests, prompt tokens as the server counts them (a word count, a
proxy for real tokenizer counts), request bytes and wall time. The scripted model's replies are the
same in every run, so the differences come only from what the runtime sends.

Run: ``.venv/bin/python benchmarks/ask_cost.py`` (about 30–60 s on 2 cores; writes
``benchmarks/out/ask_cost.json``).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).resolve().parent / "out"
CLIPS, CLIP_SECONDS = 360, 5.0
VIDEO_ID = "bench" + "0" * 59
QUESTION = "At what point does the presenter reveal the password, and what is it?"

_SUBJECTS = ["a presenter", "two hikers", "a dog", "a cyclist", "a chef", "a child", "a drone shot"]
_ACTIONS = ["walks along", "talks beside", "points at", "runs past", "looks at", "stands near"]
_PLACES = [
    "a river",
    "a red barn",
    "a market stall",
    "a mountain trail",
    "a kitchen table",
    "a bridge",
]


def _environment() -> None:
    os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="vidscope-bench-prefect-"))
    os.environ.pop("PREFECT_API_URL", None)
    for key, value in {
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "HF_HUB_OFFLINE": "1",
        "PREFECT_LOGGING_LEVEL": "WARNING",
    }.items():
        os.environ.setdefault(key, value)
    sys.path.insert(0, str(ROOT / "tests"))  # the scripted loopback server lives with the tests


def build_store(settings: Any) -> None:
    """A 30-minute video of 360 clips with varied captions; the answer sits at 20:00–20:05."""
    from vidscope.models import registry
    from vidscope.models.open_store import open_store
    from vidscope.storage.clips import SIGNALS_SUMMARY
    from vidscope.storage.ledger import STATUS_DONE

    store = open_store(settings)
    embedder = registry.text_embedder(settings)
    now = datetime.now(UTC)
    store.upsert(
        store.videos,
        [
            {
                "video_id": VIDEO_ID,
                "path": "/videos/walk.mp4",
                "file_name": "walk.mp4",
                "size_bytes": 1,
                "duration": CLIPS * CLIP_SECONDS,
                "fps": 30.0,
                "width": 1280,
                "height": 720,
                "rotation": 0,
                "has_audio": True,
                "added_at": now,
            }
        ],
    )
    captions, speech = [], []
    for i in range(CLIPS):
        s, a, p = _SUBJECTS[i % 7], _ACTIONS[(i // 7) % 6], _PLACES[(i // 42) % 6]
        captions.append(f"{s.capitalize()} {a} {p} while the light changes (clip {i}).")
        speech.append("The password is blue harbour." if i == 240 else f"Remark number {i} about {p}.")
    vectors = embedder.embed([f"{c} {t}" for c, t in zip(captions, speech, strict=True)])
    store.replace_video_rows(
        store.clips,
        VIDEO_ID,
        [
            {
                "video_id": VIDEO_ID,
                "clip_index": i,
                "start": i * CLIP_SECONDS,
                "end": (i + 1) * CLIP_SECONDS,
                "caption": captions[i],
                "caption_source": SIGNALS_SUMMARY,
                "transcript_text": speech[i],
                "ocr_text": None,
                "text_embedding": vectors[i].tolist(),
                "embed_model": embedder.name,
            }
            for i in range(CLIPS)
        ],
    )
    store.upsert(
        store.ledger,
        [
            {
                "video_id": VIDEO_ID,
                "stage": "embed",
                "stage_version": 1,
                "config_hash": "bench",
                "status": STATUS_DONE,
                "started_at": now,
                "finished_at": now,
                "seconds": 1.0,
                "rows": CLIPS,
            }
        ],
    )


def session() -> list[Any]:
    """The scripted model: browse, read the summary, search, finish."""
    from llm_server import text, tool_call

    return [
        tool_call("global_browse", {"video_id": VIDEO_ID, "query": QUESTION}, call_id="b"),
        text("The presenter walks by a river, a barn and a market; around 20:00 a password is said."),
        tool_call("clip_search", {"video_id": VIDEO_ID, "query": "password", "top_k": 16}, call_id="s"),
        tool_call(
            "finish",
            {
                "answer": "At 20:00 the presenter says the password is blue harbour.",
                "citations": [[1200, 1205]],
            },
            call_id="f",
        ),
    ]


def run(
    label: str, settings: Any, server: Any, browse_captions: int, *, scripted: bool = True
) -> dict[str, Any]:
    """One question through ``run_ask``; what it cost, from the result and the server's log."""
    from vidscope.agents.tools import AgentConfig
    from vidscope.flows.ask import run_ask

    seen = len(server.chat_requests)
    if scripted:  # a repeat gets no script: any request reaching the server would fail loudly
        server.script(session())
    started = time.perf_counter()
    result = run_ask(settings, VIDEO_ID, QUESTION, config=AgentConfig(browse_captions=browse_captions))
    seconds = time.perf_counter() - started
    requests = server.chat_requests[seen:]
    return {
        "run": label,
        "browse_captions": browse_captions,
        "model_calls": result.usage.model_calls,
        "http_requests": len(requests),
        "prompt_tokens": result.usage.input_tokens,
        "completion_tokens": result.usage.output_tokens,
        "request_bytes": sum(len(json.dumps(r)) for r in requests),
        "tool_calls": result.usage.tool_calls,
        "tool_cache_hits": result.usage.tool_cache_hits,
        "verified_citations": sum(c.verified for c in result.citations),
        "seconds": round(seconds, 3),
    }


def main() -> None:
    _environment()
    from llm_server import ScriptedLLMServer

    from vidscope.core.settings import Settings

    server = ScriptedLLMServer().start()
    try:
        with tempfile.TemporaryDirectory(prefix="vidscope-bench-") as tmp:

            def fresh(name: str) -> Settings:
                # Each configuration gets its own data dir, so no run sees another's caches.
                models = {
                    "chat": "openai:scripted",
                    "captioner": None,
                    "speech_recognizer": None,
                    "text_reader": None,
                    "options": {"openai": {"base_url": server.base_url, "max_retries": 0}},
                }
                settings = Settings(data_dir=Path(tmp) / name, models=models)
                build_store(settings)
                return settings

            warm = run("warm-up", fresh("warm"), server, 48)  # starts Prefect's server, loads models
            ours, dvd = fresh("ours"), fresh("dvd")
            rows = [
                run("ours", ours, server, 48),
                run("dvd-like", dvd, server, 300),
                run("repeat (ours)", ours, server, 48, scripted=False),
            ]
    finally:
        server.stop()
    print(
        f"{'run':<16}{'captions':>9}{'calls':>7}{'HTTP':>6}{'prompt tok':>12}{'bytes':>9}"
        f"{'tools':>7}{'cached':>8}{'s':>7}"
    )
    for r in rows:
        print(
            f"{r['run']:<16}{r['browse_captions']:>9}{r['model_calls']:>7}{r['http_requests']:>6}"
            f"{r['prompt_tokens']:>12}{r['request_bytes']:>9}{r['tool_calls']:>7}"
            f"{r['tool_cache_hits']:>8}{r['seconds']:>7.2f}"
        )
    ratio = rows[1]["prompt_tokens"] / max(1, rows[0]["prompt_tokens"])
    print(f"dvd-like / ours prompt tokens: {ratio:.2f}x; repeat HTTP requests: {rows[2]['http_requests']}")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "ask_cost.json").write_text(json.dumps({"warm_up": warm, "runs": rows}, indent=2))


if __name__ == "__main__":
    main()

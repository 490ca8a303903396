"""What one question costs in model calls, tokens and images: vidscope's DVD and AVI agents.

On one scripted session per agent over a 30-minute video of 360 captioned clips (with stored 2 fps
frames and one on-screen text), this runs the real ``ask`` flow and the real OpenAI-compatible
backend against the loopback server of ``tests/llm_server.py``:

a. dvd: global_browse → summary → clip_search → frame_inspect over a minute → finish, with the
   default ``[agent]`` budgets (captions for global_browse, frames for frame_inspect);
b. dvd-like: the same with 300 captions for global_browse, as the public Deep Video Discovery code;
c. repeat: the same question as (a) again, answered from the tool and response caches;
d. avi: clip_retrieve → global_explore → text_extract → frame_analysis over a minute (64 frames
   asked for) → review, with the default budgets.

It reports model calls, HTTP requests, prompt tokens as the server counts them (a word count, a
proxy for real tokenizer counts), images sent, request bytes and wall time. The scripted model's
replies are the same in every run, so the differences come only from what the runtime sends.

Run: ``.venv/bin/python benchmarks/ask_cost.py [label]`` (about 1–2 min on 2 cores; writes
``benchmarks/out/ask_cost[-label].json``).
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


def _jpeg(shade: int) -> bytes:
    """A tiny stored frame (what frame tools send is counted in images, not in bytes)."""
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (32, 18), (shade, 255 - shade, 128)).save(buf, "JPEG")
    return buf.getvalue()


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
    store.replace_video_rows(
        store.frames,
        VIDEO_ID,
        [
            {
                "video_id": VIDEO_ID,
                "frame_index": f,
                "t": f / 2,
                "clip_index": int(f / 2 // CLIP_SECONDS),
                "width": 32,
                "height": 18,
                "jpeg": _jpeg(f % 256),
            }
            for f in range(int(CLIPS * CLIP_SECONDS * 2))
        ],
    )
    store.replace_video_rows(
        store.ocr,
        VIDEO_ID,
        [
            {
                "video_id": VIDEO_ID,
                "item_index": 0,
                "t": 1200.0,
                "t_end": 1205.0,
                "text": "PASSWORD: BLUE HARBOUR",
                "box": [0, 0, 10, 0, 10, 10, 0, 10],
                "score": 0.99,
            }
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


#: The minute frame_inspect and frame_analysis look at (the answer sits at 20:00-20:05).
LOOK = [1170.0, 1230.0]


def dvd_session() -> list[Any]:
    """The scripted DVD model: browse, read the summary, search, inspect a minute, finish."""
    from llm_server import text, tool_call

    return [
        tool_call("global_browse", {"video_id": VIDEO_ID, "query": QUESTION}, call_id="b"),
        text("The presenter walks by a river, a barn and a market; around 20:00 a password is said."),
        tool_call("clip_search", {"video_id": VIDEO_ID, "query": "password", "top_k": 16}, call_id="s"),
        tool_call(
            "frame_inspect",
            {"video_id": VIDEO_ID, "question": "Is a password shown?", "time_ranges": [LOOK]},
            call_id="i",
        ),
        text("At 1200 s a sign reads PASSWORD: BLUE HARBOUR."),
        tool_call(
            "finish",
            {
                "answer": "At 20:00 the presenter says the password is blue harbour.",
                "citations": [[1200, 1205]],
            },
            call_id="f",
        ),
    ]


def avi_session() -> list[Any]:
    """The scripted AVI model: retrieve, explore, end the phase; read text, analyse frames, end
    the phase; review."""
    from llm_server import text, tool_call

    from vidscope.agents.avi.tools_perceive import frame_analysis

    # frame_analysis took one time_range before issue 12 and takes time_ranges since: the session
    # calls whichever the code under measurement declares, with the same minute and frames.
    fields = frame_analysis.args_model.model_fields
    where = {"time_ranges": [LOOK]} if "time_ranges" in fields else {"time_range": LOOK}
    return [
        # AVI's Fig. 10: retrieval starts with clip_retrieve (the loop enforces it since issue 28).
        tool_call("clip_retrieve", {"video_id": VIDEO_ID, "query": "password", "k": 16}, call_id="r"),
        tool_call("global_explore", {"video_id": VIDEO_ID, "query": QUESTION}, call_id="e"),
        text("Around 20:00 the presenter talks about a password."),
        text("Candidates: 1195-1210 s (the password is said)."),
        tool_call("text_extract", {"video_id": VIDEO_ID, "time_range": [1195, 1210]}, call_id="t"),
        tool_call(
            "frame_analysis",
            {"video_id": VIDEO_ID, "question": "Is a password shown?", "frames": 64, **where},
            call_id="a",
        ),
        text("At 1200 s a sign reads PASSWORD: BLUE HARBOUR."),
        text("Found: the sign PASSWORD: BLUE HARBOUR at 1200-1205 s; the speech says it too."),
        text(
            json.dumps(
                {
                    "verdict": "answer",
                    "answer": "At 20:00 the presenter says the password is blue harbour.",
                    "citations": [[1200, 1205]],
                }
            )
        ),
    ]


def run(
    label: str,
    settings: Any,
    server: Any,
    *,
    agent: str = "dvd",
    browse_captions: int | None = None,
    scripted: bool = True,
) -> dict[str, Any]:
    """One question through ``run_ask``; what it cost, from the result and the server's log."""
    from vidscope.agents.tools import AgentConfig
    from vidscope.flows.ask import run_ask

    seen = len(server.chat_requests)
    if scripted:  # a repeat gets no script: any request reaching the server would fail loudly
        server.script(dvd_session() if agent == "dvd" else avi_session())
    config = AgentConfig() if browse_captions is None else AgentConfig(browse_captions=browse_captions)
    started = time.perf_counter()
    result = run_ask(settings, VIDEO_ID, QUESTION, config=config, agent=agent)  # type: ignore[arg-type]
    seconds = time.perf_counter() - started
    requests = server.chat_requests[seen:]
    return {
        "run": label,
        "agent": agent,
        "browse_captions": config.browse_captions,
        "max_frames": config.max_frames,
        "model_calls": result.usage.model_calls,
        "http_requests": len(requests),
        "prompt_tokens": result.usage.input_tokens,
        "completion_tokens": result.usage.output_tokens,
        "images": result.usage.images,
        "request_bytes": sum(len(json.dumps(r)) for r in requests),
        "tool_calls": result.usage.tool_calls,
        "tool_cache_hits": result.usage.tool_cache_hits,
        "verified_citations": sum(c.verified for c in result.citations),
        "forced": result.forced,
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
                    # A server that takes 64 images per request (vLLM --limit-mm-per-prompt), so the
                    # budgets of the tools, not the backend's default cap of 32, decide.
                    "options": {"openai": {"base_url": server.base_url, "max_retries": 0, "max_images": 64}},
                }
                settings = Settings(data_dir=Path(tmp) / name, models=models)
                build_store(settings)
                return settings

            warm = run("warm-up", fresh("warm"), server)  # starts Prefect's server, loads models
            ours, dvd, avi = fresh("ours"), fresh("dvd"), fresh("avi")
            rows = [
                run("dvd", ours, server),
                run("dvd-like", dvd, server, browse_captions=300),
                run("repeat (dvd)", ours, server, scripted=False),
                run("avi", avi, server, agent="avi"),
            ]
    finally:
        server.stop()
    print(
        f"{'run':<14}{'captions':>9}{'calls':>7}{'HTTP':>6}{'prompt tok':>12}{'images':>8}"
        f"{'bytes':>9}{'tools':>7}{'cached':>8}{'s':>7}"
    )
    for r in rows:
        print(
            f"{r['run']:<14}{r['browse_captions']:>9}{r['model_calls']:>7}{r['http_requests']:>6}"
            f"{r['prompt_tokens']:>12}{r['images']:>8}{r['request_bytes']:>9}{r['tool_calls']:>7}"
            f"{r['tool_cache_hits']:>8}{r['seconds']:>7.2f}"
        )
    label = f"-{sys.argv[1]}" if len(sys.argv) > 1 else ""
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"ask_cost{label}.json").write_text(json.dumps({"warm_up": warm, "runs": rows}, indent=2))


if __name__ == "__main__":
    main()

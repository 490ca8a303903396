"""Images the captioner is sent per ingested hour, with and without near-duplicate frames dropped.

Each video (the shared samples in /work/shared/videos plus a generated 60 s video of three still
signs) is ingested for real with the embedded profile and a captioner behind the loopback server of
``tests/llm_server.py`` (response cache off). That scripted captioner describes what it is sent:
for every image, the colour of each cell of a 3x3 grid, and the caption is the set of those
phrases, so a frame dropped as a near-duplicate changes the caption only if it showed something the
kept frames did not. The video is ingested first with ``[ingest] caption_dedup = 0`` (every frame,
up to ``caption_frames``: what DVD sends), then again in the same store with the default threshold
(only captioning and the stages after it re-run). For both it prints the caption stage's images per
ingested hour (DVD: 7,200) and all vision-role images and tokens per hour as `vidscope usage`
computes them (the parse stage's few frames included; tokens as the loopback server counts them:
words plus 85 per image, a proxy for a real tokenizer), and whether ``clip_search`` returns the same
top hits for a few queries.

Run: ``.venv/bin/python benchmarks/caption_images.py`` (about 5 minutes on 2 cores; writes
``benchmarks/out/caption_images.json``).
"""

from __future__ import annotations

import base64
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).resolve().parent / "out"
SAMPLES = Path("/work/shared/videos")
QUERIES = ["dark gray top left", "white center", "red bottom", "bright scene", "sign", "black right"]
TOP = 3
PALETTE = {
    "black": (20, 20, 20),
    "dark gray": (70, 70, 70),
    "gray": (128, 128, 128),
    "white": (235, 235, 235),
    "red": (200, 50, 50),
    "green": (50, 160, 60),
    "blue": (50, 80, 200),
    "yellow": (220, 200, 60),
    "brown": (120, 80, 40),
}
CELLS = ["top left", "top", "top right", "left", "center", "right", "bottom left", "bottom", "bottom right"]
PARSE = json.dumps(
    {"caption": "a scene described by its colours", "scene": ["scene"], "objects": [], "actions": []}
)


def _environment() -> None:
    home = os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="vidscope-bench-prefect-"))
    os.environ.pop("PREFECT_API_URL", None)
    for key, value in {
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
        "VIDSCOPE_CONFIG": os.path.join(home, "no-such-vidscope.toml"),  # no vidscope.toml of the cwd
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "HF_HUB_OFFLINE": "1",
        "PREFECT_LOGGING_LEVEL": "WARNING",
    }.items():
        os.environ.setdefault(key, value)


def describe(jpeg: bytes) -> set[str]:
    """The colour of each 3x3 grid cell of an image, as phrases ("top left dark gray")."""
    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(jpeg)) as image:
        cells = np.asarray(image.convert("RGB").resize((3, 3), Image.Resampling.BOX), dtype=float)
    names = list(PALETTE)
    colours = np.array([PALETTE[n] for n in names], dtype=float)
    phrases = set()
    for i, cell in enumerate(cells.reshape(9, 3)):
        nearest = names[int(np.argmin(((colours - cell) ** 2).sum(axis=1)))]
        phrases.add(f"{CELLS[i]} {nearest}")
    return phrases


def main() -> None:
    _environment()
    sys.path.insert(0, str(ROOT / "tests"))  # the scripted loopback server lives with the tests
    from llm_server import ScriptedLLMServer, text
    from media import text_video

    from vidscope.agents.evidence import search_clips
    from vidscope.agents.tools import ToolContext
    from vidscope.core.settings import ModelSettings, Settings
    from vidscope.flows.ingest import run_ingest
    from vidscope.models import registry, usage
    from vidscope.models.open_store import open_store
    from vidscope.tasks.stage import ledger_rows

    class DescribingServer(ScriptedLLMServer):
        """Captions from the images each request carries; parse requests get a fixed parse."""

        def _chat(self, handler: Any, body: dict[str, Any]) -> None:
            user = body["messages"][-1]["content"]
            parts = user if isinstance(user, list) else [{"type": "text", "text": user}]
            if body.get("response_format"):
                reply = text(PARSE)
            else:
                phrases: set[str] = set()
                for part in parts:
                    if part.get("type") == "image_url":
                        url = part["image_url"]["url"]
                        phrases |= describe(base64.b64decode(url.split(",", 1)[1]))
                caption = "The clip shows " + ", ".join(sorted(phrases)) + "." if phrases else "Nothing."
                reply = text(json.dumps({"caption": caption, "subjects": []}))
            self.script([reply])
            super()._chat(handler, body)

    work = Path(tempfile.mkdtemp(prefix="vidscope-caption-images-"))
    generated = text_video(
        work / "signs.mp4",
        duration=60.0,
        texts=[(0.0, 20.0, "NORTH PIER"), (20.0, 40.0, "SOUTH GATE"), (40.0, 60.0, "EAST YARD")],
    )
    videos = sorted(p for p in SAMPLES.iterdir() if p.suffix in {".mp4", ".mkv"}) + [generated]
    server = DescribingServer().start()
    options = {"openai": {"base_url": server.base_url, "timeout_s": 30, "max_retries": 0, "cache": False}}
    results: dict[str, Any] = {"videos": {}}
    started = time.perf_counter()
    try:
        for video in videos:
            data_dir = work / video.stem
            runs: dict[str, Any] = {}
            for label, threshold in (("before", 0.0), ("after", None)):
                ingest: dict[str, Any] = {"stage_retries": 0}
                if threshold is not None:
                    ingest["caption_dedup"] = threshold
                settings = Settings(
                    data_dir=data_dir,
                    models=ModelSettings(
                        captioner="openai:scripted", chat=None, speech_recognizer=None, options=options
                    ),
                    ingest=ingest,
                )
                registry.clear_cache()
                first = len(server.chat_requests)
                earlier = usage.ingestion_per_hour(open_store(settings))["totals"]
                (report,) = run_ingest([str(video)], settings)
                if report.status != "ok":
                    raise SystemExit(f"{video.name} ({label}): ingestion {report.status}: {report}")
                store = open_store(settings)
                record = store.rows(store.videos, video_id=report.video_id).to_pylist()[0]
                hours = float(record["duration"]) / 3600
                details = json.loads(ledger_rows(store, report.video_id)["caption"]["details_json"])
                requests = server.chat_requests[first:]
                caption_images = sum(
                    1
                    for r in requests
                    if not r.get("response_format")
                    for p in r["messages"][-1]["content"]
                    if isinstance(p, dict) and p.get("type") == "image_url"
                )
                ctx = ToolContext(settings, store)
                hits = {
                    q: [
                        h.clip_index
                        for h in sorted(
                            search_clips(ctx, report.video_id, q, TOP).clips, key=lambda h: -h.score
                        )
                    ]
                    for q in QUERIES
                }
                vision = usage.ingestion_per_hour(store)
                # This run's vision calls (captions and the parse), as `vidscope usage` counts them.
                run_totals = {k: v - earlier[k] for k, v in vision["totals"].items()}
                runs[label] = {
                    "vision_totals": run_totals,
                    "vision_per_hour": {k: v / hours for k, v in run_totals.items()},
                    "hours": hours,
                    "frames_stored": details["frames_stored"],
                    "frames_sent": details["frames_sent"],
                    "caption_images": caption_images,
                    "caption_images_per_hour": caption_images / hours,
                    "top_hits": hits,
                }
            same = sum(runs["before"]["top_hits"][q] == runs["after"]["top_hits"][q] for q in QUERIES)
            results["videos"][video.name] = {**runs, "queries_unchanged": same, "queries": len(QUERIES)}
            b, a = runs["before"], runs["after"]
            print(
                f"{video.name:24s} {b['hours'] * 3600:6.1f}s  images/h"
                f" before {b['caption_images_per_hour']:7.0f} after {a['caption_images_per_hour']:7.0f}"
                f"  ratio {a['caption_images'] / b['caption_images']:.2f}"
                f"  top-{TOP} unchanged {same}/{len(QUERIES)}",
                flush=True,
            )
    finally:
        server.stop()
    seconds = sum(v["before"]["hours"] for v in results["videos"].values()) * 3600
    before = sum(v["before"]["caption_images"] for v in results["videos"].values())
    after = sum(v["after"]["caption_images"] for v in results["videos"].values())
    unchanged = sum(v["queries_unchanged"] for v in results["videos"].values())
    asked = sum(v["queries"] for v in results["videos"].values())
    tokens_before = sum(v["before"]["vision_totals"]["input_tokens"] for v in results["videos"].values())
    tokens_after = sum(v["after"]["vision_totals"]["input_tokens"] for v in results["videos"].values())
    results["total"] = {
        "vision_input_tokens_per_hour_before": tokens_before / seconds * 3600,
        "vision_input_tokens_per_hour_after": tokens_after / seconds * 3600,
        "seconds": seconds,
        "images_before": before,
        "images_after": after,
        "images_per_hour_before": before / seconds * 3600,
        "images_per_hour_after": after / seconds * 3600,
        "ratio": after / before,
        "queries_unchanged": unchanged,
        "queries": asked,
        "wall_s": time.perf_counter() - started,
    }
    t = results["total"]
    print(
        f"all ({seconds:.0f} s of video): caption images per ingested hour {t['images_per_hour_before']:.0f} "
        f"-> {t['images_per_hour_after']:.0f} (ratio {t['ratio']:.2f}); clip_search top-{TOP} unchanged "
        f"for {unchanged}/{asked} queries; vision input tokens per hour (captions + parse, server's count) "
        f"{t['vision_input_tokens_per_hour_before']:.0f} -> {t['vision_input_tokens_per_hour_after']:.0f}; "
        f"{t['wall_s']:.0f} s"
    )
    OUT.mkdir(exist_ok=True)
    (OUT / "caption_images.json").write_text(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()

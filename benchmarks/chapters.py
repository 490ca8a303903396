"""How well the ``chapters`` stage finds a video's parts without a model, and what it costs (issue 39).

Builds multi-part videos whose parts are known — different subjects, unequal lengths, with and
without title slides, narrated (espeak-ng) or told only by slides, and one with neither speech nor
text whose scenes differ in colour — ingests them with the embedded defaults (Whisper base,
RapidOCR, MiniLM; no chat model), and prints per video:

- **boundary F1** within 3 s and within 10 s: a found cut matches at most one true cut (the nearest
  unmatched one within the tolerance); F1 of the cuts between parts (a video of one part, split
  nowhere, scores 1);
- **title coverage**: the share of parts whose chapter (the one overlapping the part most) has a
  title holding one of the part's keywords; **summary coverage** the same for the chapter summary;
- **cost**: the chapters stage's seconds as a share of all stages' seconds for the video (goal ≤ 5 %).

With ``--planner URL`` (an OpenAI-compatible server, e.g. llama.cpp's with the real-model tier's
Qwen2.5-Coder-1.5B; ``--model`` names what it serves) the chapters stage then runs again on each
video with that planner (:mod:`vidscope.tasks.chapter_writer` writes titles and summaries; the
boundaries are the same), and a second table gives per video the title and summary coverage of the
written chapters, how many titles the model wrote and how many fell back to the extractive title
(a reply refused as nonsense, with the first reason), and the stage's seconds as a share of
ingestion (the embedded run's other stages plus this stage). Only the chapters stage re-runs: with
a planner configured for the whole ingestion the subjects and graph stages would use it too, so the
share printed is an upper bound. The server is yours to start and stop, e.g.::

    .venv/bin/python -m tests.real_model.llama_server serve .real-model/qwen2.5-coder-1.5b-instruct-q4.gguf \
        --port 8089 --threads 2 --ctx 8192 &
    .venv/bin/python benchmarks/chapters.py --planner http://127.0.0.1:8089/v1

    .venv/bin/python benchmarks/chapters.py [--data DIR] [--json] [--planner URL [--model NAME]]

``--data DIR`` keeps the videos and the store (a second run re-reads the stored chapters and
reports the first run's costs from the ledger).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.pop("PREFECT_API_URL", None)  # in-process: no server to wait for

#: Each subject: its keywords (any one in a title counts) and lines said or shown about it.
SUBJECTS: dict[str, tuple[set[str], list[str]]] = {
    "bread": (
        {"bread", "dough", "flour", "yeast", "oven", "loaf", "knead"},
        [
            "Today we bake bread. Mix flour, water, yeast and salt into a dough.",
            "Knead the dough until it is smooth, then let the dough rise in a warm bowl.",
            "Shape the loaf and bake the bread in a hot oven for forty minutes.",
            "A good loaf of bread sounds hollow when you tap the crust.",
        ],
    ),
    "volcano": (
        {"volcano", "lava", "magma", "eruption", "erupt", "erupts", "ash", "crater"},
        [
            "A volcano erupts when magma and gas push up through the crust.",
            "Lava flows down the slopes of the volcano and the ash cloud rises high.",
            "The crater of the volcano glows red at night during the eruption.",
            "After the eruption the lava cools into black volcanic rock.",
        ],
    ),
    "football": (
        {"football", "striker", "goalkeeper", "referee", "goal", "match", "ball"},
        [
            "In the football match the striker kicks the ball past the goalkeeper.",
            "The referee blows the whistle and the team celebrates the goal.",
            "The goalkeeper dives to stop the ball in the final minute of the match.",
            "Football fans sing in the stadium after the winning goal.",
        ],
    ),
    "bees": (
        {"bee", "bees", "honey", "hive", "flower", "pollen", "queen"},
        [
            "Honey bees live in a hive ruled by a single queen.",
            "The bees carry pollen from flower to flower and make honey.",
            "Inside the hive the bees store honey in wax cells.",
            "A beekeeper opens the hive to collect the honey.",
        ],
    ),
    "trains": (
        {"train", "trains", "railway", "locomotive", "station", "track", "steam"},
        [
            "The steam locomotive pulls the train out of the station.",
            "Railway tracks cross the valley on a long stone bridge.",
            "Passengers wait on the platform for the next train.",
            "Modern electric trains run faster than the old steam engines.",
        ],
    ),
    "chess": (
        {"chess", "king", "queen", "pawn", "bishop", "knight", "checkmate", "board"},
        [
            "In chess each player starts with sixteen pieces on the board.",
            "The knight jumps over other pieces and the bishop moves diagonally.",
            "Protect your king and push your pawns to control the centre of the board.",
            "The game ends in checkmate when the king cannot escape.",
        ],
    ),
}
#: Seconds between two narrated lines of a part.
LINE_EVERY = 7.0


@dataclass
class Case:
    """A generated video: its parts (subject, seconds), whether parts open with a title slide,
    and how it tells them (``speech``, ``slides`` or ``scenes``: colour only)."""

    name: str
    parts: list[tuple[str, float]]
    title_slides: bool
    told_by: str

    @property
    def duration(self) -> float:
        return sum(seconds for _, seconds in self.parts)

    @property
    def starts(self) -> list[float]:
        out, t = [], 0.0
        for _, seconds in self.parts:
            out.append(t)
            t += seconds
        return out


CASES = [
    Case("narrated, title slides", [("bread", 25.0), ("volcano", 40.0), ("football", 20.0)], True, "speech"),
    Case(
        "narrated only",
        [("bees", 20.0), ("trains", 35.0), ("chess", 25.0), ("volcano", 30.0)],
        False,
        "speech",
    ),
    Case("slides only", [("chess", 15.0), ("bread", 30.0), ("trains", 20.0)], True, "slides"),
    Case("slides, no titles", [("volcano", 25.0), ("bees", 15.0), ("football", 20.0)], False, "slides"),
    Case("scenes only (no speech, no text)", [("a", 20.0), ("b", 15.0), ("c", 25.0)], False, "scenes"),
]
SCENE_COLOURS = [(30, 30, 30), (40, 120, 200), (200, 180, 40), (60, 160, 80)]


def build(case: Case, folder: Path) -> Path:
    """The case's video under ``folder`` (kept if it is there already)."""
    from vidscope.core.synthetic import narration_wav, text_video

    target = folder / (
        case.name.replace(" ", "-").replace(",", "").replace("(", "").replace(")", "") + ".mp4"
    )
    if target.exists():
        return target
    texts: list[tuple[float, float, str]] = []
    lines: list[tuple[float, str]] = []
    cuts: list[tuple[float, tuple[int, int, int]]] = []
    for i, ((subject, seconds), start) in enumerate(zip(case.parts, case.starts, strict=True)):
        if case.told_by == "scenes":
            cuts.append((start, SCENE_COLOURS[i % len(SCENE_COLOURS)]))
            continue
        said = SUBJECTS[subject][1]
        body_start = start
        if case.title_slides:
            texts.append((start, start + 4.0, f"{subject.upper()} LESSON"))
            body_start = start + 4.0
        if case.told_by == "slides":
            # Each slide a short line of the subject's words, shown for ~6 s.
            n = max(1, int((start + seconds - body_start) // 6))
            span = (start + seconds - body_start) / n
            for k in range(n):
                words = [w.strip(".,").upper() for w in said[k % len(said)].split() if len(w) > 4][:3]
                texts.append((body_start + k * span, body_start + (k + 1) * span, " ".join(words)))
        else:
            t, k = start + 0.5, 0
            while t < start + seconds - 3.0:
                lines.append((t, said[k % len(said)]))
                t, k = t + LINE_EVERY, k + 1
    audio = narration_wav(lines, folder / f"{target.stem}.wav", duration=case.duration) if lines else None
    return text_video(target, duration=case.duration, fps=5, texts=texts, audio=audio, cuts=cuts)


def boundary_f1(found: list[float], truth: list[float], tolerance: float) -> float:
    """F1 of the found cuts against the true cuts, each matched at most once within ``tolerance``."""
    if not found and not truth:
        return 1.0
    free = list(truth)
    hits = 0
    for t in sorted(found):
        near = [u for u in free if abs(u - t) <= tolerance]
        if near:
            free.remove(min(near, key=lambda u: abs(u - t)))
            hits += 1
    precision = hits / len(found) if found else 0.0
    recall = hits / len(truth) if truth else 0.0
    return 0.0 if hits == 0 else 2 * precision * recall / (precision + recall)


def coverage(case: Case, chapters: list[dict[str, Any]], key: str) -> float | None:
    """Share of parts whose most-overlapping chapter's ``key`` holds one of the part's keywords."""
    if case.told_by == "scenes":
        return None
    covered = 0
    for (subject, seconds), start in zip(case.parts, case.starts, strict=True):
        best = max(chapters, key=lambda c: min(c["end"], start + seconds) - max(c["start"], start))
        words = {w.strip(".,;:!?").lower() for w in str(best[key]).split()}
        covered += bool(words & SUBJECTS[subject][0])
    return covered / len(case.parts)


@dataclass
class Row:
    case: str
    seconds: float
    parts: int
    chapters: int
    f1_3: float
    f1_10: float
    titles: float | None
    summaries: float | None
    stage_seconds: float
    ingest_seconds: float
    cuts: list[float] = field(default_factory=list)

    @property
    def share(self) -> float:
        return self.stage_seconds / self.ingest_seconds if self.ingest_seconds else 0.0


#: A chapter whose title the model's reply did not give (``why`` of the chapter row).
REFUSED = "model reply refused: "


@dataclass
class PlannerRow:
    """One video's chapters re-written by a planner: coverage, how titles were made, the cost."""

    case: str
    chapters: int
    titles: float | None
    summaries: float | None
    model_titles: int
    fallbacks: int
    reasons: list[str]
    stage_seconds: float
    ingest_seconds: float
    examples: list[str] = field(default_factory=list)

    @property
    def share(self) -> float:
        return self.stage_seconds / self.ingest_seconds if self.ingest_seconds else 0.0


def planner_settings(data: Path, url: str, model: str) -> Any:
    """The embedded defaults plus ``url``'s ``model`` as the planner (its response cache off, so
    the stage's seconds are the model's)."""
    from vidscope.core.settings import Settings

    options = {
        "base_url": url,
        "api_key_env": "VIDSCOPE_BENCHMARK_NO_KEY",
        "timeout_s": 600,
        "max_retries": 1,
        "max_concurrency": 1,
        "cache": False,
    }
    return Settings(data_dir=data, models={"planner": f"openai:{model}", "options": {"openai": options}})


def _spent(store: Any, video_id: str) -> dict[str, float]:
    """Each stage's seconds for ``video_id`` as the ledger holds them (its last run)."""
    ledger = store.rows(store.ledger, video_id=video_id, columns=["stage", "seconds"]).to_pylist()
    return {r["stage"]: r["seconds"] or 0.0 for r in ledger}


def run(root: Path, planner: str | None = None, model: str = "") -> tuple[list[Row], list[PlannerRow]]:
    """Ingest the cases under ``root`` with the embedded defaults and measure their chapters; with
    ``planner`` (a base URL), run the chapters stage again with that model and measure it too."""
    from vidscope.core.settings import Settings
    from vidscope.flows.ingest import run_ingest
    from vidscope.flows.summarize import read_summary
    from vidscope.models.open_store import open_store
    from vidscope.storage.videos import find_video
    from vidscope.tasks.chapters import CHAPTERS
    from vidscope.tasks.stage import run_stage

    folder = root / "videos"
    folder.mkdir(parents=True, exist_ok=True)
    paths = [build(case, folder) for case in CASES]
    settings = Settings(data_dir=root / "store")
    reports = run_ingest([str(p) for p in paths], settings, optimize=False)
    store = open_store(settings)
    rows: list[Row] = []
    ids: list[str] = []
    embedded: list[dict[str, float]] = []
    for case, path, report in zip(CASES, paths, reports, strict=True):
        record = find_video(store, report.video_id or path.name)
        ids.append(record.video_id)
        chapters = read_summary(store, record).model_dump()["chapters"]
        found = [c["start"] for c in chapters[1:]]
        truth = case.starts[1:]
        # The first run's stage times, from the ledger (a re-run reports cached stages as 0 s).
        spent = _spent(store, record.video_id)
        embedded.append(spent)
        rows.append(
            Row(
                case=case.name,
                seconds=case.duration,
                parts=len(case.parts),
                chapters=len(chapters),
                f1_3=boundary_f1(found, truth, 3.0),
                f1_10=boundary_f1(found, truth, 10.0),
                titles=coverage(case, chapters, "title"),
                summaries=coverage(case, chapters, "summary"),
                stage_seconds=spent.get("chapters", 0.0),
                ingest_seconds=sum(spent.values()),
                cuts=[round(t, 1) for t in found],
            )
        )
    if not planner:
        return rows, []
    written = planner_settings(root / "store", planner, model)
    planned: list[PlannerRow] = []
    for case, path, video_id, before in zip(CASES, paths, ids, embedded, strict=True):
        # The ledger's fingerprint names the planner: the stage runs again, timed by the ledger.
        run_stage(CHAPTERS, video_id, path, written)
        store = open_store(written)
        record = find_video(store, video_id)
        chapters = read_summary(store, record).model_dump()["chapters"]
        seconds = _spent(store, video_id).get("chapters", 0.0)
        made = [str(c["title_from"]) for c in chapters]
        planned.append(
            PlannerRow(
                case=case.name,
                chapters=len(chapters),
                titles=coverage(case, chapters, "title"),
                summaries=coverage(case, chapters, "summary"),
                model_titles=sum(m == "model title" for m in made),
                fallbacks=sum(REFUSED in m for m in made),
                reasons=[m.split(REFUSED, 1)[1] for m in made if REFUSED in m],
                stage_seconds=seconds,
                ingest_seconds=sum(v for k, v in before.items() if k != "chapters") + seconds,
                examples=[str(c["title"]) for c in chapters],
            )
        )
    return rows, planned


def _pct(value: float | None, digits: int = 0) -> str:
    return "–" if value is None else f"{100 * value:.{digits}f} %"


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def print_planner(rows: list[PlannerRow], model: str) -> None:
    """The planner table and its totals (Markdown)."""
    print(f"\nWith the planner {model}:\n")
    print(
        "| video | chapters | titles | summaries | model titles | fallbacks (first reason) "
        "| stage s | share |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        reason = f" ({r.reasons[0][:70]})" if r.reasons else ""
        print(
            f"| {r.case} | {r.chapters} | {_pct(r.titles)} | {_pct(r.summaries)} | {r.model_titles} | "
            f"{r.fallbacks}{reason} | {r.stage_seconds:.1f} | {_pct(r.share, 1)} |"
        )
    for r in rows:
        print(f"  {r.case}: " + " / ".join(r.examples))
    stage = sum(r.stage_seconds for r in rows)
    total = sum(r.ingest_seconds for r in rows)
    titled = sum(r.model_titles + r.fallbacks for r in rows)
    print(
        f"\ntitles {_pct(_mean([r.titles for r in rows]))}, summaries "
        f"{_pct(_mean([r.summaries for r in rows]))} of parts (videos with text); "
        f"{sum(r.model_titles for r in rows)} model titles, {sum(r.fallbacks for r in rows)} of {titled} "
        f"fell back to the extractive title; chapters stage {stage:.1f} s of {total:.1f} s ingestion = "
        f"{_pct(stage / total if total else 0, 1)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, help="Keep the videos and the store here.")
    parser.add_argument("--json", action="store_true", help="Print the rows as JSON.")
    parser.add_argument("--planner", metavar="URL", help="An OpenAI-compatible base URL (…/v1).")
    parser.add_argument(
        "--model", default="qwen2.5-coder-1.5b-instruct", help="The model the planner URL serves."
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vidscope-chapters-") as scratch:
        rows, planned = run(args.data or Path(scratch), args.planner, args.model)
    if args.json:
        print(
            json.dumps(
                {
                    "embedded": [{**r.__dict__, "share": r.share} for r in rows],
                    "planner": [{**r.__dict__, "share": r.share} for r in planned],
                },
                indent=2,
            )
        )
        return
    print(
        "| video | s | parts | chapters | cuts found (true) | F1 ≤3 s | F1 ≤10 s | titles | summaries "
        "| stage s | share |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r, case in zip(rows, CASES, strict=True):
        true_cuts = ", ".join(f"{t:g}" for t in case.starts[1:])
        print(
            f"| {r.case} | {r.seconds:g} | {r.parts} | {r.chapters} | {', '.join(f'{t:g}' for t in r.cuts)} "
            f"({true_cuts}) | {r.f1_3:.2f} | {r.f1_10:.2f} | {_pct(r.titles)} | {_pct(r.summaries)} | "
            f"{r.stage_seconds:.2f} | {_pct(r.share, 1)} |"
        )
    n = len(rows)
    told = [r for r in rows if r.titles is not None]
    stage = sum(r.stage_seconds for r in rows)
    total = sum(r.ingest_seconds for r in rows)
    print(
        f"\nmean F1 ≤3 s {sum(r.f1_3 for r in rows) / n:.2f}, ≤10 s {sum(r.f1_10 for r in rows) / n:.2f}; "
        f"titles {_pct(sum(r.titles or 0 for r in told) / len(told))}, summaries "
        f"{_pct(sum(r.summaries or 0 for r in told) / len(told))} of parts (videos with text); "
        f"chapters stage {stage:.2f} s of {total:.1f} s ingestion = {_pct(stage / total if total else 0, 1)}"
    )
    if planned:
        print_planner(planned, args.model)


if __name__ == "__main__":
    main()

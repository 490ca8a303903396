"""Every benchmark family through ``vidscope eval`` with a real model: what the report says.

One small file per family, written in the format of its loader (``evaluation/loaders/``), about
two generated narrated videos with known facts (the real-model tier's harbour tour and river port:
spoken and on screen at known times) and the shared car footage. The benchmarks' own videos are
not available here, so the questions are ours and the files' formats are the benchmarks':

* multiple choice: ``egoschema`` (``questions.json`` + ``subset_answers.json``), ``mlvu`` (a task
  folder of ``N_task.json``);
* grounding: ``charades_sta`` (``VIDEO START END##sentence``), ``activitynet_captions``
  (``{video: {duration, timestamps, sentences}}``);
* retrieval: ``msrvtt`` (``key,vid_key,video_id,sentence``; the MAVIS search pipeline over a
  gallery of the two narrated videos);
* multi-video: ``crossvid`` (a release record of task CC, strict parsing: O.Avg over the tasks
  run), ``mvx_bench`` (a reference and a candidate video, "Video A" options).

The model is Qwen2.5-Coder-1.5B-Instruct (Q4 GGUF) behind llama.cpp's server, started and stopped
here as the real-model tier does (``tests/real_model/llama_server.py``; one server, 2 threads).
Every question-answering family runs the ``dvd`` agent (the papers' own agents, AVI, SAMA and
AgentCVR, make several times more model calls; the point here is the harness, not an agent),
with a budget of 3 steps and ``--option transcripts=true`` (the library was ingested with speech,
which these questions need). Per family it prints items, statuses (scored / unparsed / failed /
skipped), the headline metric strict and over answered questions, the seconds, and whether the
report shows its columns (outcomes, strict vs answered with Wilson intervals, retrieval provenance
for retrieval, the named O.Avg for CrossVid).

Run: ``.venv/bin/python benchmarks/eval_families.py [--families egoschema,mlvu] [--work DIR]``
(writes ``benchmarks/out/eval_families.md``). Budget it: on 2 busy cores a question took 7-15
min, and the first run touching a video re-ingests its planner-backed stages (subjects, graph,
chapters) with the model, about 7 min per video (benchmarks/RESULTS.md); ``--max-minutes`` stops
starting families after that long.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).resolve().parent / "out"
SHARED_VIDEOS = ROOT.parent / "shared" / "videos"
MODEL_ALIAS = "qwen2.5-coder-1.5b-instruct"
THREADS = 2


@dataclass(frozen=True)
class Videos:
    """The generated and shared videos every family's root links to."""

    harbour: Path
    river: Path
    cars: Path


@dataclass(frozen=True)
class Family:
    """One benchmark family: its loader, the headline metric, and how its small file is written
    (``write(folder, videos)`` -> the ``vidscope eval`` arguments after the benchmark name)."""

    kind: str
    benchmark: str
    metric: str
    write: Callable[[Path, Videos], list[str]]


def _link(root: Path, name: str, target: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    link = root / name
    if not link.exists():
        link.symlink_to(target)


def _egoschema(folder: Path, v: Videos) -> list[str]:
    _link(folder, "harbour-q1.mp4", v.harbour)
    options = ["pier three", "pier five", "pier seven", "pier nine", "no pier"]
    record = {"q_uid": "harbour-q1", "google_drive_id": "", "question": "Which pier does the ferry to "
              "North Point leave from?"} | {f"option {i}": o for i, o in enumerate(options)}  # fmt: skip
    (folder / "questions.json").write_text(json.dumps([record]))
    (folder / "subset_answers.json").write_text(json.dumps({"harbour-q1": 2}))
    return ["--annotations", str(folder / "questions.json"), "--option",
            f"answers={folder / 'subset_answers.json'}"]  # fmt: skip


def _mlvu(folder: Path, v: Videos) -> list[str]:
    _link(folder, "river-port.mp4", v.river)
    tasks = folder / "mlvu"
    tasks.mkdir(exist_ok=True)
    record = {"video": "river-port.mp4", "duration": 40.0, "question": "How much does a ferry ticket cost?",
              "candidates": ["two dollars", "five dollars", "twelve dollars", "twenty dollars"],
              "answer": "five dollars", "question_type": "plotQA"}  # fmt: skip
    (tasks / "1_plotQA.json").write_text(json.dumps([record]))
    return ["--annotations", str(tasks)]


def _charades(folder: Path, v: Videos) -> list[str]:
    _link(folder, "HARB1.mp4", v.harbour)
    (folder / "charades_sta_test.txt").write_text("HARB1 20.0 25.0##the lighthouse was painted green.\n")
    return ["--annotations", str(folder / "charades_sta_test.txt")]


def _activitynet(folder: Path, v: Videos) -> list[str]:
    _link(folder, "v_river01.mp4", v.river)
    data = {"v_river01": {"duration": 40.0, "timestamps": [[30.0, 35.0]],
                          "sentences": ["The guide says what a ferry ticket costs."]}}  # fmt: skip
    (folder / "val_1.json").write_text(json.dumps(data))
    return ["--annotations", str(folder / "val_1.json")]


def _msrvtt(folder: Path, v: Videos) -> list[str]:
    # A gallery of the two narrated videos: a third video would first be re-ingested with the
    # model (its subjects, graph and chapters stages), the dearest part of a run on a busy machine.
    for name, target in (("video9001", v.harbour), ("video9002", v.river)):
        _link(folder, f"{name}.mp4", target)
    (folder / "MSRVTT_JSFUSION_test.csv").write_text(
        "key,vid_key,video_id,sentence\n"
        "ret0,video9001,video9001,a harbour tour where the ferry to north point leaves from pier seven\n"
        "ret1,video9002,video9002,a river port where a ferry ticket costs five dollars\n"
    )
    return ["--annotations", str(folder / "MSRVTT_JSFUSION_test.csv"), "--agent", "mavis"]


def _crossvid(folder: Path, v: Videos) -> list[str]:
    _link(folder, "harbour.mp4", v.harbour)
    _link(folder, "river.mp4", v.river)
    records = [
        {"id": "cc1", "task": "CC", "videos": ["harbour.mp4", "river.mp4"],
         "question": "In which video is the ferry ticket cheaper?",
         "options": ["A. the first video", "B. the second video"], "answer": "B"},
    ]  # fmt: skip
    (folder / "crossvid.json").write_text(json.dumps(records))
    return ["--annotations", str(folder / "crossvid.json")]


def _mvx(folder: Path, v: Videos) -> list[str]:
    for name, target in (("ref.mp4", v.harbour), ("cand1.mp4", v.river)):
        _link(folder, name, target)
    record = {"id": "mvx1", "task": "retrieval", "reference_video": "ref.mp4",
              "candidate_videos": ["cand1.mp4"],
              "question": "Which candidate video, like the reference, is a tour with a ferry?",
              "options": ["A. Video A", "B. none of the candidates"], "answer": "A"}  # fmt: skip
    (folder / "mvx.json").write_text(json.dumps([record]))
    return ["--annotations", str(folder / "mvx.json")]


FAMILIES: dict[str, Family] = {
    f.benchmark: f
    for f in (
        Family("multiple choice", "egoschema", "accuracy", _egoschema),
        Family("multiple choice", "mlvu", "accuracy", _mlvu),
        Family("grounding", "charades_sta", "mIoU", _charades),
        Family("grounding", "activitynet_captions", "mIoU", _activitynet),
        Family("retrieval", "msrvtt", "R@1", _msrvtt),
        Family("multi-video", "crossvid", "O.Avg", _crossvid),
        Family("multi-video", "mvx_bench", "accuracy", _mvx),
    )
}


# ------------------------------------------------------------------------------ the model server


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(log: Path) -> tuple[subprocess.Popen[str], str]:
    """llama.cpp's server with the tier's model on loopback (its own process group); its URL."""
    model_dir = Path(os.environ.get("VIDSCOPE_REAL_MODEL_DIR", ROOT / ".real-model"))
    prepared = subprocess.run(
        [sys.executable, "-m", "tests.real_model.llama_server", "prepare", str(model_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=900, check=True,
    )  # fmt: skip
    model = prepared.stdout.strip().splitlines()[-1]
    with log.open("w") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.real_model.llama_server", "serve", model, "--port",
             str(_free_port()), "--threads", str(THREADS), "--ctx", "8192", "--alias", MODEL_ALIAS],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=sink, text=True, start_new_session=True,
        )  # fmt: skip
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("listening "):
        stop_server(process)
        raise SystemExit(f"the llama.cpp server did not start: {log.read_text()[-2000:]}")
    return process, line.split()[1] + "/v1"


def cpu_seconds(pid: int) -> float | None:
    """CPU seconds (user + system) the process has used so far (Linux /proc); None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop_server(process: subprocess.Popen[str]) -> None:
    """SIGTERM the server's process group, SIGKILL it if it lingers."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, signum)
            process.wait(timeout=10)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


# ------------------------------------------------------------------------------ the library


def _vidscope(
    config: Path, data: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vidscope.cli", "--config", str(config), "--data-dir", str(data), *args],
        capture_output=True, text=True, timeout=3600, cwd=data.parent,
        env=os.environ | {"VIDSCOPE_CONFIG": str(config)} | (env or {}),
    )  # fmt: skip


def make_videos(folder: Path) -> Videos:
    """The two narrated videos (40 s, facts spoken and shown) over the shared car footage."""
    sys.path.insert(0, str(ROOT))
    from tests.real_model.facts import HARBOUR_FACTS, RIVER_FACTS
    from vidscope.core.synthetic import narration_wav, text_video

    cars = SHARED_VIDEOS / "car-detection.mp4"
    made = []
    for name, facts in (("harbour-tour.mp4", HARBOUR_FACTS), ("river-port.mp4", RIVER_FACTS)):
        path = folder / name
        if not path.exists():
            wav = narration_wav(
                [(t0, said) for t0, _, said, _ in facts], path.with_suffix(".wav"), duration=40
            )
            text_video(path, duration=40.0, fps=10, texts=[(a, b, shown) for a, b, _, shown in facts],
                       audio=wav, footage=cars)  # fmt: skip
        made.append(path)
    return Videos(harbour=made[0], river=made[1], cars=cars)


def model_config(data: Path, base_url: str) -> str:
    """The tier's configuration: the embedded profile, the real model as the planner only."""
    return (
        f'data_dir = "{data}"\nprofile = "embedded"\n\n[models]\n'
        f'planner = "openai:{MODEL_ALIAS}"\nimage_text = ""\n\n'
        f'[models.options.openai]\nbase_url = "{base_url}"\napi_key_env = "VIDSCOPE_REAL_MODEL_NO_KEY"\n'
        'timeout_s = 600\nmax_retries = 1\nmax_concurrency = 1\ntool_calling = "native"\n\n'
        "[agent]\nmax_steps = 3\ntop_k = 8\nmax_tokens = 384\ntemperature = 0.0\n"
        # Chapter titles by the planner cost most of an ingestion with this model (RESULTS.md,
        # issue 39); the point here is the harness, so the chapters keep their extractive titles.
        '\n[ingest]\nchapter_titles = "extractive"\n'
    )


# ------------------------------------------------------------------------------ one family


#: What each report must show, by family kind (the columns issue 37 asked for).
COLUMNS = {
    "all": ("Outcomes: scored ", "| metric | strict % | 95 % interval | over answered % |", "Wilson"),
    "retrieval": ("## How the queries were ranked",),
    "crossvid": ("| O.Avg (",),
}


def headline(summary: dict[str, Any], metric: str) -> tuple[str | None, float | None, float | None]:
    """The family's headline metric as the summary names it, strict and over answered questions."""
    name = next((k for k in summary.get("scores", {}) if k == metric or k.startswith(metric + " (")), None)
    if name is None:
        return None, None, None
    return name, summary["scores"][name], summary.get("answered_scores", {}).get(name)


def run_family(family: Family, work: Path, videos: Videos, config: Path, data: Path) -> dict[str, Any]:
    """``vidscope eval`` of one family's file; what its summary and report say."""
    folder = work / family.benchmark
    folder.mkdir(parents=True, exist_ok=True)
    args = family.write(folder, videos)
    if "--agent" not in args:
        args += ["--agent", "dvd"]
    started = time.monotonic()
    done = _vidscope(
        config, data, "eval", family.benchmark, "--root", str(folder), *args,
        "--option", "transcripts=true", "--run", f"families-{family.benchmark}", "--retries", "0",
        "--concurrency", "1", "--json",
    )  # fmt: skip
    seconds = time.monotonic() - started
    row: dict[str, Any] = {"family": family.kind, "benchmark": family.benchmark, "exit": done.returncode,
                           "seconds": round(seconds)}  # fmt: skip
    run_dir = data / "eval" / f"families-{family.benchmark}"
    if not (run_dir / "summary.json").is_file():
        row["error"] = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no output"]
        return row
    summary = json.loads((run_dir / "summary.json").read_text())
    report = (run_dir / "report.md").read_text()
    name, strict, answered = headline(summary, family.metric)
    wanted = COLUMNS["all"] + COLUMNS.get(family.kind, ()) + COLUMNS.get(family.benchmark, ())
    row |= {
        "items": summary["questions"],
        "outcomes": summary.get("outcomes", {}),
        "metric": name,
        "strict": strict,
        "answered": answered,
        "interval": summary.get("accuracy_interval"),
        "columns_missing": [c for c in wanted if c not in report],
        "answers": [
            json.loads(line).get("answer", "")[:80]
            for line in (run_dir / "predictions.jsonl").read_text().splitlines()
        ],  # fmt: skip
    }
    return row


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as the Markdown table RESULTS.md quotes."""
    lines = [
        "| family | benchmark | exit | items | scored / unparsed / failed / skipped | metric | strict | "
        "answered | report columns | seconds |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        o = r.get("outcomes", {})
        statuses = " / ".join(str(o.get(k, 0)) for k in ("scored", "unparsed", "failed", "skipped"))
        missing = r.get("columns_missing")
        columns = "—" if missing is None else ("missing: " + ", ".join(missing) if missing else "all")
        lines.append(
            f"| {r['family']} | {r['benchmark']} | {r['exit']} | {r.get('items', '—')} | {statuses} | "
            f"{r.get('metric') or r.get('error', '—')} | {_pct(r.get('strict'))} | "
            f"{_pct(r.get('answered'))} | "
            f"{columns} | {r['seconds']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default=",".join(FAMILIES), help="Comma-separated benchmarks.")
    parser.add_argument("--work", type=Path, help="Working folder (default: a new temporary one).")
    parser.add_argument(
        "--max-minutes", type=float, help="Start no further family after this many minutes of serving."
    )
    options = parser.parse_args()
    chosen = [FAMILIES[name] for name in options.families.split(",") if name]
    work = (options.work or Path(tempfile.mkdtemp(prefix="vidscope-eval-families-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PREFECT_HOME", str(work / "prefect"))
    os.environ.pop("PREFECT_API_URL", None)
    quiet = {"DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    for key, value in (quiet | {"PREFECT_LOGGING_LEVEL": "WARNING"}).items():
        os.environ.setdefault(key, value)
    data, config = work / "data", work / "vidscope.toml"
    videos = make_videos(work / "videos")
    started = time.monotonic()
    if not (data / "eval").exists():  # ingestion needs no model: before the server starts
        config.write_text(f'data_dir = "{data}"\nprofile = "embedded"\n')
        ingested = _vidscope(config, data, "ingest", str(videos.harbour), str(videos.river), str(videos.cars))
        if ingested.returncode not in (0, 3):
            raise SystemExit(f"ingestion failed: {(ingested.stdout + ingested.stderr)[-2000:]}")
    print(f"[eval-families] library ready in {time.monotonic() - started:.0f} s ({work})", flush=True)
    process, base_url = start_server(work / "llama.log")
    rows = []
    try:
        config.write_text(model_config(data, base_url))
        serving = time.monotonic()
        for family in chosen:
            if options.max_minutes is not None and time.monotonic() - serving > 60 * options.max_minutes:
                print(
                    f"[eval-families] --max-minutes reached: {family.benchmark} and after not run", flush=True
                )
                break
            row = run_family(family, work, videos, config, data)
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        model_cpu = cpu_seconds(process.pid)
        stop_server(process)
    text = table(rows)
    if model_cpu is not None:
        text += f"\n\nModel server CPU time: {model_cpu / 60:.1f} min."
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    OUT.mkdir(exist_ok=True)
    (OUT / "eval_families.md").write_text(
        f"### vidscope eval per family, {stamp}, commit {commit.stdout.strip()}\n\n"
        f"Model: {MODEL_ALIAS} Q4 (llama.cpp, {THREADS} threads), agent dvd (retrieval: mavis), 3 steps.\n\n"
        f"{text}\n\n```json\n{json.dumps(rows, indent=1)}\n```\n"
    )
    print(text)


if __name__ == "__main__":
    main()

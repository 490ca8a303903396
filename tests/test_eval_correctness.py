"""Evaluation numbers that can be trusted (issue 24, correctness): a run's identity, its protocol,
its record, retrieval's agent and thresholds, and a run that scored nothing.

Each test drives ``prepare_run`` / ``vidscope eval`` as a researcher would; none ingests a video
(the slow ``test_evaluate.py`` covers re-ingestion with the run's own models).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from vidscope.cli import app
from vidscope.cli.common import overrides
from vidscope.core.settings import Settings
from vidscope.evaluation.loaders import BENCHMARKS
from vidscope.evaluation.runs import RunError, read_spec
from vidscope.flows.evaluate import prepare_run, retrieval_options

runner = CliRunner()


def _mlvu(folder: Path) -> Path:
    record = {
        "video": "harbor.mp4",
        "duration": 5.0,
        "question": "What is written?",
        "question_type": "ocr",
        "candidates": ["BLUE BOAT", "RED CAR"],
        "answer": "BLUE BOAT",
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "1_x.json").write_text(json.dumps([record]))
    return folder


def _settings(data: Path, **models: Any) -> Settings:
    options = models.pop("options", {"openai": {"base_url": "http://127.0.0.1:9/v1"}})
    return Settings(data_dir=data, models={"chat": "openai:small", **models, "options": options})


@pytest.fixture()
def bench(tmp_path: Path) -> dict[str, Any]:
    (tmp_path / "right").mkdir()
    (tmp_path / "wrong").mkdir()
    return {"annotations": _mlvu(tmp_path / "mlvu"), "data": tmp_path / "data", "folder": tmp_path}


def _prepare(settings: Settings, bench: dict[str, Any], root: str = "right", **kwargs: Any) -> Path:
    kwargs.setdefault("name", "run")
    return prepare_run(settings, "mlvu", bench["annotations"], bench["folder"] / root, "dvd", **kwargs)


def _refusal(settings: Settings, bench: dict[str, Any], **kwargs: Any) -> str:
    with pytest.raises(RunError) as caught:
        _prepare(settings, bench, **kwargs)
    message = str(caught.value)
    assert len(message.splitlines()) == 1 and "choose another --run name" in message
    return message


def test_a_named_run_resumed_with_another_root_endpoint_sampling_or_budget_is_refused(bench) -> None:
    base = _settings(bench["data"])
    run_dir = _prepare(base, bench)
    assert _prepare(base, bench) == run_dir  # the same evaluation resumes

    # The wrong root no longer sticks: the run names it, and says so.
    message = _refusal(base, bench, root="wrong")
    assert "root (" in message and str(bench["folder"] / "right") in message
    assert read_spec(run_dir).root == str(bench["folder"] / "right")

    # A backend option that changes answers: the endpoint, the planner's sampling.
    moved = _settings(bench["data"], options={"openai": {"base_url": "http://127.0.0.1:10/v1"}})
    assert "models.chat.options.base_url" in _refusal(moved, bench)
    sampled = _settings(
        bench["data"],
        options={
            "openai": {"base_url": "http://127.0.0.1:9/v1", "planner": {"sampling": {"temperature": 0.6}}}
        },
    )
    assert "options.planner.sampling.temperature" in _refusal(sampled, bench)
    # The frame budget and the frame sampling of ingestion.
    budget = base.model_copy(update={"agent": base.agent.model_copy(update={"max_frames": 8})})
    assert "settings.agent.max_frames (50 -> 8)" in _refusal(budget, bench)
    fps = base.model_copy(update={"ingest": base.ingest.model_copy(update={"frame_fps": 1.0})})
    assert "settings.ingest.frame_fps" in _refusal(fps, bench)

    # Prices, timeouts and concurrency change cost and speed, not answers: the run resumes.
    priced = _settings(
        bench["data"],
        options={
            "openai": {
                "base_url": "http://127.0.0.1:9/v1",
                "timeout_s": 5,
                "max_concurrency": 1,
                "prices": {"small": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}},
            }
        },
    )
    assert _prepare(priced, bench) == run_dir


def test_without_a_run_name_any_difference_is_a_new_run(bench) -> None:
    base = _settings(bench["data"])
    first = _prepare(base, bench, name=None)
    assert _prepare(base, bench, name=None) == first
    assert _prepare(base, bench, root="wrong", name=None) != first
    moved = _settings(bench["data"], options={"openai": {"base_url": "http://127.0.0.1:10/v1"}})
    assert _prepare(moved, bench, name=None) != first
    # The annotation file's content is part of it too (an edited file is another evaluation).
    record = json.loads((bench["annotations"] / "1_x.json").read_text())
    record[0]["answer"] = "RED CAR"
    (bench["annotations"] / "1_x.json").write_text(json.dumps(record))
    assert _prepare(base, bench, name=None) != first


def test_a_run_made_before_identities_were_recorded_is_refused(bench) -> None:
    base = _settings(bench["data"])
    run_dir = _prepare(base, bench)
    spec = json.loads((run_dir / "run.json").read_text())
    del spec["identity"]
    (run_dir / "run.json").write_text(json.dumps(spec))
    assert "older vidscope" in _refusal(base, bench)


def test_run_json_records_version_commit_machine_models_settings_and_protocol(bench) -> None:
    run_dir = _prepare(_settings(bench["data"], planner="openai:thinker"), bench)
    spec = json.loads((run_dir / "run.json").read_text())
    provenance = spec["provenance"]
    assert provenance["vidscope_version"] == "0.1.0"
    assert provenance["commit"] is None or len(provenance["commit"].split("+")[0]) == 40
    assert provenance["machine"]["cpu_count"] == os.cpu_count()
    assert provenance["machine"]["python"].count(".") == 2 and provenance["machine"]["platform"]
    assert spec["models"]["planner"] == "openai:thinker" and spec["models"]["vlm"] == "openai:small"
    identity = spec["identity"]
    assert identity["models"]["chat"]["options"] == {"base_url": "http://127.0.0.1:9/v1"}
    assert identity["settings"]["agent"]["max_frames"] == 50
    assert identity["root"] == str(bench["folder"] / "right") and len(identity["annotations_sha256"]) == 64
    protocol = spec["protocol"]
    assert protocol["transcripts"] is False and protocol["subtitles"] is False
    assert protocol["answer"] == "option letter" and protocol["frame_budget"] == 50
    assert protocol["frame_fps"] == 2.0 and protocol["kinds"] == ["multiple_choice"]


def test_the_protocol_without_transcripts_ingests_and_answers_with_no_speech_recogniser(bench) -> None:
    """LVBench's 74.2 (DVD) is without transcripts: the run's models have no speech recogniser, so
    ingestion redoes the speech stage (storing nothing) and every stage reading speech."""
    from vidscope.flows.evaluate import run_settings

    settings = _settings(bench["data"], speech_recognizer="faster-whisper:embedded-base")
    without = read_spec(_prepare(settings, bench))
    assert without.protocol["transcripts"] is False and without.protocol["speech_recognizer"] is None
    assert without.identity["models"]["speech_recognizer"]["spec"] is None
    assert run_settings(settings, without).models.speech_recognizer is None

    with_them = read_spec(_prepare(settings, bench, name="with", options={"transcripts": "true"}))
    assert with_them.protocol["transcripts"] is True
    assert with_them.protocol["speech_recognizer"] == "faster-whisper:embedded-base"
    assert run_settings(settings, with_them).models.speech_recognizer == "faster-whisper:embedded-base"
    # Switching the protocol on a named run is refused like any other difference.
    assert "protocol.transcripts (False -> True)" in _refusal(settings, bench, options={"transcripts": True})
    with pytest.raises(ValueError, match="transcripts= takes true or false"):
        _prepare(settings, bench, name="bad", options={"transcripts": "maybe"})


def test_every_loader_declares_its_protocol_and_the_docs_put_each_number_beside_it() -> None:
    docs = (Path(__file__).resolve().parents[1] / "docs" / "evaluation.md").read_text()
    assert BENCHMARKS["lvbench"].protocol.transcripts is False
    assert "without subtitles" in BENCHMARKS["videomme"].protocol.published
    assert BENCHMARKS["crossvid"].protocol.transcripts is True  # AgentCVR's audio sub-agent
    for name, spec in BENCHMARKS.items():
        assert spec.protocol.answer, name
        rows = [
            line for line in docs.splitlines() if line.startswith(f"| `{name}` |") and "transcripts" in line
        ]
        row = rows[0] if len(rows) == 1 else ""
        assert row, f"docs/evaluation.md has no protocol row for {name}"
        transcripts = "with transcripts" if spec.protocol.transcripts else "without transcripts"
        assert transcripts in row, (name, row)
        if spec.protocol.published:
            assert spec.protocol.published in row, (name, row)


def test_retrieval_runs_the_search_pipeline_and_refuses_an_agent(tmp_path: Path) -> None:
    annotations = tmp_path / "MSRVTT_JSFUSION_test.csv"
    annotations.write_text("key,vid_key,video_id,sentence\nret0,harbor,harbor,a blue boat\n")
    settings = Settings(data_dir=tmp_path / "data", models={"planner": "openai:small"})
    with pytest.raises(ValueError, match="retrieval benchmark.*not by the 'dvd' agent"):
        prepare_run(settings, "msrvtt", annotations, tmp_path, "dvd")
    run_dir = prepare_run(settings, "msrvtt", annotations, tmp_path, None)
    assert read_spec(run_dir).agent == "mavis" and run_dir.name.startswith("msrvtt-mavis-")
    assert prepare_run(settings, "msrvtt", annotations, tmp_path, "mavis") == run_dir
    folder = _mlvu(tmp_path / "mlvu")
    with pytest.raises(ValueError, match="ranks videos"):
        prepare_run(settings, "mlvu", folder, tmp_path, "mavis")


def test_retrieval_uses_the_thresholds_calibrated_for_the_embedder_in_use(tmp_path: Path) -> None:
    spec = "sentence-transformers:BAAI/bge-m3"
    calibrated = {"tau_soft": 0.55, "tau_hard": 0.35, "concept_min_similarity": 0.7}
    settings = Settings(
        data_dir=tmp_path, models={"text_embedder": spec}, search={"thresholds": {spec: calibrated}}
    )
    options = retrieval_options(settings, gallery=1000)
    assert (options.tau_soft, options.tau_hard, options.concept_min_similarity) == (0.55, 0.35, 0.7)
    assert options.k == 1000  # the whole gallery is ranked
    # An explicit [search] value wins over the calibration, as for `vidscope search`.
    explicit = settings.model_copy(update={"search": settings.search.model_copy(update={"tau_soft": 0.4})})
    explicit.search.model_fields_set.add("tau_soft")
    assert retrieval_options(explicit, gallery=3).tau_soft == 0.4


@pytest.mark.slow  # starts Prefect's temporary server for the flow run (~30 s on 2 cores)
def test_a_run_that_scored_nothing_exits_non_zero_and_says_why(bench) -> None:
    overrides.clear()
    try:
        result = runner.invoke(
            app,
            [
                "--data-dir", str(bench["data"]), "eval", "mlvu", "--agent", "extractive",
                "--root", str(bench["folder"] / "wrong"), "--annotations", str(bench["annotations"]),
            ],
        )  # fmt: skip
    finally:
        overrides.clear()
    assert result.exit_code == 1, result.output
    assert "nothing was scored: none of the 1 videos the questions need was found under the root" in (
        " ".join(result.output.split())
    )
    assert "Traceback" not in result.output
    (run_dir,) = (bench["data"] / "eval").iterdir()
    (session,) = read_spec(run_dir).sessions
    assert session["started_at"] <= session["finished_at"] and session["vidscope_version"] == "0.1.0"

    # The flow itself refuses to continue the run with other settings than the run's own.
    from vidscope.flows.evaluate import run_evaluate

    other = Settings(data_dir=bench["data"], agent={"max_frames": 8})
    with pytest.raises(RunError, match=r"settings.agent.max_frames \(50 -> 8\)"):
        run_evaluate(other, run_dir)


def test_the_speech_stage_without_a_recogniser_leaves_no_stale_transcript(tmp_path: Path) -> None:
    """A run without transcripts redoes the speech stage with no recogniser: a transcript stored by
    an earlier config must go, or captions, embeddings and tools would still read it."""
    from vidscope.models.open_store import open_store
    from vidscope.storage.videos import VideoRecord
    from vidscope.tasks.speech import SPEECH
    from vidscope.tasks.stage import StageContext, StageNotApplicable

    settings = Settings(data_dir=tmp_path / "data", models={"speech_recognizer": ""})
    store = open_store(settings)
    video = VideoRecord(
        video_id="v" * 64, path=str(tmp_path / "talk.mp4"), file_name="talk.mp4", size_bytes=1,
        duration=4.0, fps=25.0, width=64, height=64, rotation=0, has_audio=True,
    )  # fmt: skip
    said = {"video_id": video.video_id, "segment_index": 0, "start": 0.0, "end": 2.0, "language": "en",
            "text": "the ticket costs twelve dollars", "avg_logprob": -0.2, "words": []}  # fmt: skip
    store.replace_video_rows(store.transcripts, video.video_id, [said])
    other = {**said, "video_id": "w" * 64}
    store.replace_video_rows(store.transcripts, other["video_id"], [other])
    with pytest.raises(StageNotApplicable, match="no speech recogniser"):
        SPEECH.run(StageContext(settings=settings, store=store, video=video, path=Path(video.path)))
    assert store.rows(store.transcripts, video_id=video.video_id).num_rows == 0
    assert store.rows(store.transcripts, video_id=other["video_id"]).num_rows == 1  # others kept


def test_retrieval_plans_with_the_planner_role(tmp_path: Path, llm_server) -> None:  # type: ignore[no-untyped-def]
    """A planner-only config (as `ask` accepts) plans retrieval queries: the MAVIS plan is asked of
    ``models.planner``, not of an unset ``chat``."""
    from llm_server import text

    from vidscope.evaluation.items import BenchmarkItem
    from vidscope.flows.evaluate import _retrieve
    from vidscope.models.open_store import open_store

    settings = Settings(
        data_dir=tmp_path / "data",
        models={
            "planner": "openai:small",
            "options": {"openai": {"base_url": llm_server.base_url, "max_retries": 0}},
        },
    )
    llm_server.default = text('{"intents": []}')
    item = BenchmarkItem(
        benchmark="msrvtt", question_id="ret0", kind="retrieval", video_ids=("harbor",),
        question="a sign with a blue boat on it",
    )  # fmt: skip
    # A library of one parsed window (what the parse stage writes), about another video.
    store = open_store(settings)
    window = {"video_id": "v" * 64, "window_index": 0, "start": 0.0, "end": 5.0, "caption": "a red car",
              "scene": [], "objects": ["car"], "actions": [], "parser": "signals",
              "caption_embedding": [0.0] * 383 + [1.0]}  # fmt: skip
    store.upsert(store.video_parses, [window])
    ranking, record = _retrieve(store, settings, item, {"v" * 64: "other"})
    assert ranking in ([], ["other"]) and record["gallery"] == 1
    request = llm_server.chat_requests[0]
    assert request["model"] == "small" and "a sign with a blue boat on it" in json.dumps(request["messages"])

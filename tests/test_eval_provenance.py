"""Every score says how it was made (issue 37): the code in a run's identity, repeats that are not
replays, and the retrieval provenance of a run.

The identity tests drive ``prepare_run`` as ``vidscope eval`` does; none ingests a video.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_search import (
    COOKING,
    DIM,
    PUPPY,
    SUNBATHERS,
    TRUE_MATCH,
    WORD_THRESHOLDS,
    WordEmbedder,
    fill_library,
)

from vidscope.agents.answers import TraceStep
from vidscope.agents.mavis.search import search_library, thresholds_for
from vidscope.core.settings import SearchSettings, Settings
from vidscope.evaluation.identity import code_identity
from vidscope.evaluation.metrics import phase_passes, phase_seconds, reasoning_iterations
from vidscope.evaluation.report import RunSummary, report_markdown
from vidscope.evaluation.report import retrieval_provenance as summarised_retrieval
from vidscope.evaluation.runs import Prediction, RunError, read_spec
from vidscope.flows.evaluate import prepare_run, repeats_warning, retrieval_provenance
from vidscope.storage.store import Store


def _settings(data: Path, **openai: Any) -> Settings:
    options = {"openai": {"base_url": "http://127.0.0.1:9/v1", **openai}}
    return Settings(data_dir=data, models={"chat": "openai:small", "options": options})


@pytest.fixture()
def bench(tmp_path: Path) -> dict[str, Any]:
    return _bench(tmp_path)


def _bench(folder: Path) -> dict[str, Any]:
    record = {
        "video": "harbor.mp4",
        "duration": 5.0,
        "question": "What is written?",
        "question_type": "ocr",
        "candidates": ["BLUE BOAT", "RED CAR"],
        "answer": "BLUE BOAT",
    }
    (folder / "mlvu").mkdir(parents=True)
    (folder / "mlvu" / "1_x.json").write_text(json.dumps([record]))
    (folder / "videos").mkdir()
    return {"annotations": folder / "mlvu", "root": folder / "videos", "data": folder / "data"}


def _prepare(settings: Settings, bench: dict[str, Any], **kwargs: Any) -> Path:
    kwargs.setdefault("name", "run")
    return prepare_run(settings, "mlvu", bench["annotations"], bench["root"], "dvd", **kwargs)


def test_the_run_identity_holds_the_agents_code_and_a_resume_with_other_prompts_is_refused(bench) -> None:
    settings = _settings(bench["data"])
    run_dir = _prepare(settings, bench)
    code = read_spec(run_dir).identity["code"]
    assert code == code_identity()
    assert code["vidscope_version"] == "0.1.0" and len(code["agents"]) == 16
    assert _prepare(settings, bench) == run_dir  # the same code resumes

    # The run as another prompt version made it: a resume refuses to mix the two, in one line.
    spec = json.loads((run_dir / "run.json").read_text())
    spec["identity"]["code"]["agents"] = "0123456789abcdef"
    (run_dir / "run.json").write_text(json.dumps(spec))
    with pytest.raises(RunError) as refused:
        _prepare(settings, bench)
    message = str(refused.value)
    assert len(message.splitlines()) == 1
    assert f"code.agents (0123456789abcdef -> {code['agents']})" in message
    assert "choose another --run name" in message


def test_repeats_are_runs_of_their_own(bench) -> None:
    settings = _settings(bench["data"])
    first = _prepare(settings, bench)
    second = _prepare(settings, bench, repeat=2)
    assert (first.name, second.name) == ("run", "run-r2")
    assert "repeat" not in read_spec(first).identity and read_spec(second).identity["repeat"] == 2
    unnamed = [_prepare(settings, bench, name=None, repeat=k) for k in (1, 2, 3)]
    assert len(set(unnamed)) == 3


def test_repeats_with_the_response_cache_on_are_replays_and_say_so(tmp_path: Path) -> None:
    cached = _settings(tmp_path)  # the OpenAI-compatible backend caches replies by default
    warning = repeats_warning(cached, 3)
    assert warning is not None and warning.startswith("--repeats 3 with the response cache on (openai:small)")
    assert "DVD B.1" in warning and "cache = false" in warning
    assert repeats_warning(cached, 1) is None
    assert repeats_warning(_settings(tmp_path, cache=False), 3) is None
    # A role's own table can turn the cache back on.
    assert repeats_warning(_settings(tmp_path, cache=False, planner={"cache": True}), 3) is not None


# ============================================================================ retrieval provenance


def test_an_uncalibrated_embedder_gets_the_defaults_with_a_warning() -> None:
    search = SearchSettings()
    options, calibrated = thresholds_for(search, "minilm:embedded")
    assert (calibrated.source, calibrated.tau_soft, calibrated.tau_hard, calibrated.warning) == (
        "calibrated",
        0.3,
        0.15,
        None,
    )
    # The paper's embedder has no calibration here: MiniLM's 0.3 / 0.15 are used, and said to be.
    _, large = thresholds_for(search, "openai:text-embedding-3-large")
    assert (large.source, large.tau_soft, large.tau_hard) == ("defaulted", 0.3, 0.15)
    assert large.warning is not None
    assert large.warning.startswith(
        "the text embedder openai:text-embedding-3-large has no calibrated thresholds"
    )
    assert "MAVIS: 0.5 / 0.3" in large.warning
    # Thresholds set by hand are explicit, whatever the embedder.
    _, given = thresholds_for(SearchSettings(tau_soft=0.5, tau_hard=0.3), "openai:text-embedding-3-large")
    assert (given.source, given.tau_soft, given.warning) == ("explicit", 0.5, None)


def test_a_gallery_inside_a_larger_store_is_searched_alone_with_v_contro_and_the_rerank_used(
    tmp_path: Path,
) -> None:
    embedder = WordEmbedder()
    store = Store(tmp_path / "data", text_dim=DIM, image_dim=DIM)
    fill_library(store, embedder)  # five videos; the benchmark's gallery is three of them
    gallery = [TRUE_MATCH, SUNBATHERS, COOKING]
    options, thresholds = thresholds_for(SearchSettings(**WORD_THRESHOLDS), "words")
    query = "a dog running on the beach"
    everything = search_library(store, query, embedder=embedder, options=options)
    assert {h.video_id for h in everything.hits} == {TRUE_MATCH, PUPPY} and everything.v_contro == 2
    result = search_library(
        store,
        query,
        embedder=embedder,
        options=options,
        image_text=embedder,  # configured, but no frame of these videos was embedded with it
        thresholds=thresholds,
        gallery=gallery,
    )
    # Only the gallery: the puppy (a true match outside it) and the dog on the sofa are never seen.
    assert [h.video_id for h in result.hits] == [TRUE_MATCH] and result.gallery == 3
    assert result.pool_size == 2 and result.v_contro == 1  # the sunbathers are vetoed
    assert {d.video_id for d in result.dropped} == {SUNBATHERS}
    # The fine stage asked for was the image-text model; the captions were compared instead.
    assert result.rerank == "caption" and result.rerank_wanted == "image-text:words"
    assert result.thresholds is not None and result.thresholds.source == "explicit"

    # What a prediction records, and what the report makes of a run's queries.
    record = retrieval_provenance(result)
    assert record == {
        "rerank": "caption",
        "rerank_wanted": "image-text:words",
        "tau_soft": 0.5,
        "tau_hard": 0.3,
        "thresholds": "explicit",
        "warning": None,
        "pool": 2,
        "v_contro": 1,
        "gallery": 3,
    }
    second = {**record, "v_contro": 4, "pool": 4, "rerank_wanted": None, "rerank": "image-text:words"}
    predictions = [
        Prediction(question_id=q, kind="retrieval", video_ids=[], answer="", retrieval=r)
        for q, r in (("q0", record), ("q1", second))
    ]
    run = summarised_retrieval(predictions)
    assert run["v_contro"] == {"q0": 1, "q1": 4}
    assert (run["v_contro_mean"], run["v_contro_median"], run["pool_mean"]) == (2.5, 2.5, 3.0)
    assert run["rerank"] == {"caption": 1, "image-text:words": 1}
    assert run["rerank_wanted"] == {"image-text:words": 1}
    assert run["thresholds"] == {"tau_soft 0.5 / tau_hard 0.3 (explicit)": 2}
    summary = RunSummary(
        run="r", benchmark="msrvtt", agent="mavis", questions=2, ready=2, answered=2, retrieval=run
    )
    report = report_markdown(summary)
    assert "## How the queries were ranked" in report
    assert "- **Configured but not used** (fell back): image-text:words 1." in report
    assert "mean 2.5, median 2.5; pool mean 3" in report
    assert "| q1 | 4 |" in report


# ============================================================================ iterations


def test_iterations_count_replies_that_act_not_nudges_refusals_or_further_calls() -> None:
    def step(kind: str, phase: str | None = None, **fields: Any) -> dict[str, Any]:
        return TraceStep(index=0, kind=kind, phase=phase, **fields).model_dump()

    # An AVI run: Retrieve (a reply with two calls, the second refused: one runs per turn), a
    # reply ending the phase, Perceive, a Review that goes back, Perceive again, a Review that
    # answers; the loop's own reminders in between.
    trace = [
        step("tool", "retrieve", tool="clip_retrieve", latency_s=1.0),
        step("refused", "retrieve", tool="graph_retrieve", follows=True),
        step("phase-end", "retrieve", latency_s=0.5),
        step("nudge", "perceive", observation="perceive ended without a targeted perception call"),
        step("tool", "perceive", tool="text_extract", latency_s=2.0),
        step("review", "review", observation="back to perceive: unclear", latency_s=0.25),
        step("tool", "perceive", tool="object_detect", latency_s=2.0),
        step("review", "review", ok=False, observation="unusable review"),
        step("answer", "review", latency_s=0.25),
    ]
    # Tool-calling rounds and answering replies: clip_retrieve, text_extract, the review that
    # went back, object_detect, the answer (9 steps).
    assert reasoning_iterations(trace) == 5
    assert phase_passes(trace) == {"retrieve": 1, "perceive": 2, "review": 2}
    assert phase_seconds(trace) == {"retrieve": 1.5, "perceive": 4.0, "review": 0.5}
    # A DVD reply with three calls is one iteration; a thought the loop nudged is none.
    dvd = [
        step("nudge"),
        step("tool"),
        step("tool", follows=True),
        step("tool", follows=True),
        step("finish"),
    ]
    assert reasoning_iterations(dvd) == 2


def test_run_json_of_a_retrieval_run_says_its_thresholds_were_defaulted(tmp_path: Path) -> None:
    annotations = tmp_path / "MSRVTT_JSFUSION_test.csv"
    annotations.write_text("key,vid_key,video_id,sentence\nret0,harbor,harbor,a sign with a blue boat\n")
    (tmp_path / "videos").mkdir()
    options = {"openai": {"base_url": "http://127.0.0.1:9/v1"}}
    settings = Settings(
        data_dir=tmp_path / "data",
        models={"chat": "openai:small", "text_embedder": "openai:text-embedding-3-large", "options": options},
    )
    run_dir = prepare_run(settings, "msrvtt", annotations, tmp_path / "videos", None, name="ret")
    recorded = read_spec(run_dir).retrieval
    assert recorded["gallery_only"] is True
    thresholds = recorded["thresholds"]
    assert (thresholds["source"], thresholds["tau_soft"], thresholds["tau_hard"]) == ("defaulted", 0.3, 0.15)
    assert "openai:text-embedding-3-large has no calibrated thresholds" in thresholds["warning"]
    # A question-answering run has no retrieval setup.
    assert read_spec(_prepare(_settings(tmp_path / "data"), _bench(tmp_path / "qa"))).retrieval == {}

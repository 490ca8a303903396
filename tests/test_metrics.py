"""Grounding, retrieval and multiple-choice metrics against hand-computed values and against the
figures the benchmarks' reference evaluation code gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from vidscope.evaluation.metrics import grounding_scores, rank_scores, recall_at_k, temporal_iou


def test_temporal_iou_values() -> None:
    assert temporal_iou((0, 10), (5, 15)) == pytest.approx(5 / 15)
    assert temporal_iou((2, 4), (2, 4)) == 1.0
    assert temporal_iou((0, 1), (2, 3)) == 0.0
    assert temporal_iou((4, 2), (2, 4)) == 1.0  # reversed bounds are sorted
    assert temporal_iou((3, 3), (0, 10)) == 0.0  # empty prediction


def test_grounding_scores_charades_style() -> None:
    predictions = [(0, 10), (0, 10), (0, 10), None]
    golds = [(0, 10), (0, 16), (0, 40), (0, 10)]  # IoU 1.0, 0.625, 0.25, 0
    scores = grounding_scores(predictions, golds)
    assert scores["R@0.3"] == pytest.approx(0.5)
    assert scores["R@0.5"] == pytest.approx(0.5)
    assert scores["R@0.7"] == pytest.approx(0.25)
    assert scores["mIoU"] == pytest.approx((1 + 0.625 + 0.25 + 0) / 4)
    with pytest.raises(ValueError):
        grounding_scores([(0, 1)], [])


def test_recall_at_k() -> None:
    rankings = {"q1": ["a", "b", "c"], "q2": ["x"] * 4 + ["b"], "q3": []}
    gold = {"q1": "a", "q2": ["b", "z"], "q3": "c"}
    scores = recall_at_k(rankings, gold)
    assert scores == {"R@1": pytest.approx(1 / 3), "R@5": pytest.approx(2 / 3), "R@10": pytest.approx(2 / 3)}
    with pytest.raises(ValueError):
        recall_at_k({}, {"q": "a"})


# ---------------------------------------------------------------------------- reference figures
# Each family is scored the way `vidscope eval` scores a run (the benchmark's real loader, a fixed
# predictions.jsonl, `report.summarise`), and compared with the figures the benchmark's reference
# evaluation code gives for the same predictions, worked out by hand in the comments.


def _summary(
    tmp_path: Path,
    benchmark: str,
    annotations: Path,
    lines: list[dict[str, Any]],
    judge: Any = None,
    **options: Any,
) -> Any:
    from vidscope.evaluation.loaders import load_benchmark
    from vidscope.evaluation.report import summarise
    from vidscope.evaluation.runs import PREDICTIONS_FILE, RunSpec, read_predictions

    items = load_benchmark(benchmark, annotations, **options)
    run_dir = tmp_path / "run"
    run_dir.mkdir(parents=True)
    (run_dir / PREDICTIONS_FILE).write_text("".join(json.dumps(line) + "\n" for line in lines))
    spec = RunSpec(
        name="fixed", benchmark=benchmark, annotations=str(annotations), root="/videos", agent="dvd",
        settings_fingerprint="-", created_at="2026-01-01T00:00:00+00:00",
    )  # fmt: skip
    return summarise(spec, items, items, read_predictions(run_dir), [], [], judge)


def test_grounding_reproduces_vslnet_charades_sta_evaluation(tmp_path: Path) -> None:
    """Reference: VSLNet's Charades-STA / ActivityNet evaluation (26hzhang/VSLNet,
    ``util/runner_utils.py``: ``calculate_iou`` = (min end - max start) / (max end - min start),
    floored at 0; ``calculate_iou_accuracy`` counts IoU >= threshold; mIoU is the mean IoU; both
    x100). The first five lines are the start of the real Charades-STA test file (VSLNet's copy).

    IoUs by that formula: 1.0; (30.0-24.3)/(30.4-22.0) = 0.678571; (30.4-26.0)/(34.0-24.3) =
    0.453608; 0 (disjoint); (12.5-6.0)/(20.0-4.3) = 0.414013; (4-0)/(8-0) = 0.5 (exactly at 0.5:
    counted, >=). R1@0.3 = 5/6 = 83.33, R1@0.5 = 3/6 = 50.00, R1@0.7 = 1/6 = 16.67,
    mIoU = 3.046192 / 6 = 50.77.
    """
    annotations = tmp_path / "charades_sta_test.txt"
    annotations.write_text(
        "3MSZA 24.3 30.4##person turn a light on.\n"
        "3MSZA 24.3 30.4##person flipped the light switch near the door.\n"
        "3MSZA 24.3 30.4##person turn the light switch on.\n"
        "3MSZA 24.3 30.4##person is playing with the switch for the light.\n"
        "AMT7R 4.3 12.5##a person is putting a picture onto the wall.\n"
        "ZZZZZ 0.0 8.0##a person opens a door.\n"
    )
    predicted = {
        "3MSZA#0": (24.3, 30.4),
        "3MSZA#1": (22.0, 30.0),
        "3MSZA#2": (26.0, 34.0),
        "3MSZA#3": (0.0, 10.0),
        "AMT7R#0": (6.0, 20.0),
        "ZZZZZ#0": (0.0, 4.0),
    }
    lines = [
        {"question_id": q, "kind": "grounding", "video_ids": [q.split("#")[0]], "answer": "", "interval": i}
        for q, i in predicted.items()
    ]
    summary = _summary(tmp_path, "charades_sta", annotations, lines)
    scores = {k: round(100 * v, 2) for k, v in summary.scores.items()}
    assert scores == {"R@0.3": 83.33, "R@0.5": 50.0, "R@0.7": 16.67, "mIoU": 50.77}


def test_retrieval_reproduces_clip4clip_msrvtt_metrics(tmp_path: Path) -> None:
    """Reference: CLIP4Clip's ``compute_metrics`` (ArrowLuo/CLIP4Clip, ``metrics.py``, the MSR-VTT
    1k-A protocol): ``ind`` is the 0-based rank of the gold video; R@k = share of ind < k (x100),
    MR (MdR) = median(ind) + 1 with numpy's median (mean of the two middle values for an even
    count), MeanR (MnR) = mean(ind) + 1.

    Gold 1-based ranks 1, 3, 6, 11, 2, 1 over a 12-video gallery: ind = 0, 2, 5, 10, 1, 0.
    R@1 = 2/6 = 33.33, R@5 = 4/6 = 66.67, R@10 = 5/6 = 83.33, MdR = median(0,0,1,2,5,10) + 1 =
    1.5 + 1 = 2.5, MnR = 18/6 + 1 = 4.0.
    """
    gallery = [f"video{n}" for n in range(9770, 9782)]
    annotations = tmp_path / "MSRVTT_JSFUSION_test.csv"
    rows = [f"ret{n},msr{v[5:]},{v},caption {n}" for n, v in enumerate(gallery[:6])]
    annotations.write_text("key,vid_key,video_id,sentence\n" + "\n".join(rows) + "\n")
    # The gallery is the six gold videos and six more (questions about them are not in the file).
    gold_rank = {"ret0": 1, "ret1": 3, "ret2": 6, "ret3": 11, "ret4": 2, "ret5": 1}
    lines = []
    for n, (query, rank) in enumerate(gold_rank.items()):
        others = [v for v in gallery if v != gallery[n]]
        ranking = [*others[: rank - 1], gallery[n], *others[rank - 1 :]]
        lines.append({"question_id": query, "kind": "retrieval", "video_ids": [gallery[n]], "answer": "",
                      "ranking": ranking})  # fmt: skip
    from vidscope.evaluation.loaders import load_benchmark
    from vidscope.evaluation.scoring import score_retrieval

    items = load_benchmark("msrvtt", annotations)
    scores = score_retrieval(items, {line["question_id"]: line["ranking"] for line in lines}, len(gallery))
    assert {k: round(100 * scores[k], 2) for k in ("R@1", "R@5", "R@10")} == {
        "R@1": 33.33, "R@5": 66.67, "R@10": 83.33,
    }  # fmt: skip
    assert (scores["MdR"], scores["MnR"]) == (2.5, 4.0)
    # Through the run's report: recalls in scores, ranks apart (they are not percentages).
    summary = _summary(tmp_path, "msrvtt", annotations, lines)
    assert round(100 * summary.scores["R@5"], 2) == 66.67
    # The report's gallery is the benchmark's videos (six here): the ranks are read from the lists.
    assert summary.ranks == {"MdR": 2.5, "MnR": 4.0}


def test_a_gold_video_the_search_did_not_return_is_ranked_last() -> None:
    ranks = rank_scores({"q1": ["a", "b"], "q2": ["x"], "q3": ["c"]}, {"q1": "b", "q2": "y", "q3": "c"}, 100)
    # Ranks 2, 100 (not returned: last of the 100 searched), 1.
    assert ranks == {"MdR": 2.0, "MnR": pytest.approx(103 / 3)}


def test_multiple_choice_accuracy_reproduces_videomme_eval_your_results(tmp_path: Path) -> None:
    """Reference: Video-MME's ``eval_your_results.py`` (``extract_characters_regex``: answer
    prefixes such as "The answer is" / "The best answer is" removed, then the first capital A-D; no
    letter scores wrong; accuracy = matched / answered x100 overall and per task type).

    By that code: "B" -> B (gold B, right); "The answer is C." -> C (gold C, right);
    "(A) a man ..." -> A (gold B, wrong); "D" -> D (gold D, right); "The best answer is B" -> B
    (gold B, right); "I cannot tell from the video." -> "" (gold A, wrong). Overall 4/6 = 66.7;
    OCR Problems 2/3 = 66.7; Counting Problem 2/3 = 66.7.
    """
    answers = ["B", "The answer is C.", "(A) a man walks in", "D", "The best answer is B",
               "I cannot tell from the video."]  # fmt: skip
    golds = ["B", "C", "B", "D", "B", "A"]
    rows = [
        {
            "video_id": "001",
            "duration": "long",
            "domain": "Knowledge",
            "sub_category": "Travel",
            "videoID": "fFjv93ACGo8",
            "question_id": f"001-{n + 1}",
            "task_type": "OCR Problems" if n < 3 else "Counting Problem",
            "question": f"Question {n}?",
            "options": ["A. a", "B. b", "C. c", "D. d"],
            "answer": gold,
        }  # fmt: skip
        for n, gold in enumerate(golds)
    ]
    annotations = tmp_path / "videomme.json"
    annotations.write_text(json.dumps(rows))
    lines = [
        {"question_id": f"001-{n + 1}", "kind": "multiple_choice", "video_ids": ["fFjv93ACGo8"], "answer": a}
        for n, a in enumerate(answers)
    ]
    summary = _summary(tmp_path, "videomme", annotations, lines)
    assert round(100 * summary.scores["accuracy"], 1) == 66.7
    assert {k: (g.correct, g.total) for k, g in summary.by_category.items()} == {
        "Counting Problem": (2, 3),
        "OCR Problems": (2, 3),
    }
    # MLVU's M-Avg is the mean of the per-task accuracies.
    assert summary.scores["M-Avg"] == pytest.approx((2 / 3 + 2 / 3) / 2)
    # The answer that named no option is wrong, and counted apart from the wrong choice.
    assert summary.unparsed == ["001-6"]


# ---------------------------------------------------------------------------- CrossVid tasks
# Reference: CrossVid's release (chuntianli666/CrossVid, ``eval/BU.py``, ``FSA.py``, ``PSS.py``,
# ``score_CCQA.py``; README: one ``QA/<TASK>.json`` per task). The records below have the fields
# those scripts read; each task's figure is the one the script prints for the same answers.


def _crossvid(
    tmp_path: Path, task: str, records: list[dict[str, Any]], answers: dict[str, str], judge: Any = None
) -> Any:
    annotations = tmp_path / f"{task}.json"
    annotations.write_text(json.dumps(records))
    lines = [{"question_id": q, "kind": kind, "video_ids": ["a", "b"], "answer": said}
             for q, said in answers.items()
             for kind in ["multiple_choice" if records[0].get("options") else "open_ended"]]  # fmt: skip
    return _summary(tmp_path, "crossvid", annotations, lines, judge)


def test_crossvid_multi_select_reproduces_bu_eval(tmp_path: Path) -> None:
    """``BU.py``: ``correct = answer == "".join(gold)`` with gold a list of 1-3 letters; the task's
    figure is correct / answered. Gold AC, B, ABD, C, BD; answers "AC" (right), "B" (right), "AB"
    (a subset: wrong), "C" (right), "BCD" (a superset: wrong) → 3/5 = 60.0. Answers written in the
    gold's letter order, so the reference's string comparison and the set comparison agree."""
    golds = [["A", "C"], ["B"], ["A", "B", "D"], ["C"], ["B", "D"]]
    records = [{"id": n, "videos": ["a.mp4", "b.mp4"], "question": f"Which behaviours? {n}",
                "options": ["A. eat", "B. run", "C. sleep", "D. swim"], "answer": gold}
               for n, gold in enumerate(golds)]  # fmt: skip
    summary = _crossvid(tmp_path, "BU", records, {"0": "AC", "1": "B", "2": "AB", "3": "C", "4": "BCD"})
    assert round(100 * summary.scores["accuracy"], 1) == 60.0
    assert summary.by_category["BU"].correct == 3 and summary.by_dimension["Comparative Analysis"].total == 5
    assert summary.unparsed == []


def test_crossvid_fsa_reproduces_mean_interval_iou(tmp_path: Path) -> None:
    """``FSA.py``: the answer ``"start,end"`` split at the comma into two floats, IoU with the gold
    interval = max(0, min end - max start) / (max end - min start), an answer that does not parse
    scores 0; the figure is the mean IoU. Gold [10, 20] x4: "10,20" → 1.0; "15,25" → 5/15 =
    0.333333; "30,40" → 0; "about ten seconds" → 0 (unparsed). Mean = 1.333333/4 = 33.33."""
    records = [{"id": n, "video A": "cook/a.mp4", "video B": "cook/b.mp4", "ref_segment": [3, 9],
                "answer": [10, 20]} for n in range(4)]  # fmt: skip
    summary = _crossvid(
        tmp_path, "FSA", records, {"0": "10,20", "1": "15,25", "2": "30,40", "3": "about ten seconds"}
    )
    assert {k: round(100 * v, 2) for k, v in summary.rule_scores.items()} == {"FSA": 33.33}


def test_crossvid_pss_reproduces_exact_order_accuracy(tmp_path: Path) -> None:
    """``PSS.py``: ``correct = answer == gold`` with gold an order such as "2->3->1->4"; the figure
    is correct / answered. Gold 2->3->1->4 x3, 1->2->3 x1: "2->3->1->4" right, "2->3->4->1" wrong,
    "2 -> 3 -> 1 -> 4" (the same order, spaced: wrong in the reference's string comparison, so
    wrong under the default strict parsing, right with --parse lenient), "3->2->1" wrong → strict
    1/4 = 25.0 (the reference's figure), lenient 2/4 = 50.0."""
    golds = ["2->3->1->4", "2->3->1->4", "2->3->1->4", "1->2->3"]
    records = [{"id": n, "video": "cook/x.mp4",
                "segments": {str(k): [5 * k, 5 * k + 4] for k in range(len(gold.split("->")))},
                "question": "Order the shuffled segments.", "answer": gold}
               for n, gold in enumerate(golds)]  # fmt: skip
    answers = {"0": "2->3->1->4", "1": "2->3->4->1", "2": "2 -> 3 -> 1 -> 4", "3": "3->2->1"}
    summary = _crossvid(tmp_path, "PSS", records, answers)
    assert summary.rule_scores == {"PSS": pytest.approx(0.25)}
    assert summary.samples[2].parsed is None and summary.samples[2].status == "unparsed"
    lenient = _summary(tmp_path / "lenient", "crossvid", tmp_path / "PSS.json",
                       [{"question_id": q, "kind": "open_ended", "video_ids": ["a"], "answer": a}
                        for q, a in answers.items()], parse="lenient")  # fmt: skip
    assert lenient.rule_scores == {"PSS": pytest.approx(0.5)}
    from vidscope.evaluation.videos import VideoLookup
    from vidscope.flows.evaluate import _why_nothing_scored

    lookup = VideoLookup(found={"cook/x.mp4": Path("x.mp4")}, missing=[])
    assert _why_nothing_scored(summary, _load_items(tmp_path / "PSS.json"), lookup, {}, {}) is None
    assert summary.by_dimension == {}  # open questions are not in the multiple-choice accuracy


def test_crossvid_ccqa_is_unscored_without_a_judge(tmp_path: Path) -> None:
    """``score_CCQA.py`` needs an LLM judge; without one the answers are listed as unscored."""
    records = [{"id": 0, "video A": "a.mp4", "video B": "b.mp4", "question": "Compare the dishes.",
                "answer": "A is spicier.", "scoring_points": ["spice", "colour"]}]  # fmt: skip
    summary = _crossvid(tmp_path, "CCQA", records, {"0": "The first one is spicier."})
    assert summary.judge_unscored == ["0"] and summary.rule_scores == {} and summary.open_ended == 0
    from vidscope.evaluation.report import report_markdown

    assert "need an LLM judge" in report_markdown(summary)
    from vidscope.evaluation.videos import VideoLookup
    from vidscope.flows.evaluate import _why_nothing_scored

    lookup = VideoLookup(found={"a.mp4": Path("a.mp4"), "b.mp4": Path("b.mp4")}, missing=[])
    why = _why_nothing_scored(summary, _load_items(tmp_path / "CCQA.json"), lookup, {}, {})
    assert why is not None and "set [models] judge" in why


def test_crossvid_ccqa_judged_by_the_planner_reproduces_score_ccqa(tmp_path: Path, llm_server: Any) -> None:
    """``score_CCQA.py``: the judge marks each scoring point covered / correct; the task's figure is
    sum(coverage + correctness) / sum(2 x points). Verdicts: [T, T] / [T, F] (3 of 4) and
    [T, F, F] / [F, F, F] (1 of 6) → 4 / 10 = 40.0. A third reply with the wrong number of entries
    leaves its answer unscored. The judge runs a chat model through the real OpenAI backend on the
    loopback server; the planner may judge only when the run allows it (``--allow-self-judge``;
    which role judges is tested in test_crossvid_scoring.py)."""
    from llm_server import text

    from vidscope.core.settings import Settings
    from vidscope.flows.eval_agents import choose_judge, judge_of, planner_judge
    from vidscope.models import registry

    records = [{"id": n, "video A": "a.mp4", "video B": "b.mp4", "question": f"Compare the dishes {n}.",
                "answer": "A is spicier and redder.", "scoring_points": points}
               for n, points in enumerate([["spice", "colour"], ["spice", "colour", "salt"], ["spice"]])
               ]  # fmt: skip
    llm_server.script([
        text('{"coverage": [true, true], "correctness": [true, false]}'),
        text('<score>{"coverage": [true, false, false], "correctness": [false, false, false]}</score>'),
        text('{"coverage": [true, true], "correctness": [true, true]}'),
    ])  # fmt: skip
    options = {"openai": {"base_url": llm_server.base_url, "max_retries": 0, "timeout_s": 20, "cache": False}}
    settings = Settings(data_dir=tmp_path / "data", models={"planner": "openai:judge", "options": options})
    judge = planner_judge(registry.planner_model(settings))  # type: ignore[arg-type]
    answers = {"0": "The first is spicier.", "1": "The first is hotter.", "2": "Spicy."}
    summary = _crossvid(tmp_path, "CCQA", records, answers, judge)
    assert {k: round(100 * v, 1) for k, v in summary.rule_scores.items()} == {"CCQA": 40.0}
    assert summary.judge_unscored == ["2"] and llm_server.pending == 0
    sent = llm_server.chat_requests[0]["messages"][-1]["content"]
    assert "The first is spicier." in sent and "colour" in sent and "<video_data>" in sent
    items = [i for i in _load_items(tmp_path / "CCQA.json")]
    no_planner = Settings(data_dir=tmp_path / "data", models={"chat": None, "planner": None})
    with pytest.raises(ValueError, match="not the answering model"):
        choose_judge(no_planner, items, allow_self=True)  # nobody at all to judge
    with pytest.raises(ValueError, match=r"not the answering model \(openai:judge\)"):
        choose_judge(settings, items, allow_self=False)
    allowed = choose_judge(settings, items, allow_self=True)
    assert allowed.spec == "openai:judge" and allowed.self_judging and judge_of(settings, allowed) is not None


def _load_items(path: Path) -> list[Any]:
    from vidscope.evaluation.loaders import load_benchmark

    return load_benchmark("crossvid", path)

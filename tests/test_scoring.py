"""Answer extraction rules and benchmark scoring against hand-checked values."""

from __future__ import annotations

import pytest

from vidscope.evaluation.answers import extract_choice
from vidscope.evaluation.items import BenchmarkItem
from vidscope.evaluation.scoring import is_correct, score_choices, score_grounding, score_retrieval

OPTIONS = ("a dog", "a cat", "red", "red car")


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        # 1. bare letter
        ("B", "B"),
        ("(b)", "B"),
        ("B.", "B"),
        (" [C] ", "C"),
        # 2. answer phrase (first one wins; letter capital or bracketed)
        ("The answer is B", "B"),
        ("Answer: (C)", "C"),
        ("The Answer is D because the car is red.", "D"),
        ("Best option: B", "B"),
        ("I would pick option C.", "C"),
        # 3. leading label; a bare leading capital is not one
        ("B. a cat sits there", "B"),
        ("(A) a dog", "A"),
        ("D) red car", "D"),
        ("A man walks in with a cat", "B"),  # not "A": the option text rule finds "a cat"
        # 4. bracketed letters, all the same
        ("It must be (C), since (C) is red", "C"),
        ("Between (A) and (B) I cannot tell", None),
        # 5. option text, quoted or not; the longer of nested matches
        ('I think it is the "red car".', "D"),
        ("the answer is a dog", "A"),  # lower-case "a" names no option; the text does
        ("It's red.", "C"),
        ("A DOG!", "A"),
        # what models write (issue 24): markdown, JSON, the final statement over a passing mention
        ("**Answer:** C", "C"),
        ("**Answer: (B)**", "B"),
        ("Final answer: **D**", "D"),
        ("The answer is `A`.", "A"),
        ('{"answer": "C", "reason": "the car is red"}', "C"),
        ('```json\n{"answer": "(B)"}\n```', "B"),
        ('{"choice": 3}', None),  # an index is not a letter; no option text either
        ("Option A looks plausible at first, but the answer is C.", "C"),
        ("The answer is B. Option A is ruled out by the second clip.", "B"),
        ("Option A fits the start, option D fits the whole clip.", "D"),
        ("Answer: A ... on reflection, the answer is D.", "D"),
        # nothing
        ("a dog or a cat", None),
        ("I don't know", None),
        ("", None),
        (None, None),
        ("E", None),  # only four options
        ("The answer is E", None),
    ],
)
def test_extract_choice_rules(answer: str | None, expected: str | None) -> None:
    assert extract_choice(answer, OPTIONS) == expected


def mc(qid: str, answer: str | None, **fields: object) -> BenchmarkItem:
    return BenchmarkItem(
        benchmark="t",
        question_id=qid,
        kind="multiple_choice",
        video_ids=("v",),
        question="?",
        options=fields.pop("options", ("x", "y", "z", "w")),  # type: ignore[arg-type]
        answer=answer,
        **fields,  # type: ignore[arg-type]
    )


def test_accuracy_overall_per_category_duration_and_dimension() -> None:
    items = [
        mc("1", "A", categories=("count", "temporal"), duration_group="long", dimension="D1"),
        mc("2", "B", categories=("count",), duration_group="long", dimension="D1"),
        mc("3", "C", categories=("ocr",), duration_group="short", dimension="D2"),
        mc("4", "D", categories=("ocr",), duration_group="short", dimension="D2"),
        mc("5", "A", categories=("temporal",), duration_group="long"),
        mc("6", None, categories=("ocr",)),  # no gold: listed, not scored
    ]
    answers = {"1": "A", "2": "The answer is B", "3": "(D)", "4": "w", "6": "A"}  # 5: no answer
    report = score_choices(items, answers)
    # Hand-checked: right 1, 2, 4; wrong 3 (D for C) and 5 (missing) -> 3 / 5.
    assert (report.overall.correct, report.overall.total) == (3, 5)
    assert report.overall.value == pytest.approx(0.6)
    assert {k: (a.correct, a.total) for k, a in report.by_category.items()} == {
        "count": (2, 2),
        "ocr": (1, 2),
        "temporal": (1, 2),  # question 1 counts in both of its categories
    }
    assert {k: (a.correct, a.total) for k, a in report.by_duration_group.items()} == {
        "long": (2, 3),
        "short": (1, 2),
    }
    assert {k: (a.correct, a.total) for k, a in report.by_dimension.items()} == {"D1": (2, 2), "D2": (1, 2)}
    assert report.macro == pytest.approx((1.0 + 0.5 + 0.5) / 3)  # MLVU's M-Avg
    assert report.chosen == {"1": "A", "2": "B", "3": "D", "4": "D", "5": None}
    assert report.unscored == ["6"]


def test_a_candidate_listed_twice_is_right_under_either_letter() -> None:
    item = mc("1", "B", options=("cat", "dog", "dog ", "fox"))
    assert is_correct(item, "B") and is_correct(item, "C")
    assert not is_correct(item, "A") and not is_correct(item, None) and not is_correct(item, "F")


def test_mvx_per_task_and_crossvid_per_dimension() -> None:
    items = [
        mc("a", "A", categories=("BU",), dimension="Comparative Analysis"),
        mc("b", "A", categories=("NC",), dimension="Comparative Analysis"),
        mc("c", "B", categories=("PSS",), dimension="Temporal Understanding"),
    ]
    report = score_choices(items, {"a": "A", "b": "B", "c": "B"})
    assert report.by_category["BU"].value == 1.0 and report.by_category["NC"].value == 0.0
    assert report.by_dimension["Comparative Analysis"].value == 0.5
    assert report.by_dimension["Temporal Understanding"].value == 1.0
    with pytest.raises(ValueError, match="not multiple choice"):
        score_choices(
            [BenchmarkItem(benchmark="t", question_id="g", kind="grounding", video_ids=("v",), question="?")],
            {},
        )


def test_grounding_and_retrieval_over_items() -> None:
    def grounding(qid: str, gold: tuple[float, float]) -> BenchmarkItem:
        return BenchmarkItem(
            benchmark="t",
            question_id=qid,
            kind="grounding",
            video_ids=("v",),
            question="?",
            intervals=(gold,),
        )

    items = [
        grounding("1", (0, 10)),
        grounding("2", (0, 16)),
        grounding("3", (0, 40)),
        grounding("4", (0, 10)),
    ]
    scores = score_grounding(items, {"1": (0, 10), "2": (0, 10), "3": (0, 10)})  # IoU 1, .625, .25, 0
    assert scores == pytest.approx({"R@0.3": 0.5, "R@0.5": 0.5, "R@0.7": 0.25, "mIoU": 1.875 / 4})

    def query(qid: str, video: str) -> BenchmarkItem:
        return BenchmarkItem(
            benchmark="t", question_id=qid, kind="retrieval", video_ids=(video,), question="?"
        )

    queries = [query("q1", "a"), query("q2", "b"), query("q3", "c")]
    rankings = {"q1": ["a", "b"], "q2": ["x", "y", "z", "w", "b"], "q3": ["x"] * 10 + ["c"]}
    # Gold ranks 1, 5 and 11: MdR 5, MnR 17 / 3.
    assert score_retrieval(queries, rankings) == pytest.approx(
        {"R@1": 1 / 3, "R@5": 2 / 3, "R@10": 2 / 3, "MdR": 5.0, "MnR": 17 / 3}
    )
    assert score_retrieval(queries, {})["R@10"] == 0.0  # a query with no ranking is a miss


def test_the_report_counts_forced_answers_and_citations_by_evidence_level() -> None:
    """Issue 28: the eval report shows the citations' evidence levels; forced answers are counted."""
    from vidscope.evaluation.items import BenchmarkItem
    from vidscope.evaluation.report import report_markdown, summarise
    from vidscope.evaluation.runs import Prediction, RunSpec

    items = [
        BenchmarkItem(
            benchmark="egoschema", question_id=q, kind="multiple_choice", video_ids=("v",), question="?",
            options=("a", "b"), answer="A",
        )
        for q in ("q1", "q2")
    ]  # fmt: skip
    predictions = {
        "q1": Prediction(
            question_id="q1", kind="multiple_choice", video_ids=["v"], answer="A", choice="A",
            evidence={"retrieved": 2, "echoed": 1},
        ),
        "q2": Prediction(
            question_id="q2", kind="multiple_choice", video_ids=["v"], answer="B", choice="B", forced=True,
            evidence={"perceived": 1, "none": 1}, fallback=True, perceived=False,
            skipped=["perception skipped"],
        ),
    }  # fmt: skip
    spec = RunSpec(
        name="r", benchmark="egoschema", annotations="a", root="r", agent="dvd", settings_fingerprint="f",
        created_at="2026-11-25T00:00:00",
    )  # fmt: skip
    summary = summarise(spec, items, items, predictions, [], [])
    assert summary.forced == 1
    assert summary.evidence == {"perceived": 1, "retrieved": 2, "echoed": 1, "none": 1}
    report = report_markdown(summary)
    assert "1 answers were forced" in report
    assert "Citations by evidence level: perceived 1, retrieved 2, echoed 1, none 1" in report
    # Issue 35: the extractive answer standing in, and AVI answers not perceived, are counted.
    assert (summary.fallback, summary.not_perceived) == (1, 1)
    assert "1 answers are the extractive answer standing in" in report and "1 AVI answers were not" in report
    assert "skipped a step of their paper's protocol: perception skipped 1" in report


def test_unparsed_answers_are_counted_apart_from_wrong_and_missing_ones() -> None:
    items = [mc("1", "A"), mc("2", "B"), mc("3", "C"), mc("4", "D")]
    answers = {"1": "A", "2": "The answer is C.", "3": "I could not find it in the video."}  # 4: none
    report = score_choices(items, answers)
    assert (report.overall.correct, report.overall.total) == (1, 4)
    assert report.unparsed == ["3"]  # 2 chose wrongly, 4 gave no answer: neither is a parsing problem


# ---------------------------------------------------------------------------- multi-video rules


@pytest.mark.parametrize(
    ("said", "expected"),
    [("AC", {"A", "C"}), ("C, A", {"A", "C"}), ("A and C", {"A", "C"}), ("Answer: BD", {"B", "D"}),
     ('"B"', {"B"}), ("E", None), ("I think A", None), ("", None), (None, None)],
)  # fmt: skip
def test_multi_select_answers_are_read_as_letter_sets(said: str | None, expected: set[str] | None) -> None:
    from vidscope.evaluation.metrics import letter_set

    assert letter_set(said, 4) == (frozenset(expected) if expected is not None else None)


def test_orders_and_intervals_are_read_strictly() -> None:
    from vidscope.evaluation.metrics import interval_of, order_of

    assert order_of("2->3->1->4") == order_of("2 → 3 → 1 → 4") == order_of("2, 3, 1, 4") == (2, 3, 1, 4)
    assert order_of("first 2 then 3") is None and order_of(None) is None
    assert interval_of("15,23") == interval_of("[15, 23]") == interval_of("15s - 23s") == (15.0, 23.0)
    assert interval_of("15-23") == (15.0, 23.0)
    assert interval_of("about 15") is None and interval_of("from 15 to 23 seconds") is None


def _multi_select(answer: str) -> BenchmarkItem:
    return BenchmarkItem(benchmark="crossvid", question_id="q", kind="multiple_choice", video_ids=("a", "b"),
                         question="?", options=("w", "x", "y", "z"), answer=answer, categories=("BU",),
                         extra={"rule": "set"})  # fmt: skip


def test_a_multi_select_gold_scores_as_a_set() -> None:
    item = _multi_select("AC")
    assert item.answer_index is None
    report = score_choices([item], {"q": "C, A"})
    assert report.overall.correct == 1 and report.chosen == {"q": "AC"}
    assert score_choices([item], {"q": "A"}).overall.correct == 0  # a subset is wrong
    assert score_choices([item], {"q": "ACD"}).overall.correct == 0  # a superset is wrong
    prose = score_choices([item], {"q": "Both the first and the third."})
    assert prose.overall.correct == 0 and prose.unparsed == ["q"]


def test_judged_points_sum_over_a_task_as_score_ccqa_does() -> None:
    """``score_CCQA.py``: sum(coverage + correctness) over all answers / sum(2 x points)."""
    from vidscope.evaluation.scoring import score_rules

    def item(qid: str, points: int) -> BenchmarkItem:
        return BenchmarkItem(benchmark="crossvid", question_id=qid, kind="open_ended", video_ids=("a", "b"),
                             question="?", answer="gold", categories=("CCQA",),
                             extra={"rule": "judge",
                                    "scoring_points": [f"p{n}" for n in range(points)]})  # fmt: skip

    verdicts = {
        "one": ([True, True], [True, False]),
        "two": ([True, False, False, False], [True] + [False] * 3),
    }
    report = score_rules(
        [item("one", 2), item("two", 4)], {"one": "x", "two": "y"}, lambda i, s: verdicts[i.question_id]
    )
    # (3 + 2) / (4 + 8) = 0.416667, not the mean of 3/4 and 2/8 (0.5)
    assert report.by_category == {"CCQA": pytest.approx(5 / 12)} and report.unscored == []
    bad = score_rules([item("one", 2)], {"one": "x"}, lambda i, s: None)
    assert bad.unscored == ["one"] and bad.by_category == {}

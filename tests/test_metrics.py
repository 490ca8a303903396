"""Grounding and retrieval metrics against hand-computed values."""

from __future__ import annotations

import pytest

from vidscope.evaluation.metrics import grounding_scores, recall_at_k, temporal_iou


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

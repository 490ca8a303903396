"""SAMA's conflict checks compare like with like and resolve toward the evidence (issue 29).

The SAMA paper's App. B worked examples were not available here (the stored pages hold only its
abstract), so these cases are written from the issue's description of them: a tracker's and a
reader's counts of the same window disagree and a re-read settles it; a per-frame peak is not a
distinct count; counts over different windows, colours of different instances and times neither
tool could have seen do not conflict; a re-read that sees neither side's value wins when it
repeats itself. The re-read here is the verification layer's own callable (what ``run_sama``
passes to :func:`admit`), answering as a vision model would from the segment.
"""

from __future__ import annotations

from vidscope.agents.sama.facts import Fact, comparable, majority
from vidscope.agents.sama.memory import EvidenceMemory, admit
from vidscope.agents.sama.tools_look import GraphFrame, GraphObject, SceneGraphResult


def fact(source: str, value: float | str, t0: float = 10.0, t1: float = 20.0, **kw: object) -> Fact:
    base: dict[str, object] = {"video_id": "v", "kind": "count", "subject": "person", "measure": "distinct"}
    return Fact(**{**base, **kw}, source=source, value=value, t0=t0, t1=t1)  # type: ignore[arg-type]


def reader_sees(*values: float | str, kind: str = "count", measure: str = "distinct"):  # noqa: ANN201
    """A re-read that states ``values`` in turn (one per round)."""
    calls: list[tuple[float, float]] = []

    def reread(f: Fact, start: float, end: float) -> list[Fact]:
        calls.append((start, end))
        value = values[min(len(calls), len(values)) - 1]
        return [fact("video_reader", value, start, end, kind=kind, subject=f.subject, measure=measure)]

    reread.calls = calls  # type: ignore[attr-defined]
    return reread


def test_a_count_conflict_over_the_same_window_is_re_read_there_and_kept_as_seen() -> None:
    memory = EvidenceMemory()
    admit(memory, [fact("object_tracker", 4)], None, 2)
    reread = reader_sees(3)
    (resolution,) = admit(memory, [fact("video_reader", 3)], reread, 2)
    assert reread.calls == [(10.0, 20.0)]  # the same window: a shorter one could hold fewer people
    assert resolution.kept is not None and resolution.kept.source == "video_reader"
    assert [f.value for f in memory.all_facts()] == [3.0]


def test_unlike_counts_are_not_compared() -> None:
    tracker_peak = fact("object_tracker", 2, measure="peak")  # two people at once
    reader_total = fact("video_reader", 5)  # five people pass by over the window
    assert not comparable(tracker_peak, reader_total)
    longer = fact("object_tracker", 9, t0=0.0, t1=60.0)  # a whole minute holds more people
    assert not comparable(longer, reader_total)
    memory = EvidenceMemory()
    for f in (tracker_peak, longer, reader_total):
        assert admit(memory, [f], reader_sees(0), 2) == []
    assert len(memory.all_facts()) == 3


def test_colours_are_compared_by_majority_and_not_for_mixed_instances() -> None:
    assert majority(["red", "red", "crimson", "blue"]) == "red"
    assert majority(["red", "blue"]) is None

    def graph(colours: list[str], vlm: str) -> SceneGraphResult:
        frames = [
            GraphFrame(t=10.0 + i, objects=[GraphObject(label="car", box=[0, 0, 9, 9], colour=c)])
            for i, c in enumerate(colours)
        ]
        return SceneGraphResult(
            video_id="v",
            t0=10.0,
            t1=20.0,
            source="detector",
            frames=frames,
            vlm_objects=[{"label": "car", "colour": vlm}],
        )

    # One car, red in most frames (blue once, in shadow): the reader's "dark red" agrees.
    memory = EvidenceMemory()
    assert (
        admit(memory, graph(["red", "red", "blue", "red"], "dark red").facts(), reader_sees("red"), 2) == []
    )
    # A red and a blue car: no majority colour, so nothing to contradict the reader's "blue".
    memory = EvidenceMemory()
    assert admit(memory, graph(["red", "blue", "red", "blue"], "blue").facts(), reader_sees("red"), 2) == []
    # One scene_graph call never conflicts with itself: its pixels say green, its vision model red
    # (issue 38: the model's colours were filed under video_reader and re-read against the pixels).
    memory = EvidenceMemory()
    reread = reader_sees("green", kind="colour", measure="")
    assert admit(memory, graph(["green", "green", "olive"], "red").facts(), reread, 2) == []
    assert reread.calls == [] and {f.source for f in memory.all_facts()} == {"scene_graph"}
    # Mostly green but the reader, in a call of its own, says red: a conflict, the re-read's green
    # is kept.
    (resolution,) = admit(
        memory, [fact("video_reader", "red", kind="colour", subject="car", measure="")], reread, 2
    )
    assert resolution.kept is not None and resolution.kept.value == "green"
    assert resolution.kept.source == "scene_graph"


def test_times_conflict_only_when_each_tool_could_have_seen_the_other() -> None:
    door = {"kind": "time", "subject": "the door opens", "measure": ""}
    early = fact("video_reader", 12.0, 10.0, 20.0, **door)
    late = fact("temporal_grounding", 40.0, 30.0, 50.0, **door)
    assert not comparable(early, late)  # neither looked where the other saw it
    assert comparable(early, fact("temporal_grounding", 18.0, 0.0, 60.0, **door))  # both saw 12 s and 18 s
    memory = EvidenceMemory()
    admit(memory, [fact("temporal_grounding", 18.0, 5.0, 25.0, **door)], None, 2)
    reread = reader_sees(12.5, 12.0, kind="time", measure="")
    (resolution,) = admit(memory, [early], reread, 2)
    start, end = reread.calls[0]
    assert (start, end) == (10.0, 20.0)
    assert resolution.kept is not None and resolution.kept.source == "video_reader"


def test_a_re_read_that_sees_neither_side_wins_when_it_repeats_itself() -> None:
    memory = EvidenceMemory()
    admit(memory, [fact("object_tracker", 4)], None, 2)
    (resolution,) = admit(memory, [fact("video_reader", 2)], reader_sees(3, 3), 2)
    assert resolution.kept is not None and resolution.kept.value == 3.0 and resolution.by_reread
    assert "the re-reads agree; neither side did" in resolution.describe()
    assert [f.value for f in memory.all_facts()] == [3.0]
    # Re-reads that disagree with each other settle nothing.
    memory = EvidenceMemory()
    admit(memory, [fact("object_tracker", 4)], None, 2)
    (resolution,) = admit(memory, [fact("video_reader", 2)], reader_sees(3, 5), 2)
    assert resolution.kept is None and memory.of("v").unresolved


def test_scene_graph_states_peak_counts_compared_with_the_trackers_peak() -> None:
    """Two people in the first frame looked at, three in the second: scene_graph's peak is three.
    The tracker's peak of two over the same window conflicts with it; its distinct count does not."""
    person = GraphObject(label="person", box=[0, 0, 9, 9])
    frames = [GraphFrame(t=11.0, objects=[person] * 2), GraphFrame(t=15.0, objects=[person] * 3)]
    graph = SceneGraphResult(video_id="v", t0=10.0, t1=20.0, source="detector", frames=frames)
    (peak,) = [f for f in graph.facts() if f.kind == "count"]
    assert (peak.subject, peak.measure, peak.value, peak.source) == ("person", "peak", 3.0, "scene_graph")
    memory = EvidenceMemory()
    admit(memory, [fact("object_tracker", 2, measure="peak"), fact("object_tracker", 5)], None, 2)
    reread = reader_sees(3, measure="peak")
    (resolution,) = admit(memory, [peak], reread, 2)
    assert (
        "conflict on peak count of person: scene_graph says 3.0, object_tracker says 2.0"
        in resolution.describe()
    )
    assert resolution.kept == peak.model_copy(update={"call": 1})  # the graph's, numbered as its call

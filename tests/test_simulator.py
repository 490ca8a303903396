"""The script simulator: validated scripts, answerable generated questions, refusals, seeded rollouts."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from vidscope.agents import strategies
from vidscope.agents.avi import tools as tools_avi
from vidscope.agents.avi.agent import phases
from vidscope.agents.cvr.agent import cvr_registry
from vidscope.agents.dvd import tools as tools_dvd
from vidscope.agents.environment import tool_context
from vidscope.agents.simulator import tools as sim_tools
from vidscope.agents.simulator.policies import OraclePolicy, RandomPolicy
from vidscope.agents.simulator.script import Event, Script, ScriptVideo, save_script
from vidscope.agents.simulator.simulator import NO_EVIDENCE, ScriptSimulator, SimContext
from vidscope.agents.simulator.templates import generate_script, generate_scripts
from vidscope.agents.simulator.tools_cvr import sim_cvr_agent_registry
from vidscope.agents.tools import execute_tool
from vidscope.core.settings import AgentSettings, Settings
from vidscope.flows.training.rollout import rollout, write_trajectories


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data")


def sim_context(settings: Settings, script: Script) -> SimContext:
    return SimContext(settings, ScriptSimulator(script), registry=sim_tools.sim_cvr_registry())


def test_scripts_are_validated() -> None:
    event = {"event_id": "e1", "start": 1.0, "end": 2.0, "label": "a dog barks"}
    with pytest.raises(ValidationError, match="ends after the video"):
        ScriptVideo(video_id="v", duration=1.5, events=[Event(**event)])
    with pytest.raises(ValidationError, match="not ordered"):
        ScriptVideo(
            video_id="v",
            duration=9,
            events=[Event(**{**event, "event_id": "e2", "start": 3, "end": 4}), Event(**event)],
        )
    with pytest.raises(ValidationError, match="duplicate event ids"):
        ScriptVideo(video_id="v", duration=9, events=[Event(**event), Event(**event)])
    with pytest.raises(ValidationError, match="before start"):
        Event(**{**event, "end": 0.5})


def test_generation_is_seeded_and_every_question_has_one_right_option() -> None:
    assert generate_script(5) == generate_script(5) and generate_script(5) != generate_script(6)
    kinds = set()
    for script in generate_scripts(20, seed=2):
        for q in script.questions:
            kinds.add(q.kind)
            assert q.answer in q.options and len(set(q.options)) == len(q.options) and q.evidence
    assert kinds == {"counting", "ordering", "temporal_alignment", "comparison"}


@pytest.mark.parametrize("strategy", ["actions", "avi", "cvr"])
def test_a_scripted_oracle_answers_every_generated_question(settings: Settings, strategy: str) -> None:
    scripts = generate_scripts(12, seed=4)
    table = rollout(settings, scripts, lambda q, rng: OraclePolicy(q), strategy=strategy, group_size=1)
    assert table.num_rows == 48
    assert table.column("reward").to_pylist() == [1.1] * 48


def test_the_simulator_refuses_intervals_outside_the_video_and_says_when_nothing_happens(
    settings: Settings,
) -> None:
    script = generate_script(1)
    video = script.videos[0]
    ctx = sim_context(settings, script)
    for t0, t1 in ((-1.0, 3.0), (video.duration + 1, video.duration + 5), (0.0, video.duration + 10)):
        outcome = execute_tool(
            ctx, "visual_query", {"targets": [{"video_id": video.video_id, "t0": t0, "t1": t1}], "focus": "x"}
        )
        error = str(outcome.error)
        assert not outcome.ok and ("outside" in error or "past the end" in error)
        outcome = execute_tool(ctx, "audio_query", {"video_id": video.video_id, "t0": t0, "t1": t1})
        assert not outcome.ok and f"duration {video.duration:.1f}s" in str(outcome.error)
    unknown = execute_tool(
        ctx, "visual_query", {"targets": [{"video_id": "nope", "t0": 0, "t1": 1}], "focus": "x"}
    )
    assert "unknown video_id" in str(unknown.error)
    quiet = video.events[0].start / 2  # before the first event nothing happens
    outcome = execute_tool(
        ctx, "visual_query", {"targets": [{"video_id": video.video_id, "t0": 0, "t1": quiet}], "focus": "x"}
    )
    assert outcome.ok and outcome.result.answer == NO_EVIDENCE and outcome.result.events == []


def test_one_simulated_look_sees_two_videos_side_by_side_within_the_frame_budget(settings: Settings) -> None:
    """As the real visual_query: several targets in one look, each fact naming its video, and the
    paper's budget ("the total number of frames ... must not exceed 128") kept by scaling."""
    script = next(s for s in generate_scripts(6, seed=1) if len(s.videos) >= 2)
    first, second = script.videos[0], script.videos[1]
    a, b = first.events[0], second.events[0]
    ctx = sim_context(settings, script)
    targets = [
        {"video_id": first.video_id, "t0": a.start, "t1": a.end, "frames": 100},
        {"video_id": second.video_id, "t0": b.start, "t1": b.end, "frames": 60},
    ]
    outcome = execute_tool(ctx, "visual_query", {"targets": targets, "focus": "what happens"})
    assert outcome.ok, outcome.error
    seen = outcome.result
    assert [t.frames for t in seen.targets] == [80, 48] and "over the 128-frame budget" in seen.note
    assert f"video {first.video_id}: " in seen.answer and f"video {second.video_id}: " in seen.answer
    assert {s.video_id for s in seen.support()} == {first.video_id, second.video_id}
    assert a.label in seen.answer and b.label in seen.answer and seen.events == []


def test_simulated_tools_have_the_real_names_specs_and_results() -> None:
    pairs = [
        (sim_tools.clip_search, tools_dvd.clip_search),
        (sim_tools.global_browse, tools_dvd.global_browse),
        (sim_tools.frame_inspect, tools_dvd.frame_inspect),
        (sim_tools.clip_retrieve, tools_avi.clip_retrieve),
        (sim_tools.text_extract, tools_avi.text_extract),
        (sim_tools.object_detect, tools_avi.object_detect),
        (sim_tools.frame_analysis, tools_avi.frame_analysis),
    ]
    for sim, real in pairs:
        assert sim.spec() == real.spec()
        assert sim.result_schema == real.result_schema
    assert sim_tools.SIM_DVD_TOOLS[-1] is tools_dvd.finish


def test_simulated_cvr_actions_are_the_real_master_agents() -> None:
    real, sim = cvr_registry(), sim_cvr_agent_registry()
    assert sim.names == real.names == ["visual_query", "audio_query", "answer"]
    assert sim.specs() == real.specs()
    for name in real.names:
        assert sim.get(name).result_schema == real.get(name).result_schema


def test_one_setting_swaps_real_tools_for_simulated_ones(settings: Settings, tmp_path: Path) -> None:
    script = generate_script(2)
    path = save_script(script, tmp_path / "script.json")
    with pytest.raises(ValidationError, match="needs"):
        AgentSettings(environment="sim")
    config = AgentSettings(environment="sim", script=path)
    ctx = tool_context(settings, None, chat=None, config=config)
    assert isinstance(ctx, SimContext) and not ctx.config.tool_cache
    assert ctx.registry is None  # a strategy's tools come with strategies.answer
    ctx.registry = strategies.get("dvd").tool_registry(simulated=True)
    assert ctx.registry.names == strategies.get("dvd").tool_registry(simulated=False).names
    assert phases(strategies.get("avi").tool_registry(simulated=True))[0].names == ["clip_retrieve"]
    video = script.videos[0]
    outcome = execute_tool(ctx, "clip_search", {"video_id": video.video_id, "query": video.events[0].label})
    assert outcome.ok and any(video.events[0].label in (c.caption or "") for c in outcome.result.clips)


@pytest.mark.parametrize("strategy", ["dvd", "cvr"])
def test_rollouts_are_reproducible_with_a_seed(settings: Settings, tmp_path: Path, strategy: str) -> None:
    scripts = generate_scripts(2, seed=9)

    def run(seed: int):
        return rollout(
            settings, scripts, lambda q, rng: RandomPolicy(rng), strategy=strategy, group_size=8, seed=seed
        )

    first, again, other = run(1), run(1), run(2)
    assert first.equals(again) and not first.equals(other)
    rewards = first.column("reward").to_pylist()
    assert set(rewards) <= {0.0, 0.1, 1.0, 1.1} and len(set(rewards)) > 1
    assert len(set(first.column("group_id").to_pylist())) == 8
    path = write_trajectories(first, tmp_path / "rollouts.parquet")
    row = pq.read_table(path).slice(0, 1).to_pylist()[0]
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    assert (
        row["completion"][0]["role"] == "assistant" and row["messages"] == row["prompt"] + row["completion"]
    )
    assert row["strategy"] == strategy


def test_generated_answers_cannot_be_guessed_from_the_letter() -> None:
    """Over many generated questions of each kind, no option letter is the answer much more often
    than chance: always answering the most frequent letter scores near 1 / options."""
    from collections import Counter

    from vidscope.agents.simulator.templates import generate_scripts as generate

    by_kind: dict[str, list[tuple[str, int]]] = {}
    for script in generate(150, seed=11):
        for q in script.questions:
            assert q.answer_letter is not None
            by_kind.setdefault(q.kind, []).append((q.answer_letter, len(q.options)))
    assert set(by_kind) == {"counting", "ordering", "temporal_alignment", "comparison"}
    for kind, answers in by_kind.items():
        letters = Counter(letter for letter, _ in answers)
        chance = sum(1 / n for _, n in answers) / len(answers)
        best = letters.most_common(1)[0][1] / len(answers)
        assert best < chance + 0.12, (kind, dict(letters))
        assert len(letters) == max(n for _, n in answers), (kind, dict(letters))  # every letter occurs

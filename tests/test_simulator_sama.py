"""SAMA against the script simulator: its nine tools simulated under the real specs, oracle rollouts
of the real ``run_sama`` loop, refusals, seeded reproducibility, a planner served over HTTP, and
``compare`` (SAMA and AgentCVR) switched to the simulator by one setting."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from llm_server import Reply, ScriptedLLMServer, text, tool_call

from vidscope.agents import strategies
from vidscope.agents.sama.agent import sama_registry
from vidscope.agents.simulator.policies import OraclePolicy, RandomPolicy
from vidscope.agents.simulator.script import Event, Script, ScriptVideo, save_script
from vidscope.agents.simulator.simulator import NO_EVIDENCE, ScriptSimulator, SimContext
from vidscope.agents.simulator.templates import generate_script, generate_scripts
from vidscope.agents.simulator.tools_sama import sim_sama_registry
from vidscope.agents.tools import execute_tool
from vidscope.core.settings import Settings
from vidscope.flows.training.rollout import rollout, write_trajectories
from vidscope.models import registry


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data")


def sim_context(settings: Settings, script: Script) -> SimContext:
    return SimContext(settings, ScriptSimulator(script), registry=sim_sama_registry())


def planner_settings(data_dir: Path, server: ScriptedLLMServer, **agent: object) -> Settings:
    """The real ``openai`` backend against the loopback server, its response cache off (a rollout
    must see every sampled reply)."""
    options = {"openai": {"base_url": server.base_url, "max_retries": 0, "timeout_s": 30, "cache": False}}
    return Settings(
        data_dir=data_dir,
        models={
            "chat": "openai:scripted",
            "captioner": None,
            "speech_recognizer": None,
            "text_reader": None,
            "options": options,
        },
        agent=agent,
    )


def test_simulated_sama_tools_are_the_real_ones() -> None:
    real, sim = sama_registry(), sim_sama_registry()
    assert sim.names == real.names and len(real.names) == 9
    assert sim.specs() == real.specs()
    for name in real.names:
        assert sim.get(name).result_schema == real.get(name).result_schema
    assert strategies.get("sama").tool_registry(simulated=True).names == real.names


def test_a_scripted_oracle_answers_every_generated_question_through_sama(settings: Settings) -> None:
    scripts = generate_scripts(12, seed=4)
    table = rollout(settings, scripts, lambda q, rng: OraclePolicy(q), strategy="sama", group_size=1)
    assert table.num_rows == 48
    assert table.column("reward").to_pylist() == [1.1] * 48
    kinds = table.column("question_kind").to_pylist()
    assert {"counting", "ordering", "temporal_alignment", "comparison"} == set(kinds)


def test_the_sama_tools_refuse_intervals_outside_the_video_and_say_when_nothing_happens(
    settings: Settings,
) -> None:
    script = generate_script(1)
    video, other = script.videos
    ctx = sim_context(settings, script)
    v = video.video_id
    for t0, t1 in ((-1.0, 3.0), (video.duration + 1, video.duration + 5), (0.0, video.duration + 10)):
        calls = {
            "video_reader": {"video_id": v, "t0": t0, "t1": t1, "question": "what happens?"},
            "object_tracker": {"video_id": v, "t0": t0, "t1": t1, "target": "person"},
            "scene_graph": {"video_id": v, "t0": t0, "t1": t1},
            "scene_detector": {"video_id": v, "t0": t0, "t1": t1},
            "subtitle_extractor": {"video_id": v, "t0": t0, "t1": t1},
            "visual_similarity": {
                "video_id": other.video_id,
                "time_range": [0.0, 5.0],
                "other_video_id": v,
                "other_range": [t0, t1],
            },
        }
        for name, arguments in calls.items():
            outcome = execute_tool(ctx, name, arguments)
            assert not outcome.ok, name
            assert f"duration {video.duration:.1f}s" in str(outcome.error), (name, outcome.error)
    for name in ("temporal_grounding", "subtitle_retriever"):
        outcome = execute_tool(ctx, name, {"video_id": "nope", "query": "door"})
        assert "unknown video_id" in str(outcome.error)

    quiet = video.events[0].start / 2  # before the first event nothing happens
    reading = execute_tool(ctx, "video_reader", {"video_id": v, "t0": 0, "t1": quiet, "question": "what?"})
    assert reading.ok and reading.result.answer == NO_EVIDENCE
    assert reading.result.counts == {} and reading.result.facts() == []
    tracked = execute_tool(ctx, "object_tracker", {"video_id": v, "t0": 0, "t1": quiet, "target": "car"})
    assert tracked.ok and tracked.result.distinct_count == 0 and tracked.result.tracks == []
    heard = execute_tool(ctx, "subtitle_extractor", {"video_id": v, "t0": 0, "t1": quiet})
    assert heard.ok and heard.result.lines == []


def test_the_sama_tools_read_events_attributes_audio_and_cross_video_relations(settings: Settings) -> None:
    script = generate_script(3)
    ctx = sim_context(settings, script)
    first, second = script.videos
    sighting = next(e for e in first.events if e.kind == "object")
    obj, count, colour = sighting.subject, sighting.attributes["count"], sighting.attributes["colour"]
    window = {"video_id": first.video_id, "t0": sighting.start, "t1": sighting.end}

    tracked = execute_tool(ctx, "object_tracker", {**window, "target": f"{obj}s"}).result
    assert tracked.distinct_count == count and tracked.peak_count == count
    reading = execute_tool(
        ctx, "video_reader", {**window, "question": f"How many {obj}s, what colour?"}
    ).result
    assert reading.counts[obj] == count and reading.colours[obj] == colour and reading.time == sighting.start
    assert {f.kind for f in reading.facts()} == {"count", "colour", "time"}
    graph = execute_tool(ctx, "scene_graph", {**window, "prompts": [obj]}).result
    assert graph.frames and all(len(f.objects) == count for f in graph.frames)
    assert all(o.colour == colour for f in graph.frames for o in f.objects)

    # The script links the two videos' sightings (same_subject): they look the same; other
    # moments do not.
    other = next(e for e in second.events if e.kind == "object")
    same = {
        "video_id": first.video_id,
        "time_range": [sighting.start, sighting.end],
        "other_video_id": second.video_id,
        "other_range": [0.0, second.duration],
    }
    alike = execute_tool(ctx, "visual_similarity", same).result
    assert alike.similarity > 0 and alike.best_match == [other.start, other.end]
    assert alike.judgement != "no more alike than unrelated footage"
    action = next(e for e in second.events if e.kind == "action" and not e.overlaps(other.start, other.end))
    unlike = execute_tool(
        ctx, "visual_similarity", {**same, "other_range": [action.start, action.end]}
    ).result
    assert unlike.similarity == 0.0 < alike.similarity
    assert unlike.judgement == "no more alike than unrelated footage"

    line = first.audio[0]
    found = execute_tool(ctx, "subtitle_retriever", {"video_id": first.video_id, "query": line.text}).result
    assert found.lines and found.lines[0].text == line.text
    hints = execute_tool(ctx, "temporal_grounding", {"video_id": first.video_id, "query": sighting.label})
    best = hints.result.hints[0]
    assert best.start <= sighting.start < best.end


def test_sama_rollouts_are_reproducible_with_a_seed(settings: Settings, tmp_path: Path) -> None:
    scripts = generate_scripts(2, seed=9)

    def run(seed: int):
        return rollout(
            settings, scripts, lambda q, rng: RandomPolicy(rng), strategy="sama", group_size=8, seed=seed
        )

    first, again, other = run(1), run(1), run(2)
    assert first.equals(again) and not first.equals(other)
    rewards = first.column("reward").to_pylist()
    assert set(rewards) <= {0.0, 0.1, 1.0, 1.1} and len(set(rewards)) > 1
    assert len(set(first.column("group_id").to_pylist())) == 8
    path = write_trajectories(first, tmp_path / "rollouts.parquet")
    row = pq.read_table(path).slice(0, 1).to_pylist()[0]
    assert row["strategy"] == "sama" and row["messages"] == row["prompt"] + row["completion"]
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]


def test_a_sama_rollout_with_a_planner_served_over_http(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    """The real SAMA loop, its planner the real ``openai`` backend against the loopback server:
    classification, a video_reader call answered by the simulator, the answer; scored 1.1 and
    stored as a conversation whose later turns are SAMA's rebuilt prompts."""
    script = generate_script(7)
    question = script.question(f"{script.script_id}-count")
    label = question.focus[0]
    ev = question.evidence
    settings = planner_settings(tmp_path / "data", llm_server)
    span = {"video_id": ev[0].video_id, "t0": ev[0].start, "t1": ev[-1].end}
    llm_server.script(
        [
            text('{"type": "reading"}'),
            tool_call("video_reader", {**span, "question": f"How many times does this happen: {label}?"}),
            tool_call(
                "answer",
                {
                    "answer": question.answer,
                    "choice": question.answer_letter,
                    "citations": [{"video_id": span["video_id"], "start": span["t0"], "end": span["t1"]}],
                },
            ),
        ]
    )
    only = Script(script_id=script.script_id, videos=script.videos, questions=[question])
    table = rollout(
        settings, [only], lambda q, rng: registry.chat_model(settings), strategy="sama", group_size=1
    )
    row = table.to_pylist()[0]
    assert row["reward"] == 1.1 and row["tool_calls"] == 1 and not row["forced"]

    requests = llm_server.chat_requests
    assert len(requests) == 3
    offered = [t["function"]["name"] for t in requests[1]["tools"]]
    assert offered[:4] == ["temporal_grounding", "video_reader", "scene_graph", "object_tracker"]
    assert offered[4:] == [
        "scene_detector",
        "visual_similarity",
        "subtitle_retriever",
        "subtitle_extractor",
        "answer",
    ]
    real = {s.name: s for s in sama_registry().specs()}
    assert requests[1]["tools"][1]["function"]["description"] == real["video_reader"].description
    # The second turn's prompt holds the simulator's reading in the evidence memory.
    memory = requests[2]["messages"][-1]["content"]
    assert f"count of {label} = {float(question.answer)}" in memory
    roles = [m["role"] for m in row["messages"]]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    assert json.loads(row["tools"])[1]["name"] == "video_reader"


@pytest.mark.parametrize("agent", ["sama", "cvr"])
def test_compare_runs_on_the_simulator_with_one_setting(
    llm_server: ScriptedLLMServer, tmp_path: Path, agent: str
) -> None:
    from vidscope.flows.compare import run_compare

    script = generate_script(11)
    question = script.question(f"{script.script_id}-compare")
    path = save_script(script, tmp_path / "script.json")
    settings = planner_settings(tmp_path / "data", llm_server, environment="sim", script=path)
    cvr = strategies.get("cvr").tool_registry(simulated=True)
    assert cvr.names == ["visual_query", "audio_query", "answer"]
    first, second = question.evidence
    if agent == "sama":
        steps = [
            text('{"type": "comparison"}'),
            tool_call(
                "object_tracker",
                {"video_id": first.video_id, "t0": first.start, "t1": first.end, "target": question.focus[0]},
            ),
        ]
    else:
        query = {"action": "visual_query", "video_id": first.video_id, "t0": first.start, "t1": first.end}
        steps = [text(json.dumps({"actions": [{**query, "focus": question.focus[0]}]}))]
    citation = {"video_id": first.video_id, "start": first.start, "end": first.end}
    done = {"answer": question.answer, "choice": question.answer_letter, "citations": [citation]}
    steps.append(
        tool_call("answer", done)
        if agent == "sama"
        else text(json.dumps({"actions": [{"action": "answer", **done}]}))
    )
    llm_server.script(steps)
    result = run_compare(
        settings, [v.video_id for v in script.videos], question.text, options=question.options, agent=agent
    )  # type: ignore[arg-type]
    assert result.agent == agent and result.choice == question.answer_letter
    assert [c.verified for c in result.citations] == [True]
    assert [v.file_name for v in result.videos] == ["scene_1.mp4", "scene_2.mp4"]
    seen = next(s for s in result.trace if s.kind == "tool")
    sighting = next(e for e in script.video(first.video_id).events if e.kind == "object")
    assert str(sighting.attributes["count"]) in seen.observation
    assert not (tmp_path / "data" / "lance" / "videos.lance").exists()  # only model calls were logged


def street_conflict() -> tuple[Script, list[Reply]]:
    """Two parked cars over [10, 16] s of "street" and a car honking in between, and the planner's
    replies: object_tracker before the cars, object_tracker and video_reader over them, the answer.
    The tracker follows three cars over [10, 16] (the honking one too), the reader counts two."""
    street = ScriptVideo(
        video_id="street",
        duration=30.0,
        events=[
            Event(
                event_id="parked",
                start=10.0,
                end=16.0,
                kind="object",
                label="two cars parked",
                subject="car",
                attributes={"count": 2, "colour": "red"},
            ),
            Event(event_id="honk", start=12.0, end=13.0, label="a car honks", subject="car"),
        ],
    )
    over = {"video_id": "street", "t0": 10.0, "t1": 16.0}
    citation = {"video_id": "street", "start": 10.0, "end": 16.0}
    replies = [
        tool_call("object_tracker", {"video_id": "street", "t0": 5.0, "t1": 9.9, "target": "car"}),
        tool_call("object_tracker", {**over, "target": "car"}),
        tool_call("video_reader", {**over, "question": "How many cars?"}),
        tool_call("answer", {"answer": "2 cars", "citations": [citation]}),
    ]
    return Script(script_id="street", videos=[street]), replies


def test_sama_conflicts_are_re_read_by_the_simulated_video_reader(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    """Like is compared with like (issue 29). Two parked cars are seen over [10, 16] s and a car
    honks in between: object_tracker follows three cars there (the honking one acts, so it is
    tracked as well), video_reader counts the two cars it is asked about. Both state how many
    different cars the same window holds, so they conflict; the re-read of that window sees two,
    and two is kept. object_tracker's count before the cars arrive (none) is over another window
    and is never compared, and its per-frame peak is not compared with the reader's count."""
    from vidscope.agents.sama.agent import run_sama

    script, replies = street_conflict()
    llm_server.script([text('{"type": "reading"}'), *replies])
    settings = planner_settings(tmp_path / "data", llm_server)
    ctx = SimContext(
        settings, ScriptSimulator(script), chat=registry.chat_model(settings), registry=sim_sama_registry()
    )
    result = run_sama(ctx, "How many cars are there?", ["street"])
    verify = [s for s in result.trace if s.kind == "verify"]
    assert len(verify) == 1 and verify[0].tool == "video_reader" and verify[0].ok
    assert (verify[0].arguments["t0"], verify[0].arguments["t1"]) == (10.0, 16.0)  # the same window
    assert "different car" in verify[0].arguments["question"]  # asked in the conflict's measure
    (conflict,) = [s for s in result.trace if s.kind == "conflict"]
    assert "distinct count of car: video_reader says 2.0, object_tracker says 3.0" in conflict.observation
    assert conflict.observation.endswith("kept 2.0 (video_reader)")
    assert result.answer == "2 cars" and [c.verified for c in result.citations] == [True]
    # Usage counts every call: the planner's three tools and the re-read; every model request.
    assert result.usage.tool_calls == 3 + len(verify)
    assert result.usage.model_calls == len(llm_server.chat_requests) == 5
    # The last prompt's memory: the reader's two cars verified, the tracker's peak and its empty
    # count before the cars both kept (neither was compared), the tracker's three dropped.
    memory = llm_server.chat_requests[-1]["messages"][-1]["content"]
    assert "video_reader: distinct count of car = 2.0 in [10, 16]s" in memory
    assert "object_tracker: peak count of car = 3.0 in [10, 16]s" in memory
    assert "object_tracker: distinct count of car = 0.0 in [5, 9.9]s" in memory
    assert "object_tracker: distinct count of car = 3.0 in" not in memory


def test_train_rollouts_command_writes_rewarded_sama_trajectories(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from vidscope.cli import app

    script_path = save_script(generate_script(3), tmp_path / "scripts" / "s.json")
    out = tmp_path / "rollouts.parquet"
    env = {"VIDSCOPE_DATA_DIR": str(tmp_path / "data")}
    args = ["train", "rollouts", "--agent", "sama", "--policy", "oracle", "--scripts", str(script_path)]
    result = CliRunner().invoke(app, [*args, "--group-size", "2", "--out", str(out)], env=env)

    assert result.exit_code == 0, result.output
    table = pq.read_table(out)
    questions = len(generate_script(3).questions)
    assert table.num_rows == 2 * questions
    assert len(set(table.column("group_id").to_pylist())) == questions
    assert set(table.column("reward").to_pylist()) == {1.1}
    assert "mean reward 1.100" in result.output

    bad = CliRunner().invoke(app, ["train", "rollouts", "--agent", "nope", "--out", str(out)], env=env)
    assert bad.exit_code == 2 and "unknown agent 'nope'" in bad.output

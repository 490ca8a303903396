"""``compare`` end to end over videos ingested by the real flow: step alignment through SAMA (its
interval read from the tools' output), the CLI (``vidscope compare … --json``), the API
(``POST /api/compare``) and the extractive answer without a planner.

Two videos are built to share one step (the same frames, "MIX THE FLOUR" on screen), a third does
not. Frame embeddings come from a random-weight open-clip ViT-B-32 (the same frames give the same
vectors, which is all alignment needs); OCR is the embedded RapidOCR, so clip search finds the
step's text. The planner is the ``openai`` backend talking to a scripted loopback server whose
last reply is computed from the prompt the agent sent (what a planner does), not written in advance.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from llm_server import Reply, ScriptedLLMServer, text, tool_call
from media import text_video
from typer.testing import CliRunner

from vidscope.api import create_app
from vidscope.cli import app
from vidscope.cli.common import overrides
from vidscope.core.settings import Settings
from vidscope.evaluation.metrics import temporal_iou
from vidscope.flows.compare import EXTRACTIVE_NOTE
from vidscope.flows.ingest import run_ingest
from vidscope.models import registry

#: Ingesting three videos (OCR, random-weight CLIP on their frames) takes one to two minutes here.
pytestmark = pytest.mark.slow

SHARED = "MIX THE FLOUR"
#: Where the shared step is in each video (A's is the reference the questions name).
STEP_A, STEP_B = (5.0, 11.0), (4.0, 10.0)
DURATIONS = {"a": 16.0, "b": 14.0, "c": 8.0}
LOOPBACK_CLIENT = ("127.0.0.1", 50000)

runner = CliRunner()


# ---------------------------------------------------------------------------- a planner that reads


class ReadingServer(ScriptedLLMServer):
    """The scripted server, whose queue may also hold functions of the request body: the reply is
    made when the request arrives, from what the agent sent (a planner reading its prompt)."""

    def _chat(self, handler: Any, body: dict[str, Any]) -> None:
        with self._lock:
            if self._queue and callable(self._queue[0]):
                self._queue[0] = self._queue[0](body)  # type: ignore[operator]
        super()._chat(handler, body)


@pytest.fixture()
def planner() -> Iterator[ReadingServer]:
    server = ReadingServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


SIMILARITY_LINE = re.compile(
    r"visual_similarity: similarity (?P<s>[0-9.]+); "
    r"best match (?P<v>[0-9a-f]+) (?P<a>[0-9.]+)-(?P<b>[0-9.]+)s"
)


def answer_from_similarity(reference: str, videos: dict[str, str]) -> Callable[[dict[str, Any]], Reply]:
    """The planner's last turn: read the visual_similarity results the agent reported, pick the
    most similar video and cite its best-matching interval (and the reference segment)."""

    def reply(body: dict[str, Any]) -> Reply:
        prompt = body["messages"][-1]["content"]
        found = [m.groupdict() for m in SIMILARITY_LINE.finditer(prompt)]
        assert len(found) == 2, prompt
        best = max(found, key=lambda m: float(m["s"]))
        video = next(v for v in videos.values() if v.startswith(best["v"]))
        name = next(k for k, v in videos.items() if v == video)
        start, end = float(best["a"]), float(best["b"])
        return tool_call(
            "answer",
            {
                "answer": f"Video {name} shows the same step, at {start:g}-{end:g} s.",
                "citations": [
                    {"video_id": reference, "start": STEP_A[0], "end": STEP_A[1]},
                    {"video_id": video, "start": start, "end": end},
                ],
            },
            call_id="done",
        )

    return reply


# ---------------------------------------------------------------------------- the videos


def model_fields(server: ScriptedLLMServer | None = None) -> dict[str, Any]:
    """Models: no ASR or captioner, RapidOCR, random-weight CLIP; the scripted planner if given."""
    fields: dict[str, Any] = {
        "chat": None,
        "captioner": None,
        "speech_recognizer": None,
        "image_text": "open-clip:ViT-B-32",
        "options": {"open-clip": {"random_weights": True, "batch_size": 16}},
    }
    if server is not None:
        fields["chat"] = "openai:scripted"
        fields["options"]["openai"] = {"base_url": server.base_url, "max_retries": 0, "timeout_s": 30}
    return fields


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A and B share one step; C does not. Ingested once for the module."""
    root = tmp_path_factory.mktemp("compare-flow")
    a = text_video(
        root / "a.mp4",
        duration=DURATIONS["a"],
        texts=[(0.0, 5.0, "INTRO ONE"), (*STEP_A, SHARED), (11.0, 16.0, "THE END")],
    )
    b = text_video(
        root / "b.mp4",
        duration=DURATIONS["b"],
        texts=[(0.0, 4.0, "WELCOME"), (*STEP_B, SHARED), (10.0, 14.0, "BYE NOW")],
    )
    c = text_video(
        root / "c.mp4", duration=DURATIONS["c"], texts=[(0.0, 8.0, "PAINT A WALL")], background=(90, 60, 30)
    )
    settings = Settings(data_dir=root / "data", models=model_fields())
    registry.text_embedder(settings)  # loaded before the flow's threads import transformers
    reports = run_ingest([str(p) for p in (a, b, c)], settings)
    assert all(r.status == "ok" for r in reports), reports
    return {"root": root, "data": root / "data", "ids": {Path(r.path).stem: r.video_id for r in reports}}


def settings_for(world: dict[str, Any], server: ScriptedLLMServer | None = None) -> Settings:
    return Settings(data_dir=world["data"], models=model_fields(server))


def config_file(world: dict[str, Any], server: ScriptedLLMServer | None, name: str) -> Path:
    """A vidscope.toml naming the same models (the CLI reads its settings from a file)."""
    fields = model_fields(server)
    lines = ["[models]"]
    for role in ("chat", "captioner", "speech_recognizer"):
        lines.append(f'{role} = "{fields[role] or ""}"')
    lines.append(f'image_text = "{fields["image_text"]}"')
    lines += ["[models.options.open-clip]", "random_weights = true", "batch_size = 16"]
    if server is not None:
        lines += ["[models.options.openai]", f'base_url = "{server.base_url}"', "max_retries = 0"]
    path = Path(world["root"]) / name
    path.write_text("\n".join(lines) + "\n")
    return path


def cli(world: dict[str, Any], config: Path, *args: str) -> Any:
    """``vidscope --data-dir … --config … args``; ``--config`` sets VIDSCOPE_CONFIG for the
    process, so it is put back afterwards (later tests must not read this file)."""
    overrides.clear()
    before = os.environ.get("VIDSCOPE_CONFIG")
    try:
        return runner.invoke(app, ["--data-dir", str(world["data"]), "--config", str(config), *args])
    finally:
        overrides.clear()
        if before is None:
            os.environ.pop("VIDSCOPE_CONFIG", None)
        else:
            os.environ["VIDSCOPE_CONFIG"] = before


# ---------------------------------------------------------------------------- SAMA aligns the step


def test_sama_aligns_the_shared_step_from_the_tools_output(
    world: dict[str, Any], planner: ReadingServer
) -> None:
    from vidscope.flows.compare import run_compare

    v = world["ids"]
    question = f"Which video shows the step that matches {STEP_A[0]:g}-{STEP_A[1]:g} s of video a, and when?"
    reference = {"video_id": v["a"], "time_range": list(STEP_A)}
    planner.script(
        [
            text('{"type": "comparison"}'),
            tool_call("temporal_grounding", {"video_id": v["b"], "query": "mix the flour"}, call_id="g"),
            Reply(
                "tool_calls",
                tool_calls=[
                    {
                        "id": f"s{k}",
                        "name": "visual_similarity",
                        "arguments": json.dumps(
                            {**reference, "other_video_id": v[k], "other_range": [0, DURATIONS[k]]}
                        ),
                    }
                    for k in ("c", "b")  # the unrelated video first: the order must not decide
                ],
            ),
            answer_from_similarity(v["a"], {k: v[k] for k in ("b", "c")}),  # type: ignore[list-item]
        ]
    )
    result = run_compare(settings_for(world, planner), [v["a"], v["b"], v["c"]], question)
    assert planner.pending == 0
    assert result.agent == "sama" and not result.extractive
    assert [s.tool for s in result.trace if s.kind == "tool"] == [
        "temporal_grounding",
        "visual_similarity",
        "visual_similarity",
    ]
    # The skill for comparisons was loaded and offered its tools in order.
    assert "multi-video-comparison" in result.trace[0].observation
    # The grounding hints reached the planner (their ranking is tested in test_compare_tools.py).
    assert "temporal_grounding: 3 candidate moments" in planner.chat_requests[2]["messages"][-1]["content"]
    # B, which shares frames with the reference, is ranked first; its aligned interval is the step.
    scores = {
        m["v"]: float(m["s"])
        for m in SIMILARITY_LINE.finditer(planner.chat_requests[-1]["messages"][-1]["content"])
    }
    assert scores[v["b"][:8]] > scores[v["c"][:8]]
    assert result.answer.startswith("Video b shows the same step")
    cited = [c for c in result.citations if c.video_id == v["b"]]
    assert len(cited) == 1 and cited[0].verified
    assert temporal_iou((cited[0].start, cited[0].end), STEP_B) >= 0.5
    assert all(c.verified for c in result.citations)


# ---------------------------------------------------------------------------- the CLI and the API


def final_answer(v: dict[str, str]) -> Reply:
    """The planner's answer naming the shared step in A and in B, each at the step."""
    return tool_call(
        "answer",
        {
            "answer": "Both videos show the flour being mixed.",
            "citations": [
                {"video_id": v["a"], "start": STEP_A[0], "end": STEP_A[1]},
                {"video_id": v["b"], "start": STEP_B[0], "end": STEP_B[1]},
            ],
        },
        call_id="done",
    )


def compare_script(v: dict[str, str]) -> list[Reply]:
    """Classify, compare the reference step of A with all of B, answer."""
    return [
        text('{"type": "comparison"}'),
        tool_call(
            "visual_similarity",
            {
                "video_id": v["a"],
                "time_range": list(STEP_A),
                "other_video_id": v["b"],
                "other_range": [0, 14],
            },
            call_id="s",
        ),
        final_answer(v),
    ]


def test_compare_through_the_cli_cites_each_video_and_passes_the_citation_checks(
    world: dict[str, Any], planner: ReadingServer
) -> None:
    v = world["ids"]
    planner.script(compare_script(v))
    config = config_file(world, planner, "with-planner.toml")
    result = cli(
        world, config, "compare", "a.mp4", v["b"][:10], "Do both videos show the same step?", "--json"
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [x["file_name"] for x in data["videos"]] == ["a.mp4", "b.mp4"]
    assert data["answer"] == "Both videos show the flour being mixed."
    assert data["agent"] == "sama" and data["extractive"] is False and data["model"]
    cited = {(c["video_id"], c["start"], c["end"]): c["verified"] for c in data["citations"]}
    assert cited == {(v["a"], *STEP_A): True, (v["b"], *STEP_B): True}
    assert [s["tool"] for s in data["trace"] if s["kind"] == "tool"] == ["visual_similarity"]
    assert planner.pending == 0

    # A citation no tool returned evidence for fails the check (the same check as ask's).
    planner.script(
        [
            text('{"type": "comparison"}'),
            tool_call(
                "answer",
                {"answer": "C paints.", "citations": [{"video_id": v["c"], "start": 1, "end": 2}]},
                call_id="x",
            ),
        ]
    )
    result = cli(world, config, "compare", "a.mp4", "c.mp4", "Which one paints?", "--json")
    assert result.exit_code == 0, result.output
    (citation,) = json.loads(result.output)["citations"]
    assert citation["verified"] is False and citation["note"]

    # Human output: the answer, then each citation with its file name and times. (The same
    # question again: the response cache answers, so the planner is not asked twice.)
    result = cli(world, config, "compare", "a.mp4", "b.mp4", "Do both videos show the same step?")
    assert result.exit_code == 0, result.output
    assert planner.pending == 0 and len(planner.chat_requests) == 5
    assert "Both videos show the flour being mixed." in result.output
    assert "a.mp4 0:05–0:11 verified" in result.output and "b.mp4 0:04–0:10 verified" in result.output

    # AgentCVR through the same command: its master's JSON actions, a visual sub-agent's look.
    look = {"action": "visual_query", "video_id": v["b"], "t0": STEP_B[0], "t1": STEP_B[1], "focus": "hands"}
    done = {
        "action": "answer",
        "answer": "B mixes flour.",
        "citations": [{"video_id": v["b"], "start": STEP_B[0], "end": STEP_B[1]}],
    }
    planner.script([text(json.dumps({"actions": [look]})), text("Hands mix flour."), text(json.dumps(done))])
    result = cli(
        world, config, "compare", "a.mp4", "b.mp4", "What do the hands do in b?", "--agent", "cvr", "--json"
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["agent"] == "cvr" and data["answer"] == "B mixes flour." and planner.pending == 0
    assert [s["tool"] for s in data["trace"] if s["kind"] == "tool"] == ["visual_query"]
    assert [(c["video_id"], c["verified"]) for c in data["citations"]] == [(v["b"], True)]
    assert "Hands mix flour." in json.dumps(planner.chat_requests[-1])  # the master read the look

    # Bad input: one clear line each.
    for args, expected in (
        (("compare", "a.mp4", "nope.mp4", "q?"), "no ingested video"),
        (("compare", "a.mp4", "b.mp4", "   "), "the question is empty"),
        (("compare", "only a question?"), "give one or more videos and then the question"),
        (("compare", "a.mp4", "b.mp4", "q?", "--options", "only"), "--options needs 2 to 26 options, got 1"),
    ):
        result = cli(world, config, *args)
        assert result.exit_code != 0 and expected in result.output, result.output
        assert "Traceback" not in result.output


def test_compare_through_the_api(world: dict[str, Any], planner: ReadingServer) -> None:
    v = world["ids"]
    planner.script(compare_script(v))
    # Worded apart from the CLI test's question: the shared store's response cache would answer it.
    question = "Is the same step shown in both videos?"
    with TestClient(
        create_app(settings_for(world, planner)), client=LOOPBACK_CLIENT, base_url="http://127.0.0.1"
    ) as client:
        response = client.post(
            "/api/compare",
            json={"videos": ["a.mp4", v["b"]], "question": question},
        )
        assert response.status_code == 200, response.text
        data = response.json()
        assert data["answer"] == "Both videos show the flour being mixed." and data["agent"] == "sama"
        assert {(c["video_id"], c["start"], c["end"], c["verified"]) for c in data["citations"]} == {
            (v["a"], *STEP_A, True),
            (v["b"], *STEP_B, True),
        }
        missing = client.post("/api/compare", json={"videos": ["a.mp4", "nope.mp4"], "question": "q?"})
        assert missing.status_code == 404 and "nope.mp4" in missing.json()["detail"]
        blank = client.post("/api/compare", json={"videos": ["a.mp4"], "question": "   "})
        # Refused by the request schema itself, as ask's (the field says "not blank").
        assert blank.status_code == 422 and blank.json()["detail"][0]["loc"] == ["body", "question"]
        none = client.post("/api/compare", json={"videos": [], "question": "q?"})
        assert none.status_code == 422
        agent = client.post("/api/compare", json={"videos": ["a.mp4"], "question": "q?", "agent": "x"})
        assert agent.status_code == 422
        one = client.post(
            "/api/compare", json={"videos": ["a.mp4"], "question": "q?", "options": ["only", " "]}
        )
        # The request schema holds compare's options to ask's rules (2 to 26, none blank).
        assert one.status_code == 422 and one.json()["detail"][0]["loc"] == ["body", "options", 1]
    assert planner.pending == 0


# ---------------------------------------------------------------------------- without a planner


def test_without_a_planner_compare_answers_extractively_and_says_so(world: dict[str, Any]) -> None:
    v = world["ids"]
    config = config_file(world, None, "no-planner.toml")
    result = cli(world, config, "compare", "a.mp4", "b.mp4", "c.mp4", "Where is the flour mixed?", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["extractive"] is True and data["agent"] is None and data["model"] is None
    assert data["note"] == EXTRACTIVE_NOTE and data["trace"] == []
    # The best clip of each video, side by side, in the order given, with its times.
    lines = data["answer"].splitlines()
    assert [line.split(" ")[0] for line in lines] == ["a.mp4", "b.mp4", "c.mp4"]
    # Worded as ask's extractive evidence: what is on screen, not the placeholder caption.
    assert lines[0] == f'a.mp4 0:05–0:10 (5.0–10.0s): on screen "{SHARED}"'
    assert lines[1] == f'b.mp4 0:05–0:10 (5.0–10.0s): on screen "{SHARED}"'
    assert "no visual caption" not in data["answer"]
    by_video = {c["video_id"]: c for c in data["citations"]}
    assert set(by_video) == set(v.values()) and all(c["verified"] for c in by_video.values())
    for name, step in (("a", STEP_A), ("b", STEP_B)):
        cited = by_video[v[name]]
        assert temporal_iou((cited["start"], cited["end"]), step) >= 0.5

    result = cli(world, config, "compare", "a.mp4", "b.mp4", "Where is the flour mixed?")
    assert result.exit_code == 0, result.output
    assert "No planner model is configured" in result.output
    assert "a.mp4 0:05–0:10 verified" in result.output

"""Scripts written by the planner over a real OpenAI-compatible client and the loopback test server
(tests/llm_server.py): a valid script is used (options shuffled), an invalid one is re-asked with
the reason, and a model that never writes one falls back to the template script, with the reason
recorded (also when the client gives up on the reply: cut off twice, as the real-model tier saw)."""

from __future__ import annotations

import json
from pathlib import Path

from llm_server import ScriptedLLMServer, cut_off, text

from vidscope.agents.simulator.templates import generate_script
from vidscope.agents.simulator.writer import MAX_TOKENS, TASKS, write_scripts, written_scripts
from vidscope.core.settings import Settings
from vidscope.models import registry


def planner(tmp_path: Path, server: ScriptedLLMServer):
    settings = Settings(
        data_dir=tmp_path / "data",
        models={
            "chat": "openai:scripted",
            "options": {"openai": {"base_url": server.base_url, "max_retries": 0, "cache": False}},
        },
    )
    registry.clear_cache()
    return registry.planner_model(settings)


def a_written_script() -> dict:
    """What a model writes: a kitchen scene (a template script, renamed, its questions' options in
    the order a model tends to write them: the answer first)."""
    data = json.loads(generate_script(41).model_dump_json())
    data["script_id"] = "whatever-the-model-says"
    for q in data["questions"]:
        q["options"] = [q["answer"], *[o for o in q["options"] if o != q["answer"]]]
    return data


def a_written_fsa_script() -> dict:
    """What a model writes for FSA as it is asked: no options, the answer the other video's segment."""
    data = a_written_script()
    second = data["videos"][1]
    data["questions"] = [
        {
            "question_id": "fsa-1",
            "text": "Which segment of the second video serves the purpose of the first one's 5-15 s?",
            "video_ids": [v["video_id"] for v in data["videos"]],
            "answer": "20,30",
            "evidence": [{"video_id": second["video_id"], "start": 20, "end": 30}],
            "task": "PSS",  # whatever the model writes there: the task asked is what counts
        }
    ]
    return data


def a_written_free_form_script(task: str) -> dict:
    """What a model writes for PSS (the videos' order) or CCQA (a sentence), as they are deployed:
    no options."""
    data = a_written_script()
    ids = [v["video_id"] for v in data["videos"]]
    answer = "->".join(str(i) for i in range(len(ids), 0, -1)) if task == "PSS" else "Both fry the onions."
    data["questions"] = [
        {"question_id": f"{task.lower()}-1", "text": "?", "video_ids": ids, "answer": answer}
    ]
    return data


def a_written_bu_script() -> dict:
    """What a model writes for BU as deployed: options, two of them right (``answers``)."""
    data = a_written_script()
    data["questions"] = [
        {
            "question_id": "bu-1",
            "text": "What do the subjects intend?",
            "video_ids": [v["video_id"] for v in data["videos"]],
            "options": ["to rest", "to hide", "to eat", "to play"],
            "answer": "to hide",
            "answers": ["to hide", "to play"],
        }
    ]
    return data


def test_a_written_script_is_used_after_a_prose_reply_and_its_options_are_shuffled(
    tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    chat = planner(tmp_path, llm_server)
    llm_server.script([text("Sure! Here is a script."), text(json.dumps(a_written_script()))])
    (script,) = written_scripts(chat, TASKS, 1, seed=1)
    registry.clear_cache()

    assert script.script_id == "gen-1-0"
    assert script.videos[0].video_id == generate_script(41).videos[0].video_id  # the model's videos
    first, again = llm_server.chat_requests
    assert "Schema:" in first["messages"][1]["content"] and TASKS[0] in first["messages"][1]["content"]
    assert "JSON" in again["messages"][-1]["content"]  # the prose reply was re-asked
    letters = [q.answer_letter for q in script.questions]
    assert letters != ["A"] * len(letters)  # written answer-first, shuffled here


def test_a_model_that_writes_no_valid_script_falls_back_to_the_templates(
    tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    chat = planner(tmp_path, llm_server)
    broken = a_written_script()
    broken["questions"][0]["answer"] = "not an option"
    llm_server.script([text(json.dumps(broken)), text(json.dumps(broken))])
    (script,) = written_scripts(chat, TASKS, 1, seed=2)
    registry.clear_cache()

    assert script == generate_script(2 * 100_003, script_id="gen-2-0")
    assert "is not an option" in llm_server.chat_requests[1]["messages"][-1]["content"]
    assert llm_server.pending == 0


def test_scripts_are_written_for_the_ten_crossvid_tasks_in_turn(
    tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    """AgentCVR writes its training scripts per CrossVid task (BU ... CCQA); each request names its
    task with the description the master gets, and the tasks whose benchmark answer is no single
    letter are asked as the deployed master answers them (issue 38: "BU is written as single-answer
    but deployed as multi-select; PSS and CCQA as multiple choice but deployed as an order and free
    text. Write what is deployed."): BU multi-select, PSS an order, CCQA free text, FSA an
    interval."""
    chat = planner(tmp_path, llm_server)
    special = {
        0: a_written_bu_script(),
        5: a_written_fsa_script(),
        6: a_written_free_form_script("PSS"),
        9: a_written_free_form_script("CCQA"),
    }
    replies = [special.get(i, a_written_script()) for i in range(10)]
    llm_server.script([text(json.dumps(r)) for r in replies])
    scripts = written_scripts(chat, TASKS, 10, seed=3)
    registry.clear_cache()

    asked = [r["messages"][1]["content"] for r in llm_server.chat_requests]
    codes = ["BU", "NC", "CC", "PEA", "PI", "FSA", "PSS", "MSR", "MOC", "CCQA"]
    assert [a.split("questions of this task: ")[1].split(",")[0] for a in asked] == codes
    assert "functional step alignment" in asked[5] and "'40,52'" in asked[5] and "no options" in asked[5]
    assert "3 to 5 options" in asked[4] and "3 to 5 options" not in asked[5]
    assert "'2->3->1'" in asked[6] and "no options" in asked[6] and "no options" in asked[9]
    assert "1 to 3" in asked[0] and "'answers'" in asked[0]
    assert "same object seen in two views is one" in asked[8]
    assert [s.script_id for s in scripts] == [f"gen-3-{i}" for i in range(10)]
    assert all(s.videos[0].video_id == generate_script(41).videos[0].video_id for s in scripts)
    # Each question is marked with the task it was written for: the master is asked it with that
    # task's prompt (train what you deploy).
    assert [{q.task for q in s.questions} for s in scripts] == [{c} for c in codes]
    assert scripts[5].questions[0].answer == "20,30" and not scripts[5].questions[0].options
    (bu,), (pss,), (ccqa,) = scripts[0].questions, scripts[6].questions, scripts[9].questions
    assert bu.multi_select and len(bu.answer_letter or "") == 2  # the two right letters, e.g. "AC"
    assert pss.is_order and not pss.options and pss.answer == "2->1"
    assert not ccqa.options and not ccqa.is_order and ccqa.answer == "Both fry the onions."


def test_a_pss_script_with_options_or_a_wrong_order_is_asked_again(
    tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    chat = planner(tmp_path, llm_server)
    wrong = a_written_free_form_script("PSS")
    wrong["questions"][0]["answer"] = "1->1"
    replies = [a_written_script(), wrong]
    llm_server.script([text(json.dumps(r)) for r in replies])
    (script,) = write_scripts(chat, [TASKS[6]], 1, seed=4)
    registry.clear_cache()

    assert "ask it without options" in llm_server.chat_requests[1]["messages"][-1]["content"]
    assert not script.by_model and "each once" in (script.reason or "")


def test_an_fsa_script_with_options_is_asked_again_free_form(
    tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    chat = planner(tmp_path, llm_server)
    llm_server.script([text(json.dumps(a_written_script())), text(json.dumps(a_written_fsa_script()))])
    (script,) = written_scripts(chat, [TASKS[5]], 1, seed=4)
    registry.clear_cache()

    assert "must be an interval 'start,end'" in llm_server.chat_requests[1]["messages"][-1]["content"]
    assert [(q.task, q.answer) for q in script.questions] == [("FSA", "20,30")]


def test_an_fsa_interval_outside_its_video_is_no_script(
    tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    chat = planner(tmp_path, llm_server)
    outside = a_written_fsa_script()
    outside["questions"][0]["answer"] = "20,900"
    llm_server.script([text(json.dumps(outside))] * 2)
    (written,) = write_scripts(chat, [TASKS[5]], 1, seed=5)
    registry.clear_cache()

    assert not written.by_model and "'20,900' is not inside its video" in (written.reason or "")


def test_a_reply_cut_off_twice_falls_back_to_the_template_with_the_reason(
    tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    """A small model writing a long script runs into the output limit (llama.cpp answers HTTP 200,
    ``finish_reason: "length"``, with the JSON cut mid-object); the client asks once more with
    twice the limit and then gives up. That task gets the template and the reason; the next task
    is still asked, and the training data is whole."""
    chat = planner(tmp_path, llm_server)
    whole = json.dumps(a_written_script())
    llm_server.script([cut_off(whole[:120]), cut_off(whole[:240]), text(whole)])
    first, second = write_scripts(chat, TASKS, 2, seed=4, max_tokens=32)
    registry.clear_cache()

    assert not first.by_model and first.script == generate_script(4 * 100_003, script_id="gen-4-0")
    assert first.reason == "the reply was cut off at the writer's output limit (32 tokens) twice"
    assert second.by_model and second.reason is None and second.script.script_id == "gen-4-1"
    limits = [r.get("max_tokens") for r in llm_server.chat_requests]
    assert limits == [32, 64, 32]  # the writer's limit, doubled once by the client's re-ask


def test_the_writer_limits_its_reply_and_says_why_without_a_model(
    tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    chat = planner(tmp_path, llm_server)
    llm_server.script([text(json.dumps(a_written_script()))])
    (written,) = write_scripts(chat, TASKS, 1, seed=5)
    registry.clear_cache()
    assert written.by_model and llm_server.chat_requests[0]["max_tokens"] == MAX_TOKENS
    (template,) = write_scripts(None, TASKS, 1, seed=5)
    assert not template.by_model and template.reason == "no model is configured"

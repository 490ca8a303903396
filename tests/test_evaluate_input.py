"""``vidscope eval`` refuses bad annotation files, loader options and run names in one line each.

Nothing here reaches a model or ingests a video: each input is refused while the run is prepared.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from vidscope.cli import app
from vidscope.cli.common import overrides

runner = CliRunner()


@pytest.fixture()
def bench(tmp_path, monkeypatch) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "videos").mkdir()
    annotations = _one_question_folder(tmp_path / "mlvu")
    return {"root": tmp_path / "videos", "annotations": annotations, "folder": tmp_path}


@pytest.fixture()
def cli(bench):  # type: ignore[no-untyped-def]
    overrides.clear()

    def invoke(*args: str):  # type: ignore[no-untyped-def]
        return runner.invoke(app, ["--data-dir", str(bench["folder"] / "data"), *args])

    yield invoke
    overrides.clear()


def _one_question_folder(folder: Path, **fields: Any) -> Path:
    record = {"video": "harbor.mp4", "duration": 5.0, "question": "What is written?", "question_type": "ocr"}
    record.update({"candidates": ["BLUE BOAT", "RED CAR"], "answer": "BLUE BOAT"}, **fields)
    folder.mkdir()
    (folder / "1_x.json").write_text(json.dumps([record]))
    return folder


def test_bad_annotations_options_and_run_names_are_one_line_each(cli, bench, tmp_path) -> None:
    def refused(*args: str) -> str:
        result = cli("eval", "mlvu", "--agent", "extractive", "--root", str(bench["root"]), *args)
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1, result.output
        return result.output

    many = [f"choice {i}" for i in range(27)]
    output = refused(
        "--annotations", str(_one_question_folder(tmp_path / "many", candidates=many, answer="choice 26"))
    )
    assert "27 options; at most 26" in output
    # A wrong-typed field is the file's fault, not an option's.
    output = refused("--annotations", str(_one_question_folder(tmp_path / "typed", candidates=5)))
    assert "cannot read" in output and "bad loader option" not in output
    output = refused("--annotations", str(_one_question_folder(tmp_path / "null", question=None)))
    assert "the question is missing" in output
    output = refused("--annotations", str(bench["annotations"]), "--option", "colour=blue")
    assert "bad loader option" in output

    data = bench["folder"] / "data"
    for name in (str(tmp_path / "abs-run"), "../../escaped", "..", "a/b", ".hidden"):
        output = refused("--annotations", str(bench["annotations"]), "--run", name)
        assert "run name" in output
    assert not (tmp_path / "abs-run").exists() and not (data.parent / "escaped").exists()
    assert not (data / "escaped").exists() and not (data / "eval" / "a").exists()


def test_up_to_26_options_load_with_their_letters(tmp_path) -> None:
    from vidscope.evaluation.loaders import mlvu

    many = [f"choice {i}" for i in range(26)]
    folder = _one_question_folder(tmp_path / "a", candidates=many, answer="choice 25")
    (item,) = mlvu.load(folder)
    assert item.answer == "Z" and item.answer_index == 25


def test_a_planner_only_config_is_accepted_as_ask_accepts_it(tmp_path: Path) -> None:
    """Issue 24 / the real-model tier: models.planner alone answers (it is what ask uses)."""
    from vidscope.core.settings import Settings
    from vidscope.flows.evaluate import prepare_run

    annotations = tmp_path / "questions.json"
    annotations.write_text(
        json.dumps([{"q_uid": "q", "question": "?"} | {f"option {i}": "x" for i in range(5)}])
    )
    planner_only = Settings(data_dir=tmp_path / "data", models={"planner": "openai:small"})
    run_dir = prepare_run(planner_only, "egoschema", annotations, tmp_path, "dvd", name="planner-only")
    assert run_dir.is_dir()
    nothing = Settings(data_dir=tmp_path / "data")
    with pytest.raises(ValueError, match="needs a planner"):
        prepare_run(nothing, "egoschema", annotations, tmp_path, "dvd", name="none")

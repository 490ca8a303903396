"""The multilingual text embedder (issue 41): a German query finds the moment in an English video.

The real model (paraphrase-multilingual-MiniLM-L12-v2) cannot be fetched here, so a tiny BERT of the
same on-disk format is built and trained for a few seconds with torch: a word-level tokenizer.json
over a few English and German words, model.safetensors + config.json, trained contrastively on
English/German translation pairs so that both languages land near each other. It then runs through
the same code as the real model: the NumPy forward pass (``minilm:<directory>``), and as ONNX
served over loopback in place of the pinned card (fetched on first use into the model cache and
checked against its pins). The video is narrated in English by espeak-ng and ingested for real.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from stores import NO_MODELS

from vidscope.agents.languages import MULTILINGUAL_OPTION, plan_query
from vidscope.core.errors import BackendUnavailable
from vidscope.core.settings import ModelSettings, Settings
from vidscope.core.synthetic import narration_wav, text_video
from vidscope.flows.ingest import run_ingest
from vidscope.models import multilingual_minilm, registry
from vidscope.models.model_files import Manifest, ModelFile
from vidscope.models.open_store import open_store

OVEN = "The oven is heated to two hundred degrees before the bread goes in."
DISHES = "Afterwards we wash the dishes and dry the cups with a towel."
GERMAN_QUERY = "Wie heiß ist der Ofen vor dem Brot?"

#: English/German pairs the tiny model learns to put together (words and whole sentences).
PAIRS = [
    ("oven", "ofen"),
    ("bread", "brot"),
    ("hot", "heiß"),
    ("heated", "geheizt"),
    ("degrees", "grad"),
    ("two hundred", "zweihundert"),
    ("200", "zweihundert"),
    ("dishes", "geschirr"),
    ("wash", "spülen"),
    ("cups", "tassen"),
    ("towel", "tuch"),
    ("dry", "trocknen"),
    ("how hot is the oven before the bread", "wie heiß ist der ofen vor dem brot"),
    ("oven temperature", "ofentemperatur"),
    ("the oven is heated to two hundred degrees", "der ofen wird auf zweihundert grad geheizt"),
    ("before the bread goes in", "bevor das brot hineinkommt"),
    ("we wash the dishes", "wir spülen das geschirr"),
    ("dry the cups with a towel", "die tassen mit einem tuch trocknen"),
]
FILLERS = [
    "the", "is", "to", "before", "goes", "in", "afterwards", "we", "and", "with", "a", "how", "of",
    "wie", "ist", "der", "vor", "dem", "das", "die", "mit", "einem", "wird", "auf", "bevor", "wir",
    "hineinkommt",
]  # fmt: skip


def _vocabulary() -> list[str]:
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "?", ".", ","]
    for english, german in PAIRS:
        words += english.split() + german.split()
    words += FILLERS + OVEN.lower().rstrip(".").split() + DISHES.lower().rstrip(".").split()
    return list(dict.fromkeys(words))


def _tokenizer_json(vocabulary: list[str]) -> str:
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordLevel

    tokenizer = Tokenizer(WordLevel({w: i for i, w in enumerate(vocabulary)}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    return tokenizer.to_str()


def train_tiny_bert(directory: Path, steps: int = 300) -> None:
    """A 2-layer BERT (hidden 32) in the multilingual MiniLM's format, trained so translations meet."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import torch
    import transformers
    from tokenizers import Tokenizer

    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: more threads only wait on each other on a busy machine
    vocabulary = _vocabulary()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tokenizer.json").write_text(_tokenizer_json(vocabulary), encoding="utf-8")
    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    config = transformers.BertConfig(
        vocab_size=len(vocabulary),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        hidden_act="gelu",
    )
    model = transformers.BertModel(config, add_pooling_layer=False)
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)

    def embed(texts: list[str]) -> torch.Tensor:
        encodings = tokenizer.encode_batch(texts)
        ids = torch.tensor([e.ids for e in encodings])
        mask = torch.tensor([e.attention_mask for e in encodings]).unsqueeze(-1).float()
        hidden = model(input_ids=ids, attention_mask=mask.squeeze(-1)).last_hidden_state
        return torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=1)

    english = [e for e, _ in PAIRS] + [OVEN, DISHES]
    german = [g for _, g in PAIRS] + [
        "der ofen wird vor dem brot auf zweihundert grad geheizt",
        "danach spülen wir das geschirr und trocknen die tassen mit einem tuch",
    ]
    targets = torch.arange(len(english))
    model.train()
    for _ in range(steps):
        similarity = 20 * embed(english) @ embed(german).T  # InfoNCE both ways over the batch
        loss = torch.nn.functional.cross_entropy(similarity, targets) + torch.nn.functional.cross_entropy(
            similarity.T, targets
        )
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    model.eval()
    model.save_pretrained(str(directory), safe_serialization=True)
    torch.set_num_threads(threads)


def export_onnx(source: Path, directory: Path) -> None:
    """The same tiny model as ``model.onnx`` (first output: the last hidden state) + tokenizer.json."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("onnx", reason="torch.onnx.export needs the onnx package (dev extra)")
    import torch
    import transformers

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tokenizer.json").write_bytes((source / "tokenizer.json").read_bytes())
    model = transformers.BertModel.from_pretrained(str(source)).eval()
    ids = torch.tensor([[2, 10, 11, 3], [2, 12, 3, 0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    types = torch.zeros_like(ids)

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = model

        def forward(self, input_ids: object, attention_mask: object, token_type_ids: object) -> object:
            return self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    axes = {0: "n", 1: "t"}
    torch.onnx.export(
        Hidden(),
        (ids, mask, types),
        str(directory / "model.onnx"),
        input_names=["input_ids", "attention_mask", "token_type_ids"],
        output_names=["last_hidden_state"],
        dynamic_axes={
            "input_ids": axes,
            "attention_mask": axes,
            "token_type_ids": axes,
            "last_hidden_state": axes,
        },
        dynamo=False,
    )


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trained tiny model's directory (its name says multilingual, as the real model's does)."""
    directory = tmp_path_factory.mktemp("models") / "tiny-multilingual-bert"
    train_tiny_bert(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_onnx(tiny_bert: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("served") / "onnx"
    export_onnx(tiny_bert, directory)
    return directory


def _cosine(vectors: np.ndarray) -> np.ndarray:
    return vectors @ vectors.T


def test_the_numpy_forward_pass_runs_the_tiny_bert_and_translations_meet(
    tiny_bert: Path, tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path / "data", models=ModelSettings(text_embedder=f"minilm:{tiny_bert}"))
    embedder = registry.text_embedder(settings)
    assert isinstance(embedder, multilingual_minilm.BertSentenceEmbedder) and embedder.dim == 32
    vectors = embedder.embed(["how hot is the oven", GERMAN_QUERY, "we wash the dishes", "Oven"])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similarity = _cosine(vectors)
    assert similarity[0, 1] > similarity[2, 1] + 0.3  # the German oven question is near the English one
    # Batched or alone, padded or not: the same vector (padding is masked out).
    assert np.allclose(embedder.embed(["Oven"])[0], vectors[3], atol=1e-5)


def test_a_german_query_finds_the_english_moment_only_with_the_multilingual_option(
    tiny_bert: Path, tmp_path: Path
) -> None:
    spec = f"minilm:{tiny_bert}"
    multilingual = tmp_path / "data"
    folder = tmp_path / "videos"
    wav = narration_wav([(0.5, OVEN), (8.0, DISHES)], folder / "said.wav", duration=14.0)
    video = text_video(folder / "kitchen.mp4", duration=14.0, size=(320, 180), audio=wav)
    # Speech and text embeddings only: the rest of the ingestion has nothing to do with languages.
    models = ModelSettings(
        **{role: off for role, off in NO_MODELS.items() if role != "speech_recognizer"}, text_embedder=spec
    )
    (report,) = run_ingest([str(video)], Settings(data_dir=multilingual, models=models), optimize=False)
    assert report.status == "ok", report

    from typer.testing import CliRunner

    from vidscope.cli import app

    def search_moments(query: str) -> dict[str, Any]:
        """``vidscope search --moments QUERY --json`` with the multilingual text embedder."""
        env = {"VIDSCOPE_MODELS__TEXT_EMBEDDER": spec}
        result = CliRunner().invoke(
            app, ["--data-dir", str(multilingual), "search", "--moments", query, "--json"], env=env
        )
        assert result.exit_code == 0 and "Traceback" not in result.output, result.output
        return dict(json.loads(result.output))

    found = search_moments(GERMAN_QUERY)
    assert found["moments"], found
    assert found["moments"][0]["start"] < 6.0  # the oven moment, not the dishes at 8 s
    assert not any("looks German" in note for note in found["notes"])  # nothing to explain
    dishes = search_moments("Wir spülen das Geschirr")
    assert dishes["moments"] and dishes["moments"][0]["end"] > 8.0

    # The named multilingual model, offline and not in the cache: one line saying where its files
    # go, no traceback, no URL.
    env = {
        "VIDSCOPE_MODELS__TEXT_EMBEDDER": f"minilm:{multilingual_minilm.MULTILINGUAL}",
        "VIDSCOPE_MODEL_CACHE": str(tmp_path / "empty-cache"),
    }
    refused = CliRunner().invoke(
        app, ["--data-dir", str(multilingual), "search", "--moments", GERMAN_QUERY], env=env
    )
    assert refused.exit_code == 1 and "Traceback" not in refused.output, refused.output
    line = " ".join(refused.output.split())
    assert "not in the cache" in line and "empty-cache" in line and "http" not in line

    settings = Settings(data_dir=multilingual, models=ModelSettings(text_embedder=spec))

    # The default (English) text model on the same library: the note find_moments shows says why a
    # German query may find little (tests/test_query_languages.py runs that search on its own ingest).
    store = open_store(settings)
    plan = plan_query(GERMAN_QUERY, store, embedder_spec="minilm:embedded")
    note = " ".join(plan.notes)
    assert "looks German" in note and "speech is English" in note
    assert f"minilm:{multilingual_minilm.MULTILINGUAL}" in note  # what to switch to, by name
    assert plan_query(GERMAN_QUERY, store, embedder_spec=spec).notes == []


def test_an_xlmr_style_sentencepiece_tokenizer_pads_with_its_own_pad(tiny_bert: Path, tmp_path: Path) -> None:
    """The real model's tokenizer is XLM-R's (a Unigram vocabulary, <s> … </s>, <pad> = 1, no [PAD]):
    the NumPy path pads with it, and a padded text's vector is its vector alone."""
    from tokenizers import Tokenizer, pre_tokenizers, processors
    from tokenizers.models import Unigram

    pieces = ["<s>", "<pad>", "</s>", "<unk>", "▁oven", "▁ofen", "▁the", "▁bread", "▁brot", "▁hot"]
    tokenizer = Tokenizer(Unigram([(p, -1.0 - i / 10) for i, p in enumerate(pieces)], unk_id=3))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 2)]
    )
    directory = tmp_path / "xlmr-style"
    directory.mkdir()
    tokenizer.save(str(directory / "tokenizer.json"))
    for name in ("model.safetensors", "config.json"):
        (directory / name).write_bytes((tiny_bert / name).read_bytes())
    embedder = multilingual_minilm.BertSentenceEmbedder("xlmr-style", directory)
    padding = embedder._tokenizer.padding
    assert padding is not None and (padding["pad_id"], padding["pad_token"]) == (1, "<pad>")
    both = embedder.embed(["the hot oven bread", "oven"])
    assert np.allclose(both[1], embedder.embed(["oven"])[0], atol=1e-5)


def _serve(directory: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(directory), **kwargs)  # type: ignore[arg-type]

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def served_card(tiny_onnx: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Manifest]:
    """The named card, its files served from loopback with their real pins (fetching allowed)."""
    server, base = _serve(tiny_onnx)
    files = [
        ModelFile(
            name=name,
            url=f"{base}/{name}",
            sha256=hashlib.sha256((tiny_onnx / name).read_bytes()).hexdigest(),
            bytes=(tiny_onnx / name).stat().st_size,
        )
        for name in ("model.onnx", "tokenizer.json")
    ]
    key = multilingual_minilm.MULTILINGUAL.lower()
    card = multilingual_minilm.CARDS[key].model_copy(update={"files": files})
    monkeypatch.setitem(multilingual_minilm.CARDS, key, card)
    monkeypatch.setenv("VIDSCOPE_MODEL_FETCH", "1")
    try:
        yield card
    finally:
        server.shutdown()
        server.server_close()


def test_the_named_model_is_fetched_pinned_into_the_model_cache_on_first_use(
    served_card: Manifest, tiny_bert: Path, tiny_onnx: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = f"minilm:{multilingual_minilm.MULTILINGUAL}"
    cache = tmp_path / "cache"
    settings = Settings(
        data_dir=tmp_path / "data", model_cache=cache, models=ModelSettings(text_embedder=spec)
    )
    embedder = registry.text_embedder(settings)
    assert embedder is not None
    where = cache / multilingual_minilm.MULTILINGUAL
    assert sorted(p.name for p in where.iterdir() if not p.name.startswith(".")) == [
        "model.onnx",
        "tokenizer.json",
        "vidscope-model.json",
    ]
    # The ONNX run of the fetched files gives the NumPy run's vectors.
    texts = ["how hot is the oven", GERMAN_QUERY, "the bread"]
    numpy_run = multilingual_minilm.BertSentenceEmbedder("numpy", tiny_bert).embed(texts)
    assert np.allclose(embedder.embed(texts), numpy_run, atol=1e-4)

    # A file that does not match its pin is never kept; the line says so, without a traceback.
    other = served_card.model_copy(
        update={"files": [f.model_copy(update={"sha256": "0" * 64}) for f in served_card.files]}
    )
    monkeypatch.setitem(multilingual_minilm.CARDS, multilingual_minilm.MULTILINGUAL.lower(), other)
    wrong = Settings(
        data_dir=tmp_path / "data2", model_cache=tmp_path / "cache2", models=ModelSettings(text_embedder=spec)
    )
    with pytest.raises(BackendUnavailable, match="not the pinned") as refused:
        registry.text_embedder(wrong)
    assert "\n" not in str(refused.value)
    assert not (tmp_path / "cache2" / multilingual_minilm.MULTILINGUAL / "model.onnx").exists()

    # Offline (fetching off) with an empty cache: one line naming where the files go.
    monkeypatch.setenv("VIDSCOPE_MODEL_FETCH", "0")
    offline = Settings(
        data_dir=tmp_path / "data3", model_cache=tmp_path / "cache3", models=ModelSettings(text_embedder=spec)
    )
    with pytest.raises(BackendUnavailable, match="not in the cache") as missing:
        registry.text_embedder(offline)
    assert str(tmp_path / "cache3" / multilingual_minilm.MULTILINGUAL) in str(missing.value)
    assert "not downloaded" in missing.value.brief


def test_models_pull_carries_the_named_model_to_a_machine_without_network(
    served_card: Manifest, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from vidscope.cli import app

    def pull(cache: Path, *args: str) -> str:
        env = {
            "VIDSCOPE_MODELS__TEXT_EMBEDDER": f"minilm:{multilingual_minilm.MULTILINGUAL}",
            "VIDSCOPE_MODELS__IMAGE_TEXT": "",
            "VIDSCOPE_MODEL_CACHE": str(cache),
        }
        result = CliRunner().invoke(
            app, ["--data-dir", str(tmp_path / "data"), "models", "pull", *args], env=env
        )
        assert result.exit_code == 0 and "Traceback" not in result.output, result.output
        return " ".join(result.output.split())

    said = pull(tmp_path / "online", "--to", str(tmp_path / "stick"))
    assert "sha256 checked" in said and "stick" in said
    carried = tmp_path / "stick" / multilingual_minilm.MULTILINGUAL
    assert (carried / "model.onnx").read_bytes() == (
        tmp_path / "online" / multilingual_minilm.MULTILINGUAL / "model.onnx"
    ).read_bytes()
    pull(tmp_path / "offline", "--from", str(tmp_path / "stick"))
    (carried / "tokenizer.json").write_text("{}")  # a changed file is refused, nothing kept
    env = {
        "VIDSCOPE_MODELS__TEXT_EMBEDDER": f"minilm:{multilingual_minilm.MULTILINGUAL}",
        "VIDSCOPE_MODELS__IMAGE_TEXT": "",
        "VIDSCOPE_MODEL_CACHE": str(tmp_path / "third"),
    }
    refused = CliRunner().invoke(
        app,
        ["--data-dir", str(tmp_path / "data"), "models", "pull", "--from", str(tmp_path / "stick")],
        env=env,
    )
    assert refused.exit_code == 1 and "Traceback" not in refused.output
    assert not (tmp_path / "third" / multilingual_minilm.MULTILINGUAL / "tokenizer.json").exists()


def test_the_real_card_is_pinned_to_one_revision() -> None:
    card = multilingual_minilm.CARDS[multilingual_minilm.MULTILINGUAL.lower()]
    assert card.runtime["dim"] == 384 and card.runtime["max_tokens"] == 128
    for f in card.files:
        assert len(f.sha256) == 64 and int(f.sha256, 16) and f.bytes
        assert "/resolve/2c4055b12046f11709e9df2c122e59ffbdc2f900/" in f.url  # a revision, not "main"
    assert multilingual_minilm.is_known("minilm:x") is False
    assert multilingual_minilm.is_known(multilingual_minilm.MULTILINGUAL.upper())
    assert json.loads(card.model_dump_json())["kind"] == "minilm"
    assert f"minilm:{card.name}" == MULTILINGUAL_OPTION  # the note names the model this card fetches

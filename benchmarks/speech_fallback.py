"""Whisper's temperature fallback, its compression-ratio bar and its schedule, on repeated, paused
and varied speech.

faster-whisper decodes a 30-s window again at higher temperatures when its text compresses more
than ``compression_ratio_threshold`` (Whisper's paper: 2.4, meant for decoding loops) or its
average log probability is under -1; the paper's schedule goes 0.0, 0.2, ... 1.0. A sentence said
twice in a window already compresses 2.6x. This script transcribes three espeak-ng narrations with
the embedded Whisper base as the speech stage runs it (beam 1, VAD, word times, half the cores)
under three settings, in one run, and prints the seconds, the words heard, how many of the spoken
words they match in order, and (paused) the fewest and most words heard in one minute:

* ``repeated``: the narration of ``ocr_clock.py``'s lecture (one sentence said over and over),
  its first ``--seconds``;
* ``paused``: the narration of ``ingest_memory.py``'s 1-hour video (one short sentence said six
  times, then silence until the next minute), ``--minutes`` of it: VAD packs the speech of two
  minutes into one window;
* ``varied``: the prose of this repository's README (code blocks and markup removed), its first
  520 words.

Settings: ``paper`` (bar 2.4, temperatures 0.0 … 1.0), ``bar 4.0`` (bar 4.0, the paper's
temperatures: vidscope's default before the schedule was cut) and ``default`` (vidscope's:
``whisper.COMPRESSION_RATIO_THRESHOLD`` and ``whisper.FALLBACK_TEMPERATURES``).

Run: ``.venv/bin/python benchmarks/speech_fallback.py [--seconds 180] [--minutes 10] [--rate 150]``
(needs the whisper-base extra and espeak-ng; ~8 minutes on 2 cores). Files go to ``benchmarks/out``
(gitignored).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(1, str(ROOT))

from ocr_clock import LECTURE_TALK  # noqa: E402  (the lecture's narration)

from vidscope.core.synthetic import narration_wav, speech_wav  # noqa: E402
from vidscope.models import whisper  # noqa: E402

OUT = BENCH / "out"
PAPER_THRESHOLD = 2.4


def _norm(words: list[str]) -> list[str]:
    return [w for w in (re.sub(r"[^a-z0-9]", "", w.lower()) for w in words) if w]


def readme_prose(words: int) -> str:
    """The README's prose: code blocks, links and markup removed, its first ``words`` words."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"https?://\S+", " ", text)
    text = re.sub(r"[#*`\[\]()|>_]", " ", text)
    return " ".join(text.split()[:words])


PAPER_TEMPERATURES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
#: The 1-hour memory benchmark's narration (``ingest_memory.py``): said six times each minute.
PAUSED_SENTENCE = "This hour-long recording checks how much memory ingestion needs. "
SETTINGS = {
    "paper": {"compression_ratio_threshold": PAPER_THRESHOLD, "temperature": list(PAPER_TEMPERATURES)},
    "bar 4.0": {"compression_ratio_threshold": 4.0, "temperature": list(PAPER_TEMPERATURES)},
    "default": {},
}


def heard(options: dict, wav: Path, spoken: list[str]) -> tuple[float, int, int, tuple[int, int]]:
    """(seconds, words heard, spoken words matched in order, (fewest, most) words in one minute)."""
    recogniser = whisper.from_spec("speech_recognizer", "embedded-base", options, OUT)
    recogniser.load()
    started = time.perf_counter()
    transcript = recogniser.transcribe(wav)
    seconds = time.perf_counter() - started
    timed = [(w.start, w) for s in transcript.segments for w in s.words]
    words = _norm([w.word for _, w in timed])
    minutes = int(wav_seconds(wav) // 60)
    per_minute = [sum(1 for start, _ in timed if m * 60 <= start < (m + 1) * 60) for m in range(minutes)]
    spread = (min(per_minute), max(per_minute)) if per_minute else (0, 0)
    return seconds, len(words), in_order(spoken, words), spread


def in_order(spoken: list[str], heard: list[str]) -> int:
    """The longest common subsequence of the two word lists: spoken words heard, in order.

    (difflib's matching blocks are greedy, and on a narration that repeats one sentence they can
    align a run of it with the wrong repetition and count a fraction of what was heard.)"""
    previous = [0] * (len(heard) + 1)
    for word in spoken:
        current = [0]
        for j, other in enumerate(heard):
            current.append(previous[j] + 1 if word == other else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def wav_seconds(wav: Path) -> float:
    import wave

    with wave.open(str(wav)) as handle:
        return handle.getnframes() / handle.getframerate()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=180.0, help="length of the repeated narration")
    parser.add_argument("--minutes", type=int, default=10, help="length of the paused narration")
    parser.add_argument("--rate", type=int, default=150, help="espeak-ng words a minute of the varied one")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    repeats = int(args.seconds * 150 / 60 / len(LECTURE_TALK.split())) + 2
    # One line cut at ``--seconds`` (narration_wav cuts a line where the narration ends).
    repeated = narration_wav(
        [(0.0, LECTURE_TALK * repeats)], OUT / "speech-fallback-repeated.wav", duration=args.seconds
    )
    paused = narration_wav(
        [(60.0 * m, PAUSED_SENTENCE * 6) for m in range(args.minutes)],
        OUT / "speech-fallback-paused.wav",
        duration=60.0 * args.minutes,
    )
    prose = readme_prose(520)
    varied = speech_wav(prose, OUT / "speech-fallback-varied.wav", rate_wpm=args.rate)
    cases = {
        "repeated": (repeated, _norm((LECTURE_TALK * repeats).split())),
        "paused": (paused, _norm((PAUSED_SENTENCE * 6 * args.minutes).split())),
        "varied": (varied, _norm(prose.split())),
    }
    print(f"default: bar {whisper.COMPRESSION_RATIO_THRESHOLD}, temperatures {whisper.FALLBACK_TEMPERATURES}")
    print(f"{'narration':<10} {'setting':<8} {'seconds':>8} {'heard':>6} {'matched':>8} {'a minute':>9}")
    for name, (wav, spoken) in cases.items():
        results = {}
        for setting, options in SETTINGS.items():
            results[setting] = heard(options, wav, spoken)
            seconds, count, matched, (fewest, most) = results[setting]
            row = f"{name:<10} {setting:<8} {seconds:>8.1f} {count:>6} {matched:>8} {fewest:>4}-{most:<4}"
            print(row, flush=True)
        fast, _, best, _ = results["default"]
        for setting in ("paper", "bar 4.0"):
            slow, _, other, _ = results[setting]
            gain = f"{slow / fast:.2f}x faster, {best - other:+d} words matched"
            print(f"{name}: default against {setting}: {gain}")


if __name__ == "__main__":
    main()

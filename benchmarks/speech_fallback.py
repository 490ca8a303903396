"""Whisper's temperature fallback and its compression-ratio bar, on repeated and on varied speech.

faster-whisper decodes a 30-s window again at higher temperatures when its text compresses more
than ``compression_ratio_threshold`` (Whisper's paper: 2.4, meant for decoding loops). A sentence
said twice in a window already compresses 2.6x. This script transcribes two espeak-ng narrations
with the embedded Whisper base as the speech stage runs it (beam 1, VAD, word times, half the
cores) at Whisper's 2.4 and at vidscope's default (``whisper.COMPRESSION_RATIO_THRESHOLD``), in one
run, and prints the seconds, the words heard and how many of the spoken words they match in order:

* ``repeated``: the narration of ``ocr_clock.py``'s lecture (one sentence said over and over),
  its first ``--seconds``;
* ``varied``: the prose of this repository's README (code blocks and markup removed), its first
  520 words.

Run: ``.venv/bin/python benchmarks/speech_fallback.py [--seconds 180] [--rate 150]`` (needs the whisper-base
extra and espeak-ng; ~2 minutes on 2 cores). Files go to ``benchmarks/out`` (gitignored).
"""

from __future__ import annotations

import argparse
import difflib
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


def heard(threshold: float, wav: Path, spoken: list[str]) -> tuple[float, int, int]:
    """(seconds, words heard, spoken words matched in order) at ``threshold``."""
    recogniser = whisper.from_spec(
        "speech_recognizer", "embedded-base", {"compression_ratio_threshold": threshold}, OUT
    )
    recogniser.load()
    started = time.perf_counter()
    transcript = recogniser.transcribe(wav)
    seconds = time.perf_counter() - started
    words = _norm([w.word for s in transcript.segments for w in s.words])
    match = difflib.SequenceMatcher(a=spoken, b=words, autojunk=False)
    return seconds, len(words), sum(block.size for block in match.get_matching_blocks())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=180.0, help="length of the repeated narration")
    parser.add_argument("--rate", type=int, default=150, help="espeak-ng words a minute of the varied one")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    repeats = int(args.seconds * 150 / 60 / len(LECTURE_TALK.split())) + 2
    # One line cut at ``--seconds`` (narration_wav cuts a line where the narration ends).
    repeated = narration_wav(
        [(0.0, LECTURE_TALK * repeats)], OUT / "speech-fallback-repeated.wav", duration=args.seconds
    )
    prose = readme_prose(520)
    varied = speech_wav(prose, OUT / "speech-fallback-varied.wav", rate_wpm=args.rate)
    cases = {
        "repeated": (repeated, _norm((LECTURE_TALK * repeats).split())),
        "varied": (varied, _norm(prose.split())),
    }
    default = whisper.COMPRESSION_RATIO_THRESHOLD
    print(f"{'narration':<10} {'threshold':>9} {'seconds':>8} {'heard':>6} {'matched':>8}")
    for name, (wav, spoken) in cases.items():
        results = {}
        for threshold in (PAPER_THRESHOLD, default):
            results[threshold] = heard(threshold, wav, spoken)
            seconds, count, matched = results[threshold]
            print(f"{name:<10} {threshold:>9} {seconds:>8.1f} {count:>6} {matched:>8}")
        (slow, _, low), (fast, _, high) = results[PAPER_THRESHOLD], results[default]
        gain = f"{slow / fast:.2f}x faster, {high - low:+d} words matched"
        print(f"{name}: {default} against {PAPER_THRESHOLD}: {gain}")


if __name__ == "__main__":
    main()

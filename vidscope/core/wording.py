"""Words for people: counts in the right number, shared by the answers and the commands."""

from __future__ import annotations


def plural(count: int, word: str, words: str | None = None) -> str:
    """``count`` and ``word`` in the right number: "1 video", "2 videos", "0 videos"."""
    return f"{count} {word if count == 1 else (words or word + 's')}"

"""Which option a free-form model answer chose: the extraction rules, explicit and in order.

Models answer "(B)", "B.", "The answer is B", "I think it's the red car", or ramble. The first
rule that decides wins; a rule that finds several different options decides nothing and the next
rule is tried; when no rule decides, the answer chose nothing and is scored wrong.

1. **Bare letter**: the whole answer is one valid letter, optionally bracketed or followed by
   ``.``/``)``/``:`` — ``"B"``, ``"(b)"``, ``"B."``.
2. **Answer phrase**: the first "answer/option/choice is X" (``"The answer is B"``, ``"Answer: (C)"``,
   ``"option D"``, ``"Best option: B"``). The letter must be a capital, or bracketed: "the answer is
   a dog" names no option.
3. **Leading label**: the answer starts with a labelled letter, ``"B. the dog"``, ``"(B) the dog"``,
   ``"B) ..."``, ``"B: ..."``. A bare leading capital is not a label ("A man walks in").
4. **Bracketed letters**: every ``(X)`` in the answer names the same valid letter.
5. **Option text**: exactly one option's text occurs in the answer (case, punctuation and spacing
   ignored; quoted text counts the same). When one matching option's text contains another's
   ("red" / "red car"), the longer one is meant.

Letters beyond the number of options are never valid ("E" with four options).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from vidscope.evaluation.items import LETTERS

_PHRASE = re.compile(
    r"\b(?i:answer|option|choice)\b(?:\s+(?i:is|would\s+be|should\s+be|will\s+be))?\s*[:\-]?\s*"
    r"(?i:option\s+|choice\s+)?(?:\(([A-Ja-j])\)|([A-J])\b)"
)
_LEADING = re.compile(r"^\s*(?:\(([A-Ja-j])\)|([A-J])\s*[.):])")
_BRACKETED = re.compile(r"\(([A-Ja-j])\)")
_BARE = re.compile(r"^\s*[(\[]?\s*([A-Ja-j])\s*[)\].:]?\s*$")
_WORD = re.compile(r"[^\w]+")


def _valid(letter: str | None, n_options: int) -> str | None:
    if letter is None:
        return None
    letter = letter.upper()
    return letter if letter in LETTERS[:n_options] else None


def _normalise(text: str) -> str:
    """Lower case, punctuation to spaces, single spaces, padded so matches fall on word boundaries."""
    return f" {_WORD.sub(' ', text.lower()).strip()} "


def _by_option_text(answer: str, options: Sequence[str]) -> str | None:
    said = _normalise(answer)
    texts = [_normalise(text) for text in options]
    found = [i for i, text in enumerate(texts) if text.strip() and text in said]
    # "red car" said: the option "red" also matches, but the longer text is the one meant.
    found = [i for i in found if not any(texts[i] != texts[j] and texts[i] in texts[j] for j in found)]
    return LETTERS[found[0]] if len({texts[i] for i in found}) == 1 else None


def extract_choice(answer: str | None, options: Sequence[str]) -> str | None:
    """The option letter ``answer`` chose among ``options``, or None when it chose none."""
    if not answer or not answer.strip() or not options:
        return None
    n = len(options)
    bare = _BARE.match(answer)
    if bare:
        return _valid(bare.group(1), n)
    for match in _PHRASE.finditer(answer):
        letter = _valid(match.group(1) or match.group(2), n)
        if letter:
            return letter
    leading = _LEADING.match(answer)
    if leading:
        letter = _valid(leading.group(1) or leading.group(2), n)
        if letter:
            return letter
    bracketed = {_valid(m, n) for m in _BRACKETED.findall(answer)}
    if len(bracketed) == 1 and None not in bracketed:
        return bracketed.pop()
    return _by_option_text(answer, options)

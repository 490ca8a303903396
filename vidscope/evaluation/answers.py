"""Which option a free-form model answer chose: the extraction rules, explicit and in order.

Models answer "(B)", "B.", "The answer is B", "**Answer:** C", ``{"answer": "D"}``, "I think it's
the red car", or ramble. Markdown emphasis and code marks are read through (``**C**`` is ``C``).
The first rule that decides wins; a rule that finds several different options decides nothing and
the next rule is tried; when no rule decides, the answer chose nothing and is scored wrong (and
counted as unparsed, apart from wrong choices: see :func:`vidscope.evaluation.scoring.score_choices`).

0. **JSON**: the answer is a JSON object (alone or in a code fence) with an ``answer``, ``choice``
   or ``option`` field: that field's value is read by these rules. **Answer tag**: the answer holds
   an ``<answer>…</answer>`` tag (the form CrossVid's "extractable" prompts ask for): the tag's
   content is read by these rules.
1. **Bare letter**: the whole answer is one valid letter, optionally bracketed or followed by
   ``.``/``)``/``:`` — ``"B"``, ``"(b)"``, ``"B."``.
2. **Answer phrase**: the *last* "answer is X" (``"The answer is B"``, ``"Answer: (C)"``,
   ``"Final answer: B"``), else the last "option/choice X" (``"option D"``, ``"Best option: B"``):
   a reasoning model weighs options in passing ("option A looks plausible, ...") before its final
   statement, and an answer phrase outranks a mention of an option. The letter must be a capital,
   or bracketed: "the answer is a dog" names no option.
3. **Leading label**: the answer starts with a labelled letter, ``"B. the dog"``, ``"(B) the dog"``,
   ``"B) ..."``, ``"B: ..."``. A bare leading capital is not a label ("A man walks in").
4. **Bracketed letters**: every ``(X)`` in the answer names the same valid letter.
5. **Option text**: exactly one option's text occurs in the answer as whole words (case,
   punctuation and spacing ignored, number words read as digits: "Pier 7" names "pier seven";
   quoted text counts the same). When one matching option's text contains another's
   ("red" / "red car"), the longer one is meant.

Letters beyond the number of options are never valid ("E" with four options).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from vidscope.evaluation.items import LETTERS

_PHRASE = re.compile(
    r"\b(?i:(answer)|option|choice)\b(?:\s+(?i:is|would\s+be|should\s+be|will\s+be))?\s*[:\-]?\s*"
    r"(?i:option\s+|choice\s+)?(?:\(([A-Ja-j])\)|([A-J])\b)"
)
#: Markdown marks around words (bold, italics, code), read through.
_MARKDOWN = re.compile(r"\*\*|__|`+|(?<!\w)\*|\*(?!\w)")
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.S)
_JSON_FIELDS = ("answer", "choice", "option", "final_answer")
_LEADING = re.compile(r"^\s*(?:\(([A-Ja-j])\)|([A-J])\s*[.):])")
_BRACKETED = re.compile(r"\(([A-Ja-j])\)")
_TAG = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.DOTALL | re.IGNORECASE)
_BARE = re.compile(r"^\s*[(\[]?\s*([A-Ja-j])\s*[)\].:]?\s*$")
_WORD = re.compile(r"[^\w]+")


def _valid(letter: str | None, n_options: int) -> str | None:
    if letter is None:
        return None
    letter = letter.upper()
    return letter if letter in LETTERS[:n_options] else None


#: Number words a model may write as digits, or the other way round ("Pier 7" for the option
#: "pier seven": what a real Qwen2.5-Coder 1.5B answered).
_NUMBER_WORDS: dict[str, str] = {
    "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
    "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12",
    "thirteen": "13", "fourteen": "14", "fifteen": "15", "sixteen": "16", "seventeen": "17",
    "eighteen": "18", "nineteen": "19", "twenty": "20", "thirty": "30", "forty": "40",
    "fifty": "50", "sixty": "60", "seventy": "70", "eighty": "80", "ninety": "90",
}  # fmt: skip


def _normalise(text: str) -> str:
    """Lower case, number words as digits, punctuation to spaces, single spaces, padded so matches
    fall on word boundaries."""
    words = _WORD.sub(" ", text.lower().replace("_", " ")).split()
    return f" {' '.join(_NUMBER_WORDS.get(w, w) for w in words)} "


def _by_option_text(answer: str, options: Sequence[str]) -> str | None:
    said = _normalise(answer)
    texts = [_normalise(text) for text in options]
    found = [i for i, text in enumerate(texts) if text.strip() and text in said]
    # "red car" said: the option "red" also matches, but the longer text is the one meant.
    found = [i for i in found if not any(texts[i] != texts[j] and texts[i] in texts[j] for j in found)]
    return LETTERS[found[0]] if len({texts[i] for i in found}) == 1 else None


def _json_answer(answer: str) -> str | None:
    """The ``answer`` field of a JSON object answer (fenced or not), as text; None if not one."""
    text = answer.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    if not text.startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    for name in _JSON_FIELDS:
        value = data.get(name)
        if isinstance(value, str | int) and not isinstance(value, bool):
            return str(value)
    return None


def _by_phrase(answer: str, n: int) -> str | None:
    """The last "answer is X" that names a valid option, else the last "option X"."""
    stated: list[str] = []
    mentioned: list[str] = []
    for match in _PHRASE.finditer(answer):
        letter = _valid(match.group(2) or match.group(3), n)
        if letter:
            (stated if match.group(1) else mentioned).append(letter)
    if stated:
        return stated[-1]
    return mentioned[-1] if mentioned else None


def extract_choice(answer: str | None, options: Sequence[str]) -> str | None:
    """The option letter ``answer`` chose among ``options``, or None when it chose none."""
    if not answer or not answer.strip() or not options:
        return None
    inner = _json_answer(answer)
    if inner is not None:
        return extract_choice(inner, options) if inner != answer else None
    tagged = _TAG.search(answer)
    if tagged and tagged.group(1) != answer:
        return extract_choice(tagged.group(1), options)
    answer = _MARKDOWN.sub("", answer)
    n = len(options)
    bare = _BARE.match(answer)
    if bare:
        return _valid(bare.group(1), n)
    letter = _by_phrase(answer, n)
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

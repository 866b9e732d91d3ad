"""Writing systems and abnormal characters, by code point: no unicodedata.name per character
(too slow for every answer); a sorted table of ranges and one bisect a letter.

Another script is not garbage: a Russian or Chinese answer is judged as fluent text in its own
script. What no model should print in an answer is the replacement character (a token cut in
the middle of a UTF-8 sequence), control characters other than tab and newlines, unassigned,
private-use or surrogate code points, and combining marks with no letter to combine with.
"""

from __future__ import annotations

import bisect
import re
import unicodedata

# (first, last, script): letters outside these are "other". CJK groups Han, kana and Hangul:
# Japanese mixes the first two in every sentence, Korean may carry Han.
_RANGES = (
    (0x0041, 0x005A, "latin"),
    (0x0061, 0x007A, "latin"),
    (0x00C0, 0x024F, "latin"),
    (0x0370, 0x03FF, "greek"),
    (0x0400, 0x052F, "cyrillic"),
    (0x0530, 0x058F, "armenian"),
    (0x0590, 0x05FF, "hebrew"),
    (0x0600, 0x06FF, "arabic"),
    (0x0750, 0x077F, "arabic"),
    (0x0900, 0x0DFF, "indic"),
    (0x0E00, 0x0E7F, "thai"),
    (0x10A0, 0x10FF, "georgian"),
    (0x1100, 0x11FF, "cjk"),
    (0x1E00, 0x1EFF, "latin"),
    (0x1F00, 0x1FFF, "greek"),
    (0x3040, 0x30FF, "cjk"),
    (0x3130, 0x318F, "cjk"),
    (0x3400, 0x4DBF, "cjk"),
    (0x4E00, 0x9FFF, "cjk"),
    (0xAC00, 0xD7AF, "cjk"),
    (0xF900, 0xFAFF, "cjk"),
    (0xFB50, 0xFDFF, "arabic"),
    (0xFE70, 0xFEFF, "arabic"),
    (0x20000, 0x2FFFF, "cjk"),
)
_STARTS = [r[0] for r in _RANGES]
# Scripts written with spaces between words, whose words o200k knows (text.py's word check).
SPACED = frozenset({"latin", "cyrillic", "greek"})
_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_ODD_CATEGORIES = frozenset({"Cc", "Cn", "Co", "Cs"})


def script_of(ch: str) -> str:
    """The script of a letter (ch.isalpha())."""
    cp = ord(ch)
    i = bisect.bisect_right(_STARTS, cp) - 1
    if i >= 0 and cp <= _RANGES[i][1]:
        return _RANGES[i][2]
    return "other"


def letters_by_script(text: str) -> dict[str, int]:
    """Letters of each script; an ASCII text is all Latin, counted without a loop in Python."""
    if text.isascii():
        n = sum(1 for _ in re.finditer(r"[A-Za-z]", text)) if len(text) < 64 else _ascii_letters(text)
        return {"latin": n} if n else {}
    counts: dict[str, int] = {}
    for ch in text:
        if ch.isalpha():
            s = "latin" if ch.isascii() else script_of(ch)
            counts[s] = counts.get(s, 0) + 1
    return counts


def stray_letters(text: str, main: str) -> int:
    """Runs of one or two letters of another script than `main` that stand alone in a text of
    `main` (a Cyrillic "ы" or a kana "っ" among English words): what a corrupted token leaves.
    A word of another language is longer, or (CJK) sits among its own script's letters."""
    if text.isascii():
        return 0
    stray, run, run_script = 0, 0, None
    for ch in text + " ":
        s = ("latin" if ch.isascii() else script_of(ch)) if ch.isalpha() else None
        if s == run_script and s is not None:
            run += 1
            continue
        if run_script is not None and run_script != main and run <= 2:
            stray += 1
        run, run_script = (1, s) if s is not None else (0, None)
    return stray


def _ascii_letters(text: str) -> int:
    return len(text) - len(text.translate(_DROP_ASCII_LETTERS))


_DROP_ASCII_LETTERS = str.maketrans("", "", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


def odd_characters(text: str) -> int:
    """Characters no answer should hold: U+FFFD, controls (tab and newlines apart),
    unassigned, private-use and surrogate code points, and combining marks that follow no
    letter (a mark after a space, a digit, punctuation or another stray mark)."""
    odd = len(_ASCII_CONTROL.findall(text))
    if text.isascii():
        return odd
    prev_letter = False
    for ch in text:
        if ch.isascii():
            prev_letter = ch.isalpha()
            continue
        cat = unicodedata.category(ch)
        if ch == "\ufffd" or (cat in _ODD_CATEGORIES and ch != "\x85"):
            odd += 1
            prev_letter = False
        elif cat[0] == "M":
            if not prev_letter:
                odd += 1
            # a mark keeps the letter it sits on: several marks may stack (Vietnamese, Indic)
        else:
            prev_letter = cat[0] == "L"
    return odd

"""One answer judged: does its text still look like language?

Four signs, each one that working models practically never show and broken ones do; an answer
is broken when one shows, judged only where there is enough text to judge (a terse answer,
"Paris." or "42", is never garbage):

- odd_characters: replacement characters, controls, unassigned code points, stray combining
  marks (scripts.py), at least ODD_MIN of them and ODD_SHARE of the characters;
- repetition_loop: the answer ends in the same few words (or characters, for text without
  spaces) over and over, LOOP_MIN_REPEATS times (and LOOP_MIN_UNITS words) or more, covering
  LOOP_SHARE of it (LOOP_SHARE_CODE of code or data);
- mixed_scripts: MIXED_MIN_SCRIPTS or more writing systems, each MIXED_SHARE of the letters
  (a Chinese answer with English terms has two), or, in a text written with spaces, letters of
  another script standing alone, one or two at a time, in text nine tenths of one script
  (STRAY_MIN, STRAY_SHARE a word);
- not_words: in a script written with spaces (Latin, Cyrillic, Greek), fewer than
  WORD_SHARE of the words are words: one o200k token with their leading space, as nearly every
  common word of the languages o200k was made for is, and as no made-up or glued-together
  word is ("kunvu", "thesewhat"). Code is exempt (its identifiers are not words).

Conservative on purpose: code, JSON, lists, numbers, mixed-language and terse answers pass
(tests/test_sanity.py holds real English, code, JSON and CJK samples to that).
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

from benchy.measure import tokenizer
from benchy.measure.sanity import scripts

TERSE_CHARS = 40  # fewer characters: not judged
TERSE_WORDS = 8  # fewer words (or CJK characters): not judged
ODD_MIN, ODD_SHARE = 2, 0.002
LOOP_MAX_PERIOD = 64  # the longest repeated unit looked for, in words (characters without spaces)
LOOP_MIN_REPEATS, LOOP_SHARE, LOOP_SHARE_CODE = 4, 0.3, 0.6
LOOP_MIN_UNITS = 8  # a unit of one or two words must repeat more often ("} } } }" ends much code)
LOOP_PREFILTER = 0.5  # zlib ratio above this: no loop worth looking for
MIXED_MIN_SCRIPTS, MIXED_SHARE = 3, 0.08
STRAY_MIN, STRAY_SHARE = 3, 0.03  # letters of another script standing alone, per word
WORD_SHARE, WORD_MIN = 0.4, 12  # the share of known words below which a text is not words; words needed

ODD_CHARACTERS = "odd_characters"
REPETITION_LOOP = "repetition_loop"
MIXED_SCRIPTS = "mixed_scripts"
NOT_WORDS = "not_words"
REASONS = (ODD_CHARACTERS, REPETITION_LOOP, MIXED_SCRIPTS, NOT_WORDS)

_ALPHA_RUN = re.compile(r"[^\W\d_]+")
_CODE_MARKS = re.compile(r"[{}()\[\];=<>]")
_CODE_LINE = re.compile(
    r"^(?:\s{2,}|\t)\S|[:;{}(),\[\]]\s*$|^\s*(?:#|//|def |class |import |return |fn |let |const |var )"
)


@dataclass(frozen=True, slots=True)
class Judgement:
    """One answer's figures and the signs of breakage it shows (none: it reads as an answer)."""

    judged: bool  # False: too short to judge (never broken)
    chars: int
    script: str | None  # the script of most of its letters (None: no letters)
    odd: int  # odd characters (scripts.odd_characters)
    compression: float  # zlib-compressed bytes / bytes
    word_share: float | None  # known words / words, where the script is spaced and there are enough
    reasons: tuple[str, ...] = ()

    @property
    def broken(self) -> bool:
        return bool(self.reasons)


def judge(text: str) -> Judgement:
    """The signs of breakage in one answer's text (reasoning and content as it streamed)."""
    stripped = text.strip()
    units = stripped.split()
    by_script = scripts.letters_by_script(stripped)
    letters = sum(by_script.values())
    script = max(by_script, key=by_script.__getitem__) if by_script else None
    spaced = script in scripts.SPACED
    size = len(units) if spaced or script is None else max(len(units), by_script.get("cjk", 0))
    raw = stripped.encode()
    compression = len(zlib.compress(raw, 1)) / len(raw) if raw else 1.0
    if len(stripped) < TERSE_CHARS or size < TERSE_WORDS:
        return Judgement(False, len(text), script, 0, compression, None)
    reasons = []
    odd = scripts.odd_characters(stripped)
    if odd >= ODD_MIN and odd >= ODD_SHARE * len(stripped):
        reasons.append(ODD_CHARACTERS)
    if compression < LOOP_PREFILTER and _looping(stripped, units):
        reasons.append(REPETITION_LOOP)
    main = by_script[script] if script else 0
    if _mixed(by_script, letters) or (spaced and main >= 0.9 * letters and _strays(stripped, script, len(units))):
        reasons.append(MIXED_SCRIPTS)
    share = word_share(stripped) if spaced and main >= 0.7 * letters else None
    if share is not None and share < WORD_SHARE and not code_like(stripped):
        reasons.append(NOT_WORDS)
    return Judgement(True, len(text), script, odd, compression, share, tuple(reasons))


def _looping(text: str, units: list[str]) -> bool:
    """A loop of words (characters, for text without spaces); code and data repeat by nature
    (closing brackets, a row of zeros), so there the loop must cover LOOP_SHARE_CODE."""
    sequence = units if len(units) >= TERSE_WORDS * 2 else list(text)
    return _loops(sequence, LOOP_SHARE) and (not code_like(text) or _loops(sequence, LOOP_SHARE_CODE))


def _loops(units: list[str], share: float) -> bool:
    """The sequence ends in one unit of at most LOOP_MAX_PERIOD items repeated LOOP_MIN_REPEATS
    times or more, the repeats covering LOOP_SHARE of it. Only periods whose last item matches
    are followed back, so a text without a loop costs a comparison per period."""
    n = len(units)
    for period in range(1, min(LOOP_MAX_PERIOD, n // LOOP_MIN_REPEATS) + 1):
        if units[-1] != units[-1 - period]:
            continue
        i = n - 1 - period
        while i >= 0 and units[i] == units[i + period]:
            i -= 1
        covered = n - 1 - i  # the tail that repeats with this period, its first copy included
        if covered >= max(LOOP_MIN_REPEATS * period, LOOP_MIN_UNITS) and covered >= share * n:
            return True
    return False


def _strays(text: str, script: str | None, words: int) -> bool:
    if script is None:
        return False
    stray = scripts.stray_letters(text, script)
    return stray >= STRAY_MIN and stray >= STRAY_SHARE * words


def _mixed(by_script: dict[str, int], letters: int) -> bool:
    return sum(1 for n in by_script.values() if n >= MIXED_SHARE * letters) >= MIXED_MIN_SCRIPTS


def word_share(text: str) -> float | None:
    """The share of a text's words that are words: each whitespace-separated chunk with a
    letter, its edge punctuation off, whose letter runs are each one o200k token with a leading
    space (as written, lower-cased or capitalized); a letter run glued to digits is no word
    ("Test869", "310second788how") unless the chunk is short ("H100", "5km"). Numbers alone are
    neither. None with fewer than WORD_MIN words."""
    known = total = 0
    for chunk in text.split():
        w = chunk.strip(_EDGE)
        if w.isalpha():
            total += 1
            known += _known(w)
        elif w and not w.isdigit() and _HAS_LETTER.search(w):
            total += 1
            known += _word(w)
    return known / total if total >= WORD_MIN else None


_EDGE = "\"'`.,;:!?()[]{}<>*_-–—«»“”‘’„…/\\|#@$%^&~+="
_HAS_LETTER = re.compile(r"[^\W\d_]")
_DIGIT = re.compile(r"\d")


def _word(chunk: str) -> bool:
    if _DIGIT.search(chunk) and len(chunk) > 5:
        return False
    return all(_known(run) for run in _ALPHA_RUN.findall(chunk))


def _known(word: str) -> bool:
    if len(word) <= 2:
        return True
    words = tokenizer.space_led_words()
    return word in words or word.lower() in words or word.capitalize() in words


def code_like(text: str) -> bool:
    """Code or data: fenced, or brackets and operators in balance and a share of the characters,
    or most lines shaped as code (indented, ending in a bracket or colon, a keyword first).
    Garbage sprinkles brackets too, but not in pairs."""
    if "```" in text:
        return True
    marks = _CODE_MARKS.findall(text)
    if len(marks) >= 6 and len(marks) >= 0.03 * len(text.replace(" ", "")) and _balanced(text):
        return True
    lines = [line for line in text.splitlines() if line.strip()]
    return len(lines) >= 3 and sum(1 for line in lines if _CODE_LINE.search(line)) >= 0.6 * len(lines)


def _balanced(text: str) -> bool:
    """Each kind of bracket opened about as often as closed (an answer cut at its token limit
    may leave a few open)."""
    pairs = (("(", ")"), ("[", "]"), ("{", "}"))
    opened = sum(text.count(a) for a, _ in pairs)
    off = sum(abs(text.count(a) - text.count(b)) for a, b in pairs)
    return opened >= 2 and off <= max(2, 0.2 * opened)

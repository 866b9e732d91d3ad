"""The simulator's own tokenizer: word-level, and on purpose not benchy's o200k.

No real server's tokenizer is benchy's local one, so a simulator that counted like benchy
could never show what a foreign vocabulary does to benchy's figures: its local count would
always agree with usage. Here a token is a special marker (`<|channel|>`, `<think>` …), a
word of ASCII letters with at most one leading space, one digit or one other character (with
at most one leading space), or a run of whitespace.

Prompts made of benchy's filler (common English words, each one o200k token with its leading
space) count the same in both, as they do on most real servers; the template's punctuation
and numbers do not. The words the simulator *generates* are made-up words of two or three
syllables: one token here, about 2.4 in o200k, as a random-weight model's or another
language's output is on a real server. The truth log counts in these tokens, so tests judge
benchy's counts against what this server says, not against benchy's own tokenizer.
"""

from __future__ import annotations

import functools
import random
import re
import zlib

NAME = "benchy-sim word-level"

SPECIAL = (
    "<|endoftext|>",
    "<|return|>",
    "<|constrain|>",
    "<|channel|>",
    "<|start|>",
    "<|end|>",
    "<|message|>",
    "<|call|>",
    "<think>",
    "</think>",
)
_SPECIAL_IDS = {text: i for i, text in enumerate(SPECIAL)}
_PIECE = re.compile(
    "|".join(re.escape(s) for s in SPECIAL) + r"| ?[A-Za-z]+| ?[0-9]| ?[^\sA-Za-z0-9]|\s+",
)


def pieces(text: str) -> list[str]:
    """The tokens of `text`, as text: they join back to it exactly."""
    return _PIECE.findall(text)


def encode(text: str) -> list[int]:
    """Token ids: special markers first, every other piece by a stable hash (ids only need to
    be equal for equal pieces, across processes, for the prefix cache)."""
    return [_SPECIAL_IDS[p] if p in _SPECIAL_IDS else _id(p) for p in pieces(text)]


def _id(piece: str) -> int:
    return len(SPECIAL) + zlib.crc32(piece.encode()) % 2_000_000_000


def count(text: str) -> int:
    return len(pieces(text))


_ONSETS = ("b", "c", "d", "f", "g", "k", "m", "p", "r", "s", "t", "v", "l", "n")
_VOWELS = ("a", "e", "i", "o", "u")
_CODAS = ("", "n", "r", "s", "l", "t")  # o200k reads about 2.4 tokens into each word


@functools.lru_cache(maxsize=1)
def output_words() -> tuple[str, ...]:
    """512 made-up words, each one token here (letters after one space) and several in o200k."""
    rng = random.Random(23)
    words: set[str] = set()
    while len(words) < 512:
        syllables = rng.choice((2, 2, 3))
        words.add("".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables)))
    return tuple(sorted(words))


def words(n: int, seed: int) -> list[str]:
    """n generated tokens, each a made-up word with its leading space, deterministic per seed."""
    vocab = output_words()
    rng = random.Random(seed)
    return [" " + vocab[rng.randrange(len(vocab))] for _ in range(n)]

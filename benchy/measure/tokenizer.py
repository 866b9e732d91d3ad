"""Offline o200k_base tokenizer shared by benchy's prompt builder and the simulator.

tiktoken normally downloads its vocabulary on first use; benchy ships the o200k_base ranks
(rebuilt byte for byte from the npm package js-tiktoken 1.0.21, sha256 below) so that nothing
is fetched at run time.
"""

from __future__ import annotations

import binascii
import functools
import gzip
import hashlib
import re
from importlib import resources

import numpy as np
import tiktoken

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"

# From tiktoken_ext.openai_public.o200k_base (the regex that splits text into BPE pieces).
_O200K_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

# o200k_base's own special tokens plus the Harmony markers gpt-oss uses (o200k_harmony ids).
SPECIAL_TOKENS = {
    "<|endoftext|>": 199999,
    "<|endofprompt|>": 200018,
    "<|return|>": 200002,
    "<|constrain|>": 200003,
    "<|channel|>": 200005,
    "<|start|>": 200006,
    "<|end|>": 200007,
    "<|message|>": 200008,
    "<|call|>": 200012,
}


def ranks_bytes() -> bytes:
    """The o200k_base.tiktoken file, as tiktoken's own download would give it."""
    packed = resources.files("benchy").joinpath("data/o200k_base.tiktoken.gz").read_bytes()
    return gzip.decompress(packed)


@functools.lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    return tiktoken.Encoding(
        name="o200k_harmony_offline", pat_str=_O200K_PAT, mergeable_ranks=_ranks(), special_tokens=SPECIAL_TOKENS
    )


@functools.lru_cache(maxsize=1)
def _ranks() -> dict[bytes, int]:
    """Each token's bytes → its id, from the shipped file (checked against its sha256)."""
    raw = ranks_bytes()
    if hashlib.sha256(raw).hexdigest() != O200K_SHA256:
        raise RuntimeError("benchy's shipped o200k_base vocabulary is corrupt (sha256 mismatch)")
    # Each line is `base64-token rank`, the ranks 0, 1, 2… in order (the file is the one the
    # sha256 names): one split and one map, not a Python loop of 200,000 lines.
    tokens = raw.split()[0::2]
    return dict(zip(map(binascii.a2b_base64, tokens), range(len(tokens))))


@functools.lru_cache(maxsize=1)
def token_lengths() -> np.ndarray:
    """Each token id's length in bytes (index: the id), special tokens included: where each
    token of an encoded text starts is a cumulative sum of these, with no Python call per token
    (tiktoken's decode_tokens_bytes makes one a token)."""
    ranks = _ranks()
    lengths = np.zeros(encoding().max_token_value + 1, dtype=np.int64)
    lengths[np.fromiter(ranks.values(), np.int64, len(ranks))] = np.fromiter(map(len, ranks), np.int64, len(ranks))
    for name, token in SPECIAL_TOKENS.items():
        lengths[token] = len(name.encode())
    return lengths


def encode(text: str) -> list[int]:
    """Token ids of text; special-token markers in text are encoded as the special tokens."""
    return encoding().encode(text, allowed_special="all")


def decode(ids: list[int]) -> str:
    return encoding().decode(ids)


def count(text: str) -> int:
    """Tokens of text. A text made only of the filler words below (every prompt benchy builds
    but a shared context's separator) is counted without the encoder: each space-led word is
    a piece of its own under o200k's split and one token, so the count is the words'
    (tests/test_prompts.py holds the two equal). A worker that only builds such prompts then
    never loads the vocabulary (a third of a CPU-second a process)."""
    words = _filler_word_count(text)
    return words if words is not None else len(encode(text))


_RUNS = re.compile(r"[A-Za-z]+|[0-9]+")


def floor(text: str) -> int:
    """Fewer tokens than this no vocabulary gives the text: its runs of letters and runs of
    digits (a token never joins a letter to a digit or spans punctuation in the pre-tokenizers
    of GPT, Llama or Qwen vocabularies, nor in benchy sim's). What a count must not exceed
    where it accuses the server (leakage), since real text's tokens differ by vocabulary."""
    return len(_RUNS.findall(text))


def _filler_word_count(text: str) -> int | None:
    """How many filler words text is (each with its leading space), None if it is anything else."""
    parts = text.split(" ")
    if parts[0] or len(parts) < 2:  # not space-led (or empty: the encoder says 0)
        return None
    for word in parts[1:]:  # one set lookup a word; "" (two spaces, a trailing one) is no word
        if word not in _WORD_SET:
            return None
    return len(parts) - 1


# The most common English words, each one o200k token with its leading space, so a text of N
# of them is exactly N tokens (BPE pieces never merge across the space boundary). They are one
# token in nearly every English BPE too (all are in the 2,048-token vocabulary of the tests'
# tiny llama.cpp model), so a server with another tokenizer still counts them steadily.
_WORDS = (
    " the of and to in is was for on that with as by at from his an are were which be this"
    " has not but or also first new after one two their time who they been have more other"
    " all when there only most would over into some these many while may such under year"
    " between three both made where world since about through number well people work then"
    " used being each system because life before same could long"
).split()
_WORD_SET = frozenset(_WORDS)


NONCE_WORDS = 32  # the commonest: one token each in any English BPE


def filler_words() -> tuple[str, ...]:
    """Every filler word (each one token with its leading space)."""
    return tuple(_WORDS)


def nonce_words() -> tuple[str, ...]:
    """The words nonces are made of (each one token with its leading space)."""
    return tuple(_WORDS[:NONCE_WORDS])


def filler(n_tokens: int, seed: int = 0) -> str:
    """Deterministic prose-like text of exactly n_tokens o200k tokens (when not glued to
    other text; see prompts.py for how it is joined)."""
    if n_tokens <= 0:
        return ""
    # A multiplicative walk over the word list: varied text, identical for equal seeds. Each
    # word's token decodes to the word with its space, so the text is the words joined (no
    # encoder needed: see count).
    step = 7919
    picks = ((seed * 104729 + i * step + (i * i) % 13) % len(_WORDS) for i in range(n_tokens))
    return "".join(" " + _WORDS[i] for i in picks)


@functools.lru_cache(maxsize=1)
def space_led_words() -> frozenset[str]:
    """Every o200k token that is a space and letters, without its space: the words o200k knows
    whole (output sanity's test of a word, benchy/measure/sanity/text.py)."""
    out = set()
    for piece in _ranks():
        if piece[:1] == b" " and len(piece) > 1:
            try:
                word = piece[1:].decode()
            except UnicodeDecodeError:
                continue
            if word.isalpha():
                out.add(word)
    return frozenset(out)

"""Where a prompt's length in the *server's* tokens comes from: one small interface, four sources.

Why: benchy's prompts are made of common English words, each one o200k token; a server whose
vocabulary splits some of them (a small BPE, a 32k SentencePiece, a non-English-first one)
counts each request differently, since every request draws its own words. Counting with the
server's own tokenizer, before the case, shows which words are one token there; prompts made
only of those are exactly as long as they are words, on that server, with no fitting error.

`TokenCounter` is the interface: `await counter.count(texts)` → each text's length in the
server's tokens (no special tokens added; UsageCounter's include the chat template's, the same
for every text), or None when the source cannot answer. Its sources, best first:

  - `FileTokenizer`: `--tokenizer FILE|DIR`, a Hugging Face tokenizer.json (or a local model
    folder holding one) read with the `tokenizers` library (the `benchy[tokenizer]` extra,
    imported only here and only when asked; offline); `count_now` counts without a loop;
  - `ServerTokenizer`: the server's own POST /tokenize (llama.cpp, vLLM, SGLang), the texts
    asked concurrently, before the case (never on the hot path);
  - `UsageCounter`: a server without /tokenize, through the usage of one-token requests;
  - none fits: benchy's o200k count, calibrated on the server's usage (prompts.calibrate).

`fit_words` asks a counter for the cost of each filler word and keeps the ones that are one
token there; `PromptLengths` is what a run keeps of it (which source, how many words, which), and
prompts.Calibration carries it to every PromptFactory. A dataset's "fitted" mode can cut real
text to a length with the same counter: count candidate cuts in one batch, keep the one at the
target.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from benchy.jsontypes import Saved
from benchy.jsontypes import described as _opt
from benchy.measure import tokenizer
from benchy.measure.evidence import LENGTHS_O200K as O200K_CALIBRATED
from benchy.measure.evidence import LENGTHS_SERVER_TOKENIZE as SERVER_TOKENIZE
from benchy.measure.evidence import LENGTHS_SERVER_USAGE as SERVER_USAGE
from benchy.measure.evidence import LENGTHS_TOKENIZER_FILE as TOKENIZER_FILE

if TYPE_CHECKING:
    from benchy.client.client import Client

# Fewer one-token words than these and the fit is not used: nonces would repeat too soon, and
# bodies drawn from too few words would share cache blocks.
MIN_BODY_WORDS = 24
MIN_NONCE_WORDS = 16
# Each word is counted after this one, less this one's count: a word inside a text, as in a
# prompt (a SentencePiece vocabulary adds a space before a text's first piece, so " the" alone
# is two tokens there and one after another word).
ANCHOR = "the"
STABILITY_SAMPLE_WORDS = 256  # a joined text of this many fitted words must count as many tokens
SERVER_CONCURRENCY = 8  # /tokenize requests in flight at once


class LengthSourceError(ValueError):
    """A --tokenizer that cannot be read (one line, for the CLI)."""


class TokenCounter(Protocol):
    """Counts texts in the server's tokens (no special tokens)."""

    method: str  # one of evidence.LENGTH_METHODS
    # True: each count also holds the chat template's tokens, the same for every text (usage)
    includes_template: bool

    async def count(self, texts: Sequence[str]) -> list[int] | None:
        """Each text's token count, in order; None when the source cannot answer."""
        ...


@dataclass
class ServerTokenizer:
    """The server's POST /tokenize, through a benchy.client.client.Client (server_token_count)."""

    client: Client
    method: str = SERVER_TOKENIZE
    includes_template: bool = False

    async def count(self, texts: Sequence[str]) -> list[int] | None:
        return await _each_counted(texts, self.client.server_token_count)


@dataclass
class UsageCounter:
    """The server's usage.prompt_tokens of one-token requests, for a server without /tokenize:
    each count includes the chat template's tokens, the same for every text, which fit_words
    takes away (it only reads differences). Costs a request a text: fit_words asks two when
    every word is one token, one a word otherwise."""

    client: Client
    endpoint: str
    method: str = SERVER_USAGE
    includes_template: bool = True

    async def count(self, texts: Sequence[str]) -> list[int] | None:
        from benchy.client.errors import ServerError  # not at import time: workers load this module

        async def one(text: str) -> int | None:
            try:
                usage = await self.client.usage_of(text, self.endpoint)
            except (ServerError, KeyError, TypeError):
                return None
            counted = usage.get("prompt_tokens") if isinstance(usage, dict) else None
            return counted if isinstance(counted, int) else None

        return await _each_counted(texts, one)


async def _each_counted(texts: Sequence[str], count: Callable[[str], Awaitable[int | None]]) -> list[int] | None:
    """Every text's count from the server, SERVER_CONCURRENCY requests at once; None if any
    text went uncounted (words fitted on part of the texts would be fitted on the wrong words)."""
    gate = asyncio.Semaphore(SERVER_CONCURRENCY)

    async def one(text: str) -> int | None:
        async with gate:
            return await count(text)

    counts = await asyncio.gather(*(one(t) for t in texts))
    if any(c is None for c in counts):
        return None
    return [int(c) for c in counts if c is not None]


class FileTokenizer:
    """A Hugging Face tokenizer.json (or a folder holding one), read offline."""

    method = TOKENIZER_FILE
    includes_template = False

    def __init__(self, path: str | Path) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise LengthSourceError(
                "--tokenizer needs the `tokenizers` package: pip install 'benchy[tokenizer]'"
            ) from None
        where = Path(path)
        file = where / "tokenizer.json" if where.is_dir() else where
        if not file.is_file():
            raise LengthSourceError(
                f"--tokenizer {path}: no tokenizer.json there (benchy reads a local file or model folder only, "
                "never a hub name: download the model's tokenizer.json and pass its path)"
            )
        try:
            self._tok = Tokenizer.from_file(str(file))
        except Exception as exc:  # the library's own words, one line
            raise LengthSourceError(f"--tokenizer {file}: not a Hugging Face tokenizer.json ({exc})") from None
        self.path = str(file)
        self.sha256 = hashlib.sha256(file.read_bytes()).hexdigest()

    async def count(self, texts: Sequence[str]) -> list[int] | None:
        return self.count_now(texts)

    def count_now(self, texts: Sequence[str]) -> list[int]:
        encoded = self._tok.encode_batch(list(texts), add_special_tokens=False)
        return [len(e.ids) for e in encoded]


@dataclass(frozen=True)
class PromptLengths(Saved):
    """Where prompt lengths came from (load/lengths.py): the server's /tokenize, --tokenizer or
    the server's usage of tiny requests (each word one server token: exact), else benchy's o200k
    count calibrated on usage (an estimate).

    The one type of the concept: made here (fit_words), carried by the run's Calibration to
    every PromptFactory, saved as setup.calibration.lengths; the words themselves are the live
    run's (not saved: their count is)."""

    _NOT_SAVED = ("one_token", "nonce_words")

    method: str = _opt("server_tokenize | tokenizer_file | server_usage | o200k_calibrated", O200K_CALIBRATED)
    words: int | None = _opt("filler words found one server token each (exact methods)", omit=True)
    reason: str | None = _opt("why a tokenizer's fit was not used", omit=True)
    tokenizer_sha256: str | None = _opt("--tokenizer's file", omit=True)
    one_token: tuple[str, ...] | None = None  # the body's words, each one server token (None: o200k's)
    nonce_words: tuple[str, ...] | None = None  # the nonce's words, each one server token

    @classmethod
    def exact(
        cls, method: str, words: tuple[str, ...], nonce_words: tuple[str, ...], sha256: str | None
    ) -> PromptLengths:
        """Lengths made of words one server token each (`words` counts them)."""
        return cls(method, len(words), None, sha256, words, nonce_words)

    def estimated(self) -> PromptLengths:
        """The o200k estimate in place of these words (a dataset's own text: no exact words)."""
        return replace(self, method=O200K_CALIBRATED, words=None, one_token=None)


async def fit_words(counter: TokenCounter) -> PromptLengths:
    """The filler words that are one token each on the counter's tokenizer, shown to stay so
    when joined (a long text of them counts as many tokens as it has words); the o200k fit
    with the reason when there are too few, or the counter cannot answer."""
    candidates = tokenizer.filler_words()
    whole = await counter.count([ANCHOR, ANCHOR + "".join(" " + w for w in candidates)])
    if whole is None:
        return PromptLengths(reason=f"{counter.method} did not answer")
    if whole[1] - whole[0] == len(candidates):  # every word one token: no need to ask each
        ones = candidates
    else:
        counts = await counter.count([ANCHOR + " " + w for w in candidates])
        if counts is None:
            return PromptLengths(reason=f"{counter.method} did not answer")
        ones = tuple(w for w, c in zip(candidates, counts) if c - whole[0] == 1)
    nonce = tuple(w for w in tokenizer.nonce_words() if w in ones)
    if len(ones) < MIN_BODY_WORDS or len(nonce) < MIN_NONCE_WORDS:
        return PromptLengths(
            reason=f"only {len(ones)} of benchy's {len(candidates)} filler words are one token there "
            f"({len(nonce)} of the nonce's)"
        )
    picks = np.random.default_rng(0).integers(0, len(ones), size=STABILITY_SAMPLE_WORDS)
    sample = "".join(" " + ones[i] for i in picks)
    joined = await counter.count([ANCHOR, ANCHOR + sample])
    if joined is None or joined[1] - joined[0] != STABILITY_SAMPLE_WORDS:
        got = "no answer" if joined is None else f"{joined[1] - joined[0]} tokens"
        return PromptLengths(reason=f"{STABILITY_SAMPLE_WORDS} one-token words joined counted {got}: not stable")
    return PromptLengths.exact(counter.method, ones, nonce, getattr(counter, "sha256", None))


async def fit_lengths(client: Client, tokenizer_file: str | None, endpoint: str = "chat") -> PromptLengths:
    """The run's length source: --tokenizer when given, else the server's /tokenize, else
    its usage of tiny requests, else (too few words fit) the calibrated o200k count."""
    return await fit_words(await best_counter(client, tokenizer_file, endpoint))


async def best_counter(client: Client, tokenizer_file: str | None, endpoint: str = "chat") -> TokenCounter:
    """The best counter this server allows: --tokenizer when given, else its /tokenize when it
    answers, else its usage (`client`: a benchy.client.client.Client, model chosen)."""
    if tokenizer_file:
        return FileTokenizer(tokenizer_file)
    server = ServerTokenizer(client)
    if await server.count([ANCHOR]) is not None:
        return server
    return UsageCounter(client, endpoint)

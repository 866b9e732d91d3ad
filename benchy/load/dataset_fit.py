"""Fitted dataset prompts (--dataset FILE --pp …) cut to the server's own count, before the case.

Why: a fitted case cuts real text to the sweep's lengths. Counted with benchy's o200k and a
scale fitted on the text, the server counts each request a few % off wherever its vocabulary
splits that text otherwise (on a small BPE: -7% to +10%). Cut with the run's best length
source instead (lengths.best_counter: --tokenizer, the server's /tokenize, its usage), each
request is its target there.

A cut depends only on where its text starts and how many tokens it must hold, so a case's
bodies are a table: a seeded pool of start entries (at most START_POOL) × the body length the
case asks (one a case, found by building a prompt as the case will). The table is cut once,
before the case, the counter asked by many cuts at once, and travels with the case to every
worker; building a prompt is then a lookup, never a count on the hot path. Where no exact
source fits (too few words one token there, lengths.fit_words) the case keeps benchy's o200k
estimate, and says so (setup.dataset.lengths).
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from benchy.load.lengths import ANCHOR, SERVER_CONCURRENCY, TokenCounter
from benchy.load.prompts import Calibration, PromptFactory
from benchy.workloads import dataset
from benchy.workloads.case import Case

START_POOL = 64  # start entries a fitted case's bodies are cut from
NONCE_SEPARATOR = "\n"  # between the nonce and the text (dataset_load's)


@dataclasses.dataclass(frozen=True)
class FittedBodies:
    """A fitted case's bodies, cut before it: (start entry, body tokens) → text, and the
    length source that counted them (evidence.LENGTH_METHODS)."""

    method: str
    bodies: dict[tuple[int, int], str]


def start_pool(entries: int, seed: int) -> tuple[int, ...]:
    """The entries a fitted case's bodies start at: all of a small file, else START_POOL
    drawn with the run's seed (in file order, so each body runs on through the next entries)."""
    if entries <= START_POOL:
        return tuple(range(entries))
    picks = np.random.default_rng(seed).choice(entries, size=START_POOL, replace=False)
    return tuple(sorted(int(i) for i in picks))


class _Probe(PromptFactory):
    """A PromptFactory that notes the body length build() asks for, and builds no text."""

    asked: list[int]

    def _body(self, tokens: int) -> str:
        self.asked.append(tokens)
        return ""


def body_tokens(case: Case, calibration: Calibration, nonce: bool) -> int:
    """The body length a prompt of `case` asks DatasetPrompts for: found by building one as
    the case will (the same nonce, depth and shared context), not by a second formula."""
    probe = _Probe(calibration, nonce=nonce, salt="probe")
    probe.asked = []
    context = probe.context(case.depth) if case.depth_mode == "cached" and case.depth else None
    probe.build(case.pp, case.depth, context)
    return probe.asked[-1]


def _exact_counter(
    counter: TokenCounter, loop: asyncio.AbstractEventLoop, stop: threading.Event | None = None
) -> Callable[[str], int]:
    """A blocking count of one text for the cuts (run in threads while `loop` asks the counter);
    each text counted once. UsageCounter's counts hold the chat template: taken away, as the
    count of the anchor word (one token, lengths.fit_words showed) less one."""
    memo: dict[str, int] = {}
    count_now = getattr(counter, "count_now", None)
    template = 0
    if counter.includes_template:
        future = asyncio.run_coroutine_threadsafe(counter.count([ANCHOR]), loop)
        anchor = future.result()
        if anchor is None:
            raise LookupError(f"{counter.method} did not answer")
        template = anchor[0] - 1

    def count(text: str) -> int:
        if text not in memo:
            if stop is not None and stop.is_set():
                raise LookupError("the cuts were stopped")
            if count_now is not None:
                memo[text] = count_now([text])[0]
            else:
                # usage's text ends at the template, which may merge with trailing whitespace:
                # such a text (an entry and its blank line) is counted as it sits in a body,
                # before a word
                inside = counter.includes_template and text[-1:].isspace()
                got = asyncio.run_coroutine_threadsafe(counter.count([text + ANCHOR if inside else text]), loop)
                counts = got.result()
                if counts is None:
                    raise LookupError(f"{counter.method} did not answer")
                memo[text] = counts[0] - template - inside
        return memo[text]

    return count


async def fit_bodies(
    counter: TokenCounter, texts: Sequence[str], starts: Sequence[int], tokens: Sequence[int]
) -> dict[tuple[int, int], str]:
    """Each (start, length) body cut by the counter (dataset.cut_entries: the newline head
    included in the count), a cut that misses its length left out; LookupError when the counter
    stops answering or no cut of a length lands on it. A body that ends in
    whitespace is left out where its length has others: the chat template's join is ambiguous
    there (a template that trims its message, as Llama 3's does, or a tokenizer that merges the
    whitespace with what follows, counts it otherwise)."""
    loop = asyncio.get_running_loop()
    pairs = [(s, t) for t in sorted(set(tokens)) for s in starts]
    counted: dict[int, int] = {}
    if hasattr(counter, "count_now"):  # a local tokenizer: no server to wait for, no threads
        count = _exact_counter(counter, loop)
        cuts = [_checked_cut(texts, s, t, count, counted) for s, t in pairs]
    else:
        # the cuts wait in threads on counts this loop asks: it must never wait on them (a
        # failed cut stops the others at their next count, and the pool is let go unjoined)
        pool, stop = ThreadPoolExecutor(SERVER_CONCURRENCY, thread_name_prefix="benchy-fit"), threading.Event()
        try:
            count = await loop.run_in_executor(pool, _exact_counter, counter, loop, stop)

            def cut(pair: tuple[int, int]) -> str | None:
                return _checked_cut(texts, pair[0], pair[1], count, counted)

            cuts = await asyncio.gather(*(loop.run_in_executor(pool, cut, p) for p in pairs))
        finally:
            stop.set()
            pool.shutdown(wait=False, cancel_futures=True)
    bodies = {pair: body for pair, body in zip(pairs, cuts) if body is not None}
    for t in set(tokens):
        if not any((s, t) in bodies for s in starts):  # named: the case keeps the estimate, and says so
            raise LookupError(f"no cut of {t} tokens lands on its target by {counter.method}")
        ragged = [(s, t) for s in starts if (s, t) in bodies and bodies[s, t][-1:].isspace()]
        if len(ragged) < sum((s, t) in bodies for s in starts):
            for pair in ragged:
                del bodies[pair]
    return bodies


def _checked_cut(
    texts: Sequence[str], start: int, tokens: int, count: Callable[[str], int], counted: dict[int, int]
) -> str | None:
    """dataset.cut_entries, None where the cut misses `tokens` (a script whose characters are
    several tokens each, where no top-up adds one): left out of the case's table, never sent short."""
    try:
        body = dataset.cut_entries(texts, start, tokens, count, head=NONCE_SEPARATOR, counted=counted)
    except ValueError:  # texts that never make the length by this count: no cut to keep
        return None
    return body if count(NONCE_SEPARATOR + body) == tokens else None


async def prepare(
    cases: Sequence[Case],
    calibrations: dict[str, Calibration],
    counter: TokenCounter,
    endpoint: str,
    nonce: bool,
    seed: int,
) -> dict[int, FittedBodies]:
    """The bodies of each fitted dataset case (by its index in `cases`) that an exact source
    can cut: its endpoint's calibration fitted the server's one-token words. A case left out
    keeps the o200k estimate."""
    out: dict[int, FittedBodies] = {}
    for i, case in enumerate(cases):
        spec = case.dataset
        calibration = calibrations[case.endpoint or endpoint]
        if spec is None or spec.mode != "fitted" or calibration.length_source.words is None:
            continue
        texts = [e.prompt for e in dataset.load(spec.path).entries]
        tokens = body_tokens(case, calibration, nonce)
        try:
            bodies = await fit_bodies(counter, texts, start_pool(len(texts), seed), [tokens])
        except LookupError:
            continue
        out[i] = FittedBodies(counter.method, bodies)
    return out

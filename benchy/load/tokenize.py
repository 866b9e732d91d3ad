"""The server's own tokenization of what it streamed: a token-count witness asked after a case
(and --tokenizer's count of every answer, count_answers).

Why: a request's completion count has witnesses that can disagree (usage, the events, the
server's timings, benchy's local tokenizer, which is no real model's), and some servers send
no usage at all. Where the server offers `/tokenize` (llama.cpp, vLLM, SGLang), its count of
the streamed text is an exact, server-side witness that needs no guess about its vocabulary
(measure/evidence.py ranks it). Asking costs a request per answer, so it is asked:

  - only once the case is over (never while its requests are in flight or its server-metrics
    window is open: it would load the server being measured);
  - for the requests whose count is disputed (no usage, usage doubted, or a witness
    disagreeing), at most TOKENIZE_DISPUTED_PER_CASE a case, and for the first
    TOKENIZE_SAMPLE_PER_CASE undisputed ones, to corroborate;
  - each within TOKENIZE_TIMEOUT_S; a server that does not answer (404, no such endpoint) is
    not asked again in the run, silently: the witness is unavailable there.

Which to ask is decided after the case too, from the case's lines in requests.jsonl read back
(RecordWriter.records_since): the decision reads each answer's token count, tens of
microseconds of a long record, which on the event loop were a tenth of a streamed token's
client CPU while the case's requests were in flight. No record is held in memory for it. The
record was written before its witness was asked: the witness follows on a line of its own
(records.witness_line), and the analysis joins the two (results.json's token_count).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from benchy.measure import evidence, reading
from benchy.records.plan import Tagged

TOKENIZER_BATCH = 256  # answers --tokenizer counts in one call (the library encodes a batch in parallel)
TOKENIZE_DISPUTED_PER_CASE = 32
TOKENIZE_SAMPLE_PER_CASE = 2
TOKENIZE_TIMEOUT_S = 5.0


def disputed(rec: Tagged) -> bool:
    """Whether the request's count lacks a server-side witness that all the others back (usage
    that only benchy's local count agrees with is unbacked: that count is an estimate)."""
    count = reading.token_count(rec)
    unbacked = not set(count.backed_by) - {evidence.LOCAL}
    return count.usage is None or count.mismatch is not None or bool(count.disagreed) or unbacked


@dataclass
class ServerTokenize:
    """Per run: whether the server has a /tokenize, and asking it after each case."""

    available: bool = True  # False once the server did not answer: asked no more this run

    async def settle(
        self,
        count_of: Callable[..., Any],
        records: Iterable[Tagged],
        redo: Callable[[Tagged], None],
    ) -> int:
        """Asks the server for the count of each chosen record of a case (`count_of`:
        Client.server_token_count; `records`: the case's, in the order they finished) and hands
        each with its new witness to `redo` (the writer's witness line); how many it counted."""
        if not self.available:
            return 0
        counted = 0
        for rec in chosen(records):
            n = await _ask(count_of, rec.token_event_text)
            if n is None:
                self.available = False
                break
            redo(replace(rec, server_tokenize=n))
            counted += 1
        return counted


def chosen(records: Iterable[Tagged]) -> list[Tagged]:
    """Of a case's records in the order they finished, those to ask about: per case the first
    TOKENIZE_DISPUTED_PER_CASE disputed ones and the first TOKENIZE_SAMPLE_PER_CASE others."""
    taken: dict[tuple[str, bool], int] = {}
    out = []
    for rec in records:
        if not rec.ok or rec.warmup or not rec.token_event_text:
            continue
        if _full(taken, rec.case, True) and _full(taken, rec.case, False):
            continue  # both quotas met: its reading (the costliest step) is not needed
        doubt = disputed(rec)
        if _full(taken, rec.case, doubt):
            continue
        taken[rec.case, doubt] = taken.get((rec.case, doubt), 0) + 1
        out.append(rec)
    return out


def _full(taken: dict[tuple[str, bool], int], case: str, doubt: bool) -> bool:
    limit = TOKENIZE_DISPUTED_PER_CASE if doubt else TOKENIZE_SAMPLE_PER_CASE
    return taken.get((case, doubt), 0) >= limit


async def _ask(count_of: Callable[..., Any], text: str) -> int | None:
    try:
        counted = await asyncio.wait_for(count_of(text), TOKENIZE_TIMEOUT_S)
    except (asyncio.TimeoutError, OSError):
        return None
    return counted if isinstance(counted, int) and counted > 0 else None


def count_answers(
    count_now: Callable[[Sequence[str]], list[int]],
    records: Iterable[Tagged],
    redo: Callable[[Tagged], None],
) -> int:
    """--tokenizer's count of each measured answer of a case (`count_now`: FileTokenizer's),
    handed with it to `redo` (the writer's witness line); how many it counted. Why: the model's
    own vocabulary counts the streamed text as the server does, where benchy's o200k is only
    an estimate of it (measure/reading.py takes it for the local count). Offline and cheap (a
    tokenizer in Rust, in batches), so every answer is counted, after the case: never while its
    requests are in flight."""
    counted, batch = 0, []
    for rec in records:
        if rec.ok and not rec.warmup and rec.token_event_text:
            batch.append(rec)
        if len(batch) == TOKENIZER_BATCH:
            counted += _counted(count_now, batch, redo)
            batch = []
    return counted + (_counted(count_now, batch, redo) if batch else 0)


def _counted(
    count_now: Callable[[Sequence[str]], list[int]], batch: list[Tagged], redo: Callable[[Tagged], None]
) -> int:
    for rec, n in zip(batch, count_now([r.token_event_text for r in batch])):
        redo(replace(rec, tokenizer_tokens=n))
    return len(batch)

"""The server's own tokenization of what it streamed: a token-count witness asked after a case.

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

Every record is written to requests.jsonl as it finishes, in order; only the held ones (their
text) stay in memory until asked, the rest are let go at once. The record was written before
its witness was asked: the witness follows on a line of its own (records.witness_line), and
the analysis joins the two (results.json's token_count).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from benchy.measure import evidence, reading
from benchy.measure.records import RequestRecord

TOKENIZE_DISPUTED_PER_CASE = 32
TOKENIZE_SAMPLE_PER_CASE = 2
TOKENIZE_TIMEOUT_S = 5.0


def disputed(rec: RequestRecord) -> bool:
    """Whether the request's count lacks a server-side witness that all the others back (usage
    that only benchy's local count agrees with is unbacked: that count is an estimate)."""
    count = reading.token_count(rec)
    unbacked = not set(count.backed_by) - {evidence.LOCAL}
    return count.usage is None or count.mismatch is not None or bool(count.disagreed) or unbacked


@dataclass
class _Held:
    rec: RequestRecord
    redo: Callable[[RequestRecord], None]  # given the record once a witness came (to write it down)


@dataclass
class ServerTokenize:
    """Per run: the records waiting for the server's tokenization, and whether it has one."""

    available: bool = True  # False once the server did not answer: asked no more this run
    _held: list[_Held] = field(default_factory=list)
    _taken: dict[tuple[str, bool], int] = field(default_factory=dict)  # (case, disputed) → held so far

    def hold(self, rec: RequestRecord, redo: Callable[[RequestRecord], None]) -> bool:
        """Keeps `rec` to be tokenized after its case (`redo` is then given it, witness set);
        False when it is not wanted."""
        if not self.available or not rec.ok or rec.warmup or not rec.token_event_text:
            return False
        if self._full(rec.case, True) and self._full(rec.case, False):
            return False  # both quotas met: the record's reading (the costliest step) is not needed
        doubt = disputed(rec)
        key = (rec.case, doubt)
        if self._full(rec.case, doubt):
            return False
        self._taken[key] = self._taken.get(key, 0) + 1
        self._held.append(_Held(rec, redo))
        return True

    def _full(self, case: str, doubt: bool) -> bool:
        limit = TOKENIZE_DISPUTED_PER_CASE if doubt else TOKENIZE_SAMPLE_PER_CASE
        return self._taken.get((case, doubt), 0) >= limit

    async def settle(self, count_of: Callable) -> int:
        """Asks the server for each held record's count (`count_of`: Client.server_token_count),
        hands each record with its new witness to its `redo` and lets the records go; how many
        it counted."""
        held, self._held = self._held, []
        counted = 0
        for item in held:
            if not self.available:
                break
            n = await _ask(count_of, item.rec.token_event_text)
            if n is None:
                self.available = False
                continue
            item.rec.server_tokenize = n
            item.redo(item.rec)
            counted += 1
        return counted


async def _ask(count_of: Callable, text: str) -> int | None:
    try:
        counted = await asyncio.wait_for(count_of(text), TOKENIZE_TIMEOUT_S)
    except (asyncio.TimeoutError, OSError):
        return None
    return counted if isinstance(counted, int) and counted > 0 else None

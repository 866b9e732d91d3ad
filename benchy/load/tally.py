"""What the running process keeps of a case's finished requests: a few numbers each, no row.

Why: the results are made after the run, from its bundle (analysis/), so while requests are in
flight the process keeps only what the load stage itself needs as it goes: the requests the
server served (the /metrics window's expected count), and each request's span and tokens as
the client's figures count them (load/monitor.py's busy time and token rate). Nothing here is
analysed on the event loop that times the requests.
"""

from __future__ import annotations

from array import array

from benchy.records import RequestRecord
from benchy.records.tokens import tokens_of


class CaseTally:
    """A case's finished requests, as the live run counts them."""

    def __init__(self) -> None:
        self.served = 0  # measured requests that ended ok as the client saw them (the server's count)
        self.cut = 0  # requests cut or refused (a restart does both: the /metrics window's evidence of one)
        self._sent = array("d")  # per request: when it was sent (monotonic s), when it ended, its tokens
        self._ended = array("d")
        self._tokens = array("q")

    def add(self, rec: RequestRecord) -> None:
        self.served += rec.ok and not rec.warmup
        self.cut += rec.status == "error" and rec.error_kind in ("connect", "reset", "disconnect")
        self._sent.append(rec.sent_mono_s)
        self._ended.append(rec.sent_mono_s + (rec.end_s or 0.0))
        self._tokens.append(tokens_of(rec))

    def __len__(self) -> int:
        return len(self._sent)

    def spans(self) -> list[tuple[float, float]]:
        """Each request's (sent, ended) on the monotonic clock."""
        return list(zip(self._sent, self._ended))

    def client_tokens(self) -> int:
        """The tokens of every request as the live run counts them (records.tokens_of)."""
        return sum(self._tokens)
